// ItemHeap: memory for items, with freed blocks kept per size class for the next item.
//
// Why: a watch cache in steady state frees one item per write (the version the oldest
// stored snapshot kept) and creates one. glibc keeps only 7 freed blocks per size in its
// per-thread cache and none above 1 KB; past that, free() files the block into its bins and
// merges it with free neighbours, reading and unlinking blocks in cold parts of the heap.
// With a registry of 1,000 snapshots that was about 400 ns of a 2.2 µs write (engine_bench
// pattern with items leaked instead of freed, same minutes). Kept here instead, a freed
// block is handed out again, last in first out, to the next item of its class: no merging,
// and its first line, just written by the free, is still in cache.
//
// Classes are 16 bytes apart. A block of class c is asked from operator new as 16c - 8
// bytes, the usable size of the chunk glibc's malloc gives for every size in the class, so
// the rounding costs no memory there (other allocators may round differently; the block is
// still at most 15 bytes over). Items over kMaxCachedBytes go straight to new/delete.
//
// Bounds: a class keeps at most max(kMinPerClass, kClassBudget / block) blocks, capped at
// kMaxPerClass, and all classes together at most kMaxTotalBytes; a free past a bound goes
// to operator delete as before. trim() hands every kept block back.
//
// Thread-safety: items are freed from any thread (a snapshot dropped by a reader, a
// Python reference released), so one spinlock guards the lists: the critical sections are
// a few instructions, and an uncontended std::mutex costs twice the atomics. Like glibc's
// malloc, the heap takes no lock while the process has one thread (single_thread.hpp).
// As with the NodePool, a fork() while another thread holds the lock leaves the child
// unable to make or free items: fork before using the engine.
// Sanitizer builds bypass the heap (see sanitizers.hpp) so that ASan still sees each item's
// lifetime; the heap itself is tested directly.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <thread>
#include <utility>

#include "watchcache/sanitizers.hpp"
#include "watchcache/single_thread.hpp"

namespace watchcache::detail {

class ItemHeap {
 public:
  static constexpr std::size_t kGranule = 16;
  static constexpr std::size_t kMaxCachedBytes = 16 * 1024;
  static constexpr std::size_t kClassBudget = 64 * 1024;
  static constexpr std::uint32_t kMinPerClass = 4;
  static constexpr std::uint32_t kMaxPerClass = 256;
  static constexpr std::size_t kMaxTotalBytes = std::size_t{8} << 20;

  // The process-wide heap. Never destroyed: items may be freed during static destructors.
  static ItemHeap& instance() {
    static ItemHeap* heap = new ItemHeap();
    return *heap;
  }

  // At least `bytes` (> 0), aligned as operator new aligns.
  void* allocate(std::size_t bytes) {
    if (bytes > kMaxCachedBytes) return ::operator new(bytes);
    const std::size_t c = class_of(bytes);
    {
      Guard g(lock_);
      SizeClass& sc = classes_[c];
      if (FreeBlock* b = sc.head) {
        sc.head = b->next;
        --sc.count;
        total_ -= block_bytes(c);
        return b;
      }
    }
    return ::operator new(block_bytes(c));
  }

  // Frees what allocate(bytes) returned; `bytes` must be the same.
  void release(void* p, std::size_t bytes) noexcept {
    if (bytes <= kMaxCachedBytes) {
      const std::size_t c = class_of(bytes);
      const std::size_t block = block_bytes(c);
      Guard g(lock_);
      SizeClass& sc = classes_[c];
      if (sc.count < cap(block) && total_ + block <= kMaxTotalBytes) {
        sc.head = new (p) FreeBlock{sc.head};
        ++sc.count;
        total_ += block;
        return;
      }
    }
    ::operator delete(p);
  }

  // Hands every kept block back to operator delete.
  void trim() noexcept {
    for (SizeClass& sc : classes_) {
      FreeBlock* list = nullptr;
      {
        Guard g(lock_);
        list = sc.head;
        total_ -= sc.count * block_bytes(static_cast<std::size_t>(&sc - classes_.data()));
        sc.head = nullptr;
        sc.count = 0;
      }
      while (list) ::operator delete(std::exchange(list, list->next));
    }
  }

  // Bytes of freed blocks kept for reuse.
  std::size_t kept_bytes() const noexcept {
    Guard g(lock_);
    return total_;
  }

  // The bytes operator new is asked for when an item of `bytes` is allocated here.
  static constexpr std::size_t block_size_for(std::size_t bytes) noexcept {
    return bytes > kMaxCachedBytes ? bytes : block_bytes(class_of(bytes));
  }

  ItemHeap(const ItemHeap&) = delete;
  ItemHeap& operator=(const ItemHeap&) = delete;

 private:
  struct FreeBlock {
    FreeBlock* next;
  };
  struct SizeClass {
    FreeBlock* head = nullptr;
    std::uint32_t count = 0;
  };

  class SpinLock {
   public:
    void lock() noexcept {
      for (unsigned spins = 0; locked_.exchange(true, std::memory_order_acquire); ++spins) {
        while (locked_.load(std::memory_order_relaxed)) {
          // A holder that was descheduled keeps the lock for a time slice: stop burning ours.
          if (++spins > 64) std::this_thread::yield();
        }
      }
    }
    void unlock() noexcept { locked_.store(false, std::memory_order_release); }

   private:
    std::atomic<bool> locked_{false};
  };
  // Takes no lock while the process has one thread (single_thread.hpp: why that matters).
  struct Guard {
    explicit Guard(SpinLock& l) noexcept : lock(l), held(!single_threaded()) {
      if (held) lock.lock();
    }
    ~Guard() {
      if (held) lock.unlock();
    }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    SpinLock& lock;
    const bool held;
  };

  static constexpr std::size_t class_of(std::size_t bytes) noexcept { return (bytes + 8 + kGranule - 1) / kGranule; }
  static constexpr std::size_t block_bytes(std::size_t c) noexcept { return c * kGranule - 8; }
  static constexpr std::uint32_t cap(std::size_t block) noexcept {
    const std::size_t by_budget = kClassBudget / block;
    return static_cast<std::uint32_t>(by_budget < kMinPerClass ? kMinPerClass
                                      : by_budget > kMaxPerClass ? kMaxPerClass
                                                                 : by_budget);
  }

  ItemHeap() = default;

  mutable SpinLock lock_;
  std::array<SizeClass, (kMaxCachedBytes + 8) / kGranule + 2> classes_{};
  std::size_t total_ = 0;
};

// Item memory: from the ItemHeap, except in sanitizer builds (see above).
inline void* new_item_memory(std::size_t bytes) {
#if WATCHCACHE_SANITIZED
  return ::operator new(bytes);
#else
  return ItemHeap::instance().allocate(bytes);
#endif
}
inline void delete_item_memory(void* p, [[maybe_unused]] std::size_t bytes) noexcept {
#if WATCHCACHE_SANITIZED
  ::operator delete(p);
#else
  ItemHeap::instance().release(p, bytes);
#endif
}

}  // namespace watchcache::detail
