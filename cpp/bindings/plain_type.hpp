// Plain C types for values the bindings hand out by the million (Item, Snapshot):
// PlainObject, an object holding one value, and PlainType, pybind11 functions as the methods
// and properties of such a type.
//
// A pybind11 class registers every instance in a process-wide table when it is made and
// removes it when it dies (convert.hpp says what that costs). A plain C type with a
// type_caster avoids that, but has no class_ to define methods on. PlainType offers the two
// calls the read-view template uses, def and def_property_readonly, made the way class_
// makes them: a cpp_function that is a method of the type, set as a type attribute, so
// signatures, overload resolution, keyword arguments and error translation are pybind11's.
#pragma once

#include <pybind11/pybind11.h>

#include <new>
#include <utility>

namespace watchcache::bindings {

namespace py = pybind11;

// An object of a plain C type holding one T. `type` is set once, by add_type(); the caster
// in convert.hpp loads and returns T through check, of and wrap.
template <class T>
struct PlainObject {
  PyObject_HEAD
  T value;

  static inline PyTypeObject* type = nullptr;

  static bool check(py::handle h) noexcept { return PyObject_TypeCheck(h.ptr(), type); }
  static T& of(py::handle h) noexcept { return reinterpret_cast<PlainObject*>(h.ptr())->value; }
  // A new object of `as` (default: the type) holding `value`; nullptr with a Python error
  // set when out of memory.
  static PyObject* wrap(T value, PyTypeObject* as = nullptr) noexcept {
    if (!as) as = type;
    PyObject* self = as->tp_alloc(as, 0);
    if (!self) return nullptr;
    new (&reinterpret_cast<PlainObject*>(self)->value) T(std::move(value));
    return self;
  }
  // The type's Py_tp_dealloc.
  static void dealloc(PyObject* self) noexcept {
    PyTypeObject* of_self = Py_TYPE(self);
    reinterpret_cast<PlainObject*>(self)->value.~T();
    of_self->tp_free(self);
    Py_DECREF(of_self);  // a heap type: each instance holds a reference to it
  }
  // Makes the type from `spec` (basicsize sizeof(PlainObject), Py_tp_dealloc dealloc) and
  // adds it to the module, which keeps it alive, as `name`.
  static PyObject* add_type(py::module_& m, const char* name, PyType_Spec& spec) {
    PyObject* made = PyType_FromSpec(&spec);
    if (!made) throw py::error_already_set();
    type = reinterpret_cast<PyTypeObject*>(made);
    m.add_object(name, py::reinterpret_steal<py::object>(made));
    return made;
  }
};

template <class T>
class PlainType {
 public:
  using type = T;

  // `type_object` must be a heap type that allows setting attributes.
  explicit PlainType(py::handle type_object) : type_(py::reinterpret_borrow<py::object>(type_object)) {}

  template <class Func, class... Extra>
  PlainType& def(const char* name, Func&& f, const Extra&... extra) {
    py::cpp_function method(std::forward<Func>(f), py::name(name), py::is_method(type_),
                            py::sibling(py::getattr(type_, name, py::none())), extra...);
    py::setattr(type_, name, method);
    return *this;
  }

  template <class Getter>
  PlainType& def_property_readonly(const char* name, Getter&& fget) {
    py::cpp_function getter(std::forward<Getter>(fget), py::is_method(type_));
    py::setattr(type_, name, py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(&PyProperty_Type))(getter));
    return *this;
  }

 private:
  py::object type_;
};

}  // namespace watchcache::bindings
