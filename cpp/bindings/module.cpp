// watchcache._core: wires the register_* files together. No logic lives in the bindings:
// the engine is in cpp/include/watchcache, the Python API in python/watchcache.
#include "convert.hpp"
#include "watchcache/item_heap.hpp"
#include "watchcache/node_pool.hpp"

#ifndef WATCHCACHE_VERSION
#define WATCHCACHE_VERSION "dev"
#endif

PYBIND11_MODULE(_core, m) {
  namespace wb = watchcache::bindings;
  m.doc() = "Native engine of watchcache: persistent B+tree with O(1) snapshots";
  m.attr("__version__") = WATCHCACHE_VERSION;
  m.attr("FANOUT") = watchcache::kDefaultFanout;
  wb::register_item(m);
  wb::register_selector(m);
  wb::register_tree(m);
  wb::register_registry(m);
  wb::register_token(m);
  m.def(
      "set_prefault", [](bool enabled) { return watchcache::detail::set_prefault(enabled); },
      pybind11::arg("enabled"));
  m.def("live_counters", [] {
    auto& c = watchcache::detail::live_counters();
    pybind11::dict d;
    d["nodes"] = c.nodes.load();
    d["items"] = c.items.load();
    d["bytes"] = c.bytes.load();
    return d;
  });
  m.def("memory_stats", [] {
    pybind11::dict d;
    d["node_chunks"] = watchcache::detail::NodePool::instance().chunks();
    d["item_chunks"] = watchcache::detail::ItemHeap::instance().chunks();
    d["item_spans"] = watchcache::detail::ItemHeap::instance().spans_in_use();
    d["chunk_bytes"] = watchcache::detail::ChunkSource::kChunkBytes;
    return d;
  });
}
