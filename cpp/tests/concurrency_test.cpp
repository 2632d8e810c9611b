// Guards the threading contract (btree.hpp, reclaim.hpp, registry.hpp): one writer owns the
// tree and puts, erases, snapshots, clears, retires and collects while reader threads take
// published snapshots — from a mutex-protected slot or from the SnapshotRegistry — and read
// them without locks (walk both ways, seek, get, count, rank, paged scans), checking each
// against the size and key/value checksum the writer published with it. Readers also drop
// snapshots, so unpinning (and the freeing it triggers) happens on every thread. Every test
// name contains "Concurren": the TSan run selects them with --gtest_filter='*Concurren*'.
// Bounded by wall time: 1.5 s each (times WATCHCACHE_TEST_SCALE).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "test_support.hpp"
#include "watchcache/btree.hpp"
#include "watchcache/registry.hpp"

namespace watchcache {
namespace {

using testing::chance;
using testing::fnv1a;
using testing::make_item;
using testing::uniform;

// A small fan-out keeps the trees deep, so writes split, borrow and merge constantly.
constexpr unsigned kF = 8;
using CTree = BasicTree<kF>;
using CSnap = BasicSnapshot<kF>;
using CRegistry = BasicSnapshotRegistry<kF>;
constexpr int kReaders = 4;
const auto kDuration = std::chrono::milliseconds(1500) * testing::test_scale();

std::uint64_t entry_hash(std::string_view key, std::string_view value, std::int64_t rev) {
  std::uint64_t h = fnv1a(key) * 0x9E3779B97F4A7C15ull;
  h ^= fnv1a(value) + 0x7F4A7C159E3779B9ull + (h << 6) + (h >> 2);
  return h ^ (static_cast<std::uint64_t>(rev) * 0xC2B2AE3D27D4EB4Full);
}

std::string key_of(std::size_t i) {
  if (i % 10 == 9) return std::string{'\xff', static_cast<char>(i & 0xFF), '\0', static_cast<char>(i >> 8)};
  return "/registry/pods/ns-" + std::to_string(i % 17) + "/pod-" + std::to_string(i);
}

struct Published {
  CSnap snap;
  std::int64_t rv = 0;
  std::size_t size = 0;
  std::uint64_t checksum = 0;
};

// What the writer publishes, and what readers report.
class Board {
 public:
  void publish(std::shared_ptr<const Published> p, std::size_t size, std::uint64_t checksum) {
    std::lock_guard lock(mu_);
    sums_[p->rv] = {size, checksum};
    latest_ = std::move(p);  // the previous publication may be dropped here or by a reader
  }
  std::shared_ptr<const Published> latest() const {
    std::lock_guard lock(mu_);
    return latest_;
  }
  std::optional<std::pair<std::size_t, std::uint64_t>> sums(std::int64_t rv) const {
    std::lock_guard lock(mu_);
    auto it = sums_.find(rv);
    if (it == sums_.end()) return std::nullopt;
    return it->second;
  }
  void fail(std::string what) {
    std::lock_guard lock(mu_);
    if (failures_.size() < 10) failures_.push_back(std::move(what));
  }
  std::vector<std::string> failures() const {
    std::lock_guard lock(mu_);
    return failures_;
  }
  void clear_latest() {
    std::lock_guard lock(mu_);
    latest_.reset();
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const Published> latest_;
  std::unordered_map<std::int64_t, std::pair<std::size_t, std::uint64_t>> sums_;
  std::vector<std::string> failures_;
};

// Reads one snapshot completely from a reader thread; "" when consistent.
std::string verify(const Published& p, std::mt19937_64& rng) {
  const CSnap& s = p.snap;
  const std::string at = " (rv " + std::to_string(p.rv) + ")";
  if (s.size() != p.size) return "size differs from the published size" + at;
  try {
    s.view().check(detail::kForever);
  } catch (const std::logic_error& e) {
    return std::string("check(): ") + e.what() + at;
  }
  std::vector<const Item*> items;
  items.reserve(p.size);
  std::uint64_t sum = 0;
  BasicCursor<kF> c(s);  // another pin of the same version, from this thread
  for (bool ok = c.seek_first(); ok; ok = c.next()) {
    const Item* it = c.item();
    if (!items.empty() && !(items.back()->key() < it->key())) return "walk is not strictly sorted" + at;
    sum += entry_hash(it->key(), it->value(), it->mod_revision());
    items.push_back(it);
  }
  if (items.size() != p.size) return "walk length differs from the size" + at;
  if (sum != p.checksum) return "checksum of keys and values differs from the published one" + at;
  std::size_t back = 0;
  for (bool ok = c.seek_last(); ok; ok = c.prev(), ++back)
    if (back >= items.size() || c.item() != items[items.size() - 1 - back]) return "backward walk differs" + at;
  if (back != items.size()) return "backward walk length differs" + at;

  for (int i = 0; i < 24 && !items.empty(); ++i) {
    std::size_t a = uniform<std::size_t>(rng, 0, items.size() - 1);
    std::size_t b = uniform<std::size_t>(rng, 0, items.size() - 1);
    if (a > b) std::swap(a, b);
    const std::string_view ka = items[a]->key(), kb = items[b]->key();
    if (s.get(ka) != items[a]) return "get differs from the walk" + at;
    if (!c.seek(ka) || c.item() != items[a]) return "seek differs from the walk" + at;
    const bool after = c.seek_after(ka);
    if (after != (a + 1 < items.size()) || (after && c.item() != items[a + 1])) return "seek_after differs" + at;
    if (s.count(ka, kb) != b - a) return "count differs from the walk" + at;
    if (s.view().rank<true>(ka) != a + 1) return "rank differs from the walk" + at;
  }

  // Page through one namespace with a small limit: the pages tile the prefix range.
  const std::string prefix = "/registry/pods/ns-" + std::to_string(uniform<int>(rng, 0, 16)) + "/";
  std::size_t expected = 0;
  for (const Item* it : items) expected += it->key().starts_with(prefix);
  ScanOptions o;
  o.prefix = prefix;
  o.limit = uniform<std::size_t>(rng, 1, 40);
  std::string next;
  std::size_t seen = 0;
  bool first_page = true;
  for (;;) {
    const auto page = scan(s, o);
    seen += page.items.size();
    if (first_page && page.next_key && page.items.size() + page.remaining != expected)
      return "remaining differs from the walk" + at;
    first_page = false;
    if (!page.next_key) break;
    next = *page.next_key;
    o.start = next;
  }
  if (seen != expected) return "paged scan differs from the walk" + at;
  return "";
}

struct Workload {
  bool clear_sometimes = true;
  bool destroy_tree_halfway = false;
};

// One writer and kReaders readers for kDuration; returns reader verification counts.
std::vector<std::size_t> run(const Workload& w, Board& board, std::uint64_t seed) {
  CRegistry registry(512 << 10);  // small budget: eviction runs concurrently with readers
  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> published{0};
  std::vector<std::size_t> verified(kReaders, 0);

  auto reader = [&](int id) {
    std::mt19937_64 rng(seed + 1000003u * static_cast<std::uint64_t>(id + 1));
    std::vector<std::shared_ptr<const Published>> held;
    while (!stop.load(std::memory_order_relaxed) || verified[static_cast<std::size_t>(id)] == 0) {
      std::shared_ptr<const Published> p;
      if (chance(rng, 50)) {
        p = board.latest();
      } else if (const auto newest = registry.latest()) {
        const auto oldest = registry.oldest();
        const std::int64_t lo = oldest ? oldest->first : newest->first;
        if (auto e = registry.floor(uniform<std::int64_t>(rng, lo, newest->first))) {
          if (const auto sums = board.sums(e->first))
            p = std::make_shared<const Published>(Published{std::move(e->second), e->first, sums->first, sums->second});
        }
      }
      if (!p) {
        if (stop.load()) break;
        std::this_thread::yield();
        continue;
      }
      held.push_back(std::move(p));
      if (held.size() > 3)  // drop (and maybe unpin) from this thread
        held.erase(held.begin() + static_cast<std::ptrdiff_t>(uniform<std::size_t>(rng, 0, held.size() - 1)));
      const auto& target = held[uniform<std::size_t>(rng, 0, held.size() - 1)];
      if (std::string err = verify(*target, rng); !err.empty()) {
        board.fail("reader " + std::to_string(id) + ": " + err);
        break;
      }
      ++verified[static_cast<std::size_t>(id)];
    }
  };

  auto writer = [&] {
    std::mt19937_64 rng(seed);
    auto tree = std::make_unique<CTree>();
    std::uint64_t sum = 0;
    std::int64_t rev = 0;
    const auto start = std::chrono::steady_clock::now();
    const auto end_writes = start + (w.destroy_tree_halfway ? kDuration / 2 : kDuration);
    while (std::chrono::steady_clock::now() < end_writes) {
      for (int op = 0; op < 24; ++op) {
        const std::string k = key_of(uniform<std::size_t>(rng, 0, 2999));
        const Item* old = tree->get(k);
        if (old) sum -= entry_hash(old->key(), old->value(), old->mod_revision());
        if (chance(rng, 60)) {
          ++rev;
          const std::string v = "value-" + std::to_string(rev);
          sum += entry_hash(k, v, rev);
          tree->put(make_item(k, v, rev));
        } else {
          tree->erase(k);
        }
      }
      const std::int64_t rv = published.load() + 1;
      auto p = std::make_shared<const Published>(Published{tree->snapshot(), rv, tree->size(), sum});
      board.publish(p, p->size, p->checksum);
      registry.add(rv, p->snap);
      published.store(rv);
      if (rv % 8 == 0) registry.prune_below(rv - 64);
      if (rv % 16 == 0) tree->collect();
      if (w.clear_sometimes && rv % 500 == 0) {
        tree->clear();  // releases the whole tree while readers hold snapshots of it
        sum = 0;
      }
    }
    if (w.destroy_tree_halfway) {
      tree.reset();  // readers keep reading what the registry and the board hold
      std::this_thread::sleep_until(start + kDuration);
    }
    stop.store(true);
  };

  std::vector<std::thread> threads;
  for (int i = 0; i < kReaders; ++i) threads.emplace_back(reader, i);
  threads.emplace_back(writer);
  for (auto& t : threads) t.join();
  board.clear_latest();
  registry.clear();
  EXPECT_GT(published.load(), 10);
  return verified;
}

class ConcurrencyTest : public testing::LeakCheckedTest {
 protected:
  void run_and_check(const Workload& w) {
    std::mt19937_64 rng = testing::seeded_rng();
    Board board;
    const auto verified = run(w, board, rng());
    for (const auto& f : board.failures()) ADD_FAILURE() << f;
    for (std::size_t i = 0; i < verified.size(); ++i) EXPECT_GT(verified[i], 0u) << "reader " << i << " verified nothing";
    std::size_t total = 0;
    for (const auto v : verified) total += v;
    RecordProperty("snapshots_verified", std::to_string(total));
  }
};

TEST_F(ConcurrencyTest, ConcurrentReadersVerifySnapshotsWhileWriterMutatesAndCollects) {
  run_and_check(Workload{true, false});
}

TEST_F(ConcurrencyTest, ConcurrentReadersKeepReadingAfterTheTreeIsDestroyed) {
  run_and_check(Workload{false, true});
}

// Many threads copy and drop one snapshot (pin counts on one version change from every
// thread) while the writer keeps snapshotting, dropping and collecting.
TEST_F(ConcurrencyTest, ConcurrentPinsAndUnpinsOfOneVersion) {
  std::mt19937_64 seed_rng = testing::seeded_rng();
  const std::uint64_t seed = seed_rng();
  CTree tree;
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < 1500; ++i) {
    tree.put(make_item(key_of(i), "base", 1));
    sum += entry_hash(key_of(i), "base", 1);
  }
  const Published base{tree.snapshot(), 1, tree.size(), sum};
  std::atomic<bool> stop{false};
  Board board;
  std::vector<std::size_t> rounds(kReaders, 0);

  std::vector<std::thread> threads;
  for (int id = 0; id < kReaders; ++id) {
    threads.emplace_back([&, id] {
      std::mt19937_64 rng(seed + static_cast<std::uint64_t>(id));
      std::vector<CSnap> copies;
      while (!stop.load(std::memory_order_relaxed) || rounds[static_cast<std::size_t>(id)] == 0) {
        for (int i = 0; i < 50; ++i) {
          copies.push_back(base.snap);
          if (copies.size() > 5) copies.erase(copies.begin() + static_cast<std::ptrdiff_t>(uniform<std::size_t>(rng, 0, 5)));
        }
        const CSnap& s = copies[uniform<std::size_t>(rng, 0, copies.size() - 1)];
        const std::string k = key_of(uniform<std::size_t>(rng, 0, 1499));
        const watchcache::Item* found = s.get(k);
        if (found == nullptr || found->value() != "base") {
          board.fail("a pinned version lost " + k);
          break;
        }
        if (rounds[static_cast<std::size_t>(id)] % 64 == 0) {
          if (std::string err = verify(Published{copies.back(), 1, base.size, base.checksum}, rng); !err.empty()) {
            board.fail(err);
            break;
          }
        }
        ++rounds[static_cast<std::size_t>(id)];
      }
    });
  }
  std::mt19937_64 rng(seed);
  const auto deadline = std::chrono::steady_clock::now() + kDuration;
  std::int64_t rev = 2;
  for (int round = 0; std::chrono::steady_clock::now() < deadline; ++round) {
    CSnap middle = tree.snapshot();  // dropped at the end of the round: a hole behind `base`
    for (int op = 0; op < 20; ++op, ++rev) tree.put(make_item(key_of(uniform<std::size_t>(rng, 0, 1499)), "new", rev));
    if (round % 3 == 0) tree.erase(key_of(uniform<std::size_t>(rng, 0, 1499)));
    if (round % 5 == 0) tree.collect();
  }
  stop.store(true);
  for (auto& t : threads) t.join();
  for (const auto& f : board.failures()) ADD_FAILURE() << f;
  for (const auto r : rounds) EXPECT_GT(r, 0u);
  const auto pins = tree.domain()->exclusive_bytes();
  ASSERT_EQ(pins.size(), 1u) << "every copy's pin was released";
  EXPECT_EQ(pins[0].first, base.snap.version());
  EXPECT_EQ(verify(base, rng), "");
}

}  // namespace
}  // namespace watchcache
