// Continue tokens in their canonical shape (watchcache/continue_token.hpp): the fast path
// tokens.py tries first. Both functions answer None for anything they do not handle, never an
// error, so tokens.py alone decides what a bad token is and how the 400 reads.
#include "convert.hpp"
#include "watchcache/continue_token.hpp"

namespace watchcache::bindings {

void register_token(py::module_& m) {
  m.def(
      "encode_continue_token",
      [](py::handle start, py::handle resource_version) -> py::object {
        if (!PyUnicode_Check(start.ptr()) || !PyLong_CheckExact(resource_version.ptr())) return py::none();
        int overflow = 0;
        const long long rv = PyLong_AsLongLongAndOverflow(resource_version.ptr(), &overflow);
        if (overflow || (rv == -1 && PyErr_Occurred())) {
          PyErr_Clear();
          return py::none();
        }
        Py_ssize_t size = 0;
        const char* data = PyUnicode_AsUTF8AndSize(start.ptr(), &size);
        if (!data) {  // a lone surrogate: the general path writes it as Go would
          PyErr_Clear();
          return py::none();
        }
        const std::string token = token::encode({data, static_cast<std::size_t>(size)}, rv);
        return py::reinterpret_steal<py::object>(
            PyUnicode_FromStringAndSize(token.data(), static_cast<Py_ssize_t>(token.size())));
      },
      py::arg("start"), py::arg("resource_version"));
  m.def(
      "decode_continue_token",
      [](py::handle text) -> py::object {
        if (!PyUnicode_Check(text.ptr()) || !PyUnicode_IS_ASCII(text.ptr())) return py::none();
        const std::string_view ascii(static_cast<const char*>(PyUnicode_DATA(text.ptr())),
                                     static_cast<std::size_t>(PyUnicode_GET_LENGTH(text.ptr())));
        const auto decoded = token::decode(ascii);
        if (!decoded) return py::none();
        PyObject* start = PyUnicode_DecodeUTF8(decoded->start.data(), static_cast<Py_ssize_t>(decoded->start.size()),
                                               nullptr);
        if (!start) throw py::error_already_set();  // decode() returns valid UTF-8 only
        return py::make_tuple(decoded->rv, py::reinterpret_steal<py::str>(start));
      },
      py::arg("token"));
}

}  // namespace watchcache::bindings
