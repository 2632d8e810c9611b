// NodePool: tier 3 of the node memory tiers (node_memory.hpp: the tiers, and which one a
// node is taken from and goes back to): a free list per node size, and chunks of the
// ChunkSource (huge pages, faulted in ahead of the writer when prefaulting is on:
// chunk_source.hpp says why) cut with a bump pointer.
//
// Why: every write after a snapshot copies a root-to-leaf path, and while a history window
// fills (the first 75 s of a watch cache, or its first 100k events) every copy is new
// memory, about 4 KB per event; taken from malloc, that made the writer fault in a fresh
// page per event. Here a node allocation is a pop from a free list or a bump in a chunk
// that is already resident. Nodes freed go back to their size's free list. Chunks also
// spare each node malloc's header (16 B).
//
// Memory taken is kept for reuse and never returned (as most allocators keep a heap's
// high-water mark). Two size classes are expected per fan-out (leaf, internal node); each
// has its own list and lock, and any thread may free.
// Sanitizer builds bypass the pool (plain operator new/delete: node_memory.hpp) so that ASan
// still sees every node's lifetime; the pool itself is tested directly. A fork() while
// another thread holds one of the pool's locks leaves the child unable to allocate nodes,
// as with any lock-holding allocator without fork handlers: fork before using the engine.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <mutex>
#include <new>

#include "watchcache/chunk_source.hpp"

namespace watchcache::detail {

class NodePool {
 public:
  static constexpr std::size_t kSlabBytes = ChunkSource::kChunkBytes;
  static constexpr std::size_t kMaxClasses = 16;  // node sizes: two per fan-out in use

  // The process-wide pool. Never destroyed: nodes may be freed during static destructors.
  static NodePool& instance() {
    static NodePool* pool = new NodePool();
    return *pool;
  }

  // `bytes` must be one of at most kMaxClasses sizes, each a multiple of 16, <= 64 KB.
  void* allocate(std::size_t bytes) {
    SizeClass& c = class_for(bytes);
    std::lock_guard lock(c.mu);
    if (c.free_list) {
      FreeNode* n = c.free_list;
      c.free_list = n->next;
      return n;
    }
    if (c.cur == nullptr || c.cur + bytes > c.end) {
      c.cur = ChunkSource::instance().take();
      c.end = c.cur + kSlabBytes;
    }
    void* p = c.cur;
    c.cur += bytes;
    return p;
  }

  void release(void* p, std::size_t bytes) noexcept {
    SizeClass& c = class_for(bytes);
    std::lock_guard lock(c.mu);
    c.free_list = new (p) FreeNode{c.free_list};
  }

  NodePool(const NodePool&) = delete;
  NodePool& operator=(const NodePool&) = delete;

 private:
  struct FreeNode {
    FreeNode* next;
  };
  struct SizeClass {
    std::mutex mu;
    std::atomic<std::size_t> bytes{0};
    FreeNode* free_list = nullptr;
    char* cur = nullptr;
    char* end = nullptr;
  };

  NodePool() = default;

  SizeClass& class_for(std::size_t bytes) {
    for (SizeClass& c : classes_) {
      if (c.bytes.load(std::memory_order_acquire) == bytes) return c;
    }
    std::lock_guard lock(classes_mu_);
    for (SizeClass& c : classes_) {
      const std::size_t b = c.bytes.load(std::memory_order_relaxed);
      if (b == bytes) return c;
      if (b == 0) {
        c.bytes.store(bytes, std::memory_order_release);  // claimed once, for good
        return c;
      }
    }
    throw std::bad_alloc();  // more node sizes than the pool was built for
  }

  std::mutex classes_mu_;
  std::array<SizeClass, kMaxClasses> classes_;
};

}  // namespace watchcache::detail
