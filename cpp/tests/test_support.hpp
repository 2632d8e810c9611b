// Shared helpers for the engine tests: seeded randomness, live-object accounting, item
// construction, and printing of binary keys.
//
// Seeds. Every randomized test draws from seeded_rng(): the base seed is WATCHCACHE_SEED when
// set, else random; it is printed to stderr and recorded as a test property, and each test
// mixes in its own name so tests draw independent streams that one seed reproduces:
//   WATCHCACHE_SEED=<n> ./build/asan/engine_tests --gtest_filter='BTreeTest/F4.*'
// (The concurrency tests also depend on thread scheduling, so a seed narrows but cannot
// replay them.)
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "watchcache/item.hpp"

namespace watchcache::testing {

inline std::uint64_t base_seed() {
  static const std::uint64_t seed = [] {
    if (const char* env = std::getenv("WATCHCACHE_SEED"); env != nullptr && *env != '\0')
      return static_cast<std::uint64_t>(std::strtoull(env, nullptr, 0));
    std::random_device rd;
    return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  }();
  return seed;
}

inline std::uint64_t fnv1a(std::string_view s) noexcept {
  std::uint64_t h = 1469598103934665603ull;
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

// The generator for the running test; prints `WATCHCACHE_SEED=<n>` for reproduction.
inline std::mt19937_64 seeded_rng() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string name =
      info ? std::string(info->test_suite_name()) + "." + info->name() : std::string("<no test>");
  const std::uint64_t seed = base_seed();
  ::testing::Test::RecordProperty("WATCHCACHE_SEED", std::to_string(seed));
  std::fprintf(stderr, "[   SEED   ] %s WATCHCACHE_SEED=%llu\n", name.c_str(),
               static_cast<unsigned long long>(seed));
  return std::mt19937_64(seed ^ fnv1a(name));
}

// WATCHCACHE_TEST_SCALE (default 1) multiplies the work of the randomized and timed tests,
// for soak runs; the default keeps the ASan and the TSan run well under a minute each.
inline int test_scale() {
  static const int scale = [] {
    const char* env = std::getenv("WATCHCACHE_TEST_SCALE");
    const long v = env != nullptr ? std::strtol(env, nullptr, 10) : 1;
    return static_cast<int>(std::clamp<long>(v, 1, 1000));
  }();
  return scale;
}

// Uniform integer in [lo, hi].
template <class Int>
Int uniform(std::mt19937_64& rng, Int lo, Int hi) {
  return std::uniform_int_distribution<Int>(lo, hi)(rng);
}

inline bool chance(std::mt19937_64& rng, unsigned percent) {
  return uniform<unsigned>(rng, 0, 99) < percent;
}

struct Counters {
  std::int64_t nodes = 0;
  std::int64_t items = 0;
  std::int64_t bytes = 0;

  static Counters now() {
    const auto& c = detail::live_counters();
    return {c.nodes.load(), c.items.load(), c.bytes.load()};
  }
  friend bool operator==(const Counters&, const Counters&) = default;
};

inline std::ostream& operator<<(std::ostream& os, const Counters& c) {
  return os << "{nodes=" << c.nodes << ", items=" << c.items << ", bytes=" << c.bytes << "}";
}

// A fixture whose TearDown requires every node, item and byte the test created to be freed.
class LeakCheckedTest : public ::testing::Test {
 protected:
  void SetUp() override { start_ = Counters::now(); }
  void TearDown() override {
    EXPECT_EQ(Counters::now(), start_) << "live engine objects leaked or over-freed by this test";
  }
  // Bytes (nodes + items) allocated since the test started.
  std::int64_t live_bytes() const { return Counters::now().bytes - start_.bytes; }
  std::int64_t live_items() const { return Counters::now().items - start_.items; }
  std::int64_t live_nodes() const { return Counters::now().nodes - start_.nodes; }

  Counters start_;
};

inline ItemRef make_item(std::string_view key, std::string_view value, std::int64_t rev = 1,
                         std::vector<StringPair> labels = {}, std::vector<StringPair> fields = {}) {
  return ItemRef::adopt(Item::create(key, value, rev, std::move(labels), std::move(fields)));
}

// A key or value with non-printable bytes escaped, for failure messages.
inline std::string printable(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"') {
      out.push_back(ch);
    } else {
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xF]);
    }
  }
  return out + "\"";
}

}  // namespace watchcache::testing
