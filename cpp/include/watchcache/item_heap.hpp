// ItemHeap: memory for items, carved from 2 MB chunks that are transparent huge pages.
//
// Why its own memory: items in huge pages, which malloc's heap does not give.
// chunk_source.hpp says why huge pages and what items gained from them.
//
// Memory: no per-block header, so small items take less than from malloc: 63 B over the
// raw bytes per item against 82 (engine_bench's "memory: RSS per item" row, `make
// bench-native`, at 773a460 and its parent). Mid-size items take more, from the coarser
// classes and partly used spans: 100-4000 byte items replaced at random held a few percent
// more of their bytes than with malloc (git show 773a460).
//
// Layout. A chunk (chunk_source.hpp) is 2 MB, aligned to 2 MB, a huge page. It is cut into 32
// spans of 64 KB; a span holds blocks of one size class. The chunk starts with its header:
// one Span record per span (span 0's blocks start after the header). So the span of any
// block is found from its address alone: chunk = address rounded down to 2 MB, span = the
// 64 KB slot within it.
//
// Classes: 16 bytes apart up to 1 KB, then 8 per doubling up to kMaxSmallBytes (8 KB): a
// block is at most 15 bytes over the request below 1 KB (as malloc's 16-byte chunks), and
// at most an eighth above. Larger items go to operator new/delete.
//
// Reuse and return. A freed block goes on its span's free list, last in first out, and the
// span to the front of its class's list of spans with room, so the next item of the class
// gets the block just freed, whose line is still in cache (a watch cache frees one item
// and makes one per write). A span whose blocks are all free goes back to the free spans,
// for any class. A chunk whose spans are all free is kept while there are fewer empty
// chunks than chunks in use (at least kSpareChunks), else unmapped: a cache that is rebuilt
// beside its old contents (a relist) keeps the memory for the next rebuild, since a fresh
// huge page is costly to touch first (chunk_source.hpp), while a cache emptied for good
// returns it all but the spares. Memory is therefore held by live items, the unused part
// of the spans they are in, and at most as much again in empty chunks: like any allocator
// that keeps a size per span (not per block), items of a class freed at random leave spans
// partly used until they fill again.
//
// Thread-safety: items are freed from any thread (a snapshot dropped by a reader, a
// Python reference released), so one spinlock guards the heap: the critical sections are
// a few instructions, and an uncontended std::mutex costs twice the atomics. Like glibc's
// malloc, the heap takes no lock while the process has one thread (single_thread.hpp).
// As with the NodePool, a fork() while another thread holds the lock leaves the child
// unable to make or free items: fork before using the engine.
// Sanitizer builds bypass the heap for items (see sanitizers.hpp) so that ASan still sees
// each item's lifetime; the heap itself is tested directly, and under ASan it poisons the
// blocks it holds, so a test touching a free block fails.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <thread>

#include "watchcache/chunk_source.hpp"
#include "watchcache/sanitizers.hpp"
#include "watchcache/single_thread.hpp"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define WATCHCACHE_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define WATCHCACHE_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define WATCHCACHE_POISON(p, n) ((void)(p), (void)(n))
#define WATCHCACHE_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace watchcache::detail {

class ItemHeap {
 public:
  static constexpr std::size_t kChunkBytes = ChunkSource::kChunkBytes;
  static constexpr std::size_t kSpanBytes = std::size_t{64} << 10;
  static constexpr std::size_t kSpansPerChunk = kChunkBytes / kSpanBytes;
  static constexpr std::size_t kGranule = 16;
  static constexpr std::size_t kFineBytes = 1024;  // classes kGranule apart up to here
  static constexpr std::size_t kMaxSmallBytes = 8 * 1024;
  static constexpr std::size_t kSpareChunks = 2;

  // The process-wide heap. Never destroyed: items may be freed during static destructors.
  static ItemHeap& instance() {
    static ItemHeap* heap = new ItemHeap();
    return *heap;
  }

  // At least `bytes` (> 0), aligned to 16.
  void* allocate(std::size_t bytes) {
    if (bytes > kMaxSmallBytes) return ::operator new(bytes);
    const unsigned c = class_of(bytes);
    Guard g(lock_);
    Span* s = with_room_[c];
    if (!s) s = open_span(c);  // throws std::bad_alloc, with nothing changed
    void* p;
    if (s->free) {
      p = s->free;
      WATCHCACHE_UNPOISON(p, kClassBytes[c]);
      s->free = s->free->next;
    } else {
      p = span_base(s) + s->bump;
      s->bump += kClassBytes[c];
      WATCHCACHE_UNPOISON(p, kClassBytes[c]);
    }
    ++s->used;
    if (!s->free && s->bump + kClassBytes[c] > kSpanBytes) unlist(with_room_[c], s);  // full
    return p;
  }

  // Frees what allocate(bytes) returned; `bytes` must be the same.
  void release(void* p, std::size_t bytes) noexcept {
    if (bytes > kMaxSmallBytes) {
      ::operator delete(p);
      return;
    }
    Guard g(lock_);
    Span* s = span_of(p);
    const unsigned c = s->cls;
    s->free = new (p) FreeBlock{s->free};
    WATCHCACHE_POISON(p, kClassBytes[c]);
    if (--s->used == 0) {
      if (s->listed) unlist(with_room_[c], s);
      close_span(s);
      return;
    }
    // To the front of its class: the next allocation takes the block just freed.
    if (s->listed) unlist(with_room_[c], s);
    push_front(with_room_[c], s);
  }

  // The block size an allocation of `bytes` takes (the request itself past kMaxSmallBytes).
  static constexpr std::size_t block_size_for(std::size_t bytes) noexcept {
    return bytes > kMaxSmallBytes ? bytes : kClassBytes[class_of(bytes)];
  }

  // Where a release of p will write: its first line and its span's record. For prefetching.
  static const void* span_record_of(const void* p) noexcept { return span_of(const_cast<void*>(p)); }

  // Chunks mapped, and spans in use (holding at least one block), for tests and reports.
  std::size_t chunks() const noexcept {
    Guard g(lock_);
    return chunks_;
  }
  std::size_t spans_in_use() const noexcept {
    Guard g(lock_);
    return spans_in_use_;
  }

  ItemHeap(const ItemHeap&) = delete;
  ItemHeap& operator=(const ItemHeap&) = delete;

 private:
  struct FreeBlock {
    FreeBlock* next;
  };
  // The record of one span, in its chunk's header. A free span (cls == kNoClass) is in the
  // free-span list; a span in use is in its class's list while it has room.
  struct Span {
    Span* prev = nullptr;
    Span* next = nullptr;
    FreeBlock* free = nullptr;  // blocks released, last first
    std::uint32_t bump = 0;     // offset from the span's start of the first block never used
    std::uint32_t used = 0;     // blocks handed out and not released
    std::uint16_t cls = kNoClass;
    bool listed = false;  // in a list: its class's (in use) or the free spans (free)
  };
  struct ChunkHeader {
    std::array<Span, kSpansPerChunk> spans;
    std::uint32_t free_spans = 0;
    ChunkHeader* prev_empty = nullptr;  // in the list of empty chunks, while empty
    ChunkHeader* next_empty = nullptr;
  };
  static constexpr std::uint16_t kNoClass = 0xFFFF;
  // Span 0's blocks start past the header, on a cache line.
  static constexpr std::uint32_t kFirstOffset = (sizeof(ChunkHeader) + 63) / 64 * 64;

  static constexpr unsigned kFineClasses = kFineBytes / kGranule;  // 16, 32, ..., 1024
  static constexpr unsigned kPerDoubling = 8;
  static constexpr unsigned kCoarseClasses = 3 * kPerDoubling;     // 1 KB to 8 KB
  static constexpr unsigned kClasses = kFineClasses + kCoarseClasses;
  static constexpr std::array<std::uint32_t, kClasses> kClassBytes = [] {
    std::array<std::uint32_t, kClasses> sizes{};
    unsigned c = 0;
    for (std::uint32_t b = kGranule; b <= kFineBytes; b += kGranule) sizes[c++] = b;
    for (std::uint32_t base = kFineBytes; base < kMaxSmallBytes; base *= 2)
      for (std::uint32_t step = 1; step <= kPerDoubling; ++step) sizes[c++] = base + step * (base / kPerDoubling);
    return sizes;
  }();
  static constexpr unsigned class_of(std::size_t bytes) noexcept {
    if (bytes <= kFineBytes) return static_cast<unsigned>(bytes == 0 ? 0 : (bytes - 1) / kGranule);
    unsigned c = kFineClasses;
    std::size_t base = kFineBytes;
    while (bytes > 2 * base) {
      base *= 2;
      c += kPerDoubling;
    }
    return c + static_cast<unsigned>((bytes - base - 1) / (base / kPerDoubling));
  }
  static_assert(kClassBytes[kClasses - 1] == kMaxSmallBytes);
  static_assert(kSpanBytes / kMaxSmallBytes >= 8, "a span holds at least 8 of the largest blocks");
  static_assert(sizeof(ChunkHeader) + kMaxSmallBytes <= kSpanBytes, "span 0 holds a block of every class");

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

  static ChunkHeader* chunk_of(const void* p) noexcept {
    return reinterpret_cast<ChunkHeader*>(reinterpret_cast<std::uintptr_t>(p) & ~(kChunkBytes - 1));
  }
  static Span* span_of(void* p) noexcept {
    const auto offset = reinterpret_cast<std::uintptr_t>(p) & (kChunkBytes - 1);
    return &chunk_of(p)->spans[offset / kSpanBytes];
  }
  static std::size_t index_of(const Span* s) noexcept {
    return static_cast<std::size_t>(s - chunk_of(s)->spans.data());
  }
  static char* span_base(const Span* s) noexcept {
    return reinterpret_cast<char*>(chunk_of(s)) + index_of(s) * kSpanBytes;
  }

  static void push_front(Span*& head, Span* s) noexcept {
    s->prev = nullptr;
    s->next = head;
    if (head) head->prev = s;
    head = s;
    s->listed = true;
  }
  static void unlist(Span*& head, Span* s) noexcept {
    if (s->prev)
      s->prev->next = s->next;
    else
      head = s->next;
    if (s->next) s->next->prev = s->prev;
    s->prev = s->next = nullptr;
    s->listed = false;
  }

  // A free span made a span of class c, at the front of the class's list.
  Span* open_span(unsigned c) {
    if (!free_spans_) map_chunk();
    Span* s = free_spans_;
    unlist(free_spans_, s);
    ChunkHeader* chunk = chunk_of(s);
    if (chunk->free_spans-- == kSpansPerChunk) unlist_empty(chunk);
    s->cls = static_cast<std::uint16_t>(c);
    s->free = nullptr;
    s->used = 0;
    s->bump = index_of(s) == 0 ? kFirstOffset : 0;
    ++spans_in_use_;
    push_front(with_room_[c], s);
    return s;
  }

  // A span with no block in use back to the free spans. If that empties its chunk, empty
  // chunks are unmapped, oldest first, down to as many as there are chunks in use (at
  // least kSpareChunks).
  void close_span(Span* s) noexcept {
    --spans_in_use_;
    s->cls = kNoClass;
    s->free = nullptr;
    ChunkHeader* chunk = chunk_of(s);
    push_front(free_spans_, s);
    if (++chunk->free_spans < kSpansPerChunk) return;
    push_empty(chunk);
    while (empty_chunks_ > std::max(kSpareChunks, chunks_ - empty_chunks_)) unmap_chunk(oldest_empty_);
  }

  void push_empty(ChunkHeader* chunk) noexcept {
    chunk->prev_empty = nullptr;
    chunk->next_empty = newest_empty_;
    if (newest_empty_)
      newest_empty_->prev_empty = chunk;
    else
      oldest_empty_ = chunk;
    newest_empty_ = chunk;
    ++empty_chunks_;
  }
  void unlist_empty(ChunkHeader* chunk) noexcept {
    (chunk->prev_empty ? chunk->prev_empty->next_empty : newest_empty_) = chunk->next_empty;
    (chunk->next_empty ? chunk->next_empty->prev_empty : oldest_empty_) = chunk->prev_empty;
    chunk->prev_empty = chunk->next_empty = nullptr;
    --empty_chunks_;
  }
  void unmap_chunk(ChunkHeader* chunk) noexcept {
    unlist_empty(chunk);
    for (Span& each : chunk->spans) unlist(free_spans_, &each);
    WATCHCACHE_UNPOISON(chunk, kChunkBytes);  // the range may be mapped again for anything
    ChunkSource::unmap(reinterpret_cast<char*>(chunk));
    --chunks_;
  }

  // A chunk from the ChunkSource (huge page, aligned), its spans all free.
  void map_chunk() {
    char* start = ChunkSource::instance().take();
    auto* chunk = new (start) ChunkHeader();
    WATCHCACHE_POISON(start + kFirstOffset, kChunkBytes - kFirstOffset);
    for (std::size_t i = kSpansPerChunk; i-- > 0;) push_front(free_spans_, &chunk->spans[i]);
    chunk->free_spans = kSpansPerChunk;
    ++chunks_;
    push_empty(chunk);
  }

  ItemHeap() = default;

  mutable SpinLock lock_;
  std::array<Span*, kClasses> with_room_{};  // per class, spans in use with room, freed into first
  Span* free_spans_ = nullptr;
  std::size_t chunks_ = 0;
  std::size_t empty_chunks_ = 0;  // chunks whose spans are all free, newest emptied first
  ChunkHeader* newest_empty_ = nullptr;
  ChunkHeader* oldest_empty_ = nullptr;
  std::size_t spans_in_use_ = 0;
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
