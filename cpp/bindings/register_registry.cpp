// SnapshotRegistry and SnapshotUsage.
#include "convert.hpp"

namespace watchcache::bindings {

namespace {

std::int64_t as_rv(py::handle h) {
  if (!PyLong_Check(h.ptr()) || PyBool_Check(h.ptr()))
    throw py::type_error("resource_version must be int, not " + type_name(h));
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(h.ptr(), &overflow);
  if (overflow) throw py::value_error("resource_version out of range for a 64-bit integer");
  return v;
}

std::size_t as_budget(py::handle h) { return as_count(h, "budget_bytes"); }

py::object entry_or_none(const std::optional<SnapshotRegistry::Entry>& e) {
  if (!e) return py::none();
  return py::make_tuple(e->first, e->second);
}

}  // namespace

void register_registry(py::module_& m) {
  py::class_<SnapshotUsage>(m, "SnapshotUsage")
      .def_readonly("resource_version", &SnapshotUsage::resource_version)
      .def_readonly("exclusive_bytes", &SnapshotUsage::exclusive_bytes)
      .def_readonly("shared_bytes", &SnapshotUsage::shared_bytes)
      .def("__repr__", [](const SnapshotUsage& u) {
        return "SnapshotUsage(resource_version=" + std::to_string(u.resource_version) +
               ", exclusive_bytes=" + std::to_string(u.exclusive_bytes) +
               ", shared_bytes=" + std::to_string(u.shared_bytes) + ")";
      });

  py::class_<SnapshotRegistry>(m, "SnapshotRegistry")
      .def(py::init([](py::handle budget) { return std::make_unique<SnapshotRegistry>(as_budget(budget)); }),
           py::arg("budget_bytes") = 0)
      .def(
          "add",
          [](SnapshotRegistry& r, py::handle rv, py::handle snap) {
            if (!SnapshotObject::check(snap))
              throw py::type_error("snapshot must be a Snapshot, not " + type_name(snap));
            const std::int64_t v = as_rv(rv);
            Snapshot copy = SnapshotObject::of(snap);
            py::gil_scoped_release nogil;  // eviction may free a lot
            r.add(v, std::move(copy));
          },
          py::arg("resource_version"), py::arg("snapshot"))
      .def(
          "add_tree_snapshot",
          [](SnapshotRegistry& r, py::handle rv, Tree& tree, py::handle prune) {
            // The watch cache's step per event in one crossing, with no Python Snapshot
            // made: each pybind11 call costs about as much as the snapshot itself.
            const std::int64_t v = as_rv(rv);
            const std::int64_t below = as_rv(prune);
            if (v <= 0) throw py::value_error("resource version must be positive, got " + std::to_string(v));
            Snapshot snap = tree.snapshot();
            py::gil_scoped_release nogil;  // pruning may free a lot
            r.add(v, std::move(snap));
            if (below > 0) r.prune_below(below);
          },
          py::arg("resource_version"), py::arg("tree"), py::arg("prune_below") = 0)
      .def(
          "get",
          [](const SnapshotRegistry& r, py::handle rv) -> py::object {
            auto s = r.get(as_rv(rv));
            if (!s) return py::none();
            return py::cast(std::move(*s));
          },
          py::arg("resource_version"))
      .def(
          "floor", [](const SnapshotRegistry& r, py::handle rv) { return entry_or_none(r.floor(as_rv(rv))); },
          py::arg("resource_version"))
      .def(
          "floor_resource_version",
          [](const SnapshotRegistry& r, py::handle rv) -> py::object {
            const auto found = r.floor_resource_version(as_rv(rv));
            if (!found) return py::none();
            return py::int_(*found);
          },
          py::arg("resource_version"))
      .def("latest", [](const SnapshotRegistry& r) { return entry_or_none(r.latest()); })
      .def("oldest", [](const SnapshotRegistry& r) { return entry_or_none(r.oldest()); })
      .def(
          "prune_below",
          [](SnapshotRegistry& r, py::handle rv) {
            const std::int64_t v = as_rv(rv);
            py::gil_scoped_release nogil;
            return r.prune_below(v);
          },
          py::arg("resource_version"))
      .def("clear",
           [](SnapshotRegistry& r) {
             py::gil_scoped_release nogil;
             r.clear();
           })
      .def("__len__", &SnapshotRegistry::size)
      .def("size", &SnapshotRegistry::size)
      .def("__contains__",
           [](const SnapshotRegistry& r, py::handle rv) {
             if (!PyLong_Check(rv.ptr()) || PyBool_Check(rv.ptr())) return false;
             int overflow = 0;
             const long long v = PyLong_AsLongLongAndOverflow(rv.ptr(), &overflow);
             return !overflow && r.contains(v);
           },
           py::arg("resource_version"))
      .def("resource_versions", &SnapshotRegistry::resource_versions)
      .def_property(
          "budget_bytes", &SnapshotRegistry::budget_bytes,
          [](SnapshotRegistry& r, py::handle v) { r.set_budget_bytes(as_budget(v)); })
      .def_property_readonly("evicted", &SnapshotRegistry::evicted)
      .def("pinned_bytes", &SnapshotRegistry::pinned_bytes)
      .def("usage", &SnapshotRegistry::usage)
      .def("__repr__", [](const SnapshotRegistry& r) {
        return "<SnapshotRegistry len=" + std::to_string(r.size()) + " pinned_bytes=" +
               std::to_string(r.pinned_bytes()) + ">";
      });
}

}  // namespace watchcache::bindings
