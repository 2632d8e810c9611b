// Guards ItemHeap (item_heap.hpp) directly, since sanitizer builds bypass it for items: a
// freed block comes back, last in first out, to the next allocation of its class and to no
// other; blocks cover what was asked; the per-class and total bounds hold, and a free past
// them is a plain delete; trim() empties the heap; once a thread has started the lock is
// taken; threads allocating and freeing at once never get one block twice (run under TSan
// in make test).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "watchcache/item_heap.hpp"

namespace watchcache::detail {
namespace {

// The heap is process-wide: each test starts from an empty one.
ItemHeap& empty_heap() {
  ItemHeap& heap = ItemHeap::instance();
  heap.trim();
  return heap;
}

TEST(ItemHeap, BlockSizesAreSixteenApartAndCoverTheRequest) {
  for (std::size_t bytes = 1; bytes <= ItemHeap::kMaxCachedBytes; ++bytes) {
    const std::size_t block = ItemHeap::block_size_for(bytes);
    ASSERT_GE(block, bytes);
    ASSERT_LT(block - bytes, ItemHeap::kGranule) << bytes;
    ASSERT_EQ((block + 8) % ItemHeap::kGranule, 0u) << bytes;  // a whole glibc chunk, no more
  }
  // Past the cached range the request goes through unchanged.
  EXPECT_EQ(ItemHeap::block_size_for(ItemHeap::kMaxCachedBytes + 1), ItemHeap::kMaxCachedBytes + 1);
}

TEST(ItemHeap, AFreedBlockServesTheNextRequestOfItsClassOnly) {
  ItemHeap& heap = empty_heap();
  void* a = heap.allocate(200);
  void* b = heap.allocate(200);
  std::memset(a, 0x5A, ItemHeap::block_size_for(200));
  heap.release(a, 200);
  heap.release(b, 200);
  EXPECT_EQ(heap.kept_bytes(), 2 * ItemHeap::block_size_for(200));
  // Another class does not take them.
  void* other = heap.allocate(200 + ItemHeap::kGranule);
  EXPECT_NE(other, a);
  EXPECT_NE(other, b);
  // The same class does, newest first; sizes that round to the class too.
  EXPECT_EQ(heap.allocate(193), b);
  EXPECT_EQ(heap.allocate(200), a);
  EXPECT_EQ(heap.kept_bytes(), 0u);
  for (void* p : {a, b}) heap.release(p, 200);
  heap.release(other, 200 + ItemHeap::kGranule);
  heap.trim();
  EXPECT_EQ(heap.kept_bytes(), 0u);
}

TEST(ItemHeap, LargeBlocksAreNotKept) {
  ItemHeap& heap = empty_heap();
  const std::size_t large = ItemHeap::kMaxCachedBytes + 100;
  void* p = heap.allocate(large);
  std::memset(p, 0x11, large);
  heap.release(p, large);
  EXPECT_EQ(heap.kept_bytes(), 0u);
}

TEST(ItemHeap, AClassKeepsABoundedNumberOfBlocks) {
  ItemHeap& heap = empty_heap();
  constexpr std::size_t kBytes = 100;
  const std::size_t block = ItemHeap::block_size_for(kBytes);
  const std::size_t cap = std::clamp<std::size_t>(ItemHeap::kClassBudget / block, ItemHeap::kMinPerClass,
                                                  ItemHeap::kMaxPerClass);
  std::vector<void*> blocks(cap + 50);
  for (void*& p : blocks) p = heap.allocate(kBytes);
  for (void* p : blocks) heap.release(p, kBytes);
  EXPECT_EQ(heap.kept_bytes(), cap * block);
  // What is kept comes back, and nothing beyond it.
  std::set<void*> again;
  for (std::size_t i = 0; i < cap; ++i) again.insert(heap.allocate(kBytes));
  EXPECT_EQ(heap.kept_bytes(), 0u);
  EXPECT_EQ(again.size(), cap);
  for (void* p : again) EXPECT_TRUE(std::find(blocks.begin(), blocks.end(), p) != blocks.end());
  for (void* p : again) heap.release(p, kBytes);
  heap.trim();
}

TEST(ItemHeap, AllClassesTogetherKeepAtMostTheTotalBound) {
  ItemHeap& heap = empty_heap();
  // Blocks of 8-16 KB, a handful per class: together far over the total bound.
  std::vector<std::pair<void*, std::size_t>> blocks;
  std::size_t asked = 0;
  for (std::size_t bytes = 8 * 1024; bytes <= ItemHeap::kMaxCachedBytes; bytes += ItemHeap::kGranule) {
    for (std::uint32_t i = 0; i < ItemHeap::kMinPerClass; ++i) {
      blocks.emplace_back(heap.allocate(bytes), bytes);
      asked += ItemHeap::block_size_for(bytes);
    }
  }
  ASSERT_GT(asked, ItemHeap::kMaxTotalBytes);
  for (const auto& [p, bytes] : blocks) heap.release(p, bytes);
  EXPECT_LE(heap.kept_bytes(), ItemHeap::kMaxTotalBytes);
  EXPECT_GT(heap.kept_bytes(), ItemHeap::kMaxTotalBytes - ItemHeap::kMaxCachedBytes);
  heap.trim();
  EXPECT_EQ(heap.kept_bytes(), 0u);
}

// The heap skips its lock only while the process has one thread: once a thread has been
// started, even one that has finished, the lock is taken for good.
TEST(ItemHeap, LocksOnceAThreadHasStarted) {
  std::thread([] {}).join();
  EXPECT_FALSE(single_threaded());
}

TEST(ItemHeap, ConcurrentAllocateAndReleaseNeverShareABlock) {
  ItemHeap& heap = empty_heap();
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
  heap.trim();
}

}  // namespace
}  // namespace watchcache::detail
