// Guards ChunkSource (chunk_source.hpp): chunks are aligned to their size, distinct and
// writable, with prefaulting on or off; set_prefault reports the previous setting; a chunk
// handed back can be mapped again. (The helper thread's concurrency with the pools is
// covered by their own tests under TSan.)
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include "watchcache/chunk_source.hpp"

namespace watchcache::detail {
namespace {

TEST(ChunkSource, ChunksAreAlignedDistinctAndWritable) {
  ChunkSource& source = ChunkSource::instance();
  const bool was = source.set_prefault(false);
  EXPECT_FALSE(source.set_prefault(true));
  std::vector<char*> chunks;
  std::set<std::uintptr_t> seen;
  for (int i = 0; i < 3 * static_cast<int>(ChunkSource::kReadyChunks); ++i) {
    if (i == 2 * static_cast<int>(ChunkSource::kReadyChunks)) {
      EXPECT_TRUE(source.set_prefault(false));
    }
    char* c = source.take();
    ASSERT_EQ(reinterpret_cast<std::uintptr_t>(c) % ChunkSource::kChunkBytes, 0u);
    ASSERT_TRUE(seen.insert(reinterpret_cast<std::uintptr_t>(c)).second) << "a chunk handed out twice";
    std::memset(c, 0x3C, ChunkSource::kChunkBytes);
    chunks.push_back(c);
  }
  for (char* c : chunks) {
    EXPECT_EQ(c[0], 0x3C);
    EXPECT_EQ(c[ChunkSource::kChunkBytes - 1], 0x3C);
    ChunkSource::unmap(c);
  }
  source.set_prefault(was);
}

}  // namespace
}  // namespace watchcache::detail
