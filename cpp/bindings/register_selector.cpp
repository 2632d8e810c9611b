// Selector: requirement tuples (parsed by watchcache.selectors) -> the native matcher.
#include "convert.hpp"

namespace watchcache::bindings {

namespace {

py::sequence as_tuple_of(py::handle h, std::size_t arity, const char* what) {
  if (!PyTuple_Check(h.ptr()) && !PyList_Check(h.ptr()))
    throw py::type_error(std::string(what) + " requirement must be a tuple, not " + type_name(h));
  auto seq = py::reinterpret_borrow<py::sequence>(h);
  if (seq.size() != arity)
    throw py::type_error(std::string(what) + " requirement must have " + std::to_string(arity) + " elements, got " +
                         std::to_string(seq.size()));
  return seq;
}

Selector build(py::handle labels, py::handle fields) {
  std::vector<LabelRequirement> lreqs;
  for (py::handle h : py::iter(labels)) {
    auto t = as_tuple_of(h, 3, "label");
    LabelRequirement r{std::string(as_key(t[0], "label key")), parse_label_op(as_key(t[1], "label operator")), {}, 0};
    py::object values = t[2];
    if (PyUnicode_Check(values.ptr()))
      throw py::type_error("label requirement values must be a sequence of str, not a single str");
    for (py::handle v : py::iter(values)) r.values.emplace_back(as_key(v, "label value"));
    lreqs.push_back(std::move(r));
  }
  std::vector<FieldRequirement> freqs;
  for (py::handle h : py::iter(fields)) {
    auto t = as_tuple_of(h, 3, "field");
    const std::string_view op = as_key(t[1], "field operator");
    if (op != "=" && op != "!=")
      throw py::value_error("unknown field selector operator '" + std::string(op) + "' (expected '=' or '!=')");
    freqs.push_back({std::string(as_key(t[0], "field key")), op == "!=", std::string(as_key(t[2], "field value"))});
  }
  return Selector(std::move(lreqs), std::move(freqs));
}

const char* op_name(LabelOp op) {
  switch (op) {
    case LabelOp::Equals: return "=";
    case LabelOp::NotEquals: return "!=";
    case LabelOp::In: return "in";
    case LabelOp::NotIn: return "notin";
    case LabelOp::Exists: return "exists";
    case LabelOp::DoesNotExist: return "!";
    case LabelOp::GreaterThan: return "gt";
    case LabelOp::LessThan: return "lt";
  }
  return "?";
}

// matches_item as a plain METH_O method rather than through pybind11's dispatcher: watch
// dispatch asks it for every watcher an event concerns, and at 100 events/s each call runs
// on a cold CPU, where the dispatcher's overload and argument machinery cost most of it.
PyObject* selector_matches_item(PyObject* self, PyObject* item) {
  if (!ItemObject::check(item)) {
    PyErr_Format(PyExc_TypeError, "matches_item() takes an Item, not %s", Py_TYPE(item)->tp_name);
    return nullptr;
  }
  // The method descriptor has checked that self is a Selector; its value is read from the
  // instance directly, without pybind11's type lookup (a hash probe that runs cold too).
  auto* instance = reinterpret_cast<py::detail::instance*>(self);
  const void* value =
      instance->simple_layout ? instance->simple_value_holder[0] : instance->nonsimple.values_and_holders[0];
  if (value == nullptr) {  // Selector.__new__ without __init__
    PyErr_SetString(PyExc_TypeError, "matches_item() on a Selector that was never initialised");
    return nullptr;
  }
  const PySelector& selector = *static_cast<const PySelector*>(value);
  return PyBool_FromLong((*selector.selector)(*ItemObject::of(item).ref));
}

PyMethodDef matches_item_def = {
    "matches_item", selector_matches_item, METH_O,
    "matches_item(item, /)\n--\n\nWhether the item's labels and fields satisfy the selector."};

}  // namespace

void register_selector(py::module_& m) {
  auto selector = py::class_<PySelector>(m, "Selector");
  PyObject* matches_item = PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(selector.ptr()), &matches_item_def);
  if (matches_item == nullptr) throw py::error_already_set();
  selector.attr("matches_item") = py::reinterpret_steal<py::object>(matches_item);
  selector
      .def(py::init([](py::handle labels, py::handle fields) {
             return PySelector{std::make_shared<const Selector>(build(labels, fields))};
           }),
           py::arg("labels") = py::tuple(), py::arg("fields") = py::tuple())
      .def_property_readonly("empty", [](const PySelector& self) { return self.selector->empty(); })
      .def(
          "matches",
          [](const PySelector& self, py::handle labels, py::handle fields) {
            // Keep the looked-up str objects alive while the matcher reads their bytes.
            std::vector<py::object> keep;
            auto get = [&keep](py::handle mapping) {
              return [&keep, mapping](std::string_view k) -> std::optional<std::string_view> {
                if (mapping.is_none()) return std::nullopt;
                py::object v = mapping.attr("get")(to_str(k));
                if (v.is_none()) return std::nullopt;
                keep.push_back(v);
                return as_key(v, "mapping value");
              };
            };
            return self.selector->matches(get(labels), get(fields));
          },
          py::arg("labels"), py::arg("fields") = py::none())
      .def("__repr__", [](const PySelector& self) {
        std::string out = "Selector(labels=[";
        bool first = true;
        for (const auto& r : self.selector->labels()) {
          if (!first) out += ", ";
          first = false;
          out += "(" + std::string(py::repr(to_str(r.key))) + ", '" + op_name(r.op) + "', [";
          for (std::size_t i = 0; i < r.values.size(); ++i)
            out += (i ? ", " : "") + std::string(py::repr(to_str(r.values[i])));
          out += "])";
        }
        out += "], fields=[";
        first = true;
        for (const auto& f : self.selector->fields()) {
          if (!first) out += ", ";
          first = false;
          out += "(" + std::string(py::repr(to_str(f.key))) + ", '" + (f.negated ? "!=" : "=") + "', " +
                 std::string(py::repr(to_str(f.value))) + ")";
        }
        return out + "])";
      });
}

}  // namespace watchcache::bindings
