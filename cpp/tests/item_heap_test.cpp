// Guards ItemHeap (item_heap.hpp) directly, since sanitizer builds bypass it for items:
// blocks cover what was asked, within the class spacing; blocks are distinct, aligned and
// keep what is written to them; a freed block comes back, last in first out, to the next
// allocation of its class and to no other; a span whose blocks are all free serves another
// class; empty chunks are kept up to the chunks in use, else unmapped down to the spares;
// large blocks go to operator new; once a thread has started the lock is taken; threads
// allocating and freeing at once never get one block twice (run under TSan in make test).
// Under ASan the heap poisons what it holds, so any test that touched a block after
// freeing it would fail there.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "watchcache/item_heap.hpp"

namespace watchcache::detail {
namespace {

using Heap = ItemHeap;

TEST(ItemHeap, BlocksCoverTheRequestWithinTheClassSpacing) {
  for (std::size_t bytes = 1; bytes <= Heap::kMaxSmallBytes; ++bytes) {
    const std::size_t block = Heap::block_size_for(bytes);
    ASSERT_GE(block, bytes);
    ASSERT_EQ(block % Heap::kGranule, 0u) << bytes;
    if (bytes <= Heap::kFineBytes) {
      ASSERT_LT(block - bytes, Heap::kGranule) << bytes;
    } else {
      ASSERT_LE(block - bytes, bytes / 8) << bytes;
    }
    if (bytes > 1) {
      ASSERT_GE(block, Heap::block_size_for(bytes - 1)) << bytes;
    }
  }
  // Past the small range the request goes through unchanged.
  EXPECT_EQ(Heap::block_size_for(Heap::kMaxSmallBytes + 1), Heap::kMaxSmallBytes + 1);
}

TEST(ItemHeap, AFreedBlockServesTheNextRequestOfItsClassOnly) {
  Heap& heap = Heap::instance();
  void* keep = heap.allocate(200);  // keeps the span in use (an empty span serves any class)
  void* a = heap.allocate(200);
  void* b = heap.allocate(200);
  std::memset(a, 0x5A, Heap::block_size_for(200));
  heap.release(a, 200);
  heap.release(b, 200);
  // Another class does not take them.
  void* other = heap.allocate(200 + Heap::kGranule);
  EXPECT_NE(other, a);
  EXPECT_NE(other, b);
  // The same class does, newest first; sizes that round to the class too.
  EXPECT_EQ(heap.allocate(193), b);
  EXPECT_EQ(heap.allocate(200), a);
  for (void* p : {a, b, keep}) heap.release(p, 200);
  heap.release(other, 200 + Heap::kGranule);
}

TEST(ItemHeap, BlocksAreDistinctAlignedAndKeepTheirBytes) {
  Heap& heap = Heap::instance();
  std::mt19937_64 rng(7);
  std::vector<std::pair<unsigned char*, std::size_t>> live;
  std::set<std::uintptr_t> starts;
  // Random sizes over every class, several spans' worth, with frees in between.
  for (int step = 0; step < 60'000; ++step) {
    if (!live.empty() && rng() % 3 == 0) {
      const std::size_t i = rng() % live.size();
      auto [p, bytes] = live[i];
      const auto stamp = static_cast<unsigned char>(reinterpret_cast<std::uintptr_t>(p) >> 4);
      ASSERT_TRUE(std::all_of(p, p + bytes, [stamp](unsigned char c) { return c == stamp; })) << "block overwritten";
      starts.erase(reinterpret_cast<std::uintptr_t>(p));
      heap.release(p, bytes);
      live[i] = live.back();
      live.pop_back();
      continue;
    }
    const std::size_t bytes = 1 + rng() % Heap::kMaxSmallBytes;
    auto* p = static_cast<unsigned char*>(heap.allocate(bytes));
    ASSERT_EQ(reinterpret_cast<std::uintptr_t>(p) % 16, 0u);
    ASSERT_TRUE(starts.insert(reinterpret_cast<std::uintptr_t>(p)).second) << "a block handed out twice";
    std::memset(p, static_cast<unsigned char>(reinterpret_cast<std::uintptr_t>(p) >> 4), bytes);
    live.emplace_back(p, bytes);
  }
  // No two live blocks overlap.
  std::sort(live.begin(), live.end());
  for (std::size_t i = 1; i < live.size(); ++i)
    ASSERT_LE(reinterpret_cast<std::uintptr_t>(live[i - 1].first) + Heap::block_size_for(live[i - 1].second),
              reinterpret_cast<std::uintptr_t>(live[i].first));
  for (auto [p, bytes] : live) heap.release(p, bytes);
}

TEST(ItemHeap, FreeSpansServeOtherClassesAndEmptyChunksAreUnmapped) {
  Heap& heap = Heap::instance();
  const std::size_t spans_before = heap.spans_in_use();
  const std::size_t chunks_before = heap.chunks();
  // Six chunks' worth of 184-byte items, then all freed: their spans are free again, and
  // all but the spare empty chunks are unmapped.
  std::vector<void*> blocks;
  const std::size_t per_chunk = Heap::kChunkBytes / Heap::block_size_for(184);
  for (std::size_t i = 0; i < 6 * per_chunk; ++i) blocks.push_back(heap.allocate(184));
  EXPECT_GE(heap.chunks(), 6u);
  for (void* p : blocks) heap.release(p, 184);
  EXPECT_EQ(heap.spans_in_use(), spans_before);
  EXPECT_LE(heap.chunks(), chunks_before + Heap::kSpareChunks);
  // The same memory now holds a class of another size, without mapping more: a chunk's
  // worth of its spans.
  const std::size_t chunks_kept = heap.chunks();
  ASSERT_GE(chunks_kept, Heap::kSpareChunks);
  blocks.clear();
  const std::size_t per_span = Heap::kSpanBytes / Heap::block_size_for(3000);
  for (std::size_t i = 0; i < per_span * (Heap::kSpansPerChunk - 1); ++i) blocks.push_back(heap.allocate(3000));
  EXPECT_EQ(heap.chunks(), chunks_kept);
  for (void* p : blocks) heap.release(p, 3000);
  EXPECT_EQ(heap.spans_in_use(), spans_before);
}

// A cache rebuilt beside its old contents keeps the memory for the next rebuild; one
// emptied for good returns all but the spares.
TEST(ItemHeap, EmptyChunksAreKeptUpToTheChunksInUse) {
  Heap& heap = Heap::instance();
  const std::size_t chunks_before = heap.chunks();
  const std::size_t per_chunk = Heap::kChunkBytes / Heap::block_size_for(184);
  std::vector<void*> old_contents, rebuilt;
  for (std::size_t i = 0; i < 4 * per_chunk; ++i) old_contents.push_back(heap.allocate(184));
  for (std::size_t i = 0; i < 4 * per_chunk; ++i) rebuilt.push_back(heap.allocate(184));
  const std::size_t both = heap.chunks();
  for (void* p : old_contents) heap.release(p, 184);
  EXPECT_EQ(heap.chunks(), both) << "as many empty chunks as chunks in use are kept";
  // Built again: into the kept chunks, nothing mapped.
  old_contents.clear();
  for (std::size_t i = 0; i < 4 * per_chunk; ++i) old_contents.push_back(heap.allocate(184));
  EXPECT_EQ(heap.chunks(), both);
  for (void* p : old_contents) heap.release(p, 184);
  for (void* p : rebuilt) heap.release(p, 184);
  EXPECT_LE(heap.chunks(), chunks_before + Heap::kSpareChunks);
}

TEST(ItemHeap, LargeBlocksAreNotTheHeaps) {
  Heap& heap = Heap::instance();
  const std::size_t spans_before = heap.spans_in_use();
  const std::size_t large = Heap::kMaxSmallBytes + 100;
  void* p = heap.allocate(large);
  std::memset(p, 0x11, large);
  EXPECT_EQ(heap.spans_in_use(), spans_before);
  heap.release(p, large);
}

// The heap skips its lock only while the process has one thread: once a thread has been
// started, even one that has finished, the lock is taken for good.
TEST(ItemHeap, LocksOnceAThreadHasStarted) {
  std::thread([] {}).join();
  EXPECT_FALSE(single_threaded());
}

TEST(ItemHeap, ConcurrentAllocateAndReleaseNeverShareABlock) {
  Heap& heap = Heap::instance();
  constexpr std::size_t kThreads = 4;
  constexpr int kRounds = 200, kBatch = 64;
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (std::size_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&heap, &failures, t] {
      // Two threads per class, so that blocks one frees go to the other.
      const std::size_t bytes = t % 2 == 0 ? 184 : 1100;
      const auto stamp = static_cast<unsigned char>(t + 1);
      std::vector<unsigned char*> mine;
      for (int r = 0; r < kRounds; ++r) {
        for (int i = 0; i < kBatch; ++i) {
          auto* p = static_cast<unsigned char*>(heap.allocate(bytes));
          std::memset(p, stamp, bytes);  // the block is this thread's
          mine.push_back(p);
        }
        for (unsigned char* p : mine) {
          if (std::any_of(p, p + bytes, [stamp](unsigned char b) { return b != stamp; })) ++failures[t];
          heap.release(p, bytes);
        }
        mine.clear();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (std::size_t t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
}

}  // namespace
}  // namespace watchcache::detail
