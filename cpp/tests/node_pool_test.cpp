// Guards NodePool (node_pool.hpp) directly, since sanitizer builds bypass it in the tree:
// blocks of each size class are distinct, aligned, writable and reused after release; many
// chunks' worth of allocations work while the helper thread refills; freed blocks in the
// lowest chunk are reused before higher ones; chunks whose blocks are all free go back, but
// for one spare per size; threads allocating and releasing at once, with the helper
// refilling, never hand out one block twice (run under TSan in make test).
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
  const std::size_t per_class = 6 * NodePool::kChunkBytes / kSmall;
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

std::uintptr_t chunk_of(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) & ~(NodePool::kChunkBytes - 1);
}

// Sizes of their own, so that no other test's blocks share these tests' chunks.
TEST(NodePool, FreedBlocksOfTheLowestChunkAreReusedFirst) {
  NodePool& pool = NodePool::instance();
  constexpr std::size_t kBytes = 512;
  const std::size_t per_chunk = NodePool::kChunkBytes / kBytes;
  std::vector<void*> blocks;
  for (std::size_t i = 0; i < 3 * per_chunk; ++i) blocks.push_back(pool.allocate(kBytes));
  const std::uintptr_t first = chunk_of(blocks.front());
  const std::uintptr_t last = chunk_of(blocks.back());
  ASSERT_NE(first, last);
  // Room in the last chunk (still being cut), in the first, and in the second, freed last
  // (a plain free list would hand those out first): the first chunk is filled first.
  std::vector<void*> freed_in_first, freed_in_second;
  for (std::size_t i = 0; i < blocks.size(); i += 7) {
    if (chunk_of(blocks[i]) == first) freed_in_first.push_back(blocks[i]);
    if (chunk_of(blocks[i]) != first && chunk_of(blocks[i]) != last) freed_in_second.push_back(blocks[i]);
  }
  ASSERT_FALSE(freed_in_second.empty());
  std::vector<void*> kept;
  std::set<void*> freed(freed_in_first.begin(), freed_in_first.end());
  freed.insert(freed_in_second.begin(), freed_in_second.end());
  for (void* p : blocks) {
    if (!freed.count(p)) kept.push_back(p);
  }
  for (void* p : freed_in_first) pool.release(p, kBytes);
  for (void* p : freed_in_second) pool.release(p, kBytes);
  for (std::size_t i = 0; i < freed_in_first.size(); ++i) {
    void* p = pool.allocate(kBytes);
    EXPECT_EQ(chunk_of(p), first) << "allocation " << i << " of " << freed_in_first.size();
    kept.push_back(p);
  }
  kept.push_back(pool.allocate(kBytes));
  EXPECT_EQ(chunk_of(kept.back()), chunk_of(freed_in_second.front())) << "then the second";
  for (void* p : kept) pool.release(p, kBytes);
}

TEST(NodePool, ChunksWhoseBlocksAreAllFreeGoBackButOneSpare) {
  NodePool& pool = NodePool::instance();
  ChunkSource::instance().set_prefault(true);
  constexpr std::size_t kBytes = 2048;
  const std::size_t per_chunk = NodePool::kChunkBytes / kBytes;
  const std::size_t before = pool.chunks();
  std::vector<void*> blocks;
  for (std::size_t i = 0; i < 8 * per_chunk; ++i) blocks.push_back(pool.allocate(kBytes));
  const std::size_t grown = pool.chunks();
  EXPECT_GE(grown, before + 8);
  // Free every block but one in each of the first two chunks: those two stay, the rest go
  // but for one spare.
  std::vector<void*> kept;
  std::set<std::uintptr_t> kept_chunks;
  for (void* p : blocks) {
    const std::uintptr_t chunk = chunk_of(p);
    if (kept_chunks.size() < 2 && !kept_chunks.count(chunk)) {
      kept_chunks.insert(chunk);
      kept.push_back(p);
    } else {
      pool.release(p, kBytes);
    }
  }
  EXPECT_EQ(pool.chunks(), before + 2 + 1);
  // Memory given back is taken again when needed: blocks are still distinct and writable.
  std::set<void*> again;
  for (std::size_t i = 0; i < 4 * per_chunk; ++i) {
    void* p = pool.allocate(kBytes);
    std::memset(p, 0x5A, kBytes);
    EXPECT_TRUE(again.insert(p).second);
    EXPECT_TRUE(std::find(kept.begin(), kept.end(), p) == kept.end());
  }
  for (void* p : again) pool.release(p, kBytes);
  for (void* p : kept) pool.release(p, kBytes);
  EXPECT_EQ(pool.chunks(), before + 1) << "one spare for the size, the rest given back";
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
