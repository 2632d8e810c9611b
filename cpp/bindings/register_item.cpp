// Item: immutable entry; `memoryview(item)` exposes the value zero-copy (read-only) and
// keeps the item alive through the exporter object.
#include "convert.hpp"

namespace watchcache::bindings {

namespace {

py::dict pairs_to_dict(const Item& item, bool fields) {
  py::dict d;
  const std::size_t n = fields ? item.field_count() : item.label_count();
  for (std::size_t i = 0; i < n; ++i) {
    const StringPair p = fields ? item.field(i) : item.label(i);
    d[to_str(p.first)] = to_str(p.second);
  }
  return d;
}

}  // namespace

void register_item(py::module_& m) {
  py::class_<PyItem>(m, "Item", py::buffer_protocol())
      .def(py::init([](py::handle key, py::handle value, py::handle mod_revision, py::handle labels,
                       py::handle fields) { return PyItem{make_item(key, value, mod_revision, labels, fields)}; }),
           py::arg("key"), py::arg("value"), py::arg("mod_revision") = 0, py::arg("labels") = py::none(),
           py::arg("fields") = py::none())
      .def_buffer([](PyItem& self) {
        const std::string_view v = self.ref->value();
        return py::buffer_info(const_cast<char*>(v.data()), 1, py::format_descriptor<unsigned char>::format(), 1,
                               {static_cast<py::ssize_t>(v.size())}, {1}, /*readonly=*/true);
      })
      .def_property_readonly("key", [](const PyItem& self) { return to_str(self.ref->key()); })
      .def_property_readonly("value", [](const PyItem& self) { return to_bytes(self.ref->value()); })
      .def_property_readonly("mod_revision", [](const PyItem& self) { return self.ref->mod_revision(); })
      .def_property_readonly("labels", [](const PyItem& self) { return pairs_to_dict(*self.ref, false); })
      .def_property_readonly("fields", [](const PyItem& self) { return pairs_to_dict(*self.ref, true); })
      .def_property_readonly("nbytes", [](const PyItem& self) { return self.ref->nbytes(); })
      .def("__eq__",
           [](const PyItem& self, py::handle other) -> py::object {
             if (!py::isinstance<PyItem>(other)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
             const Item& a = *self.ref;
             const Item& b = *other.cast<const PyItem&>().ref;
             bool eq = a.key() == b.key() && a.value() == b.value() && a.mod_revision() == b.mod_revision() &&
                       a.label_count() == b.label_count() && a.field_count() == b.field_count();
             for (std::size_t i = 0; eq && i < a.label_count(); ++i) eq = a.label(i) == b.label(i);
             for (std::size_t i = 0; eq && i < a.field_count(); ++i) eq = a.field(i) == b.field(i);
             return py::bool_(eq);
           })
      .def("__hash__",
           [](const PyItem& self) {
             return py::hash(py::make_tuple(to_str(self.ref->key()), to_bytes(self.ref->value()),
                                            self.ref->mod_revision()));
           })
      .def("__repr__",
           [](const PyItem& self) {
             return "Item(key=" + std::string(py::repr(to_str(self.ref->key()))) +
                    ", mod_revision=" + std::to_string(self.ref->mod_revision()) +
                    ", value=<" + std::to_string(self.ref->value().size()) + " bytes>)";
           })
      .def("__reduce__", [](py::handle self) {
        const PyItem& it = self.cast<const PyItem&>();
        return py::make_tuple(py::type::handle_of(self),
                              py::make_tuple(to_str(it.ref->key()), to_bytes(it.ref->value()), it.ref->mod_revision(),
                                             pairs_to_dict(*it.ref, false), pairs_to_dict(*it.ref, true)));
      });
}

}  // namespace watchcache::bindings
