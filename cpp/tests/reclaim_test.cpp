// Guards version-interval reclamation (reclaim.hpp) and its use by the tree: garbage is
// freed as soon as no live snapshot's version lies in an object's [birth, death) interval —
// at once for objects no snapshot saw, on unpin of the oldest snapshot for the prefix, and
// by collect() for "holes" behind an old pin; snapshots outlive their tree; the exclusive
// byte table equals what dropping a snapshot frees. Every test ends with the engine's live
// counters back at their starting values (fixture TearDown).
#include <array>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "btree_model.hpp"
#include "test_support.hpp"
#include "watchcache/btree.hpp"
#include "watchcache/reclaim.hpp"

namespace watchcache {
namespace {

using testing::chance;
using testing::make_item;
using testing::Model;
using testing::seeded_rng;
using testing::uniform;

using Tree8 = BasicTree<8>;
using Snap8 = BasicSnapshot<8>;

std::string key_of(std::size_t i) {
  std::string digits = std::to_string(i);
  return "/registry/configmaps/ns/cm-" + std::string(8 - digits.size(), '0') + digits;
}

void fill(Tree8& tree, Model& model, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    tree.put(make_item(key_of(i), "initial value " + std::to_string(i), 1));
    model[key_of(i)] = {"initial value " + std::to_string(i), 1};
  }
}

// Every node and item reachable from a root, with its bytes.
template <unsigned F>
void reachable_objects(const detail::Node<F>* nd, std::map<const void*, std::size_t>& out) {
  if (nd == nullptr) return;
  out.emplace(nd, detail::node_bytes(nd));
  for (unsigned i = 0; i < nd->n; ++i) {
    if (nd->leaf)
      out.emplace(nd->keys[i], nd->keys[i]->nbytes());
    else
      reachable_objects<F>(detail::as_inner(nd)->child[i], out);
  }
}

// Bytes of the objects reachable from `a` and from none of `others`.
template <unsigned F>
std::size_t bytes_only_in(const detail::Node<F>* a, std::initializer_list<const detail::Node<F>*> others) {
  std::map<const void*, std::size_t> in_a, in_others;
  reachable_objects<F>(a, in_a);
  for (const auto* o : others) reachable_objects<F>(o, in_others);
  std::size_t bytes = 0;
  for (const auto& [p, b] : in_a)
    if (!in_others.count(p)) bytes += b;
  return bytes;
}

class ReclaimTest : public testing::LeakCheckedTest {
 protected:
  std::mt19937_64 rng_ = seeded_rng();

  void replace_random(Tree8& tree, Model& model, std::size_t count, std::int64_t rev) {
    for (std::size_t i = 0; i < count; ++i) {
      const std::string k = key_of(uniform<std::size_t>(rng_, 0, model.size() - 1));
      const std::string v = "rev " + std::to_string(rev) + " " + std::to_string(i);
      tree.put(make_item(k, v, rev));
      model[k] = {v, rev};
    }
  }
};

TEST_F(ReclaimTest, SnapshotDroppedBetweenWritesLeavesNoRetiredGarbage) {
  Tree8 tree;
  Model model;
  fill(tree, model, 2000);
  for (std::int64_t round = 2; round < 200; ++round) {
    {
      const Model frozen = model;
      Snap8 snap = tree.snapshot();
      replace_random(tree, model, 5, round);
      if (chance(rng_, 30)) {
        const std::string k = key_of(uniform<std::size_t>(rng_, 0, 1999));
        tree.erase(k);
        model.erase(k);
      }
      EXPECT_GT(tree.domain()->retired_count(), 0u) << "the write after a snapshot copies a path";
      if (round % 20 == 0) {
        ASSERT_TRUE(testing::snapshot_matches<8>(snap, frozen, rng_, {}));
      }
    }
    // Dropping the only snapshot frees everything it pinned, without a collect().
    EXPECT_EQ(tree.domain()->retired_count(), 0u);
    EXPECT_EQ(tree.domain()->retired_bytes(), 0u);
    replace_random(tree, model, 3, round);  // copies nodes the dropped snapshot shared: freed at once
    EXPECT_EQ(tree.domain()->retired_count(), 0u);
    EXPECT_EQ(tree.collect(), 0u);
    ASSERT_EQ(live_bytes(), static_cast<std::int64_t>(tree.nbytes()));
  }
  ASSERT_NO_THROW(tree.check_invariants());
}

TEST_F(ReclaimTest, CollectFreesHolesBehindAnOldPinnedSnapshot) {
  Tree8 tree;
  Model model;
  fill(tree, model, 1500);
  const Model old_model = model;
  const Snap8 old = tree.snapshot();
  std::map<const void*, std::size_t> old_objects;
  reachable_objects<8>(old.view().root, old_objects);
  // The sweep runs when the retired list doubles, so without any collect() the list stays
  // below max(1024, 2 x what the old snapshot needs).
  const std::size_t count_bound = std::max<std::size_t>(1024, 2 * old_objects.size());

  std::int64_t rev = 2;
  std::size_t max_count = 0;
  for (int cycle = 0; cycle < 400; ++cycle, ++rev) {
    {
      Snap8 middle = tree.snapshot();
      replace_random(tree, model, 8, rev);
    }  // dropping a snapshot that is not the oldest leaves holes
    max_count = std::max(max_count, tree.domain()->retired_count());
    if (cycle % 100 == 99) {
      tree.collect();
      // What remains is exactly what the old snapshot reaches and the tree does not.
      EXPECT_EQ(tree.domain()->retired_bytes(), bytes_only_in<8>(old.view().root, {tree.view().root}));
      EXPECT_LE(tree.domain()->retired_bytes(), old.nbytes());
    }
  }
  EXPECT_LE(max_count, count_bound);

  // A hole of known content: keys born after `old`, pinned only by `middle`, replaced.
  for (std::size_t i = 0; i < 10; ++i) tree.put(make_item("fresh-" + std::to_string(i), "first", rev));
  tree.collect();
  std::vector<ItemRef> fresh;
  for (std::size_t i = 0; i < 10; ++i) fresh.push_back(ItemRef::share(tree.get("fresh-" + std::to_string(i))));
  std::optional<Snap8> middle = tree.snapshot();
  for (std::size_t i = 0; i < 10; ++i) tree.put(make_item("fresh-" + std::to_string(i), "second", rev + 1));
  const Snap8 newer = tree.snapshot();
  middle.reset();  // neither the oldest pin nor the newest
  for (const auto& f : fresh) EXPECT_EQ(f->refcount(), 2u) << "a hole is kept until collect()";
  const std::size_t before = tree.domain()->retired_bytes();
  const std::size_t freed = tree.collect();
  EXPECT_GT(freed, 0u);
  EXPECT_EQ(tree.domain()->retired_bytes(), before - freed);
  for (const auto& f : fresh) EXPECT_EQ(f->refcount(), 1u) << "collect() released the hole";
  EXPECT_EQ(tree.domain()->retired_bytes(), bytes_only_in<8>(old.view().root, {tree.view().root}));
  ASSERT_TRUE(testing::snapshot_matches<8>(old, old_model, rng_, {}));
}

TEST_F(ReclaimTest, ItemsBornAndReplacedInTheSameVersionAreFreedAtOnce) {
  Tree8 tree;
  Model model;
  fill(tree, model, 300);
  const Snap8 pinned = tree.snapshot();  // a live snapshot: retirement goes through the domain

  tree.put(make_item("x", "v1", 2));
  ItemRef v1 = ItemRef::share(tree.get("x"));
  EXPECT_EQ(v1->refcount(), 2u);
  const std::size_t retired = tree.domain()->retired_bytes();
  tree.put(make_item("x", "v2", 3));
  EXPECT_EQ(v1->refcount(), 1u) << "no snapshot saw v1: the tree released it at once";
  EXPECT_EQ(tree.domain()->retired_bytes(), retired) << "same-version writes copy and retire nothing";

  ItemRef v2 = ItemRef::share(tree.get("x"));
  ASSERT_TRUE(tree.erase("x"));
  EXPECT_EQ(v2->refcount(), 1u);
  EXPECT_EQ(tree.domain()->retired_bytes(), retired);

  // Contrast: an item a snapshot saw stays until the snapshot goes.
  tree.put(make_item("y", "v1", 4));
  ItemRef y1 = ItemRef::share(tree.get("y"));
  std::optional<Snap8> saw = tree.snapshot();
  tree.put(make_item("y", "v2", 5));
  EXPECT_EQ(y1->refcount(), 2u);
  EXPECT_EQ(saw->get("y"), y1.get());
  saw.reset();
  EXPECT_EQ(y1->refcount(), 1u) << "saw was the newest snapshot: what only it kept goes with it";
}

TEST_F(ReclaimTest, DroppingTheNewestSnapshotFreesItsWritesBehindAnOlderOne) {
  Tree8 tree;
  Model model;
  fill(tree, model, 1500);
  const Model old_model = model;
  const Snap8 old = tree.snapshot();
  for (std::int64_t rev = 2; rev < 300; ++rev) {
    {
      const Snap8 fresh = tree.snapshot();
      replace_random(tree, model, 2, rev);  // two paths: well inside kNewestScan entries
    }
    // Nothing waits for a sweep: what is retired is exactly what the old snapshot reaches.
    ASSERT_EQ(tree.domain()->retired_bytes(), bytes_only_in<8>(old.view().root, {tree.view().root})) << rev;
  }
  EXPECT_EQ(tree.collect(), 0u);
  ASSERT_TRUE(testing::snapshot_matches<8>(old, old_model, rng_, {}));
  ASSERT_NO_THROW(tree.check_invariants());
}

TEST_F(ReclaimTest, SnapshotsOutliveTheirTree) {
  auto tree = std::make_unique<Tree8>();
  Model model;
  fill(*tree, model, 800);
  struct Version {
    Snap8 snap;
    Model model;
  };
  std::vector<Version> versions;
  std::int64_t rev = 2;
  for (int round = 0; round < 12; ++round, ++rev) {
    versions.push_back({tree->snapshot(), model});
    for (int op = 0; op < 60; ++op) {
      const std::string k = key_of(uniform<std::size_t>(rng_, 0, 1200));
      if (chance(rng_, 70)) {
        tree->put(make_item(k, "r" + std::to_string(rev), rev));
        model[k] = {"r" + std::to_string(rev), rev};
      } else {
        tree->erase(k);
        model.erase(k);
      }
    }
  }
  const auto domain_use = versions.front().snap.domain().use_count();
  tree.reset();
  EXPECT_EQ(versions.front().snap.domain().use_count(), domain_use - 1) << "the domain outlives the tree";

  for (const auto& v : versions) {
    ASSERT_TRUE(testing::snapshot_matches<8>(v.snap, v.model, rng_, {}));
    const auto all = scan(v.snap, ScanOptions{});
    ASSERT_EQ(all.items.size(), v.model.size());
  }
  // Drop in random order; after a collect() the survivors keep exactly what they reach.
  std::shuffle(versions.begin(), versions.end(), rng_);
  while (versions.size() > 1) {
    versions.pop_back();
    versions.front().snap.domain()->collect();
    std::map<const void*, std::size_t> reachable;
    for (const auto& v : versions) reachable_objects<8>(v.snap.view().root, reachable);
    std::size_t bytes = 0;
    for (const auto& [p, b] : reachable) bytes += b;
    EXPECT_EQ(static_cast<std::size_t>(live_items() + live_nodes()), reachable.size());
    EXPECT_EQ(live_bytes(), static_cast<std::int64_t>(bytes));
    for (const auto& v : versions) ASSERT_TRUE(testing::snapshot_matches<8>(v.snap, v.model, rng_, {}));
  }
  EXPECT_EQ(live_bytes(), static_cast<std::int64_t>(versions.front().snap.nbytes()));
  versions.clear();
  // TearDown: every counter is back at its start once the last snapshot is gone.
}

TEST_F(ReclaimTest, ExclusiveBytesEqualWhatDroppingTheSnapshotFrees) {
  Tree8 tree;
  Model model;
  fill(tree, model, 1000);
  std::optional<Snap8> s1 = tree.snapshot();
  replace_random(tree, model, 20, 2);
  std::optional<Snap8> s2 = tree.snapshot();
  std::optional<Snap8> s3 = tree.snapshot();  // no writes between s2 and s3: they share everything
  replace_random(tree, model, 20, 3);
  std::optional<Snap8> s4 = tree.snapshot();  // nothing retired after s4 yet

  auto table = tree.domain()->exclusive_bytes();
  ASSERT_EQ(table.size(), 4u);
  EXPECT_EQ(table[0].first, s1->version());
  EXPECT_EQ(table[1].first, s2->version());
  EXPECT_EQ(table[2].first, s3->version());
  EXPECT_EQ(table[3].first, s4->version());
  EXPECT_GT(table[0].second, 0u);
  EXPECT_EQ(table[1].second, 0u);
  EXPECT_EQ(table[2].second, 0u);
  EXPECT_EQ(table[3].second, 0u);
  std::size_t sum = 0;
  for (const auto& e : table) sum += e.second;
  EXPECT_LE(sum, tree.domain()->retired_bytes());

  // s1 alone keeps the first round's replaced items and copied paths.
  const std::size_t before = tree.domain()->retired_bytes();
  const std::size_t s1_exclusive = table[0].second;
  EXPECT_EQ(s1_exclusive, bytes_only_in<8>(s1->view().root, {s2->view().root, tree.view().root}));
  s1.reset();
  tree.collect();
  EXPECT_EQ(before - tree.domain()->retired_bytes(), s1_exclusive);

  // After more writes the newest snapshot owns what they replaced.
  replace_random(tree, model, 20, 4);
  table = tree.domain()->exclusive_bytes();
  ASSERT_EQ(table.size(), 3u);
  EXPECT_EQ(table[2].first, s4->version());
  EXPECT_GT(table[2].second, 0u);
  EXPECT_EQ(table[2].second, bytes_only_in<8>(s4->view().root, {s3->view().root, tree.view().root}));
  // s2 and s3 (same contents) share everything they pin: neither has exclusive bytes.
  EXPECT_EQ(table[0].second, 0u);
  EXPECT_EQ(table[1].second, 0u);
  // Dropping s2 leaves s3 as the sole owner of the second round's garbage.
  s2.reset();
  table = tree.domain()->exclusive_bytes();
  ASSERT_EQ(table.size(), 2u);
  EXPECT_GT(table[0].second, 0u);
  EXPECT_EQ(table[0].second, bytes_only_in<8>(s3->view().root, {s4->view().root, tree.view().root}));
}

// --- ReclaimDomain on its own ---------------------------------------------------------------

// "Freed" counts a node leaving the retired set, whether deleted or parked for reuse: what
// the domain reports to the live accounting, which it settles by the end of each call.
int g_nodes_freed = 0;
void discard(void* p, std::size_t) noexcept { delete static_cast<int*>(p); }
void count(std::int64_t nodes, std::int64_t) noexcept { g_nodes_freed -= static_cast<int>(nodes); }
constexpr detail::NodeHooks kCountingHooks{&discard, &count};

class ReclaimDomainTest : public testing::LeakCheckedTest {
 protected:
  void SetUp() override {
    LeakCheckedTest::SetUp();
    g_nodes_freed = 0;
  }
  // An item whose lifetime we observe through a second reference.
  ItemRef probe(const char* key) {
    ItemRef r = make_item(key, "v");
    r.get()->retain();  // the domain's reference, released when it frees the item
    return r;
  }
};

TEST_F(ReclaimDomainTest, DesignNoteExample) {
  // versions 1..5, live snapshots {2, 5}: A [1,4) is pinned by 2; B [3,4) is freeable.
  detail::ReclaimDomain d(kCountingHooks);
  d.pin(2);
  d.pin(5);
  ItemRef a = probe("A"), b = probe("B");
  d.retire_item(a.get(), 1, 4);
  d.retire_item(b.get(), 3, 4);
  EXPECT_EQ(a->refcount(), 2u);
  EXPECT_EQ(b->refcount(), 1u) << "no live version in [3, 4): freed at retirement";
  EXPECT_EQ(d.retired_count(), 1u);
  EXPECT_EQ(d.oldest_pin(), 2u);
  d.unpin(2);
  EXPECT_EQ(a->refcount(), 1u) << "unpinning the oldest frees the prefix with death <= the new oldest";
  EXPECT_EQ(d.retired_count(), 0u);
  EXPECT_EQ(d.oldest_pin(), 5u);
  d.unpin(5);
  EXPECT_EQ(d.oldest_pin(), detail::kForever);
}

TEST_F(ReclaimDomainTest, UnpinFreesObjectsThatDiedAtTheNewOldestPin) {
  // A [1, 4) is seen by 2 only; once 2 goes the oldest pin is 4, and 4 is not in [1, 4).
  detail::ReclaimDomain d(kCountingHooks);
  d.pin(2);
  d.pin(4);
  ItemRef a = probe("A");
  d.retire_item(a.get(), 1, 4);
  d.retire_node(new int(4), 3, 5, 10);  // [3, 5) holds 4: stays
  d.unpin(2);
  EXPECT_EQ(a->refcount(), 1u);
  EXPECT_EQ(d.retired_count(), 1u);
  EXPECT_EQ(g_nodes_freed, 0);
  d.unpin(4);
  EXPECT_EQ(g_nodes_freed, 1);
}

TEST_F(ReclaimDomainTest, BatchRetirementFreesUnpinnedAndKeepsPinned) {
  detail::ReclaimDomain d(kCountingHooks);
  d.pin(3);
  ItemRef seen = probe("seen"), unseen = probe("unseen"), fresh = probe("fresh");
  std::vector<detail::ReclaimDomain::Retired> batch = {
      detail::ReclaimDomain::item(seen.get(), 2, 5),    // 3 in [2, 5)
      detail::ReclaimDomain::item(unseen.get(), 4, 5),  // no pin in [4, 5)
      detail::ReclaimDomain::item(fresh.get(), 5, 5),   // born and died in version 5
      detail::ReclaimDomain::node(new int(5), 1, 5, 32),
  };
  d.retire(batch);
  EXPECT_TRUE(batch.empty());
  EXPECT_EQ(seen->refcount(), 2u);
  EXPECT_EQ(unseen->refcount(), 1u);
  EXPECT_EQ(fresh->refcount(), 1u);
  EXPECT_EQ(d.retired_count(), 2u);
  EXPECT_EQ(d.retired_bytes(), seen->nbytes() + 32);
  d.unpin(3);
  EXPECT_EQ(seen->refcount(), 1u);
  EXPECT_EQ(g_nodes_freed, 1);
}

TEST_F(ReclaimDomainTest, BornAndDiedInOneVersionIsFreedAtOnce) {
  detail::ReclaimDomain d(kCountingHooks);
  d.pin(3);
  ItemRef x = probe("x");
  d.retire_item(x.get(), 4, 4);
  EXPECT_EQ(x->refcount(), 1u);
  d.retire_node(new int(1), 7, 7, 64);
  EXPECT_EQ(g_nodes_freed, 1);
  EXPECT_EQ(d.retired_count(), 0u);
  d.unpin(3);
}

TEST_F(ReclaimDomainTest, HoleBehindAnOldPinWaitsForCollect) {
  detail::ReclaimDomain d(kCountingHooks);
  d.pin(1);
  d.pin(3);
  d.pin(5);
  ItemRef x = probe("x");
  d.retire_item(x.get(), 2, 4);  // pinned by 3 only
  d.retire_node(new int(2), 1, 4, 100);  // pinned by 1 and 3
  d.unpin(3);  // neither the oldest nor the newest: x is now a hole
  EXPECT_EQ(x->refcount(), 2u);
  EXPECT_EQ(d.retired_bytes(), x->nbytes() + 100);
  const auto table = d.exclusive_bytes();
  ASSERT_EQ(table.size(), 2u);
  EXPECT_EQ(table[0], (std::pair<std::uint64_t, std::size_t>(1, 100)));
  EXPECT_EQ(table[1], (std::pair<std::uint64_t, std::size_t>(5, 0)));
  EXPECT_EQ(d.collect(), x->nbytes());
  EXPECT_EQ(x->refcount(), 1u);
  EXPECT_EQ(g_nodes_freed, 0);
  d.unpin(1);
  EXPECT_EQ(g_nodes_freed, 1);
  EXPECT_EQ(d.retired_bytes(), 0u);
  d.unpin(5);
}

TEST_F(ReclaimDomainTest, UnpinningTheNewestFreesWhatOnlyItKept) {
  detail::ReclaimDomain d(kCountingHooks);
  d.pin(1);
  d.pin(3);
  ItemRef before = probe("before"), x = probe("x"), y = probe("y");
  d.retire_item(before.get(), 0, 3);  // died before 3 was taken: 1 keeps it
  d.retire_item(x.get(), 2, 4);  // 3 only
  d.retire_node(new int(1), 1, 4, 100);  // 1 and 3
  d.retire_item(y.get(), 3, 5);  // 3 only
  d.unpin(3);
  EXPECT_EQ(x->refcount(), 1u);
  EXPECT_EQ(y->refcount(), 1u);
  EXPECT_EQ(before->refcount(), 2u);
  EXPECT_EQ(g_nodes_freed, 0);
  EXPECT_EQ(d.retired_count(), 2u);
  EXPECT_EQ(d.retired_bytes(), before->nbytes() + 100);
  // The survivors keep their order by death: unpinning 1 frees both as a prefix.
  d.unpin(1);
  EXPECT_EQ(before->refcount(), 1u);
  EXPECT_EQ(g_nodes_freed, 1);
  EXPECT_EQ(d.retired_count(), 0u);
}

TEST_F(ReclaimDomainTest, UnpinningTheNewestLooksAtABoundedTail) {
  detail::ReclaimDomain d(kCountingHooks);
  d.pin(1);
  d.pin(3);
  const std::size_t n = detail::ReclaimDomain::kNewestScan + 10;
  std::vector<ItemRef> items;
  for (std::size_t i = 0; i < n; ++i) {
    items.push_back(probe("k"));
    d.retire_item(items.back().get(), 2, 4);  // 3 only
  }
  d.unpin(3);
  for (std::size_t i = 0; i < n; ++i)
    EXPECT_EQ(items[i]->refcount(), i < 10 ? 2u : 1u) << "the newest kNewestScan go at once, the rest at a sweep";
  EXPECT_EQ(d.retired_count(), 10u);
  d.collect();
  EXPECT_EQ(d.retired_count(), 0u);
  for (const auto& it : items) EXPECT_EQ(it->refcount(), 1u);
  d.unpin(1);
}

TEST_F(ReclaimDomainTest, PinsCountAndMayArriveOutOfOrder) {
  detail::ReclaimDomain d(kCountingHooks);
  d.pin(5);
  d.pin(3);  // inserted before 5
  d.pin(3);
  d.pin(9);
  ItemRef x = probe("x");
  d.retire_item(x.get(), 2, 4);  // only 3 is in [2, 4)
  d.unpin(3);
  EXPECT_EQ(x->refcount(), 2u) << "3 is still pinned once";
  EXPECT_EQ(d.oldest_pin(), 3u);
  d.unpin(42);  // unknown version: ignored
  d.unpin(3);
  EXPECT_EQ(x->refcount(), 1u);
  EXPECT_EQ(d.oldest_pin(), 5u);
  d.pin(3);  // a version older than every other pin may come back (a copied snapshot)
  EXPECT_EQ(d.oldest_pin(), 3u);
  d.unpin(3);
  d.unpin(9);
  EXPECT_EQ(d.oldest_pin(), 5u);
  d.unpin(5);
  EXPECT_EQ(d.oldest_pin(), detail::kForever);
}

TEST_F(ReclaimDomainTest, ManyOutOfOrderUnpinsKeepTheOldestRight) {
  auto rng = seeded_rng();
  detail::ReclaimDomain d(kCountingHooks);
  std::multiset<std::uint64_t> live;
  for (std::uint64_t v = 1; v <= 400; ++v) {
    d.pin(v);
    live.insert(v);
    if (v % 3 == 0) {
      d.pin(v);
      live.insert(v);
    }
  }
  // Unpin in random order, re-pinning now and then (a copied snapshot), both below and above
  // the oldest live version; after everything is gone, pins start over at a higher version.
  std::uint64_t next = 401;
  for (int round = 0; round < 2; ++round) {
    while (!live.empty()) {
      auto it = live.begin();
      std::advance(it, static_cast<std::ptrdiff_t>(uniform<std::size_t>(rng, 0, live.size() - 1)));
      if (chance(rng, 10)) {
        d.pin(*it);
        live.insert(*it);
      }
      d.unpin(*it);
      live.erase(it);
      if (chance(rng, 5)) {
        d.pin(next);
        live.insert(next++);
      }
      ASSERT_EQ(d.oldest_pin(), live.empty() ? detail::kForever : *live.begin());
      ASSERT_EQ(d.exclusive_bytes().size(), std::set<std::uint64_t>(live.begin(), live.end()).size());
    }
    for (int i = 0; i < 100; ++i) {
      d.pin(next);
      live.insert(next++);
    }
  }
  while (!live.empty()) {
    d.unpin(*live.begin());
    live.erase(live.begin());
  }
  EXPECT_EQ(d.oldest_pin(), detail::kForever);
}

TEST_F(ReclaimDomainTest, FreedNodesAreParkedAndHandedBackBySize) {
  detail::ReclaimDomain d(kCountingHooks);
  d.pin(2);
  int* small = new int(1);
  int* large = new int(2);
  d.retire_node(small, 1, 3, 32);
  d.retire_node(large, 1, 3, 64);
  d.unpin(2);
  EXPECT_EQ(g_nodes_freed, 2) << "both left the retired set, parked";
  int* fresh = new int(3);
  std::array<detail::NodeStock, 1> stock{detail::NodeStock{64, {}}};
  std::vector<detail::ReclaimDomain::Retired> batch = {detail::ReclaimDomain::node(fresh, 4, 4, 64)};
  d.retire(batch, stock);  // born and died now: parked, then handed back with `large`
  EXPECT_EQ(stock[0].nodes, (std::vector<void*>{large, fresh})) << "the most recently parked on top";
  for (void* n : stock[0].nodes) discard(n, stock[0].bytes);
  // `small` stays parked; the destructor deletes it (the leak check would catch it otherwise).
}

TEST_F(ReclaimDomainTest, ParkingIsBounded) {
  detail::ReclaimDomain d(kCountingHooks);
  const int n = static_cast<int>(detail::ParkedNodes::kPerSize) + 10;
  d.pin(2);
  for (int i = 0; i < n; ++i) d.retire_node(new int(i), 1, 3, 16);
  const int before = g_nodes_freed;
  d.unpin(2);
  EXPECT_EQ(g_nodes_freed - before, n);
  std::array<detail::NodeStock, 1> stock{detail::NodeStock{16, {}}};
  std::size_t handed = 0;
  for (;;) {
    std::vector<detail::ReclaimDomain::Retired> none = {detail::ReclaimDomain::node(new int(0), 9, 9, 8)};
    d.retire(none, stock);
    if (stock[0].nodes.empty()) break;
    handed += stock[0].nodes.size();
    for (void* p : stock[0].nodes) discard(p, stock[0].bytes);
    stock[0].nodes.clear();
  }
  EXPECT_EQ(handed, detail::ParkedNodes::kPerSize) << "the rest were deleted, not parked";
}

TEST_F(ReclaimDomainTest, DestructorFreesWhatIsStillRetired) {
  ItemRef x = probe("x");
  {
    detail::ReclaimDomain d(kCountingHooks);
    d.pin(2);
    d.retire_item(x.get(), 1, 3);
    d.retire_node(new int(3), 1, 3, 10);
    EXPECT_EQ(x->refcount(), 2u);
  }
  EXPECT_EQ(x->refcount(), 1u);
  EXPECT_EQ(g_nodes_freed, 1);
}

}  // namespace
}  // namespace watchcache
