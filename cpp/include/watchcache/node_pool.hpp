// NodePool: memory for tree nodes, from slabs whose pages a background thread has already
// faulted in.
//
// Why: every write after a snapshot copies a root-to-leaf path, and while a history window
// fills (the first 75 s of a watch cache, or its first 100k events) every copy is new
// memory, about 4 KB per event. Taking that memory from malloc makes the writer fault in a
// fresh page per event: 1-1.5 µs of a 5 µs event on this kind of machine (the kernel zeroes
// the page; bench/apply_cost.py, window growing vs steady). With prefaulting on, a helper
// thread maps and touches slabs ahead of the writer, so a node allocation is a pop from a
// free list or a bump in a slab that is already resident. Nodes freed go back to their
// size's free list. Slabs also spare each node malloc's header (16 B).
//
// Prefaulting is off until set_prefault(true): the WatchCache turns it on. A process that
// has started a thread loses libc's and libstdc++'s single-thread fast paths (malloc's
// arena locks, atomic shared_ptr counts), which cost a plain Tree 10-20 % per put in the
// microbenchmarks; a watch cache runs among the event loop's and gRPC's threads anyway.
//
// Slabs are transparent huge pages (2 MB, aligned, MADV_HUGEPAGE) where the kernel allows
// them: a read or copy of a node in a large tree is a TLB miss besides a cache miss, and on
// a virtual machine a 4 KB page walk is itself several memory reads. Measured with two
// builds in one process, alternating batches at 1M keys (an A/B probe outside the repo) on
// an AMD EPYC VM, two runs: update with an older snapshot 0.91x, get 0.93-0.95x,
// snapshot-put-drop 0.95-0.97x, write after a fresh snapshot in a window of 1000
// 0.94-0.97x (against 1 MB slabs of 4 KB pages).
// Where THP is off or unsupported the advice is refused and the slabs use small pages.
//
// Memory taken from the OS is kept for reuse and never returned (as most allocators keep
// a heap's high-water mark); the ready reserve is kReadySlabs slabs. Two size classes are
// expected per fan-out (leaf, internal node); each has its own list and lock, and any
// thread may free.
// Sanitizer builds bypass the pool (plain operator new/delete, see btree.hpp) so that ASan
// still sees every node's lifetime; the pool itself is tested directly. A fork() while
// another thread holds one of the pool's locks leaves the child unable to allocate nodes,
// as with any lock-holding allocator without fork handlers: fork before using the engine.
#pragma once

#include <sys/mman.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

namespace watchcache::detail {

class NodePool {
 public:
  static constexpr std::size_t kSlabBytes = std::size_t{2} << 20;  // one huge page
  static constexpr std::size_t kReadySlabs = 2;
  static constexpr std::size_t kPage = 4096;
  static constexpr std::size_t kMaxClasses = 16;  // node sizes: two per fan-out in use

  // The process-wide pool. Never destroyed: its helper thread may outlive static
  // destructors, and nodes may be freed during them.
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
      c.cur = take_slab();
      c.end = c.cur + kSlabBytes;
    }
    void* p = c.cur;
    c.cur += bytes;
    return p;
  }

  // Whether a helper thread keeps kReadySlabs slabs faulted in ahead of allocations.
  // Turning it off stops refills (the helper stays, idle); the slabs it made stay ready.
  // Returns the previous setting.
  bool set_prefault(bool on) {
    bool was = false;
    {
      std::lock_guard lock(ready_mu_);
      was = prefault_;
      prefault_ = on;
      if (on && !started_) {
        started_ = true;
        std::thread([this] { fill_forever(); }).detach();
      }
    }
    want_.notify_one();
    return was;
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

  // A resident slab: from the helper's reserve, or mapped here when the reserve is empty
  // (the first allocation, or a writer faster than the helper).
  char* take_slab() {
    char* slab = nullptr;
    {
      std::lock_guard lock(ready_mu_);
      if (!ready_.empty()) {
        slab = ready_.back();
        ready_.pop_back();
      }
    }
    want_.notify_one();
    return slab ? slab : map_slab(false);
  }

  // A slab aligned to its size, so that it can be one huge page: twice the size is mapped
  // and the misaligned ends are unmapped again.
  static char* map_slab(bool touch) {
    void* m = ::mmap(nullptr, 2 * kSlabBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    auto* mapped = static_cast<char*>(m);
    const std::uintptr_t offset = reinterpret_cast<std::uintptr_t>(mapped) & (kSlabBytes - 1);
    char* slab = offset ? mapped + (kSlabBytes - offset) : mapped;
    if (slab != mapped) ::munmap(mapped, static_cast<std::size_t>(slab - mapped));
    if (slab + kSlabBytes != mapped + 2 * kSlabBytes)
      ::munmap(slab + kSlabBytes, static_cast<std::size_t>(mapped + 2 * kSlabBytes - (slab + kSlabBytes)));
#ifdef MADV_HUGEPAGE
    ::madvise(slab, kSlabBytes, MADV_HUGEPAGE);  // advice only: refused where THP is off
#endif
    if (touch) {
      for (std::size_t off = 0; off < kSlabBytes; off += kPage) {
        // A volatile store: the point is the page fault, which the compiler must not drop.
        *static_cast<volatile char*>(slab + off) = 0;
      }
    }
    return slab;
  }

  void fill_forever() {
    std::unique_lock lock(ready_mu_);
    for (;;) {
      want_.wait(lock, [this] { return prefault_ && ready_.size() < kReadySlabs; });
      lock.unlock();
      char* slab = nullptr;
      try {
        slab = map_slab(true);
      } catch (const std::bad_alloc&) {
        slab = nullptr;  // out of memory: the writer maps (and fails) on its own
      }
      lock.lock();
      if (slab == nullptr) return;
      ready_.push_back(slab);
    }
  }

  std::mutex classes_mu_;
  std::array<SizeClass, kMaxClasses> classes_;
  std::mutex ready_mu_;
  std::condition_variable want_;
  std::vector<char*> ready_;
  bool started_ = false;
  bool prefault_ = false;
};

}  // namespace watchcache::detail
