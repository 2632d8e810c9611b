// Node memory: the tiers a tree node's memory passes through on its way between the OS and
// the writer, and the one policy for which tier a node is taken from and goes back to. The
// tiers are described here and nowhere else; the files that implement them refer here.
//
//   tier                          held by, per node size               bound
//   1  NodeStock (below)          one tree's writer; no lock           NodeStock::kHigh
//   2  ParkedNodes (below)        one ReclaimDomain (reclaim.hpp),     ParkedNodes::kPerSize
//                                 under the domain's lock
//   3  NodePool (node_pool.hpp)   the process; a lock per node size    none; a chunk whose
//                                                                      nodes are all free goes
//                                                                      back to tier 4 (one
//                                                                      spare kept per size)
//   4  ChunkSource                the process: 2 MB huge-page chunks, faulted in ahead of the
//      (chunk_source.hpp)         writer when prefaulting is on; shared with the ItemHeap
//
// Sanitizer builds replace tiers 3 and 4 with operator new/delete (sanitizers.hpp), so that
// ASan and TSan see where each node's memory comes from and goes; tiers 1 and 2 work alike
// in every build.
//
// The policy, implemented by the functions named in parentheses (BasicTree and the
// ReclaimDomain only say when a node is free):
//   taken     BasicTree::allocate takes the top of its stock (NodeStock::take), else asks
//             tier 3 (new_node_memory: a free node of the size's lowest chunk with room,
//             else a new chunk from tier 4).
//   freed     A node born in the tree's current version, which no snapshot has seen (a merge
//             or a root collapse drops one): to the stock while it holds fewer than kHigh,
//             else to tier 3 (NodeStock::give_back). A retired node, once no live snapshot
//             can reach it (ReclaimDomain::free_one): parked while its size has fewer than
//             kPerSize, else to tier 3 (ParkedNodes::park). A tree's live nodes when no
//             snapshot is pinned (clear(), the destructor): to tier 3 (discard_node).
//   restocked At every write's ReclaimDomain::retire (one lock per write, taken anyway to
//             hand over the path the write replaced), parked nodes refill the writer's
//             stock up to kHigh, the most recently parked on top (ParkedNodes::restock).
//   dropped   A tree's stock goes to tier 3 with the tree; a domain's parked nodes with the
//             domain (its last holder, the tree or a snapshot).
//
// Why tiers 1 and 2: a write after a snapshot allocates a root-to-leaf path and, once the
// oldest stored snapshot goes, frees about as many nodes, so a tree recycles nodes at the
// rate it writes. From the stock a node costs no lock and no locked instruction (which
// would wait for the path copy's cold stores: single_thread.hpp); the domain's lock is
// taken once per write, not per node. The newest parked nodes go on top of the stock, so a
// copy lands in a node freed a write ago (the path kept by the snapshot dropped with the
// previous write), whose lines are likely still in cache. Nodes were malloc'ed before these
// tiers existed: at over 1 KB they missed glibc's per-thread cache and went through its
// shared bins, a quarter of the instructions of a write after a snapshot (`git show
// ea42c70` has the callgrind counts; `valgrind --tool=callgrind ... build/bench/write_probe
// write` is the command that measures a write today, see cpp/bench/write_probe.cpp).
// Why tiers 3 and 4: node_pool.hpp and chunk_source.hpp.
//
// Tiers 1 and 2 neither read nor write a node given back to them, and nodes are told apart
// by their size alone, never by reading them: a node retired long ago is cold, and parking
// it must not cost a cache miss (the writer's next copy into it pays for the line anyway,
// as a store). Tier 3, by contrast, writes its free-list link into the node.
//
// Accounting: a node counts as live (live_counters: nodes and bytes) from taken to given
// back; nodes in a stock, parked or in tier 3 do not count. The writer settles what it owes
// once per write (BasicTree::owe_nodes), the domain once per call; count_nodes says why.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <new>
#include <span>
#include <vector>

#include "watchcache/item.hpp"
#include "watchcache/node_pool.hpp"
#include "watchcache/sanitizers.hpp"
#include "watchcache/single_thread.hpp"

namespace watchcache::detail {

// Tier 3, or operator new in sanitizer builds.
inline void* new_node_memory(std::size_t bytes) {
#if WATCHCACHE_SANITIZED
  return ::operator new(bytes);
#else
  return NodePool::instance().allocate(bytes);
#endif
}

// Back to tier 3, or operator delete in sanitizer builds. Leaf and Inner are trivially
// destructible, so a node's memory is all there is to free.
inline void discard_node(void* p, [[maybe_unused]] std::size_t bytes) noexcept {
#if WATCHCACHE_SANITIZED
  ::operator delete(p);
#else
  NodePool::instance().release(p, bytes);
#endif
}

// Adds to the live node accounting. A single-threaded process adds without the locked
// instruction, which would wait for the path copy's stores to reach the cache
// (single_thread.hpp); callers batch their counts (a write's, an unpin's) for the same reason.
inline void count_nodes(std::int64_t nodes, std::int64_t bytes) noexcept {
  auto& c = live_counters();
  if (single_threaded()) {
    c.nodes.store(c.nodes.load(std::memory_order_relaxed) + nodes, std::memory_order_relaxed);
    c.bytes.store(c.bytes.load(std::memory_order_relaxed) + bytes, std::memory_order_relaxed);
    return;
  }
  c.nodes.fetch_add(nodes, std::memory_order_relaxed);
  c.bytes.fetch_add(bytes, std::memory_order_relaxed);
}

// How a ReclaimDomain disposes of nodes, which it knows only as pointers and sizes, and
// tells the live accounting they left: the tree's are kNodeHooks; tests pass their own.
struct NodeHooks {
  void (*discard)(void*, std::size_t bytes) noexcept;  // frees a node's memory
  // Called once per batch of freed or parked nodes (with negative counts), not per node.
  void (*count)(std::int64_t nodes, std::int64_t bytes) noexcept;
};
inline constexpr NodeHooks kNodeHooks{&discard_node, &count_nodes};

// Tier 1: a writer's stock of free nodes of one size, refilled from tier 2 by
// ParkedNodes::restock. Only the writer touches it.
struct NodeStock {
  static constexpr std::size_t kHigh = 32;  // nodes a writer keeps at hand

  std::size_t bytes = 0;
  std::vector<void*> nodes;

  // Memory for one node of type Kind, whose size is this stock's `bytes`: the top of the
  // stock, else tier 3. Stocked nodes are cold (parking never touches them) and a path copy
  // overwrites one per level, so the next one's lines are asked for, for writing, while
  // this one is filled: the next copy's store misses then overlap this copy, and a write in
  // a window of snapshots takes 0.94-0.95 of the time it takes with them cold
  // (`scripts/ab-engine.sh c13ce44~1 window`, run at c13ce44). The size comes from the type
  // so that the prefetch loop unrolls: a loop over `bytes` made a write after a snapshot 6%
  // more instructions (`valgrind --tool=callgrind ... build/bench/write_probe write`).
  template <class Kind>
  void* take() {
    if (nodes.empty()) return new_node_memory(sizeof(Kind));
    void* node = nodes.back();
    nodes.pop_back();
    if (!nodes.empty()) prefetch_for_write<sizeof(Kind)>(nodes.back());
    return node;
  }

  // A node no snapshot has seen: kept while the stock is below kHigh, else to tier 3.
  void give_back(void* node) {
    if (nodes.size() < kHigh)
      nodes.push_back(node);
    else
      discard_node(node, bytes);
  }

  // Every stocked node to tier 3 (the tree is going away).
  void discard_all() noexcept {
    for (void* node : nodes) discard_node(node, bytes);
    nodes.clear();
  }

 private:
  template <std::size_t kNodeBytes>
  static void prefetch_for_write(const void* node) noexcept {
    const char* p = static_cast<const char*>(node);
    for (std::size_t off = 0; off < kNodeBytes; off += 64) __builtin_prefetch(p + off, 1);
  }
};

// Tier 2: the nodes a ReclaimDomain freed, parked for its writer's stock. Guarded by the
// domain's lock.
class ParkedNodes {
 public:
  static constexpr std::size_t kPerSize = 128;  // bounds the memory parked per node size

  // Parks a node no snapshot can reach any more; past kPerSize of its size (or out of memory
  // for the list) discards it through `hooks` instead.
  void park(void* node, std::size_t bytes, const NodeHooks& hooks) noexcept {
    Shelf* shelf = shelf_for(bytes);
    if (shelf && shelf->nodes.size() < kPerSize) {
      try {
        shelf->nodes.push_back(node);
        return;
      } catch (...) {  // out of memory for the list: free the node instead
      }
    }
    hooks.discard(node, bytes);
  }

  // Tops up each of `stocks` that holds fewer than NodeStock::kHigh with parked nodes of its
  // size. The most recently parked go on top, in order: the writer's next copies land in
  // nodes freed a write ago (when a snapshot taken for that write was dropped), whose lines
  // are likely still in cache, rather than in the coldest of a batch.
  void restock(std::span<NodeStock> stocks) {
    // Writes under a long-lived snapshot park nothing: then there is nothing to look up.
    if (std::all_of(shelves_.begin(), shelves_.end(), [](const Shelf& shelf) { return shelf.nodes.empty(); }))
      return;
    for (NodeStock& stock : stocks) {
      Shelf* shelf = shelf_for(stock.bytes);
      if (!shelf || shelf->nodes.empty() || stock.nodes.size() >= NodeStock::kHigh) continue;
      const std::size_t take = std::min(shelf->nodes.size(), NodeStock::kHigh - stock.nodes.size());
      const auto from = shelf->nodes.end() - static_cast<std::ptrdiff_t>(take);
      stock.nodes.insert(stock.nodes.end(), from, shelf->nodes.end());
      shelf->nodes.erase(from, shelf->nodes.end());
    }
  }

  // Every parked node through `hooks` (the domain is going away).
  void discard_all(const NodeHooks& hooks) noexcept {
    for (Shelf& shelf : shelves_) {
      for (void* node : shelf.nodes) hooks.discard(node, shelf.bytes);
      shelf.nodes.clear();
    }
  }

 private:
  struct Shelf {
    std::size_t bytes = 0;
    std::vector<void*> nodes;
  };

  // The shelf for nodes of `bytes`; a tree has two node sizes (leaf, internal).
  Shelf* shelf_for(std::size_t bytes) noexcept {
    for (Shelf& shelf : shelves_)
      if (shelf.bytes == bytes) return &shelf;
    for (Shelf& shelf : shelves_)
      if (shelf.bytes == 0) {
        shelf.bytes = bytes;
        return &shelf;
      }
    return nullptr;
  }

  std::array<Shelf, 2> shelves_{};
};

}  // namespace watchcache::detail
