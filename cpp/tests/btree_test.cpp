// Guards the copy-on-write B+tree (btree.hpp) against a std::map model, for fan-outs 4, 8,
// 16 and 32. Copy-on-write bugs hide in rebalancing, so the tests drive splits, borrows,
// merges, root growth and shrink, separator rewrites and bulk loads while many snapshots stay
// alive (and random ones are dropped); after every phase they check the structure
// (check_invariants / View::check), every snapshot against its frozen model through every
// read path, and the byte accounting. Also: clear(), assign_sorted(), scan() and prefix_end.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "btree_model.hpp"
#include "test_support.hpp"
#include "watchcache/btree.hpp"

namespace watchcache {
namespace {

using testing::chance;
using testing::make_item;
using testing::Model;
using testing::printable;
using testing::reachable_bytes;
using testing::seeded_rng;
using testing::snapshot_matches;
using testing::tree_matches;
using testing::uniform;

template <unsigned F>
struct Version {
  BasicSnapshot<F> snap;
  Model model;
};

template <class Tree>
class BTreeTest : public testing::LeakCheckedTest {
 protected:
  static constexpr unsigned kF = Tree::kFanout;

  // Every snapshot equals its model; the live tree equals `model`; snapshots report the bytes
  // they reach; every live byte belongs to the tree or to the retired list.
  void check_all(const Tree& tree, const Model& model, const std::vector<Version<kF>>& versions) {
    ASSERT_TRUE(tree_matches<kF>(tree, model, rng_, universe_));
    for (const auto& v : versions) {
      ASSERT_TRUE(snapshot_matches<kF>(v.snap, v.model, rng_, universe_)) << "snapshot version " << v.snap.version();
      ASSERT_EQ(v.snap.nbytes(), reachable_bytes<kF>(v.snap.view().root)) << "snapshot version " << v.snap.version();
    }
    ASSERT_EQ(tree.nbytes(), reachable_bytes<kF>(tree.view().root));
    ASSERT_EQ(live_bytes(), static_cast<std::int64_t>(tree.nbytes() + tree.domain()->retired_bytes()));
  }

  static void drop_random(std::vector<Version<kF>>& versions, std::mt19937_64& rng) {
    if (versions.empty()) return;
    versions.erase(versions.begin() + static_cast<std::ptrdiff_t>(uniform<std::size_t>(rng, 0, versions.size() - 1)));
  }

  // Puts or erases one key and checks the return value against the model.
  void random_op(Tree& tree, Model& model, unsigned put_percent, std::int64_t rev) {
    std::string key = universe_[uniform<std::size_t>(rng_, 0, universe_.size() - 1)];
    if (chance(rng_, put_percent)) {
      std::string value = chance(rng_, 5) ? std::string() : "v" + std::to_string(rev);
      const bool was_new = model.find(key) == model.end();
      ASSERT_EQ(tree.put(make_item(key, value, rev)), was_new) << "put " << printable(key);
      model[key] = {std::move(value), rev};
    } else {
      // Half the erases target a present key so the tree can shrink to empty.
      if (chance(rng_, 50) && !model.empty()) {
        auto it = model.lower_bound(key);
        key = it == model.end() ? model.begin()->first : it->first;
      }
      ASSERT_EQ(tree.erase(key), model.erase(key) == 1) << "erase " << printable(key);
    }
  }

  std::mt19937_64 rng_ = seeded_rng();
  std::vector<std::string> universe_ = testing::key_universe(rng_);
};

struct FanoutName {
  template <class T>
  static std::string GetName(int) {
    return "F" + std::to_string(T::kFanout);
  }
};
using Fanouts = ::testing::Types<BasicTree<4>, BasicTree<8>, BasicTree<16>, BasicTree<32>>;
TYPED_TEST_SUITE(BTreeTest, Fanouts, FanoutName);

TYPED_TEST(BTreeTest, RandomOperationsMatchModelWhileManySnapshotsLive) {
  constexpr unsigned F = TypeParam::kFanout;
  TypeParam tree;
  Model model;
  std::vector<Version<F>> versions;
  // Put percentages per phase: grow, churn, shrink almost to empty, regrow.
  const unsigned put_percent[] = {90, 90, 70, 50, 30, 10, 2, 2, 60, 95, 95, 50, 20, 5, 1, 80, 50, 95, 40, 3};
  std::int64_t rev = 0;
  std::size_t max_size = 0, min_size_after_peak = SIZE_MAX;
  std::vector<unsigned> phases;
  for (int pass = 0; pass < testing::test_scale(); ++pass)
    phases.insert(phases.end(), std::begin(put_percent), std::end(put_percent));
  for (const unsigned pct : phases) {
    for (int op = 0; op < 500; ++op) {
      ASSERT_NO_FATAL_FAILURE(this->random_op(tree, model, pct, ++rev));
      if (op % 37 == 0) {
        versions.push_back({tree.snapshot(), model});
        if (versions.size() > 14) this->drop_random(versions, this->rng_);
      }
      if (op % 89 == 0 && !versions.empty() && chance(this->rng_, 50)) {
        // A copy pins the same version twice; dropping either keeps the other valid.
        auto& v = versions[uniform<std::size_t>(this->rng_, 0, versions.size() - 1)];
        versions.push_back({v.snap, v.model});
      }
      if (op % 101 == 0 && chance(this->rng_, 30)) tree.collect();
    }
    max_size = std::max(max_size, model.size());
    if (max_size > 0) min_size_after_peak = std::min(min_size_after_peak, model.size());
    ASSERT_NO_FATAL_FAILURE(this->check_all(tree, model, versions));
  }
  EXPECT_GT(max_size, 400u);
  EXPECT_LT(min_size_after_peak, 2 * F) << "the tree never shrank to a single leaf";

  versions.clear();
  tree.collect();
  EXPECT_EQ(tree.domain()->retired_bytes(), 0u);
  EXPECT_EQ(this->live_bytes(), static_cast<std::int64_t>(tree.nbytes()));
}

// Inserts in random order shorten node prefixes (every key outside one does); splits must
// give them back, or a grown tree searches by reading items where a bulk-loaded one would
// not (btree_write.hpp, repack_halves).
TYPED_TEST(BTreeTest, RandomInsertsKeepEveryNodePrefixExact) {
  constexpr unsigned F = TypeParam::kFanout;
  const std::size_t n = F <= 8 ? 3000 : 4 * F * F;
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < n; ++i) {
    const std::string ns = std::to_string(uniform<unsigned>(this->rng_, 0, 40));
    const std::string pod = std::to_string(i);
    keys.push_back("/registry/pods/ns-" + std::string(5 - ns.size(), '0') + ns + "/pod-" +
                   std::string(7 - pod.size(), '0') + pod);
  }
  std::shuffle(keys.begin(), keys.end(), this->rng_);
  TypeParam tree;
  std::vector<BasicSnapshot<F>> kept;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    tree.put(make_item(keys[i], "v"));
    if (i % 97 == 0) kept.push_back(tree.snapshot());  // splits of copied nodes too
  }
  ASSERT_NO_THROW(tree.check_invariants());
  EXPECT_GE(tree.view().height, 3u);
  EXPECT_EQ(tree.view().loose_prefixes(), 0u);
  for (const auto& snap : kept) EXPECT_EQ(snap.view().loose_prefixes(), 0u) << "snapshot " << snap.version();
}

std::string sequential_key(std::size_t i, bool binary) {
  if (binary) return {static_cast<char>(i >> 8), static_cast<char>(i & 0xFF)};  // has NUL and 0xFF bytes
  std::string digits = std::to_string(i);
  return "/registry/pods/default/pod-" + std::string(6 - digits.size(), '0') + digits;
}

TYPED_TEST(BTreeTest, SequentialInsertsThenEraseEverythingInEveryOrder) {
  constexpr unsigned F = TypeParam::kFanout;
  const std::size_t n = F <= 8 ? 500 : 2 * F * F + 3;
  const std::size_t check_every = std::max<std::size_t>(1, n / 128);
  for (const bool binary : {false, true}) {
    for (const bool insert_ascending : {true, false}) {
      for (const bool erase_ascending : {true, false}) {
        SCOPED_TRACE(::testing::Message() << "binary=" << binary << " insert_ascending=" << insert_ascending
                                          << " erase_ascending=" << erase_ascending);
        TypeParam tree;
        Model model;
        std::vector<Version<F>> versions;
        unsigned max_height = 0;
        for (std::size_t step = 0; step < n; ++step) {
          const std::size_t i = insert_ascending ? step : n - 1 - step;
          const std::string key = sequential_key(i, binary);
          ASSERT_TRUE(tree.put(make_item(key, "v" + std::to_string(i), static_cast<std::int64_t>(step))));
          model[key] = {"v" + std::to_string(i), static_cast<std::int64_t>(step)};
          max_height = std::max(max_height, tree.view().height);
          if (step % check_every == 0) {
            ASSERT_NO_THROW(tree.check_invariants()) << "after inserting " << step;
          }
          if (step % 53 == 0) {
            versions.push_back({tree.snapshot(), model});
            if (versions.size() > 6) this->drop_random(versions, this->rng_);
          }
        }
        EXPECT_GE(max_height, 3u);
        ASSERT_NO_FATAL_FAILURE(this->check_all(tree, model, versions));

        unsigned last_height = tree.view().height;
        bool shrank = false;
        for (std::size_t step = 0; step < n; ++step) {
          const std::size_t i = erase_ascending ? step : n - 1 - step;
          const std::string key = sequential_key(i, binary);
          ASSERT_TRUE(tree.erase(key)) << printable(key);
          ASSERT_FALSE(tree.erase(key)) << printable(key);
          model.erase(key);
          shrank = shrank || tree.view().height < last_height;
          last_height = tree.view().height;
          if (step % check_every == 0) {
            ASSERT_NO_THROW(tree.check_invariants()) << "after erasing " << step;
          }
          if (step % 61 == 0) {
            versions.push_back({tree.snapshot(), model});
            if (versions.size() > 8) this->drop_random(versions, this->rng_);
          }
        }
        EXPECT_TRUE(shrank);
        EXPECT_TRUE(tree.empty());
        EXPECT_EQ(tree.view().root, nullptr);
        EXPECT_EQ(tree.view().height, 0u);
        EXPECT_EQ(tree.nbytes(), 0u);
        ASSERT_NO_FATAL_FAILURE(this->check_all(tree, model, versions));
        versions.clear();
        tree.collect();
        EXPECT_EQ(this->live_bytes(), 0);
      }
    }
  }
}

// Builds a tree of n keys from the universe (in random order) with the model.
template <class Tree>
void fill_random(Tree& tree, Model& model, std::vector<std::string> keys, std::size_t n, std::mt19937_64& rng) {
  std::shuffle(keys.begin(), keys.end(), rng);
  keys.resize(std::min(n, keys.size()));
  for (const auto& k : keys) {
    tree.put(make_item(k, "init", 1));
    model[k] = {"init", 1};
  }
}

TYPED_TEST(BTreeTest, EraseOfMinimumKeysUpdatesSeparators) {
  constexpr unsigned F = TypeParam::kFanout;
  TypeParam tree;
  Model model;
  fill_random(tree, model, this->universe_, F <= 8 ? 400 : 1100, this->rng_);
  ASSERT_GE(tree.view().height, 2u);
  std::vector<Version<F>> versions;
  versions.push_back({tree.snapshot(), model});
  for (std::size_t step = 0; !model.empty(); ++step) {
    const std::string key = model.begin()->first;
    ASSERT_TRUE(tree.erase(key));
    model.erase(model.begin());
    if (step % 3 == 0) {
      ASSERT_NO_THROW(tree.check_invariants()) << "after erasing the minimum " << printable(key);
    }
    if (step % 41 == 0) versions.push_back({tree.snapshot(), model});
  }
  ASSERT_NO_FATAL_FAILURE(this->check_all(tree, model, versions));
}

TYPED_TEST(BTreeTest, EraseOfSeparatorKeysKeepsTheTreeConsistent) {
  constexpr unsigned F = TypeParam::kFanout;
  TypeParam tree;
  Model model;
  fill_random(tree, model, this->universe_, F <= 8 ? 600 : 1100, this->rng_);
  std::vector<Version<F>> versions;
  for (std::size_t step = 0; !model.empty(); ++step) {
    std::vector<std::string> separators;
    testing::separator_keys<F>(tree.view().root, separators);
    const std::string key = separators.empty() ? model.begin()->first
                                               : separators[uniform<std::size_t>(this->rng_, 0, separators.size() - 1)];
    if (step % 7 == 0) versions.push_back({tree.snapshot(), model});
    if (versions.size() > 10) this->drop_random(versions, this->rng_);
    ASSERT_TRUE(tree.erase(key)) << printable(key);
    model.erase(key);
    ASSERT_NO_THROW(tree.check_invariants()) << "after erasing separator " << printable(key);
  }
  ASSERT_NO_FATAL_FAILURE(this->check_all(tree, model, versions));
}

TYPED_TEST(BTreeTest, ReplacingASeparatorItemRewritesThePath) {
  constexpr unsigned F = TypeParam::kFanout;
  TypeParam tree;
  Model model;
  fill_random(tree, model, this->universe_, F <= 8 ? 300 : 1100, this->rng_);
  ASSERT_GE(tree.view().height, 2u);
  for (std::int64_t round = 2; round < 200; ++round) {
    std::vector<std::string> separators;
    testing::separator_keys<F>(tree.view().root, separators);
    ASSERT_FALSE(separators.empty());
    const std::string key = separators[uniform<std::size_t>(this->rng_, 0, separators.size() - 1)];
    ItemRef old = ItemRef::share(tree.get(key));
    ASSERT_TRUE(old);
    const bool with_snapshot = chance(this->rng_, 50);
    std::optional<BasicSnapshot<F>> snap;
    if (with_snapshot) snap = tree.snapshot();

    const std::string value = "replaced-" + std::to_string(round);
    ASSERT_FALSE(tree.put(make_item(key, value, round)));
    model[key] = {value, round};
    ASSERT_NO_THROW(tree.check_invariants()) << "after replacing separator " << printable(key);
    const watchcache::Item* now = tree.get(key);
    ASSERT_NE(now, nullptr);
    ASSERT_NE(now, old.get());
    EXPECT_EQ(now->value(), value);
    if (with_snapshot) {
      // The snapshot keeps the old item (and the tree's reference to it) alive.
      EXPECT_EQ(snap->get(key), old.get());
      ASSERT_NO_THROW(snap->view().check(detail::kForever));
      EXPECT_EQ(old->refcount(), 2u);
      snap.reset();
    }
    EXPECT_EQ(old->refcount(), 1u) << "the replaced item was not released once no snapshot could see it";
  }
  ASSERT_NO_FATAL_FAILURE(this->check_all(tree, model, {}));
}

TYPED_TEST(BTreeTest, ExchangeReturnsTheReplacedItemEvenWhenItIsFreedAtOnce) {
  TypeParam tree;
  EXPECT_FALSE(tree.exchange(make_item("a", "1", 1)));
  const watchcache::Item* first = tree.get("a");
  // No snapshot pins the first item: the put retires and frees the tree's reference, so
  // only the returned one keeps it alive.
  ItemRef previous = tree.exchange(make_item("a", "2", 2));
  ASSERT_TRUE(previous);
  EXPECT_EQ(previous.get(), first);
  EXPECT_EQ(previous->value(), "1");
  EXPECT_EQ(previous->refcount(), 1u);
  {
    auto snap = tree.snapshot();
    ItemRef second = tree.exchange(make_item("a", "3", 3));
    EXPECT_EQ(second->value(), "2");
    EXPECT_EQ(second->refcount(), 2u);  // ours and the snapshot's
  }
  EXPECT_EQ(tree.get("a")->value(), "3");
  EXPECT_EQ(tree.size(), 1u);
  ASSERT_NO_THROW(tree.check_invariants());
}

TYPED_TEST(BTreeTest, PutOfNullItemIsRejected) {
  TypeParam tree;
  tree.put(make_item("a", "1"));
  EXPECT_THROW(tree.put(ItemRef()), std::invalid_argument);
  EXPECT_EQ(tree.size(), 1u);
  ASSERT_NO_THROW(tree.check_invariants());
}

// erase() and take() share one removal; on one tree with a snapshot alive: a missing key
// copies nothing, and take() hands back each present item itself while the snapshot
// still sees it.
TYPED_TEST(BTreeTest, EraseOfAbsentKeyCopiesNothingAndTakeHandsBackTheRemovedItem) {
  constexpr unsigned F = TypeParam::kFanout;
  TypeParam tree;
  Model model;
  fill_random(tree, model, this->universe_, 300, this->rng_);
  BasicSnapshot<F> snap = tree.snapshot();
  const auto bytes = this->live_bytes();
  EXPECT_FALSE(tree.erase("definitely-absent"));
  EXPECT_FALSE(tree.erase(std::string(1, '\0') + "absent"));
  EXPECT_FALSE(tree.take("definitely-absent"));
  EXPECT_EQ(this->live_bytes(), bytes);
  EXPECT_EQ(tree.view().root, snap.view().root);

  for (const auto& [key, value] : Model(model)) {
    const ItemRef removed = tree.take(key);
    ASSERT_TRUE(removed) << key;
    EXPECT_EQ(removed->key(), key);
    EXPECT_EQ(removed.get(), snap.get(key)) << "the same item, not a copy";
    EXPECT_FALSE(tree.get(key));
    EXPECT_FALSE(tree.take(key)) << "a second take finds nothing";
    model.erase(key);
    if (model.size() % 50 == 0) tree.check_invariants();
  }
  EXPECT_EQ(tree.size(), 0u);
  EXPECT_EQ(snap.size(), 300u);
}

TYPED_TEST(BTreeTest, AssignSortedRejectsUnsortedOrDuplicateKeysAndLeavesTheTreeUnchanged) {
  TypeParam tree;
  Model model;
  fill_random(tree, model, this->universe_, 150, this->rng_);
  const auto* root = tree.view().root;
  const std::int64_t items_before = this->live_items();

  auto refs = [](std::vector<std::string> keys) {
    std::vector<ItemRef> out;
    for (const auto& k : keys) out.push_back(make_item(k, "new"));
    return out;
  };
  EXPECT_THROW(tree.assign_sorted(refs({"a", "c", "b"})), std::invalid_argument);
  EXPECT_THROW(tree.assign_sorted(refs({"a", "b", "b", "c"})), std::invalid_argument);
  EXPECT_THROW(tree.assign_sorted(refs({"b", "a"})), std::invalid_argument);
  EXPECT_THROW(tree.assign_sorted(refs({std::string("a\0", 2), "a"})), std::invalid_argument);
  EXPECT_EQ(tree.view().root, root);
  EXPECT_EQ(this->live_items(), items_before) << "the rejected items must be released";
  ASSERT_NO_FATAL_FAILURE(this->check_all(tree, model, {}));

  tree.assign_sorted(refs({"a", std::string("a\0", 2), "b"}));
  Model expect{{"a", {"new", 1}}, {std::string("a\0", 2), {"new", 1}}, {"b", {"new", 1}}};
  ASSERT_NO_FATAL_FAILURE(this->check_all(tree, expect, {}));
}

TYPED_TEST(BTreeTest, AssignSortedPacksTreesOfEdgeSizes) {
  constexpr unsigned F = TypeParam::kFanout;
  std::vector<std::size_t> sizes = {0, 1, F - 1, F, F + 1, 2 * F, F * F - 1, F * F, F * F + 1};
  if (F <= 8) sizes.push_back(F * F * F + 1);
  std::vector<std::string> sorted = this->universe_;
  ASSERT_GE(sorted.size(), sizes.back());
  for (const std::size_t n : sizes) {
    SCOPED_TRACE(::testing::Message() << "n=" << n);
    TypeParam tree;
    Model old_model;
    fill_random(tree, old_model, this->universe_, 50, this->rng_);
    std::vector<Version<F>> versions;
    versions.push_back({tree.snapshot(), old_model});

    // Evenly spread keys across the universe so prefixes vary between leaves.
    std::vector<ItemRef> items;
    Model model;
    for (std::size_t i = 0; i < n; ++i) {
      const std::string& k = sorted[i * sorted.size() / std::max<std::size_t>(n, 1)];
      items.push_back(make_item(k, "packed", 7));
      model[k] = {"packed", 7};
    }
    ASSERT_EQ(model.size(), n);
    tree.assign_sorted(std::move(items));
    ASSERT_NO_FATAL_FAILURE(this->check_all(tree, model, versions));

    unsigned height = 0;
    if (n > 0) {
      height = 1;
      for (std::size_t cap = F; cap < n; cap *= F) ++height;
    }
    EXPECT_EQ(tree.view().height, height) << "packed tree is not of minimal height";
    EXPECT_EQ(testing::leaf_count<F>(tree.view().root), (n + F - 1) / F) << "leaves are not packed";

    // A packed tree is full: the first writes split at once.
    std::int64_t rev = 8;
    for (int op = 0; op < static_cast<int>(4 * F); ++op) {
      ASSERT_NO_FATAL_FAILURE(this->random_op(tree, model, 60, ++rev));
      ASSERT_NO_THROW(tree.check_invariants());
    }
    ASSERT_NO_FATAL_FAILURE(this->check_all(tree, model, versions));
  }
}

TYPED_TEST(BTreeTest, ReplacingValuesInAPackedTreeNeverSplits) {
  constexpr unsigned F = TypeParam::kFanout;
  TypeParam tree;
  std::vector<ItemRef> items;
  Model model;
  for (std::size_t i = 0; i < F * F; ++i) {
    const std::string k = sequential_key(i, false);
    items.push_back(make_item(k, "packed", 1));
    model[k] = {"packed", 1};
  }
  tree.assign_sorted(std::move(items));
  const auto leaves = testing::leaf_count<F>(tree.view().root);
  const auto height = tree.view().height;
  std::vector<Version<F>> versions;
  std::int64_t rev = 2;
  for (const auto& entry : Model(model)) {
    if (rev % 97 == 0) versions.push_back({tree.snapshot(), model});
    ASSERT_FALSE(tree.put(make_item(entry.first, "replaced", rev)));
    model[entry.first] = {"replaced", rev++};
  }
  EXPECT_EQ(testing::leaf_count<F>(tree.view().root), leaves);
  EXPECT_EQ(tree.view().height, height);
  ASSERT_NO_FATAL_FAILURE(this->check_all(tree, model, versions));
  // The first new key does split the full leaf it lands in.
  ASSERT_TRUE(tree.put(make_item(sequential_key(F * F / 2, false) + "x", "new", rev)));
  model[sequential_key(F * F / 2, false) + "x"] = {"new", rev};
  EXPECT_EQ(testing::leaf_count<F>(tree.view().root), leaves + 1);
  ASSERT_NO_FATAL_FAILURE(this->check_all(tree, model, versions));
}

TYPED_TEST(BTreeTest, ClearWithoutSnapshotsFreesEverythingAtOnce) {
  constexpr unsigned F = TypeParam::kFanout;
  TypeParam tree;
  Model model;
  fill_random(tree, model, this->universe_, 700, this->rng_);
  {
    BasicSnapshot<F> gone = tree.snapshot();  // taken and dropped before the clear
  }
  tree.put(make_item("after-snapshot", "x"));
  tree.clear();
  EXPECT_TRUE(tree.empty());
  EXPECT_EQ(tree.nbytes(), 0u);
  EXPECT_EQ(tree.view().root, nullptr);
  EXPECT_EQ(this->live_bytes(), 0);
  EXPECT_EQ(this->live_items(), 0);
  EXPECT_EQ(this->live_nodes(), 0);
  EXPECT_EQ(tree.domain()->retired_count(), 0u);

  model.clear();
  std::int64_t rev = 1;
  for (int op = 0; op < 300; ++op) ASSERT_NO_FATAL_FAILURE(this->random_op(tree, model, 80, ++rev));
  ASSERT_NO_FATAL_FAILURE(this->check_all(tree, model, {}));
}

TYPED_TEST(BTreeTest, ClearWithLiveSnapshotsKeepsThemReadable) {
  constexpr unsigned F = TypeParam::kFanout;
  TypeParam tree;
  Model model;
  fill_random(tree, model, this->universe_, 700, this->rng_);
  std::vector<Version<F>> versions;
  versions.push_back({tree.snapshot(), model});
  std::int64_t rev = 1;
  for (int op = 0; op < 200; ++op) ASSERT_NO_FATAL_FAILURE(this->random_op(tree, model, 50, ++rev));
  versions.push_back({tree.snapshot(), model});
  for (int op = 0; op < 20; ++op) ASSERT_NO_FATAL_FAILURE(this->random_op(tree, model, 50, ++rev));

  tree.clear();
  model.clear();
  EXPECT_TRUE(tree.empty());
  EXPECT_EQ(tree.nbytes(), 0u);
  ASSERT_NO_FATAL_FAILURE(this->check_all(tree, model, versions));

  for (int op = 0; op < 300; ++op) ASSERT_NO_FATAL_FAILURE(this->random_op(tree, model, 80, ++rev));
  versions.push_back({tree.snapshot(), model});
  for (int op = 0; op < 100; ++op) ASSERT_NO_FATAL_FAILURE(this->random_op(tree, model, 50, ++rev));
  ASSERT_NO_FATAL_FAILURE(this->check_all(tree, model, versions));

  versions.erase(versions.begin(), versions.begin() + 2);  // the pre-clear versions
  tree.collect();
  ASSERT_NO_FATAL_FAILURE(this->check_all(tree, model, versions));
  tree.clear();
  versions.clear();
  EXPECT_EQ(this->live_bytes(), 0);
}

// --- scan ---------------------------------------------------------------------------------

struct ScanExpect {
  std::vector<std::string> keys;
  std::optional<std::string> next_key;
  std::size_t remaining = 0;
  std::size_t scanned = 0;
};

// The model's reading of ScanOptions: the range is the keys starting with the prefix, from
// the start key (clamped up to the prefix) on.
template <class Pred>
ScanExpect model_scan(const Model& model, const ScanOptions& o, const Pred& pred) {
  ScanExpect out;
  auto in_range = [&o](const std::string& k) { return k.starts_with(o.prefix); };
  auto it = (o.start && *o.start >= o.prefix)
                ? (o.start_inclusive ? model.lower_bound(*o.start) : model.upper_bound(*o.start))
                : model.lower_bound(o.prefix);
  bool limited = false;
  for (; it != model.end() && in_range(it->first); ++it) {
    ++out.scanned;
    if (!pred(it->second)) continue;
    out.keys.push_back(it->first);
    if (o.limit && out.keys.size() == o.limit) {
      limited = true;
      ++it;
      break;
    }
  }
  if (limited && it != model.end() && in_range(it->first)) {
    out.next_key = out.keys.back() + '\0';
    for (; it != model.end() && in_range(it->first); ++it) ++out.remaining;
  }
  return out;
}

template <unsigned F>
::testing::AssertionResult scan_is(const BasicScanResult<F>& got, const ScanExpect& want, const Model& model) {
  std::vector<std::string> keys;
  for (const Item* it : got.items) keys.emplace_back(it->key());
  if (keys != want.keys) {
    auto f = ::testing::AssertionFailure() << "items differ: got";
    for (const auto& k : keys) f << ' ' << printable(k);
    f << "; want";
    for (const auto& k : want.keys) f << ' ' << printable(k);
    return f;
  }
  for (const Item* it : got.items) {
    const auto m = model.find(it->key());
    if (m == model.end()) return ::testing::AssertionFailure() << "scanned a key the model lacks";
    if (auto r = testing::item_is(it, m); !r) return r;
  }
  if (got.next_key != want.next_key)
    return ::testing::AssertionFailure() << "next_key " << (got.next_key ? printable(*got.next_key) : "none")
                                         << ", want " << (want.next_key ? printable(*want.next_key) : "none");
  if (got.remaining != want.remaining)
    return ::testing::AssertionFailure() << "remaining " << got.remaining << ", want " << want.remaining;
  if (got.scanned != want.scanned)
    return ::testing::AssertionFailure() << "scanned " << got.scanned << ", want " << want.scanned;
  return ::testing::AssertionSuccess();
}

TYPED_TEST(BTreeTest, ScanMatchesModelForRandomOptions) {
  constexpr unsigned F = TypeParam::kFanout;
  TypeParam tree;
  Model model;
  fill_random(tree, model, this->universe_, this->universe_.size() * 2 / 3, this->rng_);
  std::int64_t rev = 1;
  for (int op = 0; op < 400; ++op) ASSERT_NO_FATAL_FAILURE(this->random_op(tree, model, 60, ++rev));
  const BasicSnapshot<F> snap = tree.snapshot();
  const Model frozen = model;
  auto& rng = this->rng_;
  const auto& universe = this->universe_;

  const auto odd_item = [](const Item& it) { return it.mod_revision() % 3 != 0; };
  const auto odd_model = [](const testing::ModelValue& v) { return v.rev % 3 != 0; };
  const auto all_model = [](const testing::ModelValue&) { return true; };
  for (int round = 0; round < 1500 * testing::test_scale(); ++round) {
    std::string prefix;
    const unsigned p = uniform<unsigned>(rng, 0, 99);
    if (p < 10) {
      prefix.clear();
    } else if (p < 60) {
      const std::string& k = universe[uniform<std::size_t>(rng, 0, universe.size() - 1)];
      prefix = k.substr(0, uniform<std::size_t>(rng, 1, k.size()));
    } else if (p < 80) {
      prefix.assign(uniform<std::size_t>(rng, 1, 3), '\0');
      for (char& c : prefix) c = "\0\xff/pqx"[uniform<std::size_t>(rng, 0, 5)];
    } else {
      const char* fixed[] = {"\xff", "q\xff", "\xff\xff", "/registry/pods/", "p", "pppp", "\x7f"};
      prefix = fixed[uniform<std::size_t>(rng, 0, 6)];
    }
    std::string start_storage;
    ScanOptions opts;
    opts.prefix = prefix;
    const unsigned s = uniform<unsigned>(rng, 0, 99);
    if (s < 30) {
      opts.start = std::nullopt;
    } else {
      if (s < 70)
        start_storage = universe[uniform<std::size_t>(rng, 0, universe.size() - 1)];
      else if (s < 90)
        start_storage = prefix + testing::probe_key(rng, universe);
      else
        start_storage = testing::probe_key(rng, universe);
      opts.start = start_storage;
    }
    opts.start_inclusive = chance(rng, 50);
    opts.limit = chance(rng, 30) ? 0 : uniform<std::size_t>(rng, 1, 20);
    const bool filtered = chance(rng, 50);

    SCOPED_TRACE(::testing::Message() << "prefix=" << printable(prefix) << " start="
                                      << (opts.start ? printable(*opts.start) : "none")
                                      << " inclusive=" << opts.start_inclusive << " limit=" << opts.limit
                                      << " filtered=" << filtered);
    if (filtered)
      ASSERT_TRUE(scan_is<F>(scan(snap, opts, odd_item), model_scan(frozen, opts, odd_model), frozen));
    else
      ASSERT_TRUE(scan_is<F>(scan(snap, opts), model_scan(frozen, opts, all_model), frozen));
    if (round % 100 == 0) {
      ASSERT_NO_FATAL_FAILURE(this->random_op(tree, model, 50, ++rev));
    }
  }
}

TYPED_TEST(BTreeTest, ScanResultKeepsItsItemsAfterTheTreeIsGone) {
  constexpr unsigned F = TypeParam::kFanout;
  auto tree = std::make_unique<TypeParam>();
  Model model;
  fill_random(*tree, model, this->universe_, 400, this->rng_);
  BasicScanResult<F> result;
  {
    BasicSnapshot<F> snap = tree->snapshot();
    result = scan(snap, ScanOptions{});
  }
  std::int64_t rev = 1;
  for (int op = 0; op < 300; ++op) ASSERT_NO_FATAL_FAILURE(this->random_op(*tree, model, 10, ++rev));
  tree.reset();
  ASSERT_EQ(result.items.size(), 400u);
  for (std::size_t i = 1; i < result.items.size(); ++i)
    ASSERT_LT(result.items[i - 1]->key(), result.items[i]->key());
  for (const Item* it : result.items) EXPECT_EQ(it->value(), "init");
}

// Hand-written ranges on a small-fanout tree so each range spans several leaves.
class ScanTest : public testing::LeakCheckedTest {
 protected:
  void SetUp() override {
    LeakCheckedTest::SetUp();
    std::int64_t rev = 1;
    for (const char* k : {"a", "b/1", "b/2", "b/3", "b/4", "b/5", "b/6", "b0", "c"})
      tree_.put(make_item(k, std::string("value of ") + k, rev++));
  }
  void TearDown() override {
    snap_ = {};
    tree_.clear();
    LeakCheckedTest::TearDown();
  }
  static std::vector<std::string> keys(const BasicScanResult<4>& r) {
    std::vector<std::string> out;
    for (const Item* it : r.items) out.emplace_back(it->key());
    return out;
  }
  BasicScanResult<4> run(std::string_view prefix, std::optional<std::string_view> start = std::nullopt,
                         bool inclusive = true, std::size_t limit = 0) {
    if (snap_.view().root == nullptr) snap_ = tree_.snapshot();
    ScanOptions o;
    o.prefix = prefix;
    o.start = start;
    o.start_inclusive = inclusive;
    o.limit = limit;
    return scan(snap_, o);
  }

  BasicTree<4> tree_;
  BasicSnapshot<4> snap_;
  using Keys = std::vector<std::string>;
};

TEST_F(ScanTest, PrefixBoundsTheRange) {
  EXPECT_EQ(keys(run("b/")), (Keys{"b/1", "b/2", "b/3", "b/4", "b/5", "b/6"}));
  EXPECT_EQ(keys(run("b")), (Keys{"b/1", "b/2", "b/3", "b/4", "b/5", "b/6", "b0"}));
  EXPECT_EQ(keys(run("")).size(), 9u);
  EXPECT_EQ(keys(run("b/3")), (Keys{"b/3"}));
  EXPECT_TRUE(keys(run("d")).empty());
  EXPECT_TRUE(keys(run("b/7")).empty());
  const auto r = run("b/");
  EXPECT_FALSE(r.next_key.has_value());
  EXPECT_EQ(r.remaining, 0u);
  EXPECT_EQ(r.scanned, 6u);
}

TEST_F(ScanTest, StartIsInclusiveOrExclusive) {
  EXPECT_EQ(keys(run("b/", "b/3", true)), (Keys{"b/3", "b/4", "b/5", "b/6"}));
  EXPECT_EQ(keys(run("b/", "b/3", false)), (Keys{"b/4", "b/5", "b/6"}));
  // A start between keys behaves the same either way.
  EXPECT_EQ(keys(run("b/", "b/3x", true)), (Keys{"b/4", "b/5", "b/6"}));
  EXPECT_EQ(keys(run("b/", "b/3x", false)), (Keys{"b/4", "b/5", "b/6"}));
  // The continuation form: last key + NUL, inclusive.
  EXPECT_EQ(keys(run("b/", std::string_view("b/3\0", 4), true)), (Keys{"b/4", "b/5", "b/6"}));
}

TEST_F(ScanTest, StartBeforeThePrefixIsClampedAndAfterItIsEmpty) {
  EXPECT_EQ(keys(run("b/", "a", true)), (Keys{"b/1", "b/2", "b/3", "b/4", "b/5", "b/6"}));
  EXPECT_EQ(keys(run("b/", "a", false)), (Keys{"b/1", "b/2", "b/3", "b/4", "b/5", "b/6"}));
  // Start equal to the prefix, exclusive: the prefix key itself would be skipped.
  EXPECT_EQ(keys(run("b/1", "b/1", false)), Keys{});
  EXPECT_EQ(keys(run("b/1", "b/1", true)), (Keys{"b/1"}));
  const auto after = run("b/", "b0", true);
  EXPECT_TRUE(after.items.empty());
  EXPECT_FALSE(after.next_key.has_value());
  EXPECT_EQ(after.remaining, 0u);
  EXPECT_EQ(after.scanned, 0u);
  EXPECT_TRUE(run("b/", "zzz", true).items.empty());
}

TEST_F(ScanTest, LimitReportsNextKeyAndRemaining) {
  const auto page1 = run("b/", std::nullopt, true, 2);
  EXPECT_EQ(keys(page1), (Keys{"b/1", "b/2"}));
  ASSERT_TRUE(page1.next_key.has_value());
  EXPECT_EQ(*page1.next_key, std::string("b/2\0", 4));
  EXPECT_EQ(page1.remaining, 4u);
  EXPECT_EQ(page1.scanned, 2u);

  const auto page2 = run("b/", *page1.next_key, true, 2);
  EXPECT_EQ(keys(page2), (Keys{"b/3", "b/4"}));
  ASSERT_TRUE(page2.next_key.has_value());
  EXPECT_EQ(page2.remaining, 2u);

  // The last page: exactly the rest of the range, so nothing follows ("b0" is outside it).
  const auto page3 = run("b/", *page2.next_key, true, 2);
  EXPECT_EQ(keys(page3), (Keys{"b/5", "b/6"}));
  EXPECT_FALSE(page3.next_key.has_value());
  EXPECT_EQ(page3.remaining, 0u);

  const auto whole = run("b/", std::nullopt, true, 6);
  EXPECT_FALSE(whole.next_key.has_value());
  const auto larger = run("b/", std::nullopt, true, 100);
  EXPECT_EQ(keys(larger).size(), 6u);
  EXPECT_FALSE(larger.next_key.has_value());
  EXPECT_EQ(larger.remaining, 0u);
  // Without a prefix the range runs to the end of the tree.
  const auto open = run("", "b/6", true, 1);
  EXPECT_EQ(keys(open), (Keys{"b/6"}));
  EXPECT_EQ(open.next_key, std::optional<std::string>(std::string("b/6\0", 4)));
  EXPECT_EQ(open.remaining, 2u);
}

TEST_F(ScanTest, PredicateFiltersButRemainingIgnoresIt) {
  snap_ = tree_.snapshot();
  ScanOptions o;
  o.prefix = "b/";
  o.limit = 1;
  const auto even = [](const Item& it) { return (it.key().back() - '0') % 2 == 0; };
  const auto r = scan(snap_, o, even);
  EXPECT_EQ(keys(r), (Keys{"b/2"}));
  EXPECT_EQ(r.scanned, 2u);
  EXPECT_EQ(r.next_key, std::optional<std::string>(std::string("b/2\0", 4)));
  EXPECT_EQ(r.remaining, 4u) << "remaining counts b/3..b/6, selected or not";

  // Limit reached on the last even key: the odd b/5 follows, so there is a next page even
  // though it will select nothing.
  o.limit = 3;
  const auto r3 = scan(snap_, o, even);
  EXPECT_EQ(keys(r3), (Keys{"b/2", "b/4", "b/6"}));
  EXPECT_FALSE(r3.next_key.has_value());
  o.limit = 2;
  const auto r2 = scan(snap_, o, even);
  EXPECT_EQ(keys(r2), (Keys{"b/2", "b/4"}));
  EXPECT_EQ(r2.next_key, std::optional<std::string>(std::string("b/4\0", 4)));
  EXPECT_EQ(r2.remaining, 2u);

  const auto none = scan(snap_, o, [](const Item&) { return false; });
  EXPECT_TRUE(none.items.empty());
  EXPECT_FALSE(none.next_key.has_value());
  EXPECT_EQ(none.scanned, 6u);
}

TEST_F(ScanTest, EmptySnapshotScansNothing) {
  BasicTree<4> empty;
  const auto r = scan(empty.snapshot(), ScanOptions{"", std::nullopt, true, 5});
  EXPECT_TRUE(r.items.empty());
  EXPECT_FALSE(r.next_key.has_value());
  EXPECT_EQ(r.scanned, 0u);
}

TEST(PrefixEndTest, IncrementsTheLastByteBelow0xFF) {
  using detail::prefix_end;
  EXPECT_FALSE(prefix_end("").has_value());
  EXPECT_EQ(prefix_end("a"), std::optional<std::string>("b"));
  EXPECT_EQ(prefix_end("/registry/pods/"), std::optional<std::string>("/registry/pods0"));
  EXPECT_EQ(prefix_end("a\xfe"), std::optional<std::string>("a\xff"));
  EXPECT_EQ(prefix_end("a\xff"), std::optional<std::string>("b"));
  EXPECT_EQ(prefix_end("a\xff\xff\xff"), std::optional<std::string>("b"));
  EXPECT_FALSE(prefix_end("\xff").has_value());
  EXPECT_FALSE(prefix_end("\xff\xff").has_value());
  EXPECT_EQ(prefix_end(std::string_view("\0", 1)), std::optional<std::string>("\x01"));
  EXPECT_EQ(prefix_end(std::string_view("a\0\xff", 3)), std::optional<std::string>(std::string("a\x01", 2)));
}

// The inline key integers must order like the bytes they hold, at both widths, and survive
// the store/load round trip that shrinking a node's prefix makes.
template <unsigned W>
void expect_key_bits_order_like_bytes(std::mt19937_64& rng) {
  const std::string alphabet = std::string("\0\x01\x7f\x80\xfe\xff", 6) + "ab";
  auto random_key = [&] {
    std::string k(uniform<std::size_t>(rng, 0, 14), '\0');
    for (char& c : k) c = alphabet[uniform<std::size_t>(rng, 0, alphabet.size() - 1)];
    return k;
  };
  for (int i = 0; i < 5000; ++i) {
    const std::string a = random_key(), b = random_key();
    const std::size_t offset = uniform<std::size_t>(rng, 0, 3);
    const auto ba = detail::key_bits<W>(a, offset), bb = detail::key_bits<W>(b, offset);
    std::string pa = a.size() > offset ? a.substr(offset, W) : "", pb = b.size() > offset ? b.substr(offset, W) : "";
    pa.resize(W, '\0');
    pb.resize(W, '\0');
    ASSERT_EQ(ba < bb, pa < pb) << printable(a) << " vs " << printable(b) << " at " << offset;
    ASSERT_EQ(ba == bb, pa == pb) << printable(a) << " vs " << printable(b) << " at " << offset;
    unsigned char buf[W + 4] = {};
    detail::store_bits<W>(ba, buf);
    ASSERT_EQ(std::string(reinterpret_cast<const char*>(buf), W), pa);
    ASSERT_EQ(detail::load_bits<W>(buf), ba);
  }
}

TEST(KeyBitsTest, IntegersOrderLikeTheirBytesInInternalNodes) {
  std::mt19937_64 rng(7);
  expect_key_bits_order_like_bytes<detail::Inner<32>::kKeyBytes>(rng);
}

// A leaf's integer (7 tail bytes and the tail length up to 8) must order like the keys,
// be equal for equal keys, hold the whole key exactly when the tail has at most 7 bytes
// (then equal integers mean equal keys), and widen correctly when the prefix shrinks.
TEST(KeyBitsTest, LeafIntegersOrderLikeTheirKeysAndKnowWholeKeys) {
  using L = detail::Leaf<32>;
  std::mt19937_64 rng(11);
  const std::string alphabet = std::string("\0\x01\x7f\x80\xfe\xff", 6) + "ab";
  auto random_bytes = [&](std::size_t lo, std::size_t hi) {
    std::string k(uniform<std::size_t>(rng, lo, hi), '\0');
    for (char& c : k) c = alphabet[uniform<std::size_t>(rng, 0, alphabet.size() - 1)];
    return k;
  };
  for (int i = 0; i < 20000; ++i) {
    const std::string prefix = random_bytes(0, 6);
    const std::string a = prefix + random_bytes(0, 11), b = prefix + random_bytes(0, 11);
    const std::size_t off = prefix.size();
    const L::Bits ba = L::bits_of(a, off), bb = L::bits_of(b, off);
    const auto where = [&] { return printable(a) + " vs " + printable(b) + " at " + std::to_string(off); };
    if (ba < bb) {
      ASSERT_LT(a, b) << where();
    }
    if (bb < ba) {
      ASSERT_LT(b, a) << where();
    }
    if (a == b) {
      ASSERT_EQ(ba, bb) << where();
    }
    if (ba == bb && L::whole(ba)) {
      ASSERT_EQ(a, b) << where();
    }
    ASSERT_EQ(L::whole(ba), a.size() - off <= detail::kLeafTailBytes) << where();
    const std::size_t gap = uniform<std::size_t>(rng, 0, off);
    ASSERT_EQ(L::widened(ba, a.data() + off - gap, gap), L::bits_of(a, off - gap)) << where() << " gap " << gap;
  }
}

TEST(ItemAgeTest, CopyingALeafAgesItsSlotsAndSaturatesToUnknown) {
  constexpr std::uint32_t unknown = detail::kAgeUnknown;
  const std::uint32_t src[] = {0, 5, unknown - 3, unknown - 2, unknown};
  std::uint32_t dst[5];
  detail::age_slots(dst, src, 5, 2);
  EXPECT_EQ(std::vector<std::uint32_t>(dst, dst + 5), (std::vector<std::uint32_t>{2, 7, unknown - 1, unknown, unknown}));
  detail::age_slots(dst, src, 5, std::uint64_t{1} << 33);  // older than 32 bits can say
  EXPECT_EQ(std::vector<std::uint32_t>(dst, dst + 5), std::vector<std::uint32_t>(5, unknown));

  detail::Leaf<4> leaf(100);
  leaf.age[0] = 0;
  leaf.age[1] = 40;
  leaf.age[2] = unknown;
  EXPECT_EQ(leaf.item_birth(0), 100u);
  EXPECT_EQ(leaf.item_birth(1), 60u);
  EXPECT_EQ(leaf.item_birth(2), 0u) << "an unknown age reads as the oldest birth: kept longer, never freed early";
}

TEST(ScanPrefixTest, PrefixesEndingIn0xFFCoverTheirWholeRange) {
  BasicTree<4> tree;
  for (const std::string_view k : {std::string_view("a\xfe"), std::string_view("a\xff"), std::string_view("a\xff\x00", 3),
                                   std::string_view("a\xff\xff"), std::string_view("b"), std::string_view("\xff"),
                                   std::string_view("\xff\x00", 2), std::string_view("\xff\xff\xff")})
    tree.put(make_item(k, "v"));
  const auto snap = tree.snapshot();
  auto count = [&snap](std::string_view prefix) { return scan(snap, ScanOptions{prefix, std::nullopt, true, 0}).items.size(); };
  EXPECT_EQ(count("a\xff"), 3u);
  EXPECT_EQ(count("a"), 4u);
  EXPECT_EQ(count("\xff"), 3u) << "an all-0xFF prefix has no end: the range runs to the last key";
  EXPECT_EQ(count("\xff\xff"), 1u);
  const auto page = scan(snap, ScanOptions{"\xff", std::nullopt, true, 1});
  EXPECT_EQ(page.next_key, std::optional<std::string>(std::string("\xff\0", 2)));
  EXPECT_EQ(page.remaining, 2u);
}

// --- cursors ------------------------------------------------------------------------------

TEST(CursorTest, EmptySnapshotHasNoPositions) {
  const auto start = testing::Counters::now();
  {
    BasicTree<4> tree;
    BasicCursor<4> c(tree.snapshot());
    EXPECT_FALSE(c.seek_first());
    EXPECT_FALSE(c.seek_last());
    EXPECT_FALSE(c.seek("a"));
    EXPECT_FALSE(c.seek_after(""));
    EXPECT_FALSE(c.next());
    EXPECT_FALSE(c.prev());
    EXPECT_FALSE(c.valid());
    EXPECT_EQ(c.item(), nullptr);
  }
  EXPECT_EQ(testing::Counters::now(), start);
}

TEST(CursorTest, CursorKeepsItsSnapshotAliveAfterTheTreeIsGone) {
  const auto start = testing::Counters::now();
  {
    std::optional<BasicCursor<4>> cursor;
    {
      BasicTree<4> tree;
      for (int i = 0; i < 100; ++i) tree.put(make_item(sequential_key(static_cast<std::size_t>(i), false), "v"));
      cursor.emplace(tree.snapshot());
      for (int i = 0; i < 100; i += 2) tree.erase(sequential_key(static_cast<std::size_t>(i), false));
    }
    std::size_t n = 0;
    for (bool ok = cursor->seek_first(); ok; ok = cursor->next()) {
      EXPECT_EQ(cursor->item()->key(), sequential_key(n, false));
      ++n;
    }
    EXPECT_EQ(n, 100u);
    EXPECT_FALSE(cursor->valid());
    EXPECT_EQ(cursor->item(), nullptr);
    ASSERT_TRUE(cursor->seek_last());
    EXPECT_FALSE(cursor->next());
    EXPECT_TRUE(cursor->seek(sequential_key(50, false)));
    EXPECT_TRUE(cursor->prev());
    EXPECT_EQ(cursor->item()->key(), sequential_key(49, false));
    ASSERT_NO_THROW(cursor->snapshot().view().check(detail::kForever));
  }
  EXPECT_EQ(testing::Counters::now(), start);
}

}  // namespace
}  // namespace watchcache
