// ChunkSource: the engine's memory from the OS, in 2 MB chunks aligned to their size and
// advised as transparent huge pages, for the NodePool (nodes: tier 3 of node_memory.hpp's
// tiers) and the ItemHeap (items); with prefaulting on, a helper thread keeps a few chunks
// faulted in ahead of the writer. Why huge pages is said here, for both users.
//
// Why huge pages: a read or copy of a node or an item in a large tree is a TLB miss
// besides a cache miss, and on a virtual machine a 4 KB page walk is itself several memory
// reads. Items are most of a cache's memory (1M items of 100-byte values: 190 MB) and every
// get, put and scan reads nodes and items all over it. Time ratios at 1M keys against small
// pages, from scripts/ab-engine.sh (two builds in one process, alternating batches; the
// scenarios are named in the script):
//   nodes in huge pages, against 1 MB slabs of 4 KB pages: update 0.91, get 0.93-0.95,
//     snap_put 0.95-0.97, window 0.94-0.97 (`scripts/ab-engine.sh 10bb913~1 update get
//     snap_put window` at 28109d0, the first revision with the script);
//   items in huge pages, against glibc's malloc: update 0.84-0.88, snap_put 0.89-0.90,
//     window 0.89-0.90, get 0.94-0.96, scan 0.93-0.94 (`scripts/ab-engine.sh 773a460~1` at
//     773a460); the same chunks without the MADV_HUGEPAGE advice gained nothing
//     (0.97-1.01): the pages are the gain, not the layout.
// Where THP is off or unsupported the advice is refused and chunks use small pages. A huge
// page costs most at its first touch: a fault, zeroing 2 MB and often compaction, which
// takes far longer and varies far more than small pages' first touch of the same memory
// (git show 93f8cb6). Hence the prefaulting below, and the ItemHeap keeping empty chunks
// for reuse.
//
// Why prefault: while a watch cache grows (its history window filling: every path copy is
// new memory, about 4 KB per event, and every event's item) the writer would otherwise
// fault in and zero fresh memory itself: 1-1.5 µs of a 5 µs event with 4 KB pages (`python
// bench/apply_cost.py`: window growing against steady), more with huge pages. The helper
// takes that off the writer's thread. Prefaulting is off until set_prefault(true): the
// WatchCache turns it on. A process that has started a thread loses libc's and libstdc++'s
// single-thread fast paths (malloc's arena locks, atomic shared_ptr counts), which cost a
// plain Tree 10-20 % per put (bench/test_bench_engine.py's test_put at 1M, with the helper
// thread against without: git show 2f3ed75); a watch cache runs among the event loop's and
// gRPC's threads anyway.
#pragma once

#include <sys/mman.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include "watchcache/sanitizers.hpp"

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

  // Hands back a chunk from take() that its user no longer needs: to the reserve while it
  // holds fewer than kReadyChunks (the chunk is resident: the next take() costs no fault),
  // else to the OS. Its contents are left as they are; users write their own headers.
  void give_back(char* chunk) noexcept {
    {
      std::lock_guard lock(ready_mu_);
      if (ready_.size() < kReadyChunks) {
        ready_.push_back(chunk);  // no allocation: reserved in the constructor
        return;
      }
    }
    unmap(chunk);
  }

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

// ChunkSource::set_prefault, for the process. Sanitizer builds take neither nodes nor items
// from chunks (sanitizers.hpp): nothing to prefault, false.
inline bool set_prefault([[maybe_unused]] bool on) {
#if WATCHCACHE_SANITIZED
  return false;
#else
  return ChunkSource::instance().set_prefault(on);
#endif
}

}  // namespace watchcache::detail
