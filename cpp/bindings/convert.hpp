// Conversions between Python objects and engine types, shared by the register_*.cpp files.
// Glue only: type checks with clear TypeErrors, zero-copy views of str/bytes while the
// Python object is alive, and list building with the raw C API (pybind11's generic casts
// cost ~2x for the 500-tuple pages the cache serves).
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "plain_type.hpp"
#include "watchcache/btree.hpp"
#include "watchcache/item.hpp"
#include "watchcache/registry.hpp"
#include "watchcache/selector.hpp"

namespace watchcache::bindings {

namespace py = pybind11;

// Python-side handle of an item: one reference, so the item outlives trees and snapshots.
struct PyItem {
  ItemRef ref;
};

// Item's Python type is a plain C type (register_item.cpp, PlainObject in plain_type.hpp),
// not a pybind11 class: pybind11 enters every instance of its classes in a process-wide hash
// table when it is made and removes it when it dies. With 100k+ items alive that table is
// megabytes, so each wrap and each free of an Item cost a cache miss or two, and the cache
// makes and frees several per applied event (and one per item of a page turned into Python
// objects). The caster below lets the other bindings keep taking and returning PyItem.
using ItemObject = PlainObject<PyItem>;
inline PyObject* new_item_object(ItemRef ref) noexcept { return ItemObject::wrap(PyItem{std::move(ref)}); }

// Snapshot's Python type is a plain C type too (register_tree.cpp), for the same reason and
// because taking one is the hottest call of all: a pybind11 instance cost about as much to
// register, unregister and box as the O(1) snapshot itself. Its methods are still pybind11
// functions (PlainType), reached through the caster below.
using SnapshotObject = PlainObject<Snapshot>;

struct PySelector {
  std::shared_ptr<const Selector> selector;
};

inline std::string type_name(py::handle h) { return py::str(py::type::handle_of(h).attr("__name__")); }

// A view of a str's UTF-8 bytes, valid while the str is alive.
inline std::string_view as_key(py::handle h, const char* what = "key") {
  if (!PyUnicode_Check(h.ptr()))
    throw py::type_error(std::string(what) + " must be str, not " + type_name(h));
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(h.ptr(), &size);
  if (!data) throw py::error_already_set();
  return {data, static_cast<std::size_t>(size)};
}

inline std::optional<std::string_view> as_optional_key(py::handle h, const char* what) {
  if (h.is_none()) return std::nullopt;
  return as_key(h, what);
}

// Engine text (a key, a label, a field) as a new str; nullptr with a Python error set. It is
// almost always ASCII, and then the str is allocated and copied directly: a page turns
// hundreds of keys into str, and the UTF-8 decoder's setup costs as much as the copy.
// Anything else goes to the decoder.
inline PyObject* new_text_str(std::string_view s) noexcept {
  std::uint64_t high = 0;
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t word;
    std::memcpy(&word, s.data() + i, 8);
    high |= word;
  }
  for (; i < s.size(); ++i) high |= static_cast<unsigned char>(s[i]);
  if (high & 0x8080808080808080ULL)
    return PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "surrogateescape");
  PyObject* o = PyUnicode_New(static_cast<Py_ssize_t>(s.size()), 127);
  if (o) std::memcpy(PyUnicode_1BYTE_DATA(o), s.data(), s.size());
  return o;
}

inline py::str to_str(std::string_view s) {
  PyObject* o = new_text_str(s);
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

inline py::bytes to_bytes(std::string_view s) {
  return py::bytes(s.data(), s.size());
}

// Holds a contiguous read-only buffer (bytes, bytearray, memoryview, ...) for a scope.
class ValueBuffer {
 public:
  explicit ValueBuffer(py::handle h) {
    if (PyUnicode_Check(h.ptr()) || !PyObject_CheckBuffer(h.ptr()))
      throw py::type_error("value must be bytes-like (bytes, bytearray, memoryview), not " + type_name(h));
    if (PyObject_GetBuffer(h.ptr(), &view_, PyBUF_SIMPLE) != 0) throw py::error_already_set();
  }
  ValueBuffer(const ValueBuffer&) = delete;
  ValueBuffer& operator=(const ValueBuffer&) = delete;
  ~ValueBuffer() { PyBuffer_Release(&view_); }
  std::string_view view() const noexcept {
    return {static_cast<const char*>(view_.buf), static_cast<std::size_t>(view_.len)};
  }

 private:
  Py_buffer view_{};
};

// A non-negative int that fits `what`'s range; ValueError (not pybind11's cast error) beyond.
inline std::size_t as_count(py::handle h, const char* what) {
  if (!PyLong_Check(h.ptr()) || PyBool_Check(h.ptr()))
    throw py::type_error(std::string(what) + " must be int, not " + type_name(h));
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(h.ptr(), &overflow);
  if (overflow) throw py::value_error(std::string(what) + " out of range for a 64-bit integer");
  if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
  if (v < 0) throw py::value_error(std::string(what) + " must not be negative, got " + std::to_string(v));
  return static_cast<std::size_t>(v);
}

inline std::int64_t as_revision(py::handle h) {
  if (!PyLong_Check(h.ptr()) || PyBool_Check(h.ptr()))
    throw py::type_error("mod_revision must be int, not " + type_name(h));
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(h.ptr(), &overflow);
  if (overflow) throw py::value_error("mod_revision out of range for a 64-bit integer");
  if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
  if (v < 0) throw py::value_error("mod_revision must not be negative, got " + std::to_string(v));
  return v;
}

// Mapping[str, str] | None -> pairs viewing the mapping's strings. `keep` holds the items
// list alive for the views' lifetime (left empty for None: most puts carry no maps, and an
// empty py::list per map would be two allocations per put).
inline std::vector<StringPair> as_string_map(py::handle h, const char* what, py::object& keep) {
  std::vector<StringPair> out;
  if (h.is_none()) return out;
  if (!PyDict_Check(h.ptr()) && !py::isinstance(h, py::module_::import("collections.abc").attr("Mapping")))
    throw py::type_error(std::string(what) + " must be a mapping of str to str, not " + type_name(h));
  py::list items(h.attr("items")());
  keep = items;
  out.reserve(items.size());
  for (py::handle kv : items) {
    auto pair = py::reinterpret_borrow<py::tuple>(kv);
    out.emplace_back(as_key(pair[0], what), as_key(pair[1], what));
  }
  return out;
}

inline ItemRef make_item(py::handle key, py::handle value, py::handle revision, py::handle labels,
                         py::handle fields) {
  const std::string_view k = as_key(key);
  ValueBuffer v(value);
  const std::int64_t rev = as_revision(revision);
  py::object keep_labels, keep_fields;
  auto l = as_string_map(labels, "labels", keep_labels);
  auto f = as_string_map(fields, "fields", keep_fields);
  return ItemRef::adopt(Item::create(k, v.view(), rev, std::move(l), std::move(f)));
}

// An entry of put_many/from_sorted: Item, (key, value) or (key, value, mod_revision).
// Returns a tuple's or list's fields after checking its shape; none for an Item.
inline std::span<PyObject* const> entry_fields(py::handle entry) {
  if (ItemObject::check(entry)) return {};
  if (!PyTuple_Check(entry.ptr()) && !PyList_Check(entry.ptr()))
    throw py::type_error("entry must be an Item or a (key, value[, mod_revision]) tuple, not " + type_name(entry));
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(entry.ptr());
  if (n != 2 && n != 3)
    throw py::type_error("entry tuple must have 2 or 3 elements, got " + std::to_string(n));
  return {PySequence_Fast_ITEMS(entry.ptr()), static_cast<std::size_t>(n)};
}

inline ItemRef entry_to_item(py::handle entry) {
  const auto fields = entry_fields(entry);
  if (fields.empty()) return ItemObject::of(entry).ref;
  if (fields.size() == 3) return make_item(fields[0], fields[1], fields[2], py::none(), py::none());
  return make_item(fields[0], fields[1], py::int_(0), py::none(), py::none());
}

// Entries as items in key order, the last of equal keys winning, every entry checked before
// any item is made. The items are made in key order, so that consecutive keys sit in
// consecutive memory: made in input order, a shuffled input left a tree whose items were
// scattered, and every scan of it missed the cache once per item (a scan 500 to Python
// items at 1M keys took twice as long as from sorted input: git show 11fe2ee).
inline std::vector<ItemRef> entries_in_key_order(py::handle entries) {
  const auto seq = py::reinterpret_steal<py::object>(PySequence_Fast(entries.ptr(), "entries must be iterable"));
  if (!seq) throw py::error_already_set();
  const auto n = static_cast<std::size_t>(PySequence_Fast_GET_SIZE(seq.ptr()));
  PyObject* const* all = PySequence_Fast_ITEMS(seq.ptr());
  std::vector<std::pair<std::string_view, std::size_t>> order;
  order.reserve(n);
  bool ascending = true;
  for (std::size_t i = 0; i < n; ++i) {
    const auto fields = entry_fields(all[i]);
    const std::string_view k = fields.empty() ? ItemObject::of(all[i]).ref->key() : as_key(fields[0]);
    if (i > 0 && !(order.back().first < k)) ascending = false;
    order.emplace_back(k, i);
  }
  if (!ascending)
    std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<ItemRef> items;
  items.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    ItemRef item = entry_to_item(all[order[i].second]);  // a superseded entry is still checked
    if (i + 1 < n && order[i + 1].first == order[i].first) continue;
    items.push_back(std::move(item));
  }
  return items;
}

// For functions written against the raw C API (C types' slots, raw methods): runs `fn` and
// turns a C++ exception into the Python error it stands for; `fail` is what the function
// returns on error.
template <class Fn, class R>
R guarded(Fn&& fn, R fail) noexcept {
  try {
    return fn();
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const py::builtin_exception& e) {
    e.set_error();
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::out_of_range& e) {  // pybind11's own translation of the std exceptions
    PyErr_SetString(PyExc_IndexError, e.what());
  } catch (const std::overflow_error& e) {
    PyErr_SetString(PyExc_OverflowError, e.what());
  } catch (const std::invalid_argument& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const std::length_error& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const std::domain_error& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return fail;
}

// Builds the pairs / keys / values lists of a page with the raw C API.
enum class ListShape { Keys, Values, Pairs };

template <class ItemRange>
py::list build_list(const ItemRange& items, ListShape shape) {
  const auto n = static_cast<Py_ssize_t>(items.size());
  PyObject* list = PyList_New(n);
  if (!list) throw py::error_already_set();
  // Items of a page are scattered allocations: ask for a few ahead while building objects.
  // An item's header, key and a small value span about three cache lines.
  constexpr std::size_t kAhead = 12;
  const std::size_t count = items.size();
  auto prefetch_item = [](const Item* p) {
    const char* c = reinterpret_cast<const char*>(p);
    __builtin_prefetch(c);
    __builtin_prefetch(c + 64);
    __builtin_prefetch(c + 128);
  };
  for (std::size_t j = 0; j < std::min(kAhead, count); ++j) prefetch_item(items[j]);
  Py_ssize_t i = 0;
  for (const Item* it : items) {
    const auto next = static_cast<std::size_t>(i) + kAhead;
    if (next < count) prefetch_item(items[next]);
    PyObject* obj = nullptr;
    PyObject* k = nullptr;
    PyObject* v = nullptr;
    if (shape != ListShape::Values) {
      k = new_text_str(it->key());
    }
    if (shape != ListShape::Keys) {
      v = PyBytes_FromStringAndSize(it->value().data(), static_cast<Py_ssize_t>(it->value().size()));
    }
    if (shape == ListShape::Keys) {
      obj = k;
    } else if (shape == ListShape::Values) {
      obj = v;
    } else if (k && v) {
      obj = PyTuple_New(2);
      if (obj) {
        PyTuple_SET_ITEM(obj, 0, k);
        PyTuple_SET_ITEM(obj, 1, v);
      } else {
        Py_DECREF(k);
        Py_DECREF(v);
      }
    } else {
      Py_XDECREF(k);
      Py_XDECREF(v);
    }
    if (!obj) {
      Py_DECREF(list);
      throw py::error_already_set();
    }
    PyList_SET_ITEM(list, i++, obj);
  }
  return py::reinterpret_steal<py::list>(list);
}

void register_item(py::module_& m);
void register_selector(py::module_& m);
void register_tree(py::module_& m);
void register_registry(py::module_& m);
void register_token(py::module_& m);

}  // namespace watchcache::bindings

namespace pybind11::detail {

// A caster for a value that lives inside a PlainObject (Item, Snapshot): loading borrows the
// object's own value (no copy, no reference count traffic); returning moves the value, or a
// copy of it, into a new object of the type.
template <class T>
struct plain_object_caster {
  using Object = watchcache::bindings::PlainObject<T>;

  bool load(handle src, bool /*convert*/) {
    if (!Object::check(src)) return false;
    value_ = &Object::of(src);
    return true;
  }
  static handle cast(const T& src, return_value_policy policy, handle parent) { return cast(T(src), policy, parent); }
  static handle cast(T&& src, return_value_policy /*policy*/, handle /*parent*/) {
    PyObject* obj = Object::wrap(std::move(src));
    if (!obj) throw error_already_set();
    return obj;
  }

  template <typename U>
  using cast_op_type = pybind11::detail::cast_op_type<U>;
  operator T*() { return value_; }
  operator T&() { return *value_; }

 private:
  T* value_ = nullptr;
};

template <>
struct type_caster<watchcache::bindings::PyItem> : plain_object_caster<watchcache::bindings::PyItem> {
  static constexpr auto name = const_name("Item");
};

template <>
struct type_caster<watchcache::Snapshot> : plain_object_caster<watchcache::Snapshot> {
  static constexpr auto name = const_name("Snapshot");
};

}  // namespace pybind11::detail
