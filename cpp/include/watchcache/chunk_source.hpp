// ChunkSource: the engine's memory from the OS, in 2 MB chunks aligned to their size and
// advised as transparent huge pages, for the NodePool (nodes) and the ItemHeap (items);
// with prefaulting on, a helper thread keeps a few chunks faulted in ahead of the writer.
//
// Why huge pages: a read or copy of a node or an item in a large tree is a TLB miss
// besides a cache miss, and on a virtual machine a 4 KB page walk is itself several memory
// reads. node_pool.hpp and item_heap.hpp give what each gained. Where THP is off or
// unsupported the advice is refused and chunks use small pages.
//
// Why prefault: while a watch cache grows (its history window filling: every path copy is
// new memory, about 4 KB per event, and every event's item) the writer would otherwise
// fault in and zero fresh memory itself: 1-1.5 µs of a 5 µs event with 4 KB pages
// (bench/apply_cost.py, window growing vs steady), and a fresh huge page here costs a
// fault, zeroing and often compaction (first touch of 256 MB: 39-748 ms, against 143-228
// ms in small pages; a probe outside the repo). The helper takes that off the writer's
// thread. Prefaulting is off until set_prefault(true): the WatchCache turns it on. A
// process that has started a thread loses libc's and libstdc++'s single-thread fast paths
// (malloc's arena locks, atomic shared_ptr counts), which cost a plain Tree 10-20 % per put
// in the microbenchmarks; a watch cache runs among the event loop's and gRPC's threads
// anyway.
#pragma once

#include <sys/mman.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

namespace watchcache::detail {

class ChunkSource {
 public:
  static constexpr std::size_t kChunkBytes = std::size_t{2} << 20;  // one huge page
  static constexpr std::size_t kReadyChunks = 4;
  static constexpr std::size_t kPage = 4096;

  // The process-wide source. Never destroyed: its helper thread may outlive static
  // destructors.
  static ChunkSource& instance() {
    static ChunkSource* source = new ChunkSource();
    return *source;
  }

  // A chunk: from the helper's reserve, or mapped here when the reserve is empty (the first
  // chunk, prefaulting off, or a writer faster than the helper). Throws std::bad_alloc.
  char* take() {
    char* chunk = nullptr;
    {
      std::lock_guard lock(ready_mu_);
      if (!ready_.empty()) {
        chunk = ready_.back();
        ready_.pop_back();
      }
    }
    want_.notify_one();
    return chunk ? chunk : map(false);
  }

  // Hands a chunk from take() back to the OS.
  static void unmap(char* chunk) noexcept { ::munmap(chunk, kChunkBytes); }

  // Whether a helper thread keeps kReadyChunks chunks faulted in ahead of take(). Turning
  // it off stops refills (the helper stays, idle); the chunks it made stay ready. Returns
  // the previous setting.
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

  ChunkSource(const ChunkSource&) = delete;
  ChunkSource& operator=(const ChunkSource&) = delete;

 private:
  ChunkSource() { ready_.reserve(kReadyChunks); }

  // Twice the size is mapped and the misaligned ends unmapped again, so that the chunk can
  // be one huge page.
  static char* map(bool touch) {
    void* m = ::mmap(nullptr, 2 * kChunkBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    auto* mapped = static_cast<char*>(m);
    const std::uintptr_t offset = reinterpret_cast<std::uintptr_t>(mapped) & (kChunkBytes - 1);
    char* chunk = offset ? mapped + (kChunkBytes - offset) : mapped;
    if (chunk != mapped) ::munmap(mapped, static_cast<std::size_t>(chunk - mapped));
    if (chunk + kChunkBytes != mapped + 2 * kChunkBytes)
      ::munmap(chunk + kChunkBytes, static_cast<std::size_t>(mapped + 2 * kChunkBytes - (chunk + kChunkBytes)));
#ifdef MADV_HUGEPAGE
    ::madvise(chunk, kChunkBytes, MADV_HUGEPAGE);  // advice only: refused where THP is off
#endif
    if (touch) {
      for (std::size_t off = 0; off < kChunkBytes; off += kPage) {
        // A volatile store: the point is the page fault, which the compiler must not drop.
        *static_cast<volatile char*>(chunk + off) = 0;
      }
    }
    return chunk;
  }

  void fill_forever() {
    std::unique_lock lock(ready_mu_);
    for (;;) {
      want_.wait(lock, [this] { return prefault_ && ready_.size() < kReadyChunks; });
      lock.unlock();
      char* chunk = nullptr;
      try {
        chunk = map(true);
      } catch (const std::bad_alloc&) {
        chunk = nullptr;  // out of memory: the writer maps (and fails) on its own
      }
      lock.lock();
      if (chunk == nullptr) return;
      ready_.push_back(chunk);
    }
  }

  std::mutex ready_mu_;
  std::condition_variable want_;
  std::vector<char*> ready_;
  bool started_ = false;
  bool prefault_ = false;
};

}  // namespace watchcache::detail
