// NodePool: tier 3 of the node memory tiers (node_memory.hpp: the tiers, and which one a
// node is taken from and goes back to): per node size, chunks of the ChunkSource (huge
// pages, faulted in ahead of the writer when prefaulting is on: chunk_source.hpp says why),
// each with its own free list and a bump pointer for the part never used.
//
// Why: every write after a snapshot copies a root-to-leaf path, and while a history window
// fills (the first 75 s of a watch cache, or its first 100k events) every copy is new
// memory, about 4 KB per event; taken from malloc, that made the writer fault in a fresh
// page per event. Here a node allocation is a pop from a free list or a bump in a chunk
// that is already resident. Chunks also spare each node malloc's header (16 B).
//
// Giving memory back. The nodes a watch cache holds rise and fall: snapshots pin path
// copies until a compaction or the history window drops them, and a reader holding an old
// snapshot (a slow LIST, a watch sending its initial events) keeps alive what the registry
// has already let go. A pool that kept every chunk it took would hold the highest of those
// peaks for the life of the process: a soak at 1,000 changes/s (tests/reliability/soak.py
// --long) saw a server's RSS step up 45 MiB, 28 chunks, at a random time in the hour and
// never come down. So each chunk counts its live nodes, allocation takes from the chunk
// with room that has the lowest number in its size's table (so the nodes freed in low
// chunks are reused first and the high ones drain as their nodes are copied or dropped),
// and a chunk whose nodes are all free goes back to the ChunkSource (its reserve of ready
// chunks, else the OS). Each size keeps one empty chunk as a spare, so a pool at a chunk
// boundary does not map and unmap a chunk per write.
//
// Layout: a chunk is 2 MB aligned to 2 MB, so a node's chunk, and its header at the chunk's
// start, is found from the node's address alone. The header is written when a node of the
// chunk is taken or given back, never read by readers of the tree.
//
// Each size has its own table and lock, and any thread may free.
// Sanitizer builds bypass the pool (plain operator new/delete: node_memory.hpp) so that ASan
// still sees every node's lifetime; the pool itself is tested directly. A fork() while
// another thread holds one of the pool's locks leaves the child unable to allocate nodes,
// as with any lock-holding allocator without fork handlers: fork before using the engine.
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>
#include <vector>

#include "watchcache/chunk_source.hpp"

namespace watchcache::detail {

class NodePool {
 public:
  static constexpr std::size_t kChunkBytes = ChunkSource::kChunkBytes;
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
    Chunk* k = c.current ? c.current : lowest_with_room(c);
    void* p;
    if (k->free) {
      p = k->free;
      k->free = k->free->next;
    } else {
      p = reinterpret_cast<char*>(k) + k->bump;
      k->bump += static_cast<std::uint32_t>(bytes);
    }
    if (k->live++ == 0 && c.spare == k) c.spare = nullptr;
    if (!k->free && k->bump + bytes > kChunkBytes) {  // full
      c.set_room(k->id, false);
      c.current = nullptr;
    }
    return p;
  }

  void release(void* p, std::size_t bytes) noexcept {
    SizeClass& c = class_for(bytes);
    Chunk* k = chunk_of(p);
    {
      std::lock_guard lock(c.mu);
      k->free = new (p) FreeNode{k->free};
      if (--k->live > 0 || c.spare == nullptr) {
        if (k->live == 0) c.spare = k;
        c.set_room(k->id, true);
        if (c.current && k->id < c.current->id) c.current = k;
        return;
      }
      forget(c, k);
    }
    // Outside the size's lock: an munmap there would hold up every allocation of the size.
    ChunkSource::instance().give_back(reinterpret_cast<char*>(k));
  }

  // Chunks held for nodes, all sizes together (including the spares), for reports.
  std::size_t chunks() const noexcept { return chunks_.load(std::memory_order_relaxed); }

  NodePool(const NodePool&) = delete;
  NodePool& operator=(const NodePool&) = delete;

 private:
  struct FreeNode {
    FreeNode* next;
  };
  // At the start of each chunk; the chunk's nodes follow from kFirstOffset.
  struct Chunk {
    FreeNode* free = nullptr;  // nodes given back, last first
    std::uint32_t bump = 0;    // offset of the first node never handed out
    std::uint32_t live = 0;    // nodes handed out and not given back
    std::uint32_t id = 0;      // index in its size's table
  };
  static constexpr std::uint32_t kFirstOffset = (sizeof(Chunk) + 63) / 64 * 64;

  struct SizeClass {
    std::mutex mu;
    std::atomic<std::size_t> bytes{0};
    std::vector<Chunk*> table;                // by id; nullptr where a chunk was given back
    std::vector<std::uint64_t> room;          // bit per id: the chunk has a free node
    Chunk* current = nullptr;                 // the lowest id with room, when known
    Chunk* spare = nullptr;                   // an empty chunk kept, if any

    void set_room(std::uint32_t id, bool has) noexcept {
      const std::uint64_t bit = std::uint64_t{1} << (id % 64);
      if (has)
        room[id / 64] |= bit;
      else
        room[id / 64] &= ~bit;
    }
  };

  NodePool() = default;

  static Chunk* chunk_of(void* p) noexcept {
    return reinterpret_cast<Chunk*>(reinterpret_cast<std::uintptr_t>(p) & ~(kChunkBytes - 1));
  }

  // The chunk with room that has the lowest id, or a new one. Throws std::bad_alloc.
  Chunk* lowest_with_room(SizeClass& c) {
    for (std::size_t w = 0; w < c.room.size(); ++w) {
      if (c.room[w]) return c.current = c.table[w * 64 + static_cast<std::size_t>(std::countr_zero(c.room[w]))];
    }
    return c.current = take_chunk(c);
  }

  // A chunk from the ChunkSource, under the lowest free id of the table. The table grows
  // first, so that a failure leaves at most an unused slot.
  Chunk* take_chunk(SizeClass& c) {
    std::size_t id = 0;
    while (id < c.table.size() && c.table[id] != nullptr) ++id;
    if (id == c.table.size()) c.table.push_back(nullptr);
    if (c.room.size() <= id / 64) c.room.push_back(0);
    auto* k = new (ChunkSource::instance().take()) Chunk{};
    k->bump = kFirstOffset;
    k->id = static_cast<std::uint32_t>(id);
    c.table[id] = k;
    c.set_room(k->id, true);
    chunks_.fetch_add(1, std::memory_order_relaxed);
    return k;
  }

  // Takes an empty chunk out of its size's table, to be given back.
  void forget(SizeClass& c, Chunk* k) noexcept {
    c.set_room(k->id, false);
    c.table[k->id] = nullptr;
    if (c.current == k) c.current = nullptr;
    chunks_.fetch_sub(1, std::memory_order_relaxed);
  }

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

  std::atomic<std::size_t> chunks_{0};
  std::mutex classes_mu_;
  std::array<SizeClass, kMaxClasses> classes_;
};

}  // namespace watchcache::detail
