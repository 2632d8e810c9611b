// PlainType: pybind11 functions as the methods and properties of a plain C type.
//
// A pybind11 class registers every instance in a process-wide table when it is made and
// removes it when it dies (convert.hpp says what that costs). A plain C type with a
// type_caster avoids that, but has no class_ to define methods on. PlainType offers the two
// calls the read-view template uses, def and def_property_readonly, made the way class_
// makes them: a cpp_function that is a method of the type, set as a type attribute, so
// signatures, overload resolution, keyword arguments and error translation are pybind11's.
#pragma once

#include <pybind11/pybind11.h>

#include <utility>

namespace watchcache::bindings {

namespace py = pybind11;

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
