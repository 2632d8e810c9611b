// Guards the secondary indexes (secondary_index.hpp) against a std::map model, for fan-outs
// 4, 8 and 32 (index nodes of 8 to 43 entries): random puts that keep, change, add or drop
// an item's indexed values, erases, takes, clears and bulk loads, while many snapshots stay
// alive (and random ones are dropped). After every phase: the tree's and every snapshot's
// invariant check (index <-> tree agreement), indexed reads of every snapshot against the
// model and against a full scan with the same selector (items, order, next_key, remaining),
// exact counts, and the byte accounting. Also: declaration errors, an index added to a full
// tree, the registry's snapshots, the in-node order of values whose hashes tie, and readers
// on other threads while the writer goes on (the TSan run picks the "Concurren" test).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "btree_model.hpp"
#include "test_support.hpp"
#include "watchcache/btree.hpp"
#include "watchcache/registry.hpp"
#include "watchcache/secondary_index.hpp"
#include "watchcache/selector.hpp"

namespace watchcache {
namespace {

using testing::chance;
using testing::make_item;
using testing::printable;
using testing::reachable_bytes;
using testing::seeded_rng;
using testing::uniform;

const IndexSpec kNode{IndexSource::Field, "spec.nodeName"};
const IndexSpec kApp{IndexSource::Label, "app"};

// One object of the model: its indexed field and label, either of which may be absent.
struct Obj {
  std::optional<std::string> node;
  std::optional<std::string> app;
  std::int64_t rev = 0;
};
using ObjModel = std::map<std::string, Obj, std::less<>>;

ItemRef make_obj(const std::string& key, const Obj& o) {
  std::vector<StringPair> labels{{"tier", "backend"}};
  if (o.app) labels.emplace_back("app", *o.app);
  std::vector<StringPair> fields{{"metadata.name", key}};
  if (o.node) fields.emplace_back("spec.nodeName", *o.node);
  return make_item(key, "value-" + std::to_string(o.rev), o.rev, std::move(labels), std::move(fields));
}

// The keys of a scan's items, in order.
template <class Result>
std::vector<std::string> keys(const Result& r) {
  std::vector<std::string> out;
  for (const Item* it : r.items) out.emplace_back(it->key());
  return out;
}

// The object's value under `spec` as the index defines it: a missing field reads as "", a
// missing label is no value.
std::optional<std::string> value_of(const Obj& o, const IndexSpec& spec) {
  if (spec.source == IndexSource::Field) return o.node.value_or("");
  return o.app;
}

template <unsigned F>
std::size_t index_node_bytes(const detail::IndexNode* nd) {
  if (nd == nullptr) return 0;
  if (nd->leaf) return detail::IndexLeaf<F>::kBytes;
  std::size_t bytes = detail::IndexInner<F>::kBytes;
  for (unsigned i = 0; i < nd->n; ++i) bytes += index_node_bytes<F>(detail::as_index_inner<F>(nd)->child[i]);
  return bytes;
}

template <unsigned F>
std::size_t index_bytes(const BasicSnapshot<F>& snap) {
  const detail::IndexRoots* roots = snap.indexes().get();
  std::size_t bytes = 0;
  if (roots)
    for (std::size_t i = 0; i < roots->specs->size(); ++i) bytes += index_node_bytes<F>(roots->roots[i].node);
  return bytes;
}

template <unsigned F>
struct Version {
  BasicSnapshot<F> snap;
  ObjModel model;
};

// A query's expected page, from the model: keys in the range with one of the values, the
// first `limit`, and the continuation scan() gives for the range.
struct Expected {
  std::vector<std::string> keys;
  std::optional<std::string> next_key;
  std::size_t remaining = 0;
  std::size_t candidates = 0;  // every candidate in the range (count_index)
};

bool in_range(std::string_view k, const ScanOptions& o) {
  if (k.substr(0, o.prefix.size()) != o.prefix) return false;
  if (!o.start || *o.start < o.prefix) return true;
  return o.start_inclusive ? k >= *o.start : k > *o.start;
}

Expected expect(const ObjModel& model, const IndexSpec& spec, const std::vector<std::string>& values,
                const ScanOptions& o) {
  Expected e;
  std::size_t after_last = 0;
  bool full = false;
  for (const auto& [key, obj] : model) {
    if (!in_range(key, o)) continue;
    if (full) {
      ++after_last;
      continue;
    }
    const std::optional<std::string> v = value_of(obj, spec);
    if (!v || std::find(values.begin(), values.end(), *v) == values.end()) continue;
    e.keys.push_back(key);
    if (o.limit && e.keys.size() == o.limit) full = true;
  }
  for (const auto& [key, obj] : model) {
    const std::optional<std::string> v = value_of(obj, spec);
    if (in_range(key, o) && v && std::find(values.begin(), values.end(), *v) != values.end()) ++e.candidates;
  }
  if (full && after_last > 0) {
    e.next_key = e.keys.back() + '\0';
    e.remaining = after_last;
  }
  return e;
}

template <unsigned F>
::testing::AssertionResult page_is(const BasicScanResult<F>& got, const std::vector<std::string>& keys,
                                   const std::optional<std::string>& next_key, std::size_t remaining) {
  std::vector<std::string> got_keys;
  for (const Item* it : got.items) got_keys.emplace_back(it->key());
  if (got_keys != keys) {
    auto f = ::testing::AssertionFailure() << "keys differ: got";
    for (const auto& k : got_keys) f << " " << printable(k);
    f << "; want";
    for (const auto& k : keys) f << " " << printable(k);
    return f;
  }
  if (got.next_key != next_key)
    return ::testing::AssertionFailure() << "next_key " << (got.next_key ? printable(*got.next_key) : "none")
                                         << ", want " << (next_key ? printable(*next_key) : "none");
  if (got.remaining != remaining)
    return ::testing::AssertionFailure() << "remaining " << got.remaining << ", want " << remaining;
  return ::testing::AssertionSuccess();
}

template <class Tree>
class SecondaryIndexTest : public testing::LeakCheckedTest {
 protected:
  static constexpr unsigned kF = Tree::kFanout;

  SecondaryIndexTest() {
    for (int ns = 0; ns < 5; ++ns)
      for (int pod = 0; pod < 70; ++pod)
        keys_.push_back("/registry/pods/ns-" + std::to_string(ns) + "/pod-" + std::to_string(pod));
    std::sort(keys_.begin(), keys_.end());
  }

  std::optional<std::string> random_node() {
    if (chance(rng_, 8)) return std::nullopt;  // no such field: indexed under ""
    if (chance(rng_, 5)) return std::string();
    return "node-" + std::to_string(uniform<int>(rng_, 0, 9));
  }
  std::optional<std::string> random_app() {
    if (chance(rng_, 20)) return std::nullopt;  // no label: not in the label index
    return "app-" + std::to_string(uniform<int>(rng_, 0, 4));
  }

  // One write: a new key, an update that keeps, changes, adds or drops each indexed value,
  // or an erase (by erase or take).
  void random_op(Tree& tree, ObjModel& model, unsigned put_percent, std::int64_t rev) {
    std::string key = keys_[uniform<std::size_t>(rng_, 0, keys_.size() - 1)];
    // Half the erases target a present key, so that the erasing phases empty the tree.
    if (!chance(rng_, put_percent) && !model.empty() && chance(rng_, 50)) {
      auto at = model.lower_bound(key);
      key = at == model.end() ? model.begin()->first : at->first;
    }
    auto it = model.find(key);
    if (chance(rng_, put_percent)) {
      Obj o;
      o.rev = rev;
      if (it != model.end() && chance(rng_, 60)) {
        o.node = chance(rng_, 70) ? it->second.node : random_node();
        o.app = chance(rng_, 70) ? it->second.app : random_app();
      } else {
        o.node = random_node();
        o.app = random_app();
      }
      if (chance(rng_, 50)) {
        const ItemRef previous = tree.exchange(make_obj(key, o));
        ASSERT_EQ(static_cast<bool>(previous), it != model.end()) << "exchange " << key;
        if (previous) {
          ASSERT_EQ(previous->mod_revision(), it->second.rev);
        }
      } else {
        ASSERT_EQ(tree.put(make_obj(key, o)), it == model.end()) << "put " << key;
      }
      model[key] = o;
      return;
    }
    if (chance(rng_, 50)) {
      ASSERT_EQ(tree.erase(key), it != model.end()) << "erase " << key;
    } else {
      const ItemRef gone = tree.take(key);
      ASSERT_EQ(static_cast<bool>(gone), it != model.end()) << "take " << key;
    }
    model.erase(key);
  }

  ScanOptions random_options(std::string& prefix, std::string& start) {
    ScanOptions o;
    const int shape = uniform<int>(rng_, 0, 3);
    prefix = shape == 0 ? "" : shape == 1 ? "/registry/pods/ns-" + std::to_string(uniform<int>(rng_, 0, 5)) + "/"
                         : shape == 2   ? "/registry/pods/ns-2/pod-1"
                                        : "/registry/pods/";
    o.prefix = prefix;
    if (chance(rng_, 50)) {
      start = chance(rng_, 20) ? "/registry/a" : keys_[uniform<std::size_t>(rng_, 0, keys_.size() - 1)];
      if (chance(rng_, 30)) start.push_back('\0');
      o.start = start;
      o.start_inclusive = chance(rng_, 50);
    }
    o.limit = chance(rng_, 30) ? 0 : uniform<std::size_t>(rng_, 1, 40);
    return o;
  }

  std::vector<std::string> random_values(const IndexSpec& spec) {
    std::vector<std::string> values;
    const int n = uniform<int>(rng_, 1, 3);
    for (int i = 0; i < n; ++i) {
      if (spec.source == IndexSource::Field) {
        const std::optional<std::string> v = random_node();
        values.push_back(chance(rng_, 10) ? "node-none" : v.value_or(""));
      } else {
        values.push_back(random_app().value_or("app-none"));
      }
    }
    return values;
  }

  // Random indexed reads of one version against its model and against scan() with the same
  // condition as a predicate.
  void reads_match(const BasicSnapshot<kF>& snap, const ObjModel& model, int queries) {
    ASSERT_NO_THROW(check_indexes(snap));
    for (int q = 0; q < queries; ++q) {
      const IndexSpec& spec = chance(rng_, 50) ? kNode : kApp;
      const std::vector<std::string> values = random_values(spec);
      const std::vector<std::string_view> views(values.begin(), values.end());
      std::string prefix, start;
      const ScanOptions o = random_options(prefix, start);
      const Expected e = expect(model, spec, values, o);
      const auto got = scan_index(snap, spec, views, o);
      ASSERT_TRUE(page_is(got, e.keys, e.next_key, e.remaining)) << describe(spec) << " prefix " << printable(prefix);
      ASSERT_EQ(count_index(snap, spec, views, o), e.candidates);

      auto has_value = [&](const Item& it) {
        const std::optional<std::string_view> v = detail::indexed_value(it, spec);
        return v && std::find(values.begin(), values.end(), *v) != values.end();
      };
      // A selector on the candidates: the same page as a full scan with value and selector.
      const Selector sel({LabelRequirement{"app", LabelOp::NotIn, {"app-1"}, 0}},
                         {FieldRequirement{"metadata.name", true, keys_[0]}});
      const auto filtered = scan_index(snap, spec, views, o, sel);
      const auto full = scan(snap, o, [&](const Item& it) { return has_value(it) && sel(it); });
      std::vector<std::string> full_keys;
      for (const Item* it : full.items) full_keys.emplace_back(it->key());
      ASSERT_TRUE(page_is(filtered, full_keys, full.next_key, full.remaining)) << "with a selector";
      ASSERT_LE(filtered.items.size(), filtered.scanned);
    }
  }

  void check_all(const Tree& tree, const ObjModel& model, const std::vector<Version<kF>>& versions) {
    ASSERT_NO_THROW(tree.check_invariants());
    ASSERT_EQ(tree.size(), model.size());
    for (const auto& v : versions) {
      ASSERT_NO_FATAL_FAILURE(reads_match(v.snap, v.model, 12)) << "snapshot version " << v.snap.version();
      ASSERT_EQ(v.snap.nbytes(), reachable_bytes<kF>(v.snap.view().root) + index_bytes(v.snap));
    }
    Tree& live = const_cast<Tree&>(tree);
    const BasicSnapshot<kF> now = live.snapshot();
    ASSERT_NO_FATAL_FAILURE(reads_match(now, model, 12)) << "the live tree";
    ASSERT_EQ(tree.nbytes(), reachable_bytes<kF>(now.view().root) + index_bytes(now));
    ASSERT_EQ(live_bytes(), static_cast<std::int64_t>(tree.nbytes() + tree.domain()->retired_bytes()));
  }

  static void drop_random(std::vector<Version<kF>>& versions, std::mt19937_64& rng) {
    if (versions.empty()) return;
    versions.erase(versions.begin() + static_cast<std::ptrdiff_t>(uniform<std::size_t>(rng, 0, versions.size() - 1)));
  }

  std::vector<ItemRef> items_of(const ObjModel& model) {
    std::vector<ItemRef> items;
    for (const auto& [key, obj] : model) items.push_back(make_obj(key, obj));
    return items;
  }

  std::mt19937_64 rng_ = seeded_rng();
  std::vector<std::string> keys_;
};

struct FanoutName {
  template <class T>
  static std::string GetName(int) {
    return "F" + std::to_string(T::kFanout);
  }
};
using Fanouts = ::testing::Types<BasicTree<4>, BasicTree<8>, BasicTree<32>>;
TYPED_TEST_SUITE(SecondaryIndexTest, Fanouts, FanoutName);

TYPED_TEST(SecondaryIndexTest, RandomWritesMatchModelWhileManySnapshotsLive) {
  constexpr unsigned F = TypeParam::kFanout;
  TypeParam tree;
  tree.add_index(kNode);
  tree.add_index(kApp);
  // Small fan-outs fold their index changes every few writes, the default one seldom: both
  // a reader of long epochs and one of many folds are checked.
  if (F < 32) tree.set_index_epoch_capacity(static_cast<std::uint32_t>(uniform<std::size_t>(this->rng_, 16, 64)));
  ObjModel model;
  std::vector<Version<F>> versions;
  // Put percentages per phase: grow, churn, shrink almost to empty, regrow.
  const unsigned put_percent[] = {95, 90, 70, 50, 30, 10, 3, 60, 95, 95, 50, 5, 80};
  std::int64_t rev = 0;
  std::size_t max_size = 0, min_after_peak = SIZE_MAX;
  std::vector<unsigned> phases;
  for (int pass = 0; pass < testing::test_scale(); ++pass)
    phases.insert(phases.end(), std::begin(put_percent), std::end(put_percent));
  int phase_no = 0;
  for (const unsigned pct : phases) {
    for (int op = 0; op < 400; ++op) {
      ASSERT_NO_FATAL_FAILURE(this->random_op(tree, model, pct, ++rev));
      // A snapshot dropped at once still ends its version: the next writes meet nodes of
      // older versions (copied, not written in place), value-keeping updates included.
      if (chance(this->rng_, 40)) (void)tree.snapshot();
      if (op % 23 == 0) {
        versions.push_back({tree.snapshot(), model});
        if (versions.size() > 16) this->drop_random(versions, this->rng_);
      }
      if (op % 97 == 0 && chance(this->rng_, 30)) tree.collect();
    }
    max_size = std::max(max_size, model.size());
    if (max_size > 0) min_after_peak = std::min(min_after_peak, model.size());
    ASSERT_NO_FATAL_FAILURE(this->check_all(tree, model, versions)) << "phase " << phase_no;
    // Now and then a bulk load or a clear, with the older snapshots still alive.
    if (phase_no % 5 == 4) {
      tree.assign_sorted(this->items_of(model));
      ASSERT_NO_FATAL_FAILURE(this->check_all(tree, model, versions)) << "after assign_sorted";
    }
    if (phase_no == 6) {
      tree.clear();
      model.clear();
      ASSERT_NO_FATAL_FAILURE(this->check_all(tree, model, versions)) << "after clear";
    }
    ++phase_no;
  }
  EXPECT_GT(max_size, 250u);
  EXPECT_LT(min_after_peak, 40u);

  versions.clear();
  tree.collect();
  // What is left retired is what waits for the next fold.
  EXPECT_EQ(tree.domain()->retired_bytes(), tree.deferred_bytes());
  EXPECT_EQ(this->live_bytes(), static_cast<std::int64_t>(tree.nbytes() + tree.deferred_bytes()));
}

TYPED_TEST(SecondaryIndexTest, AValueChangeMovesTheItemAndOldSnapshotsKeepTheOldPlace) {
  TypeParam tree;
  tree.add_index(kNode);
  for (int i = 0; i < 200; ++i) {
    const std::string key = "/registry/pods/ns/pod-" + std::to_string(1000 + i);
    tree.put(make_obj(key, Obj{"node-" + std::to_string(i % 4), std::nullopt, i}));
  }
  const std::string moved = "/registry/pods/ns/pod-1005";  // on node-1
  const auto before = tree.snapshot();
  tree.put(make_obj(moved, Obj{"node-3", std::nullopt, 500}));
  const auto after = tree.snapshot();
  const std::vector<std::string_view> node1{"node-1"}, node3{"node-3"};
  const auto has = [&](const auto& r) {
    const auto k = keys(r);
    return std::find(k.begin(), k.end(), moved) != k.end();
  };
  EXPECT_TRUE(has(scan_index(before, kNode, node1, {})));
  EXPECT_FALSE(has(scan_index(before, kNode, node3, {})));
  EXPECT_FALSE(has(scan_index(after, kNode, node1, {})));
  EXPECT_TRUE(has(scan_index(after, kNode, node3, {})));
  EXPECT_EQ(count_index(before, kNode, node1, {}), 50u);
  EXPECT_EQ(count_index(after, kNode, node1, {}), 49u);
  EXPECT_EQ(count_index(after, kNode, node3, {}), 51u);
  const auto on3 = scan_index(after, kNode, node3, {});
  EXPECT_TRUE(std::is_sorted(on3.items.begin(), on3.items.end(),
                             [](const Item* a, const Item* b) { return a->key() < b->key(); }));
  // The same value again: the entry is repointed to the new item, in place.
  tree.put(make_obj(moved, Obj{"node-3", std::nullopt, 501}));
  const auto again = tree.snapshot();
  const auto r = scan_index(again, kNode, node3, {});
  const auto at = std::find_if(r.items.begin(), r.items.end(), [&](const Item* it) { return it->key() == moved; });
  ASSERT_NE(at, r.items.end());
  EXPECT_EQ((*at)->mod_revision(), 501);
  EXPECT_EQ(count_index(again, kNode, node3, {}), 51u);
  EXPECT_NO_THROW(check_indexes(before));
  EXPECT_NO_THROW(check_indexes(after));
  EXPECT_NO_THROW(tree.check_invariants());
}

TYPED_TEST(SecondaryIndexTest, ItemsWithoutTheFieldReadAsEmptyAndWithoutTheLabelAreNotIndexed) {
  TypeParam tree;
  tree.add_index(kNode);
  tree.add_index(kApp);
  tree.put(make_obj("/a", Obj{std::nullopt, std::nullopt, 1}));
  tree.put(make_obj("/b", Obj{"", "x", 2}));
  tree.put(make_obj("/c", Obj{"n1", std::string(), 3}));
  const auto snap = tree.snapshot();
  const std::vector<std::string_view> empty{""}, x{"x"};
  EXPECT_EQ(keys(scan_index(snap, kNode, empty, {})), (std::vector<std::string>{"/a", "/b"}));
  // A label present with the empty value is indexed under ""; an absent one nowhere.
  EXPECT_EQ(keys(scan_index(snap, kApp, empty, {})), (std::vector<std::string>{"/c"}));
  EXPECT_EQ(keys(scan_index(snap, kApp, x, {})), (std::vector<std::string>{"/b"}));
  const std::vector<std::string_view> both{"", "x"};
  EXPECT_EQ(count_index(snap, kApp, both, {}), 2u);
  // Dropping the label takes the item out of the label index; adding it back returns it.
  tree.put(make_obj("/b", Obj{"", std::nullopt, 4}));
  EXPECT_EQ(count_index(tree.snapshot(), kApp, both, {}), 1u);
  tree.put(make_obj("/a", Obj{std::nullopt, "x", 5}));
  const auto later = tree.snapshot();
  EXPECT_EQ(keys(scan_index(later, kApp, x, {})), (std::vector<std::string>{"/a"}));
  EXPECT_EQ(keys(scan_index(snap, kApp, x, {})), (std::vector<std::string>{"/b"}));
  EXPECT_NO_THROW(tree.check_invariants());
  EXPECT_NO_THROW(check_indexes(snap));
  EXPECT_NO_THROW(check_indexes(later));
}

TYPED_TEST(SecondaryIndexTest, EraseRemovesEntriesAndEmptiesTheIndexWhileSnapshotsKeepThem) {
  TypeParam tree;
  tree.add_index(kNode);
  std::vector<std::string> keys;
  for (int i = 0; i < 300; ++i) keys.push_back("/k/" + std::to_string(100000 + i));
  for (std::size_t i = 0; i < keys.size(); ++i) tree.put(make_obj(keys[i], Obj{"n" + std::to_string(i % 3), {}, 1}));
  const auto full = tree.snapshot();
  std::mt19937_64 order(7);
  std::shuffle(keys.begin(), keys.end(), order);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(tree.erase(keys[i]));
    if (i % 50 == 0) {
      ASSERT_NO_THROW(tree.check_invariants());
    }
  }
  EXPECT_EQ(tree.snapshot().indexes().get()->roots[0].node, nullptr);
  EXPECT_EQ(tree.snapshot().indexes().get()->roots[0].height, 0u);
  const std::vector<std::string_view> all{"n0", "n1", "n2"};
  EXPECT_EQ(count_index(full, kNode, all, {}), 300u);
  EXPECT_EQ(scan_index(full, kNode, all, {}).items.size(), 300u);
  EXPECT_EQ(count_index(tree.snapshot(), kNode, all, {}), 0u);
  EXPECT_NO_THROW(check_indexes(full));
}

TYPED_TEST(SecondaryIndexTest, AnIndexAddedToAFullTreeServesLaterSnapshotsOnly) {
  TypeParam tree;
  ObjModel model;
  for (int i = 0; i < 500; ++i) {
    const std::string key = "/registry/pods/ns-" + std::to_string(i % 7) + "/p" + std::to_string(i);
    model[key] = Obj{"node-" + std::to_string(i % 11), "app-" + std::to_string(i % 3), i};
    tree.put(make_obj(key, model[key]));
  }
  const auto unindexed = tree.snapshot();
  EXPECT_FALSE(static_cast<bool>(unindexed.indexes()));
  tree.add_index(kApp);
  EXPECT_EQ(tree.indexes(), std::vector<IndexSpec>{kApp});
  const auto indexed = tree.snapshot();
  EXPECT_NO_THROW(tree.check_invariants());
  ASSERT_NO_FATAL_FAILURE(this->reads_match(indexed, model, 0));
  const std::vector<std::string_view> app1{"app-1"};
  EXPECT_THROW(scan_index(unindexed, kApp, app1, {}), std::invalid_argument);
  EXPECT_THROW(count_index(indexed, kNode, app1, {}), std::invalid_argument);
  EXPECT_EQ(count_index(indexed, kApp, app1, {}), 167u);
  tree.add_index(kNode);
  const auto both = tree.snapshot();
  EXPECT_EQ(detail::specs_of(indexed.indexes()), std::vector<IndexSpec>{kApp}) << "a snapshot keeps the specs it was taken with";
  EXPECT_EQ(detail::specs_of(both.indexes()), (std::vector<IndexSpec>{kApp, kNode}));
  ASSERT_NO_FATAL_FAILURE(this->reads_match(both, model, 30));
}

TYPED_TEST(SecondaryIndexTest, DeclarationsAreValidated) {
  TypeParam tree;
  EXPECT_THROW(tree.add_index({IndexSource::Field, ""}), std::invalid_argument);
  EXPECT_TRUE(tree.indexes().empty());
  EXPECT_FALSE(static_cast<bool>(tree.snapshot().indexes())) << "a failed declaration adds nothing";
  tree.add_index(kNode);
  EXPECT_THROW(tree.add_index(kNode), std::invalid_argument);
  tree.add_index({IndexSource::Label, "spec.nodeName"});  // another source: another index
  for (std::size_t i = tree.indexes().size(); i < kMaxIndexes; ++i)
    tree.add_index({IndexSource::Label, "l" + std::to_string(i)});
  EXPECT_THROW(tree.add_index({IndexSource::Label, "one-too-many"}), std::length_error);
  EXPECT_EQ(tree.indexes().size(), kMaxIndexes);
  tree.put(make_obj("/x", Obj{"n", "a", 1}));
  EXPECT_NO_THROW(tree.check_invariants());
}

TYPED_TEST(SecondaryIndexTest, SnapshotsWithoutWritesInBetweenShareOneRootsRecord) {
  TypeParam tree;
  tree.add_index(kNode);
  tree.set_index_epoch_capacity(16);
  tree.put(make_obj("/a", Obj{"n", {}, 1}));
  const auto s1 = tree.snapshot();
  const auto s2 = tree.snapshot();
  EXPECT_EQ(s1.indexes().get(), s2.indexes().get());
  // Writes between folds change the epoch, not the index trees: the record stays, and each
  // snapshot reads the epoch's changes up to its own version.
  tree.put(make_obj("/b", Obj{"n", {}, 2}));
  const auto s3 = tree.snapshot();
  EXPECT_EQ(s3.indexes().get(), s2.indexes().get());
  EXPECT_EQ(count_index(s2, kNode, {"n"}, {}), 1u);
  EXPECT_EQ(count_index(s3, kNode, {"n"}, {}), 2u);
  // A fold writes new index trees: a new record.
  for (int i = 0; i < 40; ++i) tree.put(make_obj("/c" + std::to_string(i), Obj{"m", {}, 3 + i}));
  const auto s4 = tree.snapshot();
  EXPECT_NE(s4.indexes().get(), s3.indexes().get());
  EXPECT_EQ(count_index(s3, kNode, {"n"}, {}), 2u);
  EXPECT_EQ(count_index(s4, kNode, {"m"}, {}), 40u);
  EXPECT_NO_THROW(check_indexes(s3));
  EXPECT_NO_THROW(check_indexes(s4));
}

// A tree's indexes are not read by the scan path: without indexes a tree and its snapshots
// carry no roots record at all.
TYPED_TEST(SecondaryIndexTest, TreesWithoutIndexesCarryNoRoots) {
  TypeParam tree;
  tree.put(make_obj("/a", Obj{"n", {}, 1}));
  EXPECT_FALSE(static_cast<bool>(tree.snapshot().indexes()));
  EXPECT_TRUE(tree.indexes().empty());
  EXPECT_THROW(scan_index(tree.snapshot(), kNode, {"n"}, {}), std::invalid_argument);
}

// Two node names whose 32-bit value hashes are equal, found by a birthday search (about
// 80,000 names): their entries share one hash run, ordered by value.
std::pair<std::string, std::string> colliding_node_names() {
  std::unordered_map<detail::IndexHash, std::string> seen;
  for (int i = 0;; ++i) {
    std::string name = "node-" + std::to_string(i);
    const auto [at, fresh] = seen.emplace(detail::value_hash(name), name);
    if (!fresh) return {at->second, name};
  }
}

TYPED_TEST(SecondaryIndexTest, ValuesWhoseHashesCollideStayApart) {
  const auto [a, b] = colliding_node_names();
  ASSERT_NE(a, b);
  ASSERT_EQ(detail::value_hash(a), detail::value_hash(b));
  TypeParam tree;
  tree.add_index(kNode);
  ObjModel model;
  std::vector<BasicSnapshot<TypeParam::kFanout>> snaps;
  std::vector<ObjModel> models;
  const std::string names[] = {a, b, "other"};
  for (int op = 0; op < 3000; ++op) {
    const std::string& key = this->keys_[uniform<std::size_t>(this->rng_, 0, this->keys_.size() - 1)];
    if (chance(this->rng_, 85)) {
      const Obj o{names[uniform<int>(this->rng_, 0, 2)], std::nullopt, op};
      tree.put(make_obj(key, o));
      model[key] = o;
    } else {
      tree.erase(key);
      model.erase(key);
    }
    if (op % 150 == 0) {
      snaps.push_back(tree.snapshot());
      models.push_back(model);
    }
  }
  snaps.push_back(tree.snapshot());
  models.push_back(model);
  ASSERT_NO_THROW(tree.check_invariants());
  for (std::size_t v = 0; v < snaps.size(); ++v) {
    ASSERT_NO_THROW(check_indexes(snaps[v]));
    for (const std::vector<std::string>& values :
         {std::vector<std::string>{a}, std::vector<std::string>{b}, std::vector<std::string>{a, b},
          std::vector<std::string>{b, "other"}}) {
      const std::vector<std::string_view> views(values.begin(), values.end());
      ScanOptions o;
      o.limit = chance(this->rng_, 50) ? 0 : 7;
      const Expected e = expect(models[v], kNode, values, o);
      ASSERT_TRUE(page_is(scan_index(snaps[v], kNode, views, o), e.keys, e.next_key, e.remaining)) << values[0];
      ASSERT_EQ(count_index(snaps[v], kNode, views, o), e.candidates) << values[0];
    }
  }
}

using IndexRegistryTest = testing::LeakCheckedTest;

TEST_F(IndexRegistryTest, RegistrySnapshotsServeIndexedReadsAtTheirResourceVersion) {
  Tree tree;
  tree.add_index(kNode);
  SnapshotRegistry registry;
  std::map<std::int64_t, std::size_t> on_node_a;
  std::size_t count = 0;
  for (std::int64_t rv = 1; rv <= 200; ++rv) {
    const std::string key = "/registry/pods/ns/p" + std::to_string(rv % 60);
    const bool was_a = [&] {
      const Item* it = tree.get(key);
      return it && it->find_field("spec.nodeName") == std::optional<std::string_view>("a");
    }();
    const bool is_a = rv % 3 == 0;
    tree.put(make_obj(key, Obj{is_a ? "a" : "b", {}, rv}));
    count = count - (was_a ? 1 : 0) + (is_a ? 1 : 0);
    registry.add(rv, tree.snapshot());
    on_node_a[rv] = count;
    if (rv % 50 == 0) registry.prune_below(rv - 120);
  }
  for (const std::int64_t rv : registry.resource_versions()) {
    const auto snap = registry.get(rv);
    ASSERT_TRUE(snap.has_value());
    ASSERT_NO_THROW(check_indexes(*snap));
    EXPECT_EQ(count_index(*snap, kNode, {"a"}, {}), on_node_a[rv]) << "rv " << rv;
    ScanOptions page;
    page.limit = 3;
    std::size_t seen = 0;
    std::string next;
    for (;;) {
      const ScanResult r = scan_index(*snap, kNode, {"a"}, page);
      seen += r.items.size();
      if (!r.next_key) break;
      next = *r.next_key;
      page.start = next;
    }
    EXPECT_EQ(seen, on_node_a[rv]) << "pages at rv " << rv;
  }
}

TEST(IndexOrderTest, ValuesWhoseHashesTieAreOrderedByValueThenKey) {
  const IndexSpec spec{IndexSource::Label, "app"};
  const ItemRef a = make_item("/k2", "", 1, {{"app", "aa"}});
  const ItemRef b = make_item("/k1", "", 1, {{"app", "bb"}});
  constexpr std::uint64_t kTie = 42;
  // Same (forced) hash: "aa" sorts before "bb" whatever the keys.
  EXPECT_LT(detail::compare_entry(kTie, a.get(), detail::IndexProbe{kTie, "bb", "/k1", false}, spec), 0);
  EXPECT_GT(detail::compare_entry(kTie, b.get(), detail::IndexProbe{kTie, "aa", "/k2", false}, spec), 0);
  EXPECT_EQ(detail::compare_entry(kTie, b.get(), detail::IndexProbe{kTie, "bb", "/k1", false}, spec), 0);
  EXPECT_LT(detail::compare_entry(kTie, b.get(), detail::IndexProbe{kTie, "bb", "/k1", true}, spec), 0)
      << "past_run is after every key of the value";
  EXPECT_GT(detail::compare_entry(kTie, b.get(), detail::IndexProbe{kTie, "bb", "/k0", false}, spec), 0);
  EXPECT_LT(detail::compare_entry(kTie - 1, b.get(), detail::IndexProbe{kTie, "aa", "/k2", false}, spec), 0)
      << "the hash decides first";
}

// Readers on other threads scan the indexes of published snapshots while the writer puts,
// moves items between values, repoints them (the value kept), erases
// and publishes through the registry; each page must agree with a full scan of the same
// snapshot and with the exact count.
TEST(SecondaryIndexConcurrencyTest, ReadersScanIndexesWhileTheWriterMovesItems) {
  constexpr unsigned kF = 8;
  using CTree = BasicTree<kF>;
  using CSnap = BasicSnapshot<kF>;
  const auto duration = std::chrono::milliseconds(1500) * testing::test_scale();
  CTree tree;
  tree.add_index(kNode);
  tree.add_index(kApp);
  tree.set_index_epoch_capacity(64);  // folds while readers walk epochs and index trees
  BasicSnapshotRegistry<kF> registry;
  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> newest{0};
  std::atomic<std::size_t> pages{0};
  std::mutex failures_mu;
  std::vector<std::string> failures;

  auto reader = [&](int id) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(id) * 7919 + testing::base_seed());
    while (!stop.load()) {
      const std::int64_t top = newest.load();
      if (top == 0) continue;
      const auto entry = registry.floor(uniform<std::int64_t>(rng, 1, top));
      if (!entry) continue;
      const CSnap& snap = entry->second;
      const bool by_node = chance(rng, 50);
      const IndexSpec& spec = by_node ? kNode : kApp;
      const std::string value = by_node ? "node-" + std::to_string(uniform<int>(rng, 0, 5))
                                        : "app-" + std::to_string(uniform<int>(rng, 0, 2));
      const std::vector<std::string_view> values{value};
      ScanOptions o;
      o.limit = uniform<std::size_t>(rng, 0, 20);
      const auto got = scan_index(snap, spec, values, o);
      const auto want = scan(snap, o, [&](const Item& it) { return detail::indexed_value(it, spec) == value; });
      const std::size_t counted = count_index(snap, spec, values, {});
      const std::size_t all = scan(snap, {}, [&](const Item& it) { return detail::indexed_value(it, spec) == value; })
                                  .items.size();
      bool checked = true;
      if (chance(rng, 5)) {
        try {
          check_indexes(snap);
        } catch (const std::logic_error&) {
          checked = false;
        }
      }
      if (got.items != want.items || got.next_key != want.next_key || got.remaining != want.remaining ||
          counted != all || !checked) {
        std::lock_guard lock(failures_mu);
        failures.push_back("rv " + std::to_string(entry->first) + " " + describe(spec) + "=" + value);
      }
      pages.fetch_add(1);
    }
  };
  std::vector<std::thread> readers;
  for (int i = 0; i < 3; ++i) readers.emplace_back(reader, i);

  std::mt19937_64 rng = seeded_rng();
  const auto until = std::chrono::steady_clock::now() + duration;
  std::int64_t rv = 0;
  std::unordered_map<std::string, Obj> current;
  while (std::chrono::steady_clock::now() < until) {
    const int writes = uniform<int>(rng, 1, 20);
    for (int w = 0; w < writes; ++w) {
      const std::string key = "/registry/pods/ns-" + std::to_string(uniform<int>(rng, 0, 3)) + "/p" +
                              std::to_string(uniform<int>(rng, 0, 150));
      if (chance(rng, 15)) {
        tree.erase(key);
        current.erase(key);
        continue;
      }
      const auto was = current.find(key);
      Obj o;
      if (was != current.end() && chance(rng, 60)) {
        o = was->second;  // keeps both values: the entries are repointed
      } else {
        if (!chance(rng, 20)) o.app = "app-" + std::to_string(uniform<int>(rng, 0, 2));
        o.node = "node-" + std::to_string(uniform<int>(rng, 0, 5));
      }
      o.rev = rv;
      tree.put(make_obj(key, o));
      current[key] = o;
    }
    ++rv;
    registry.add(rv, tree.snapshot());
    registry.prune_below(rv - 50);
    newest.store(rv);
    if (rv % 64 == 0) tree.collect();
  }
  stop.store(true);
  for (auto& t : readers) t.join();
  EXPECT_TRUE(failures.empty()) << failures.size() << " pages disagreed, first: " << failures.front();
  EXPECT_GT(pages.load(), 0u);
  registry.clear();
  EXPECT_NO_THROW(tree.check_invariants());
}

// The writer's net effect of an epoch's changes, by pointer: what a fold applies, and what a
// reader's overlay is made of.
TEST(IndexNetTest, ChangesNetByPointer) {
  const ItemRef a = make_obj("/a", Obj{"n", {}, 1}), a2 = make_obj("/a", Obj{"n", {}, 2}),
                a3 = make_obj("/a", Obj{"n", {}, 3}), b = make_obj("/b", Obj{"n", {}, 4}),
                p = make_obj("/p", Obj{"n", {}, 5}), p2 = make_obj("/p", Obj{"n", {}, 6}),
                q = make_obj("/q", Obj{"n", {}, 7});
  const detail::IndexHash h = 42;
  detail::IndexNet net;
  auto added = [&net] {
    std::map<const Item*, const Item*> out;
    net.for_each_added([&](const detail::IndexNet::Added& x) { out[x.item] = x.origin; });
    return out;
  };
  // A tree entry renamed twice: one entry of the trees names the last item.
  EXPECT_EQ(net.apply(h, a.get(), a2.get()), a.get()) << "taken out of the trees: the caller keeps it";
  EXPECT_EQ(net.apply(h, a2.get(), a3.get()), nullptr) << "a2 was never in the trees";
  EXPECT_EQ(added(), (std::map<const Item*, const Item*>{{a3.get(), a.get()}}));
  // A tree entry removed: the trees lose it.
  EXPECT_EQ(net.apply(h, b.get(), nullptr), b.get());
  // An entry the epoch added, renamed, then removed: nothing reaches the trees.
  EXPECT_EQ(net.apply(h, nullptr, p.get()), nullptr);
  EXPECT_EQ(net.apply(h, p.get(), p2.get()), nullptr);
  EXPECT_EQ(net.apply(h, p2.get(), nullptr), nullptr);
  // An added entry stays added.
  EXPECT_EQ(net.apply(h, nullptr, q.get()), nullptr);
  EXPECT_EQ(added(), (std::map<const Item*, const Item*>{{a3.get(), a.get()}, {q.get(), nullptr}}));
  // The renamed tree entry removed at last: the trees lose a, not a3.
  EXPECT_EQ(net.apply(h, a3.get(), nullptr), nullptr);
  std::vector<const Item*> removed;
  for (const auto& r : net.removed()) removed.push_back(r.item);
  std::sort(removed.begin(), removed.end());
  std::vector<const Item*> want{a.get(), b.get()};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(removed, want);
  EXPECT_EQ(added(), (std::map<const Item*, const Item*>{{q.get(), nullptr}}));
  net.clear();
  EXPECT_TRUE(net.empty());
}

class IndexEpochTest : public testing::LeakCheckedTest {};

// An item the trees name that a write replaces stays alive, counted as retired, until the
// fold takes it out of the trees, though no snapshot pins it; then it is freed.
TEST_F(IndexEpochTest, AReplacedTreeEntryLivesUntilTheFold) {
  BasicTree<8> tree;
  tree.add_index(kNode);
  tree.set_index_epoch_capacity(16);
  tree.put(make_obj("/a", Obj{"n", {}, 1}));
  for (int i = 0; i < 16; ++i) tree.put(make_obj("/f" + std::to_string(i), Obj{"m", {}, 2 + i}));  // folds /a in
  ASSERT_EQ(tree.deferred_bytes(), 0u);
  const ItemRef replaced = make_obj("/a", Obj{"n", {}, 30});
  const std::size_t first_bytes = ItemRef::share(tree.get("/a"))->nbytes();
  tree.put(make_obj("/a", Obj{"n", {}, 31}));
  EXPECT_EQ(tree.deferred_bytes(), first_bytes);
  EXPECT_EQ(tree.domain()->retired_bytes(), first_bytes);
  EXPECT_EQ(this->live_items(), static_cast<std::int64_t>(tree.size()) + 2) << "the tree's, the old /a, `replaced`";
  for (int i = 0; i < 16; ++i) tree.put(make_obj("/g" + std::to_string(i), Obj{"m", {}, 40 + i}));  // the fold
  EXPECT_EQ(tree.deferred_bytes(), 0u);
  tree.collect();
  EXPECT_EQ(tree.domain()->retired_bytes(), 0u);
  EXPECT_EQ(this->live_items(), static_cast<std::int64_t>(tree.size()) + 1);
  const auto snap = tree.snapshot();
  EXPECT_EQ(count_index(snap, kNode, {"n"}, {}), 1u);
  EXPECT_EQ(count_index(snap, kNode, {"m"}, {}), 32u);
  EXPECT_NO_THROW(check_indexes(snap));
}

// A snapshot taken inside an epoch goes on reading its own version after later writes and
// folds: the changes after it are skipped, the trees it read stay its own.
TEST_F(IndexEpochTest, OldSnapshotsReadTheirVersionAcrossFolds) {
  BasicTree<8> tree;
  tree.add_index(kNode);
  tree.set_index_epoch_capacity(16);
  for (int i = 0; i < 10; ++i) tree.put(make_obj("/p" + std::to_string(i), Obj{"n1", {}, i}));
  const auto mid = tree.snapshot();
  for (int i = 0; i < 10; i += 2) tree.put(make_obj("/p" + std::to_string(i), Obj{"n2", {}, 20 + i}));
  tree.erase("/p1");
  for (int i = 0; i < 40; ++i) tree.put(make_obj("/q" + std::to_string(i), Obj{"n3", {}, 40 + i}));
  const auto late = tree.snapshot();
  const std::vector<std::string_view> n1{"n1"}, n2{"n2"};
  EXPECT_EQ(keys(scan_index(mid, kNode, n1, {})).size(), 10u);
  EXPECT_EQ(keys(scan_index(mid, kNode, n2, {})).size(), 0u);
  EXPECT_EQ(keys(scan_index(late, kNode, n1, {})), (std::vector<std::string>{"/p3", "/p5", "/p7", "/p9"}));
  EXPECT_EQ(keys(scan_index(late, kNode, n2, {})), (std::vector<std::string>{"/p0", "/p2", "/p4", "/p6", "/p8"}));
  ScanOptions page;
  page.limit = 2;
  page.start = "/p3";
  page.start_inclusive = false;
  EXPECT_EQ(keys(scan_index(late, kNode, n1, page)), (std::vector<std::string>{"/p5", "/p7"}));
  EXPECT_EQ(count_index(late, kNode, n1, page), 3u);
  EXPECT_NO_THROW(check_indexes(mid));
  EXPECT_NO_THROW(check_indexes(late));
  EXPECT_NO_THROW(tree.check_invariants());
}

}  // namespace
}  // namespace watchcache
