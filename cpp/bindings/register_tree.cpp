// Tree, Snapshot, ScanResult, Cursor and the range iterator; the secondary indexes' reads
// (scan_index, count_index) and declarations (secondary_index.hpp).
//
// Lifetimes: everything that outlives a call (iterators, cursors, scan results) holds a
// Snapshot, so it stays valid however the tree changes or is dropped; iterating a Tree
// therefore iterates a snapshot taken when iteration starts. Items handed to Python hold
// their own reference. GIL: scans and renders of snapshots release it; reads of the live
// Tree keep it (the Tree has one writer, serialized by the GIL).
#include <pybind11/pybind11.h>

#include "convert.hpp"
#include "plain_type.hpp"
#include "watchcache/render.hpp"

namespace watchcache::bindings {

namespace {

// ScanResult.chunks()' default piece size.
constexpr std::size_t kDefaultChunkBytes = 256 * 1024;
// A piece this small is copied with the GIL held: releasing and taking it back costs more
// than the copy (the first piece of every small LIST is such a piece).
constexpr std::size_t kReleaseGilBytes = 64 * 1024;

using View = detail::View<kDefaultFanout>;
using Walker = detail::Walker<kDefaultFanout>;

// Iterates keys or (key, value) pairs between optional bounds, either direction.
class RangeIterator {
 public:
  RangeIterator(Snapshot snap, std::optional<std::string> lo, std::optional<std::string> hi, bool lo_inclusive,
                bool hi_inclusive, bool reverse, bool pairs)
      : cursor_(std::move(snap)), lo_(std::move(lo)), hi_(std::move(hi)), lo_inclusive_(lo_inclusive),
        hi_inclusive_(hi_inclusive), reverse_(reverse), pairs_(pairs) {}

  py::object next() {
    if (!started_) {
      started_ = true;
      position();
    } else {
      reverse_ ? cursor_.prev() : cursor_.next();
    }
    if (!cursor_.valid() || !in_bounds(cursor_.item()->key())) throw py::stop_iteration();
    const Item* it = cursor_.item();
    if (!pairs_) return to_str(it->key());
    return py::make_tuple(to_str(it->key()), to_bytes(it->value()));
  }

 private:
  void position() {
    if (!reverse_) {
      if (lo_)
        lo_inclusive_ ? cursor_.seek(*lo_) : cursor_.seek_after(*lo_);
      else
        cursor_.seek_first();
      return;
    }
    if (!hi_) {
      cursor_.seek_last();
      return;
    }
    // Land on the first key past the upper bound, then step back once.
    const bool past = hi_inclusive_ ? cursor_.seek_after(*hi_) : cursor_.seek(*hi_);
    if (past)
      cursor_.prev();
    else
      cursor_.seek_last();
  }

  bool in_bounds(std::string_view k) const {
    if (lo_ && (lo_inclusive_ ? k < std::string_view(*lo_) : k <= std::string_view(*lo_))) return false;
    if (hi_ && (hi_inclusive_ ? k > std::string_view(*hi_) : k >= std::string_view(*hi_))) return false;
    return true;
  }

  Cursor cursor_;
  std::optional<std::string> lo_, hi_;
  bool lo_inclusive_, hi_inclusive_, reverse_, pairs_;
  bool started_ = false;
};

// A list body in pieces of about `chunk_bytes` (ListRenderer's pieces, render.hpp), one
// rendered per __next__ from the scan result this holds: the result (and the snapshot its
// items live in) stays alive while pieces remain and is let go with the last one, so a
// LIST sent in pieces holds its snapshot, never a copy of its body. The position advances
// before the GIL is released, so threads that share one iterator get distinct pieces.
class ListChunks {
 public:
  ListChunks(py::object owner, const ScanResult& result, std::string_view kind, std::string_view api_version,
             std::string_view metadata, std::size_t chunk_bytes)
      : owner_(std::move(owner)), result_(&result), renderer_(kind, api_version, metadata), chunk_bytes_(chunk_bytes) {}

  bool done() const noexcept { return result_ == nullptr; }

  py::bytes next() {
    if (!result_) throw py::stop_iteration();
    const ScanResult* result = result_;
    const py::object owner = owner_;  // keeps the result alive through this call
    const std::size_t begin = next_, end = renderer_.piece_end(result->items, begin, chunk_bytes_);
    const std::size_t size = renderer_.size(result->items, begin, end);
    PyObject* out = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(size));
    if (!out) throw py::error_already_set();
    auto piece = py::reinterpret_steal<py::bytes>(out);
    next_ = end;
    if (end == result->items.size()) {
      result_ = nullptr;
      owner_ = py::none();
    }
    if (size < kReleaseGilBytes) {
      renderer_.render(result->items, begin, end, PyBytes_AS_STRING(out));
    } else {
      py::gil_scoped_release nogil;
      renderer_.render(result->items, begin, end, PyBytes_AS_STRING(out));
    }
    return piece;
  }

 private:
  py::object owner_;
  const ScanResult* result_;
  const ListRenderer renderer_;
  const std::size_t chunk_bytes_;
  std::size_t next_ = 0;
};

// render()'s and chunks()' metadata: bytes holding a JSON object.
std::string_view as_metadata(py::handle metadata) {
  if (!PyBytes_Check(metadata.ptr())) throw py::type_error("metadata must be bytes, not " + type_name(metadata));
  return {PyBytes_AS_STRING(metadata.ptr()), static_cast<std::size_t>(PyBytes_GET_SIZE(metadata.ptr()))};
}

std::vector<const Item*> collect_all(const View& v) {
  std::vector<const Item*> out;
  out.reserve(v.size);
  Walker w(v);
  for (w.seek_first(); w.valid(); w.next()) out.push_back(w.item());
  return out;
}

const Item* require(const View& v, py::handle key) {
  const Item* it = v.find(as_key(key));
  if (!it) throw py::key_error(py::repr(key));
  return it;
}

RangeIterator make_range(Snapshot snap, py::handle lo, py::handle hi, std::pair<bool, bool> inclusive, bool reverse,
                         bool pairs) {
  auto lo_key = as_optional_key(lo, "lo");
  auto hi_key = as_optional_key(hi, "hi");
  return RangeIterator(std::move(snap), lo_key ? std::optional<std::string>(*lo_key) : std::nullopt,
                       hi_key ? std::optional<std::string>(*hi_key) : std::nullopt, inclusive.first, inclusive.second,
                       reverse, pairs);
}

ScanResult do_scan(const Snapshot& snap, py::handle prefix, py::handle start_at, py::handle start_after,
                   py::handle limit, py::handle selector) {
  ScanOptions opts;
  opts.prefix = as_key(prefix, "prefix");
  if (!start_at.is_none() && !start_after.is_none())
    throw py::value_error("pass start_at or start_after, not both");
  if (!start_at.is_none()) {
    opts.start = as_key(start_at, "start_at");
  } else if (!start_after.is_none()) {
    opts.start = as_key(start_after, "start_after");
    opts.start_inclusive = false;
  }
  opts.limit = as_count(limit, "limit");
  std::shared_ptr<const Selector> sel;
  if (!selector.is_none()) {
    if (!py::isinstance<PySelector>(selector))
      throw py::type_error("selector must be a Selector, not " + type_name(selector));
    sel = selector.cast<const PySelector&>().selector;
  }
  py::gil_scoped_release nogil;
  if (sel && !sel->empty()) return scan(snap, opts, *sel);
  return scan(snap, opts);
}

// An index named from Python: ("field" | "label", name).
IndexSpec as_index_spec(py::handle source, py::handle name) {
  const std::string_view s = as_key(source, "index source");
  IndexSpec spec;
  if (s == "field")
    spec.source = IndexSource::Field;
  else if (s == "label")
    spec.source = IndexSource::Label;
  else
    throw py::value_error("index source must be 'field' or 'label', not '" + std::string(s) + "'");
  spec.name = std::string(as_key(name, "index name"));
  return spec;
}

// An iterable of (source, name) pairs, each checked before anything is declared.
std::vector<IndexSpec> as_index_specs(py::handle specs) {
  std::vector<IndexSpec> out;
  if (PyUnicode_Check(specs.ptr()))
    throw py::type_error("indexes must be an iterable of (source, name) pairs, not str");
  for (py::handle h : py::iter(specs)) {
    if (!PyTuple_Check(h.ptr()) && !PyList_Check(h.ptr()))
      throw py::type_error("an index must be a (source, name) pair, not " + type_name(h));
    const auto pair = py::reinterpret_borrow<py::sequence>(h);
    if (pair.size() != 2) throw py::type_error("an index must be a (source, name) pair");
    out.push_back(as_index_spec(pair[0], pair[1]));
  }
  return out;
}

py::list index_spec_list(const std::vector<IndexSpec>& specs) {
  py::list out;
  for (const IndexSpec& s : specs)
    out.append(py::make_tuple(s.source == IndexSource::Field ? "field" : "label", to_str(s.name)));
  return out;
}

void add_indexes(Tree& t, const std::vector<IndexSpec>& specs) {
  for (const IndexSpec& s : specs) t.add_index(s);
}

// The values of an indexed read: a sequence of str (not a str itself, whose characters would
// each be taken for a value), copied so that the GIL can be released.
std::vector<std::string> as_index_values(py::handle values) {
  if (PyUnicode_Check(values.ptr()))
    throw py::type_error("values must be a sequence of str, not a single str");
  std::vector<std::string> out;
  for (py::handle v : py::iter(values)) out.emplace_back(as_key(v, "index value"));
  return out;
}

// The prefix and start of a scan, as do_scan takes them.
ScanOptions as_scan_range(py::handle prefix, py::handle start_at, py::handle start_after) {
  ScanOptions opts;
  opts.prefix = as_key(prefix, "prefix");
  if (!start_at.is_none() && !start_after.is_none())
    throw py::value_error("pass start_at or start_after, not both");
  if (!start_at.is_none()) {
    opts.start = as_key(start_at, "start_at");
  } else if (!start_after.is_none()) {
    opts.start = as_key(start_after, "start_after");
    opts.start_inclusive = false;
  }
  return opts;
}

const IndexSpec& require_index_in(const Snapshot& snap, const IndexSpec& spec) {
  const std::optional<detail::IndexView<kDefaultFanout>> v = detail::find_index(snap, spec);
  if (!v) throw py::key_error("no index on " + describe(spec) + " (declared: " +
                              std::string(py::str(index_spec_list(detail::specs_of(snap.indexes())))) + ")");
  return *v->spec;
}

ScanResult do_scan_index(const Snapshot& snap, py::handle source, py::handle name, py::handle values,
                         py::handle prefix, py::handle start_at, py::handle start_after, py::handle limit,
                         py::handle selector) {
  const IndexSpec& spec = require_index_in(snap, as_index_spec(source, name));
  const std::vector<std::string> wanted = as_index_values(values);
  ScanOptions opts = as_scan_range(prefix, start_at, start_after);
  opts.limit = as_count(limit, "limit");
  std::shared_ptr<const Selector> sel;
  if (!selector.is_none()) {
    if (!py::isinstance<PySelector>(selector))
      throw py::type_error("selector must be a Selector, not " + type_name(selector));
    sel = selector.cast<const PySelector&>().selector;
  }
  const std::vector<std::string_view> views(wanted.begin(), wanted.end());
  py::gil_scoped_release nogil;
  if (sel && !sel->empty()) return scan_index(snap, spec, views, opts, *sel);
  return scan_index(snap, spec, views, opts);
}

std::size_t do_count_index(const Snapshot& snap, py::handle source, py::handle name, py::handle values,
                           py::handle prefix, py::handle start_at, py::handle start_after) {
  const IndexSpec& spec = require_index_in(snap, as_index_spec(source, name));
  const std::vector<std::string> wanted = as_index_values(values);
  const ScanOptions opts = as_scan_range(prefix, start_at, start_after);
  return count_index(snap, spec, std::vector<std::string_view>(wanted.begin(), wanted.end()), opts);
}

// The read-only Mapping face shared by Tree (its current state) and Snapshot.
template <class Cls, class ViewOf, class SnapshotOf>
void bind_read_view(Cls& cls, ViewOf view_of, SnapshotOf snapshot_of) {
  using Self = typename Cls::type;
  cls.def("__len__", [view_of](Self& self) { return view_of(self).size; })
      .def(
          "__contains__",
          [view_of](Self& self, py::handle key) {
            return PyUnicode_Check(key.ptr()) && view_of(self).find(as_key(key)) != nullptr;
          },
          py::arg("key"))
      .def(
          "__getitem__", [view_of](Self& self, py::handle key) { return to_bytes(require(view_of(self), key)->value()); },
          py::arg("key"))
      .def("__iter__",
           [snapshot_of](Self& self) {
             return make_range(snapshot_of(self), py::none(), py::none(), {true, false}, false, false);
           })
      .def("__reversed__",
           [snapshot_of](Self& self) {
             return make_range(snapshot_of(self), py::none(), py::none(), {true, false}, true, false);
           })
      .def(
          "get",
          [view_of](Self& self, py::handle key, py::object default_) -> py::object {
            const Item* it = view_of(self).find(as_key(key));
            return it ? to_bytes(it->value()) : default_;
          },
          py::arg("key"), py::arg("default") = py::none())
      .def(
          "get_item",
          [view_of](Self& self, py::handle key) -> py::object {
            const Item* it = view_of(self).find(as_key(key));
            if (!it) return py::none();
            return py::cast(PyItem{ItemRef::share(it)});
          },
          py::arg("key"))
      .def("get_many",
           [view_of](Self& self, py::handle keys) {
             std::vector<py::object> ks;
             for (py::handle k : py::iter(keys)) {
               as_key(k);  // validate all before doing anything
               ks.push_back(py::reinterpret_borrow<py::object>(k));
             }
             const View v = view_of(self);
             py::list out(ks.size());
             for (std::size_t i = 0; i < ks.size(); ++i) {
               const Item* it = v.find(as_key(ks[i]));
               out[i] = it ? py::object(to_bytes(it->value())) : py::object(py::none());
             }
             return out;
           },
           py::arg("keys"))
      .def("keys", [view_of](Self& self) { return build_list(collect_all(view_of(self)), ListShape::Keys); })
      .def("values", [view_of](Self& self) { return build_list(collect_all(view_of(self)), ListShape::Values); })
      .def("items", [view_of](Self& self) { return build_list(collect_all(view_of(self)), ListShape::Pairs); })
      .def(
          "count",
          [view_of](Self& self, py::handle lo, py::handle hi) {
            return view_of(self).count(as_optional_key(lo, "lo"), as_optional_key(hi, "hi"));
          },
          py::arg("lo") = py::none(), py::arg("hi") = py::none())
      .def("count_prefix",
           [view_of](Self& self, py::handle prefix) {
             const std::string_view p = as_key(prefix, "prefix");
             const auto end = detail::prefix_end(p);
             return view_of(self).count(p, end ? std::optional<std::string_view>(*end) : std::nullopt);
           },
           py::arg("prefix"))
      .def(
          "irange",
          [snapshot_of](Self& self, py::handle lo, py::handle hi, std::pair<bool, bool> inclusive, bool reverse) {
            return make_range(snapshot_of(self), lo, hi, inclusive, reverse, false);
          },
          py::arg("lo") = py::none(), py::arg("hi") = py::none(), py::arg("inclusive") = std::make_pair(true, false),
          py::arg("reverse") = false)
      .def(
          "irange_items",
          [snapshot_of](Self& self, py::handle lo, py::handle hi, std::pair<bool, bool> inclusive, bool reverse) {
            return make_range(snapshot_of(self), lo, hi, inclusive, reverse, true);
          },
          py::arg("lo") = py::none(), py::arg("hi") = py::none(), py::arg("inclusive") = std::make_pair(true, false),
          py::arg("reverse") = false)
      .def(
          "scan",
          [snapshot_of](Self& self, py::handle prefix, py::handle start_at, py::handle start_after, py::handle limit,
                        py::handle selector) {
            return do_scan(snapshot_of(self), prefix, start_at, start_after, limit, selector);
          },
          py::arg("prefix") = "", py::kw_only(), py::arg("start_at") = py::none(), py::arg("start_after") = py::none(),
          py::arg("limit") = 0, py::arg("selector") = py::none())
      .def(
          "scan_index",
          [snapshot_of](Self& self, py::handle source, py::handle name, py::handle values, py::handle prefix,
                        py::handle start_at, py::handle start_after, py::handle limit, py::handle selector) {
            return do_scan_index(snapshot_of(self), source, name, values, prefix, start_at, start_after, limit,
                                 selector);
          },
          py::arg("source"), py::arg("name"), py::arg("values"), py::kw_only(), py::arg("prefix") = "",
          py::arg("start_at") = py::none(), py::arg("start_after") = py::none(), py::arg("limit") = 0,
          py::arg("selector") = py::none())
      .def(
          "count_index",
          [snapshot_of](Self& self, py::handle source, py::handle name, py::handle values, py::handle prefix,
                        py::handle start_at, py::handle start_after) {
            return do_count_index(snapshot_of(self), source, name, values, prefix, start_at, start_after);
          },
          py::arg("source"), py::arg("name"), py::arg("values"), py::kw_only(), py::arg("prefix") = "",
          py::arg("start_at") = py::none(), py::arg("start_after") = py::none())
      .def("cursor", [snapshot_of](Self& self) { return Cursor(snapshot_of(self)); })
      .def("check_invariants", [](Self& self) {
        if constexpr (std::is_same_v<Self, Tree>) {
          self.check_invariants();
        } else {
          self.view().check(detail::kForever);
          check_indexes(self);
        }
      });
}

// Pickled snapshots carry their items and index declarations; unpickling builds a fresh
// tree and keeps only its snapshot (the tree itself is dropped: the snapshot's domain keeps
// the nodes).
py::tuple snapshot_state(const Snapshot& snap) {
  py::list entries;
  Walker w(snap.view());
  for (w.seek_first(); w.valid(); w.next()) entries.append(py::cast(PyItem{ItemRef::share(w.item())}));
  return py::make_tuple(entries, index_spec_list(detail::specs_of(snap.indexes())));
}

Snapshot snapshot_from_items(py::handle entries, py::handle indexes) {
  const std::vector<IndexSpec> specs = as_index_specs(indexes);
  std::vector<ItemRef> items;
  for (py::handle e : py::iter(entries)) items.push_back(entry_to_item(e));
  Tree t;
  t.assign_sorted(std::move(items));
  add_indexes(t, specs);
  return t.snapshot();
}

PyType_Slot snapshot_slots[] = {
    {Py_tp_doc, const_cast<char*>("An immutable view of a Tree at one moment (Tree.snapshot()).")},
    {Py_tp_dealloc, reinterpret_cast<void*>(SnapshotObject::dealloc)},
    {0, nullptr},
};

// Not instantiable from Python: snapshots come from Tree.snapshot(), a registry or unpickling.
PyType_Spec snapshot_spec = {
    "watchcache._core.Snapshot",
    sizeof(SnapshotObject),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    snapshot_slots,
};

// Tree.snapshot() as a raw method: pybind11's dispatcher (argument loading, overload
// records, return casting) cost about half of the call, and a snapshot is what a watch
// cache takes per event. The Tree itself is still found through pybind11's caster.
PyObject* tree_snapshot(PyObject* self, PyObject* /*unused*/) {
  py::detail::make_caster<Tree> tree;
  if (!tree.load(self, /*convert=*/false)) {
    PyErr_Format(PyExc_TypeError, "snapshot() needs a Tree, not %s", Py_TYPE(self)->tp_name);
    return nullptr;
  }
  Tree& t = py::detail::cast_op<Tree&>(tree);
  return guarded([&] { return SnapshotObject::wrap(t.snapshot()); }, static_cast<PyObject*>(nullptr));
}

PyMethodDef tree_snapshot_def = {
    "snapshot", tree_snapshot, METH_NOARGS,
    "snapshot($self, /)\n--\n\nAn immutable view of the tree as it is now. O(1), independent of size."};

const Item* cursor_item(const Cursor& c) {
  if (!c.valid()) throw py::key_error("cursor is not positioned on an item");
  return c.item();
}

}  // namespace

void register_tree(py::module_& m) {
  py::class_<RangeIterator>(m, "_RangeIterator")
      .def("__iter__", [](py::handle self) { return self; })
      .def("__next__", &RangeIterator::next);

  py::class_<ListChunks>(m, "ListChunks")
      .def("__iter__", [](py::handle self) { return self; })
      .def("__next__", &ListChunks::next)
      .def_property_readonly("done", &ListChunks::done);

  py::class_<ScanResult>(m, "ScanResult")
      .def_property_readonly("next_key",
                             [](const ScanResult& r) -> py::object {
                               if (!r.next_key) return py::none();
                               return to_str(*r.next_key);
                             })
      .def_property_readonly("last_key",
                             [](const ScanResult& r) -> py::object {
                               if (r.items.empty()) return py::none();
                               return to_str(r.items.back()->key());
                             })
      .def_property_readonly("remaining", [](const ScanResult& r) { return r.remaining; })
      .def_property_readonly("scanned", [](const ScanResult& r) { return r.scanned; })
      .def("__len__", [](const ScanResult& r) { return r.items.size(); })
      .def(
          "__getitem__",
          [](const ScanResult& r, py::ssize_t i) {
            const auto n = static_cast<py::ssize_t>(r.items.size());
            if (i < 0) i += n;
            if (i < 0 || i >= n) throw py::index_error("scan result index out of range");
            return PyItem{ItemRef::share(r.items[static_cast<std::size_t>(i)])};
          },
          py::arg("index"))
      .def("__iter__",
           [](const ScanResult& r) {
             py::list out(r.items.size());
             for (std::size_t i = 0; i < r.items.size(); ++i) out[i] = py::cast(PyItem{ItemRef::share(r.items[i])});
             return py::iter(out);
           })
      .def("keys", [](const ScanResult& r) { return build_list(r.items, ListShape::Keys); })
      .def("values", [](const ScanResult& r) { return build_list(r.items, ListShape::Values); })
      .def("items", [](const ScanResult& r) { return build_list(r.items, ListShape::Pairs); })
      .def(
          "render",
          [](const ScanResult& r, py::handle kind, py::handle api_version, py::handle metadata) {
            const std::string_view k = as_key(kind, "kind"), v = as_key(api_version, "api_version");
            const ListRenderer renderer(k, v, as_metadata(metadata));
            const std::size_t size = renderer.size(r.items);
            PyObject* out = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(size));
            if (!out) throw py::error_already_set();
            {
              py::gil_scoped_release nogil;
              renderer.render(r.items, PyBytes_AS_STRING(out));
            }
            return py::reinterpret_steal<py::bytes>(out);
          },
          py::arg("kind"), py::arg("api_version"), py::arg("metadata") = py::bytes("{}"))
      .def(
          "chunks",
          [](const py::object& self, py::handle kind, py::handle api_version, py::handle metadata,
             py::handle chunk_bytes) {
            const std::string_view k = as_key(kind, "kind"), v = as_key(api_version, "api_version");
            const std::string_view md = as_metadata(metadata);
            const std::size_t target = as_count(chunk_bytes, "chunk_bytes");
            if (target == 0) throw py::value_error("chunk_bytes must be positive");
            return ListChunks(self, self.cast<const ScanResult&>(), k, v, md, target);
          },
          py::arg("kind"), py::arg("api_version"), py::arg("metadata") = py::bytes("{}"),
          py::arg("chunk_bytes") = kDefaultChunkBytes);

  py::class_<Cursor>(m, "Cursor")
      .def_property_readonly("valid", &Cursor::valid)
      .def_property_readonly("key", [](const Cursor& c) { return to_str(cursor_item(c)->key()); })
      .def_property_readonly("value", [](const Cursor& c) { return to_bytes(cursor_item(c)->value()); })
      .def_property_readonly("item", [](const Cursor& c) { return PyItem{ItemRef::share(cursor_item(c))}; })
      .def("seek", [](Cursor& c, py::handle k) { return c.seek(as_key(k)); }, py::arg("key"))
      .def("seek_after", [](Cursor& c, py::handle k) { return c.seek_after(as_key(k)); }, py::arg("key"))
      .def("seek_first", &Cursor::seek_first)
      .def("seek_last", &Cursor::seek_last)
      .def("next", &Cursor::next)
      .def("prev", &Cursor::prev);

  PlainType<Snapshot> snapshot(SnapshotObject::add_type(m, "Snapshot", snapshot_spec));
  bind_read_view(
      snapshot, [](const Snapshot& s) { return s.view(); }, [](const Snapshot& s) { return s; });
  snapshot.def_property_readonly("version", &Snapshot::version)
      .def_property_readonly("indexes", [](const Snapshot& s) { return index_spec_list(detail::specs_of(s.indexes())); })
      .def_property_readonly("nbytes", &Snapshot::nbytes)
      .def("__reduce__",
           [](const Snapshot& s) {
             return py::make_tuple(py::module_::import("watchcache._core").attr("_snapshot_from_items"),
                                   snapshot_state(s));
           })
      .def("__repr__", [](const Snapshot& s) {
        return "<Snapshot version=" + std::to_string(s.version()) + " len=" + std::to_string(s.size()) + ">";
      });
  m.def("_snapshot_from_items", &snapshot_from_items, py::arg("entries"), py::arg("indexes") = py::tuple());

  py::class_<Tree> tree(m, "Tree");
  bind_read_view(
      tree, [](const Tree& t) { return t.view(); }, [](Tree& t) { return t.snapshot(); });
  tree.def(py::init([](py::handle items, py::handle indexes) {
             const std::vector<IndexSpec> specs = as_index_specs(indexes);
             auto t = std::make_unique<Tree>();
             std::vector<ItemRef> sorted;
             if (!items.is_none()) {
               py::object source = py::reinterpret_borrow<py::object>(items);
               if (PyDict_Check(items.ptr()) ||
                   py::isinstance(items, py::module_::import("collections.abc").attr("Mapping")))
                 source = source.attr("items")();
               sorted = entries_in_key_order(source);
             }
             py::gil_scoped_release nogil;
             t->assign_sorted(std::move(sorted));
             add_indexes(*t, specs);
             return t;
           }),
           py::arg("items") = py::none(), py::kw_only(), py::arg("indexes") = py::tuple())
      .def_static("from_sorted",
                  [](py::handle entries, py::handle indexes) {
                    const std::vector<IndexSpec> specs = as_index_specs(indexes);
                    std::vector<ItemRef> items;
                    for (py::handle e : py::iter(entries)) items.push_back(entry_to_item(e));
                    auto t = std::make_unique<Tree>();
                    {
                      py::gil_scoped_release nogil;
                      t->assign_sorted(std::move(items));
                      add_indexes(*t, specs);
                    }
                    return t;
                  },
                  py::arg("entries"), py::kw_only(), py::arg("indexes") = py::tuple())
      .def(
          "add_index",
          [](Tree& t, py::handle source, py::handle name) {
            IndexSpec spec = as_index_spec(source, name);
            py::gil_scoped_release nogil;
            t.add_index(std::move(spec));
          },
          py::arg("source"), py::arg("name"))
      .def_property_readonly("indexes", [](const Tree& t) { return index_spec_list(t.indexes()); })
      .def("__setitem__",
           [](Tree& t, py::handle key, py::handle value) {
             t.put(make_item(key, value, py::int_(0), py::none(), py::none()));
           },
           py::arg("key"), py::arg("value"))
      .def("__delitem__",
           [](Tree& t, py::handle key) {
             if (!t.erase(as_key(key))) throw py::key_error(py::repr(key));
           },
           py::arg("key"))
      .def(
          "put",
          [](Tree& t, py::handle key, py::handle value, py::handle rev, py::handle labels, py::handle fields) {
            t.put(make_item(key, value, rev, labels, fields));
          },
          py::arg("key"), py::arg("value"), py::arg("mod_revision") = 0, py::arg("labels") = py::none(),
          py::arg("fields") = py::none())
      .def("put_item", [](Tree& t, const PyItem& item) { t.put(item.ref); }, py::arg("item"))
      .def(
          "swap_item",
          [](Tree& t, const PyItem& item) -> py::object {
            ItemRef previous = t.exchange(item.ref);
            if (!previous) return py::none();
            return py::cast(PyItem{std::move(previous)});
          },
          py::arg("item"))
      .def(
          "pop_item",
          [](Tree& t, py::handle key) -> py::object {
            ItemRef previous = t.take(as_key(key));
            if (!previous) return py::none();
            return py::cast(PyItem{std::move(previous)});
          },
          py::arg("key"))
      .def("put_many",
           [](Tree& t, py::handle entries) {
             // Convert (and so validate) everything first: a bad entry changes nothing. In
             // key order, each put's path is the last one's neighbour.
             for (auto& r : entries_in_key_order(entries)) t.put(std::move(r));
           },
           py::arg("entries"))
      .def("erase", [](Tree& t, py::handle key) { return t.erase(as_key(key)); }, py::arg("key"))
      .def("erase_many",
           [](Tree& t, py::handle keys) {
             std::vector<py::object> ks;
             for (py::handle k : py::iter(keys)) {
               as_key(k);
               ks.push_back(py::reinterpret_borrow<py::object>(k));
             }
             std::size_t erased = 0;
             for (const auto& k : ks) erased += t.erase(as_key(k)) ? 1 : 0;
             return erased;
           },
           py::arg("keys"))
      .def(
          "pop",
          [](Tree& t, py::handle key, py::object default_) -> py::object {
            const Item* it = t.get(as_key(key));
            if (!it) return default_;
            py::bytes value = to_bytes(it->value());
            t.erase(as_key(key));
            return value;
          },
          py::arg("key"), py::arg("default") = py::none())
      .def("clear", &Tree::clear)
      .def_property_readonly("version", &Tree::version)
      .def_property_readonly("nbytes", &Tree::nbytes)
      .def("collect", &Tree::collect)
      .def("__repr__", [](const Tree& t) {
        return "<Tree len=" + std::to_string(t.size()) + " version=" + std::to_string(t.version()) + ">";
      });
  PyObject* snapshot_method = PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(tree.ptr()), &tree_snapshot_def);
  if (!snapshot_method) throw py::error_already_set();
  py::setattr(tree, "snapshot", py::reinterpret_steal<py::object>(snapshot_method));
}

}  // namespace watchcache::bindings
