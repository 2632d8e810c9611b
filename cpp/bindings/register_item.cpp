// Item: immutable entry; `memoryview(item)` exposes the value zero-copy (read-only) and
// keeps the item alive through the exporter object. A plain C type: see ItemObject in
// convert.hpp for why it is not a pybind11 class.
#include "convert.hpp"

namespace watchcache::bindings {

namespace {

const Item& item(PyObject* self) noexcept { return *ItemObject::of(self).ref; }

py::dict pairs_to_dict(const Item& it, bool fields) {
  py::dict d;
  const std::size_t n = fields ? it.field_count() : it.label_count();
  for (std::size_t i = 0; i < n; ++i) {
    const StringPair p = fields ? it.field(i) : it.label(i);
    d[to_str(p.first)] = to_str(p.second);
  }
  return d;
}

PyObject* item_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* keywords[] = {"key", "value", "mod_revision", "labels", "fields", nullptr};
  PyObject *key = nullptr, *value = nullptr, *revision = nullptr, *labels = Py_None, *fields = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|OOO:Item", const_cast<char**>(keywords), &key, &value, &revision,
                                   &labels, &fields))
    return nullptr;
  return guarded(
      [&]() -> PyObject* {
        const py::object zero = py::int_(0);
        ItemRef ref = make_item(key, value, revision ? py::handle(revision) : py::handle(zero), labels, fields);
        return ItemObject::wrap(PyItem{std::move(ref)}, type);
      },
      static_cast<PyObject*>(nullptr));
}

PyObject* item_richcompare(PyObject* self, PyObject* other, int op) {
  if ((op != Py_EQ && op != Py_NE) || !ItemObject::check(other)) Py_RETURN_NOTIMPLEMENTED;
  const Item& a = item(self);
  const Item& b = item(other);
  bool eq = a.key() == b.key() && a.value() == b.value() && a.mod_revision() == b.mod_revision() &&
            a.label_count() == b.label_count() && a.field_count() == b.field_count();
  for (std::size_t i = 0; eq && i < a.label_count(); ++i) eq = a.label(i) == b.label(i);
  for (std::size_t i = 0; eq && i < a.field_count(); ++i) eq = a.field(i) == b.field(i);
  return PyBool_FromLong((op == Py_EQ) == eq);
}

Py_hash_t item_hash(PyObject* self) {
  return guarded(
      [&]() -> Py_hash_t {
        const Item& it = item(self);
        return py::hash(py::make_tuple(to_str(it.key()), to_bytes(it.value()), it.mod_revision()));
      },
      Py_hash_t{-1});
}

PyObject* item_repr(PyObject* self) {
  return guarded(
      [&]() -> PyObject* {
        const Item& it = item(self);
        const std::string text = "Item(key=" + std::string(py::repr(to_str(it.key()))) +
                                 ", mod_revision=" + std::to_string(it.mod_revision()) + ", value=<" +
                                 std::to_string(it.value().size()) + " bytes>)";
        return PyUnicode_FromStringAndSize(text.data(), static_cast<Py_ssize_t>(text.size()));
      },
      static_cast<PyObject*>(nullptr));
}

PyObject* item_reduce(PyObject* self, PyObject* /*unused*/) {
  return guarded(
      [&]() -> PyObject* {
        const Item& it = item(self);
        py::tuple args = py::make_tuple(to_str(it.key()), to_bytes(it.value()), it.mod_revision(),
                                        pairs_to_dict(it, false), pairs_to_dict(it, true));
        return py::make_tuple(py::handle(reinterpret_cast<PyObject*>(Py_TYPE(self))), args).release().ptr();
      },
      static_cast<PyObject*>(nullptr));
}

int item_getbuffer(PyObject* self, Py_buffer* view, int flags) {
  const std::string_view v = item(self).value();
  return PyBuffer_FillInfo(view, self, const_cast<char*>(v.data()), static_cast<Py_ssize_t>(v.size()),
                           /*readonly=*/1, flags);
}

PyObject* get_key(PyObject* self, void*) {
  return new_text_str(item(self).key());
}
PyObject* get_value(PyObject* self, void*) {
  const std::string_view v = item(self).value();
  return PyBytes_FromStringAndSize(v.data(), static_cast<Py_ssize_t>(v.size()));
}
PyObject* get_mod_revision(PyObject* self, void*) { return PyLong_FromLongLong(item(self).mod_revision()); }
PyObject* get_labels(PyObject* self, void*) {
  return guarded([&]() -> PyObject* { return pairs_to_dict(item(self), false).release().ptr(); },
                 static_cast<PyObject*>(nullptr));
}
PyObject* get_fields(PyObject* self, void*) {
  return guarded([&]() -> PyObject* { return pairs_to_dict(item(self), true).release().ptr(); },
                 static_cast<PyObject*>(nullptr));
}
PyObject* get_nbytes(PyObject* self, void*) { return PyLong_FromSize_t(item(self).nbytes()); }

// One label's or field's value without building the whole dict: watch dispatch reads one
// or two per event, and at 100 events/s each read runs on a cold CPU, where the dict's
// allocations cost most of its time.
PyObject* find_value(PyObject* self, PyObject* name, bool field) {
  if (!PyUnicode_Check(name)) {
    PyErr_Format(PyExc_TypeError, "the name must be str, not %s", Py_TYPE(name)->tp_name);
    return nullptr;
  }
  Py_ssize_t size = 0;
  const char* text = PyUnicode_AsUTF8AndSize(name, &size);
  if (text == nullptr) return nullptr;
  const std::string_view wanted(text, static_cast<std::size_t>(size));
  const Item& it = item(self);
  const std::optional<std::string_view> found = field ? it.find_field(wanted) : it.find_label(wanted);
  if (!found) Py_RETURN_NONE;
  return new_text_str(*found);
}
PyObject* item_label(PyObject* self, PyObject* name) { return find_value(self, name, false); }
PyObject* item_field(PyObject* self, PyObject* name) { return find_value(self, name, true); }

PyGetSetDef item_getset[] = {
    {"key", get_key, nullptr, nullptr, nullptr},
    {"value", get_value, nullptr, nullptr, nullptr},
    {"mod_revision", get_mod_revision, nullptr, nullptr, nullptr},
    {"labels", get_labels, nullptr, nullptr, nullptr},
    {"fields", get_fields, nullptr, nullptr, nullptr},
    {"nbytes", get_nbytes, nullptr,
     "Bytes of memory this item occupies in the engine (header, key, value, maps).", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyMethodDef item_methods[] = {
    {"__reduce__", item_reduce, METH_NOARGS, nullptr},
    {"label", item_label, METH_O, "label(name, /)\n--\n\nThe value of label ``name``, None when absent."},
    {"field", item_field, METH_O, "field(name, /)\n--\n\nThe value of field ``name``, None when absent."},
    {nullptr, nullptr, 0, nullptr},
};

PyType_Slot item_slots[] = {
    {Py_tp_doc, const_cast<char*>("Item(key, value, mod_revision=0, labels=None, fields=None)\n--\n\n"
                                  "An immutable entry. memoryview(item) is the value, zero-copy.")},
    {Py_tp_new, reinterpret_cast<void*>(item_new)},
    {Py_tp_dealloc, reinterpret_cast<void*>(ItemObject::dealloc)},
    {Py_tp_richcompare, reinterpret_cast<void*>(item_richcompare)},
    {Py_tp_hash, reinterpret_cast<void*>(item_hash)},
    {Py_tp_repr, reinterpret_cast<void*>(item_repr)},
    {Py_tp_getset, item_getset},
    {Py_tp_methods, item_methods},
    {Py_bf_getbuffer, reinterpret_cast<void*>(item_getbuffer)},
    {0, nullptr},
};

PyType_Spec item_spec = {
    "watchcache._core.Item",
    sizeof(ItemObject),
    0,
    static_cast<unsigned int>(Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE),
    item_slots,
};

}  // namespace

void register_item(py::module_& m) { ItemObject::add_type(m, "Item", item_spec); }

}  // namespace watchcache::bindings
