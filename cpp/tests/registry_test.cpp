// Guards SnapshotRegistry (registry.hpp): non-decreasing positive resource versions,
// exact and floor lookups (with and without taking the snapshot), latest/oldest, pruning,
// budget eviction (oldest first, never the newest), pinned-byte accounting read from the
// reclamation domains, and usage() splitting each snapshot's bytes into exclusive +
// shared. Live counters return to their start.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_support.hpp"
#include "watchcache/btree.hpp"
#include "watchcache/registry.hpp"

namespace watchcache {
namespace {

using testing::make_item;

std::string key_of(std::size_t i) { return "/registry/secrets/ns/s-" + std::to_string(100000 + i); }

class RegistryTest : public testing::LeakCheckedTest {
 protected:
  void fill(Tree& tree, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) tree.put(make_item(key_of(i), std::string(100, 'v'), 1));
  }
  // Replaces `count` items spread over the key space: every write after a snapshot retires.
  void churn(Tree& tree, std::size_t count, std::int64_t rev) {
    for (std::size_t i = 0; i < count; ++i)
      tree.put(make_item(key_of((i * 7919 + static_cast<std::size_t>(rev) * 31) % 1000), std::string(100, 'w'), rev));
  }
  // A snapshot whose "rv" key holds the given rv, to tell stored snapshots apart.
  Snapshot tagged(Tree& tree, std::int64_t rv) {
    tree.put(make_item("rv", std::to_string(rv), rv));
    return tree.snapshot();
  }
  static std::string tag(const Snapshot& s) {
    const Item* it = s.get("rv");
    return it ? std::string(it->value()) : std::string("<no rv key>");
  }
};

TEST_F(RegistryTest, AddRejectsNonPositiveAndDecreasingVersions) {
  Tree tree;
  SnapshotRegistry reg;
  EXPECT_THROW(reg.add(0, tree.snapshot()), std::invalid_argument);
  EXPECT_THROW(reg.add(-5, tree.snapshot()), std::invalid_argument);
  reg.add(5, tagged(tree, 5));
  EXPECT_THROW(reg.add(4, tagged(tree, 4)), std::invalid_argument);
  EXPECT_EQ(reg.size(), 1u);
  EXPECT_EQ(reg.resource_versions(), std::vector<std::int64_t>{5});
  EXPECT_EQ(tag(*reg.get(5)), "5");
  // The rejected snapshots were released: only rv 5's version is still pinned.
  EXPECT_EQ(tree.domain()->exclusive_bytes().size(), 1u);
  reg.add(6, tagged(tree, 6));
  EXPECT_EQ(reg.resource_versions(), (std::vector<std::int64_t>{5, 6}));
}

TEST_F(RegistryTest, GetIsExactAndFloorFindsTheNewestAtOrBelow) {
  Tree tree;
  SnapshotRegistry reg;
  EXPECT_FALSE(reg.get(1).has_value());
  EXPECT_FALSE(reg.floor(100).has_value());
  EXPECT_FALSE(reg.latest().has_value());
  EXPECT_FALSE(reg.oldest().has_value());
  for (const std::int64_t rv : {10, 20, 30}) reg.add(rv, tagged(tree, rv));

  ASSERT_TRUE(reg.get(20).has_value());
  EXPECT_EQ(tag(*reg.get(20)), "20");
  EXPECT_FALSE(reg.get(25).has_value());
  EXPECT_FALSE(reg.get(0).has_value());
  EXPECT_FALSE(reg.get(31).has_value());
  EXPECT_TRUE(reg.contains(30));
  EXPECT_FALSE(reg.contains(15));

  EXPECT_FALSE(reg.floor(9).has_value());
  EXPECT_EQ(reg.floor(10)->first, 10);
  EXPECT_EQ(reg.floor(25)->first, 20);
  EXPECT_EQ(tag(reg.floor(25)->second), "20");
  EXPECT_EQ(reg.floor(30)->first, 30);
  EXPECT_EQ(reg.floor(1'000'000)->first, 30);
  for (const std::int64_t rv : {0, 9, 10, 15, 20, 25, 30, 1'000'000}) {
    const auto entry = reg.floor(rv);
    EXPECT_EQ(reg.floor_resource_version(rv), entry ? std::optional<std::int64_t>(entry->first) : std::nullopt)
        << "rv " << rv;
  }

  EXPECT_EQ(reg.latest()->first, 30);
  EXPECT_EQ(tag(reg.latest()->second), "30");
  EXPECT_EQ(reg.oldest()->first, 10);
  EXPECT_EQ(tag(reg.oldest()->second), "10");
}

TEST_F(RegistryTest, ReturnedSnapshotsOutliveTheirEntries) {
  Tree tree;
  fill(tree, 200);
  SnapshotRegistry reg;
  reg.add(1, tagged(tree, 1));
  std::optional<Snapshot> kept = reg.get(1);
  churn(tree, 50, 2);
  reg.clear();
  EXPECT_EQ(reg.size(), 0u);
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(tag(*kept), "1");
  EXPECT_EQ(kept->size(), 201u);
  EXPECT_NO_THROW(kept->view().check(detail::kForever));
  EXPECT_GT(tree.domain()->retired_bytes(), 0u) << "the copy still pins its version";
  kept.reset();
  EXPECT_EQ(tree.domain()->retired_bytes(), 0u);
}

TEST_F(RegistryTest, PruneBelowDropsOlderEntriesAndTheirPinnedBytes) {
  Tree tree;
  fill(tree, 1000);
  SnapshotRegistry reg;
  for (std::int64_t rv = 1; rv <= 10; ++rv) {
    reg.add(rv, tagged(tree, rv));
    churn(tree, 40, rv);
  }
  const std::size_t all = reg.pinned_bytes();
  EXPECT_GT(all, 0u);
  EXPECT_EQ(all, tree.domain()->retired_bytes());

  EXPECT_EQ(reg.prune_below(1), 0u);
  EXPECT_EQ(reg.prune_below(4), 3u);
  EXPECT_EQ(reg.oldest()->first, 4);
  EXPECT_EQ(reg.prune_below(4), 0u);
  const std::size_t after_three = reg.pinned_bytes();
  EXPECT_LT(after_three, all);
  EXPECT_EQ(reg.prune_below(10), 6u);
  const std::size_t newest_only = reg.pinned_bytes();
  EXPECT_LT(newest_only, after_three);
  EXPECT_GT(newest_only, 0u) << "writes after rv 10 are pinned by it";
  EXPECT_EQ(reg.resource_versions(), std::vector<std::int64_t>{10});
  EXPECT_EQ(reg.prune_below(1'000), 1u);
  EXPECT_EQ(reg.size(), 0u);
  EXPECT_EQ(reg.pinned_bytes(), 0u);
  EXPECT_EQ(tree.domain()->retired_bytes(), 0u);
  EXPECT_EQ(live_bytes(), static_cast<std::int64_t>(tree.nbytes()));
}

TEST_F(RegistryTest, BudgetEvictsOldestFirstAndNeverTheNewest) {
  Tree tree;
  fill(tree, 1000);
  // Measure what one round of churn pins, then allow about three rounds.
  std::size_t per_round = 0;
  {
    Snapshot probe = tree.snapshot();
    churn(tree, 40, 1);
    per_round = tree.domain()->retired_bytes();
  }
  ASSERT_GT(per_round, 0u);
  const std::size_t budget = 3 * per_round;
  SnapshotRegistry reg(budget);
  EXPECT_EQ(reg.budget_bytes(), budget);
  for (std::int64_t rv = 1; rv <= 30; ++rv) {
    reg.add(rv, tagged(tree, rv));
    const auto rvs = reg.resource_versions();
    ASSERT_FALSE(rvs.empty());
    EXPECT_EQ(rvs.back(), rv) << "the newest is never evicted";
    for (std::size_t i = 1; i < rvs.size(); ++i) EXPECT_EQ(rvs[i], rvs[i - 1] + 1) << "eviction takes the oldest";
    EXPECT_TRUE(reg.pinned_bytes() <= budget || reg.size() == 1u);
    EXPECT_EQ(reg.evicted(), static_cast<std::size_t>(rv) - reg.size());
    churn(tree, 40, rv + 1);
  }
  EXPECT_GT(reg.evicted(), 0u);
  EXPECT_LT(reg.size(), 30u);
  EXPECT_GT(reg.size(), 1u);

  // A budget no snapshot fits: everything but the newest goes.
  const std::size_t before = reg.evicted(), stored = reg.size();
  reg.set_budget_bytes(1);
  EXPECT_EQ(reg.size(), 1u);
  EXPECT_EQ(reg.latest()->first, 30);
  EXPECT_EQ(reg.evicted(), before + stored - 1);
  EXPECT_GT(reg.pinned_bytes(), 1u) << "the newest stays even over budget";

  // No budget: nothing is evicted.
  reg.set_budget_bytes(0);
  for (std::int64_t rv = 31; rv <= 40; ++rv) {
    reg.add(rv, tagged(tree, rv));
    churn(tree, 40, rv + 1);
  }
  EXPECT_EQ(reg.size(), 11u);
}

TEST_F(RegistryTest, UsageSplitsEachSnapshotIntoExclusiveAndShared) {
  Tree tree;
  fill(tree, 1000);
  SnapshotRegistry reg;
  for (std::int64_t rv = 1; rv <= 6; ++rv) {
    reg.add(rv, tagged(tree, rv));
    churn(tree, 30, rv + 1);
  }
  const auto usage = reg.usage();
  ASSERT_EQ(usage.size(), 6u);
  std::size_t exclusive = 0;
  for (const auto& u : usage) {
    const auto snap = reg.get(u.resource_version);
    ASSERT_TRUE(snap.has_value());
    EXPECT_EQ(u.exclusive_bytes + u.shared_bytes, snap->nbytes()) << "rv " << u.resource_version;
    EXPECT_GT(u.exclusive_bytes, 0u) << "each rv's churn replaced items only it still sees";
    exclusive += u.exclusive_bytes;
  }
  EXPECT_LE(exclusive, reg.pinned_bytes());

  // Dropping the oldest frees exactly its exclusive bytes.
  const std::size_t pinned = reg.pinned_bytes();
  reg.prune_below(2);
  EXPECT_EQ(pinned - reg.pinned_bytes(), usage[0].exclusive_bytes);
}

TEST_F(RegistryTest, PinnedBytesSumOverTheDomainsOfSeveralTrees) {
  Tree a, b;
  fill(a, 300);
  fill(b, 500);
  SnapshotRegistry reg;
  for (std::int64_t rv = 1; rv <= 8; ++rv) {
    Tree& t = rv % 2 ? a : b;
    reg.add(rv, t.snapshot());
    churn(t, 20, rv + 1);
  }
  EXPECT_EQ(reg.pinned_bytes(), a.domain()->retired_bytes() + b.domain()->retired_bytes());
  EXPECT_GT(a.domain()->retired_bytes(), 0u);
  EXPECT_GT(b.domain()->retired_bytes(), 0u);
  for (const auto& u : reg.usage()) {
    const auto stored = reg.get(u.resource_version);
    ASSERT_TRUE(stored.has_value());
    EXPECT_EQ(u.exclusive_bytes + u.shared_bytes, stored->nbytes());
  }
  reg.clear();
  EXPECT_EQ(a.domain()->retired_bytes() + b.domain()->retired_bytes(), 0u);
}

TEST_F(RegistryTest, RegistryOutlivesTheTree) {
  SnapshotRegistry reg;
  std::vector<std::size_t> sizes;
  {
    Tree tree;
    fill(tree, 400);
    for (std::int64_t rv = 1; rv <= 4; ++rv) {
      reg.add(rv, tagged(tree, rv));
      sizes.push_back(tree.size());
      churn(tree, 20, rv + 1);
    }
  }
  // The tree's nodes and items went to the domain: what the snapshots reach stays pinned.
  EXPECT_GE(reg.pinned_bytes(), reg.latest()->second.nbytes());
  EXPECT_EQ(static_cast<std::int64_t>(reg.pinned_bytes()), live_bytes());
  for (const std::int64_t rv : reg.resource_versions()) {
    const auto snap = reg.get(rv);
    EXPECT_EQ(tag(*snap), std::to_string(rv));
    EXPECT_EQ(snap->size(), sizes[static_cast<std::size_t>(rv - 1)]);
    EXPECT_EQ(scan(*snap, ScanOptions{}).items.size(), snap->size());
    EXPECT_NO_THROW(snap->view().check(detail::kForever));
  }
  reg.prune_below(4);
  EXPECT_EQ(static_cast<std::int64_t>(reg.latest()->second.nbytes()), live_bytes());
  reg.clear();
  EXPECT_EQ(live_bytes(), 0);
}

TEST_F(RegistryTest, AddAtTheNewestVersionReplacesItsSnapshot) {
  // Several keys written by one etcd transaction share a revision; the registry keeps the
  // state after the last of them and releases the intermediate one.
  Tree tree;
  SnapshotRegistry reg;
  reg.add(5, tagged(tree, 5));
  tree.put(make_item("other", "x", 5));
  Snapshot later = tree.snapshot();
  reg.add(5, later);
  EXPECT_EQ(reg.size(), 1u);
  ASSERT_TRUE(reg.get(5).has_value());
  EXPECT_NE(reg.get(5)->get("other"), nullptr);
  reg.add(6, tagged(tree, 6));
  EXPECT_EQ(reg.resource_versions(), (std::vector<std::int64_t>{5, 6}));
}

}  // namespace
}  // namespace watchcache
