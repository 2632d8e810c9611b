// Guards NodePool (node_pool.hpp) directly, since sanitizer builds bypass it in the tree:
// blocks of each size class are distinct, aligned, writable and reused after release; many
// slabs' worth of allocations work while the helper thread refills; threads allocating and
// releasing at once, with the helper refilling, never hand out one block twice (run under
// TSan in make test).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "watchcache/node_pool.hpp"

namespace watchcache::detail {
namespace {

constexpr std::size_t kSmall = 704, kLarge = 1024;  // the tree's leaf and internal sizes

TEST(NodePool, BlocksAreDistinctAlignedWritableAndReused) {
  NodePool& pool = NodePool::instance();
  ChunkSource::instance().set_prefault(true);
  std::vector<void*> blocks;
  std::set<std::uintptr_t> seen;
  // More than a few slabs of each size, so slab changes and the helper's reserve are used.
  const std::size_t per_class = 6 * NodePool::kSlabBytes / kSmall;
  for (std::size_t i = 0; i < per_class; ++i) {
    for (const std::size_t bytes : {kSmall, kLarge}) {
      void* p = pool.allocate(bytes);
      ASSERT_EQ(reinterpret_cast<std::uintptr_t>(p) % 16, 0u);
      std::memset(p, 0xAB, bytes);
      ASSERT_TRUE(seen.insert(reinterpret_cast<std::uintptr_t>(p)).second) << "a block handed out twice";
      blocks.push_back(p);
    }
  }
  // Released blocks come back before new memory is cut, each to its own size.
  void* large = blocks.back();
  pool.release(large, kLarge);
  EXPECT_EQ(pool.allocate(kLarge), large);
  for (std::size_t i = 0; i < blocks.size(); ++i) pool.release(blocks[i], i % 2 == 0 ? kSmall : kLarge);
}

TEST(NodePool, ConcurrentAllocateAndReleaseNeverShareABlock) {
  NodePool& pool = NodePool::instance();
  ChunkSource::instance().set_prefault(true);  // the helper thread refills while the others allocate
  constexpr std::size_t kThreads = 4;
  constexpr int kRounds = 200, kBatch = 64;
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (std::size_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&pool, &failures, t] {
      const std::size_t bytes = t % 2 == 0 ? kSmall : kLarge;
      const auto stamp = static_cast<unsigned char>(t + 1);
      std::vector<unsigned char*> mine;
      for (int r = 0; r < kRounds; ++r) {
        for (int i = 0; i < kBatch; ++i) {
          auto* p = static_cast<unsigned char*>(pool.allocate(bytes));
          std::memset(p, stamp, bytes);  // the block is this thread's
          mine.push_back(p);
        }
        for (unsigned char* p : mine) {
          if (std::any_of(p, p + bytes, [stamp](unsigned char b) { return b != stamp; })) ++failures[t];
          pool.release(p, bytes);
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
