// Secondary indexes, part 2: the read path. IndexView (one index of one version: rank,
// counts, the invariant check against the tree of the same version), IndexWalker (an
// in-order walk), and the public reads over a snapshot: scan_index (the items whose indexed
// value is one of some values, in key order, as scan() would return them) and count_index.
// Nothing here writes a node, so all of it is safe on a snapshot from any thread, like
// btree_read.hpp. The design is at the top of secondary_index.hpp.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "watchcache/btree_read.hpp"
#include "watchcache/item.hpp"
#include "watchcache/secondary_index_epoch.hpp"
#include "watchcache/secondary_index_node.hpp"

namespace watchcache {
namespace detail {

// What an epoch's changes did to one run of an index tree, for one reader: entries of the
// tree that left (`removed`), entries of the tree that name a newer item now (`renamed`:
// same key and value), and entries the tree does not hold (`added`, in key order).
struct RunOverlay {
  std::vector<const Item*> removed;                          // by address
  std::vector<std::pair<const Item*, const Item*>> renamed;  // by the tree's entry
  std::vector<const Item*> added;                            // by key

  // The item a tree entry stands for: null when it left.
  const Item* resolve(const Item* entry) const noexcept {
    if (!removed.empty() && std::binary_search(removed.begin(), removed.end(), entry)) return nullptr;
    if (!renamed.empty()) {
      const auto r = std::lower_bound(renamed.begin(), renamed.end(), std::make_pair(entry, static_cast<const Item*>(nullptr)));
      if (r != renamed.end() && r->first == entry) return r->second;
    }
    return entry;
  }
};

// One index of one version: what a snapshot's IndexRoots holds for it, with its spec.
template <unsigned F>
struct IndexView {
  const IndexSpec* spec = nullptr;
  const IndexNode* root = nullptr;  // the index tree of the last fold
  unsigned height = 0;
  std::size_t size = 0;             // the tree's entries
  const IndexEpoch* epoch = nullptr;  // the changes since, of which those up to `version`
  std::uint64_t version = 0;          // count
  std::uint32_t index = 0;            // the index's number in the epoch's changes

  // Entries < p (kStrict=false) or <= p (kStrict=true). O(log n) node visits, each reading
  // items only inside the probe's run.
  template <bool kStrict>
  std::size_t rank(const IndexProbe& p) const noexcept {
    const IndexNode* nd = root;
    if (!nd) return 0;
    std::size_t r = 0;
    while (!nd->leaf) {
      const auto* in = as_index_inner<F>(nd);
      const unsigned i = index_child<F>(in, p, *spec);
      for (unsigned j = 0; j < i; ++j) r += in->count[j];
      nd = in->child[i];
      prefetch_index_node<F>(nd);
    }
    return r + index_land<kStrict>(as_index_leaf<F>(nd), p, *spec).pos;
  }

  // Entries of `value` whose key lies in [from, to): `from` inclusive or not, nullopt bounds
  // open. O(log n + k) for k changes of the value's hash in the epoch.
  std::size_t count_run(std::string_view value, std::optional<std::string_view> from, bool from_inclusive,
                        std::optional<std::string_view> to) const {
    const IndexHash h = value_hash(value);
    const IndexProbe lo{h, value, from.value_or(std::string_view{}), false};
    const std::size_t a = from && !from_inclusive ? rank<true>(lo) : rank<false>(lo);
    const IndexProbe hi = to ? IndexProbe{h, value, *to, false} : IndexProbe{h, value, {}, true};
    const std::size_t b = rank<false>(hi);
    std::size_t n = b > a ? b - a : 0;
    const RunOverlay o = overlay(h, value);
    const auto in_range = [&](const Item* it) {
      const std::string_view k = it->key();
      if (from && (from_inclusive ? k < *from : k <= *from)) return false;
      return !to || k < *to;
    };
    for (const Item* r : o.removed)
      if (entry_value(*r, *spec) == value && in_range(r)) --n;
    for (const Item* it : o.added)
      if (in_range(it)) ++n;
    return n;
  }

  // What the epoch's changes up to `version` did to the run of `value` (and of any value
  // whose hash it shares): built from the changes of its hash alone, oldest first.
  RunOverlay overlay(IndexHash h, std::string_view value) const {
    RunOverlay o;
    if (!epoch) return o;
    std::vector<const IndexChange*> changes;
    epoch->for_each_change(index, h, version, [&](const IndexChange& c) { changes.push_back(&c); });
    if (changes.empty()) return o;
    IndexNet net;
    for (auto c = changes.rbegin(); c != changes.rend(); ++c) net.apply((*c)->hash, (*c)->gone, (*c)->come);
    for (const IndexNet::Removed& r : net.removed()) o.removed.push_back(r.item);
    net.for_each_added([&](const IndexNet::Added& a) {
      if (a.origin)
        o.renamed.emplace_back(a.origin, a.item);
      else if (entry_value(*a.item, *spec) == value)
        o.added.push_back(a.item);
    });
    std::sort(o.removed.begin(), o.removed.end());
    std::sort(o.renamed.begin(), o.renamed.end());
    std::sort(o.added.begin(), o.added.end(), [](const Item* x, const Item* y) { return x->key() < y->key(); });
    return o;
  }

  // Throws std::logic_error naming the first broken invariant: the tree's shape (fill,
  // counts, separators, births, order) and its agreement with `main`, the tree of the same
  // version: every entry is the item `main` holds at its key, under that item's value, once;
  // and every item of `main` that has a value has an entry (the counts agree). O(n log n).
  void check(const View<F>& main, std::uint64_t max_birth) const {
    const std::string what = "index on " + describe(*spec) + ": ";
    auto fail = [&what](const char* broken) { throw std::logic_error(what + broken); };
    std::size_t expected = 0;
    {
      Walker<F> w(main);
      for (bool ok = w.seek_first(); ok; ok = w.next()) if (indexed_value(*w.item(), *spec)) ++expected;
    }
    Checked state{main, nullptr, 0, 0, {}};
    if (!root) {
      if (size != 0 || height != 0) fail("empty index with size or height");
    } else {
      const std::size_t total = check_node(root, 1, max_birth, state, fail);
      if (total != size) fail("size does not match the entries in the index");
      if (state.leaves_depth != height) fail("height does not match leaf depth");
    }
    // The entries this version sees: the tree's, with the epoch's changes up to `version`.
    IndexNet net;
    if (epoch)
      epoch->for_each_change(version, [&](const IndexChange& c) {
        if (c.index != index) return;
        net.apply(c.hash, c.gone, c.come);
      });
    std::vector<const Item*> in_tree = state.entries;
    std::sort(in_tree.begin(), in_tree.end());
    const auto held = [&](const Item* it) { return std::binary_search(in_tree.begin(), in_tree.end(), it); };
    std::vector<const Item*> gone;
    for (const IndexNet::Removed& r : net.removed()) gone.push_back(r.item);
    std::vector<std::pair<const Item*, const Item*>> renamed;
    std::vector<const Item*> seen;
    net.for_each_added([&](const IndexNet::Added& a) {
      if (a.origin)
        renamed.emplace_back(a.origin, a.item);
      else
        seen.push_back(a.item);
    });
    for (const Item* g : gone)
      if (!held(g)) fail("a change removes an entry the index tree does not hold");
    for (const auto& r : renamed)
      if (!held(r.first)) fail("a change renames an entry the index tree does not hold");
    std::sort(gone.begin(), gone.end());
    std::sort(renamed.begin(), renamed.end());
    for (const Item* e : state.entries) {
      if (std::binary_search(gone.begin(), gone.end(), e)) continue;
      const auto r = std::lower_bound(renamed.begin(), renamed.end(), std::make_pair(e, static_cast<const Item*>(nullptr)));
      if (r != renamed.end() && r->first == e) {
        if (r->second->key() != e->key() || entry_value(*r->second, *spec) != entry_value(*e, *spec))
          fail("a change renames an entry to another key or value");
        seen.push_back(r->second);
      } else {
        seen.push_back(e);
      }
    }
    for (const Item* it : seen) {
      if (!indexed_value(*it, *spec)) fail("entry for an item without the label");
      if (main.find(it->key()) != it) fail("stale entry: not the tree's item at its key");
    }
    if (seen.size() != expected) fail("entries and the tree's items with an indexed value differ in number");
  }

 private:
  struct Checked {
    const View<F>& main;
    const Item* prev_item;
    IndexHash prev_hash;
    std::size_t leaves_depth;
    std::vector<const Item*> entries;
  };

  template <class Fail>
  std::size_t check_node(const IndexNode* nd, std::size_t depth, std::uint64_t max_birth, Checked& state,
                         const Fail& fail) const {
    if (nd->birth > max_birth) fail("node born after its parent");
    if (nd != root && nd->n == 0) fail("empty node");
    if (nd->leaf) {
      const auto* lf = as_index_leaf<F>(nd);
      if (nd->n > IndexLeaf<F>::kCapacity) fail("leaf over capacity");
      if (nd != root && nd->n < kIndexMinFill<IndexLeaf<F>>) fail("leaf under minimum fill");
      if (state.leaves_depth == 0) state.leaves_depth = depth;
      if (state.leaves_depth != depth) fail("leaves at different depths");
      for (unsigned i = 0; i < nd->n; ++i) {
        const Item* it = lf->item[i];
        if (!it) fail("null entry");
        const std::optional<std::string_view> v = indexed_value(*it, *spec);
        if (!v) fail("entry for an item without the label");
        if (lf->hash[i] != value_hash(*v)) fail("entry hash is not its item's value hash");
        state.entries.push_back(it);
        if (state.prev_item &&
            compare_entry(state.prev_hash, state.prev_item, IndexProbe{lf->hash[i], *v, it->key(), false}, *spec) >= 0)
          fail("entries out of order or repeated");
        state.prev_item = it;
        state.prev_hash = lf->hash[i];
      }
      return nd->n;
    }
    const auto* in = as_index_inner<F>(nd);
    if (nd->n > IndexInner<F>::kCapacity) fail("internal node over capacity");
    if (nd != root && nd->n < kIndexMinFill<IndexInner<F>>) fail("internal node under minimum fill");
    if (nd == root && nd->n < 2) fail("internal root with fewer than 2 children");
    std::size_t total = 0;
    for (unsigned i = 0; i < nd->n; ++i) {
      const IndexNode* c = in->child[i];
      if (c->n == 0) fail("empty child");
      const IndexHash min_hash = c->leaf ? as_index_leaf<F>(c)->hash[0] : as_index_inner<F>(c)->hash[0];
      if (in->hash[i] != min_hash) fail("separator is not the hash of the child's minimum entry");
      const std::size_t sub = check_node(c, depth + 1, nd->birth, state, fail);
      if (sub != in->count[i]) fail("stale subtree count");
      total += sub;
    }
    return total;
  }
};

// The view of `spec` in a snapshot, or nullopt when the snapshot's tree had no such index
// when the snapshot was taken.
template <unsigned F>
std::optional<IndexView<F>> find_index(const BasicSnapshot<F>& snap, const IndexSpec& spec) noexcept {
  const IndexRoots* roots = snap.indexes().get();
  if (!roots) return std::nullopt;
  const std::optional<std::size_t> at = roots->find(spec);
  if (!at) return std::nullopt;
  const IndexRoot& r = roots->roots[*at];
  return IndexView<F>{&(*roots->specs)[*at], r.node, r.height, r.size, roots->epoch.get(), snap.version(),
                      static_cast<std::uint32_t>(*at)};
}

template <unsigned F>
IndexView<F> require_index(const BasicSnapshot<F>& snap, const IndexSpec& spec) {
  if (std::optional<IndexView<F>> v = find_index(snap, spec)) return *v;
  throw std::invalid_argument("no index on " + describe(spec) + " in this snapshot");
}

// Iterates an index in entry order: a root-to-leaf path, like btree_read.hpp's Walker.
// Keeps nothing alive.
template <unsigned F>
class IndexWalker {
 public:
  explicit IndexWalker(const IndexView<F>& v) noexcept : view_(v) {}

  bool valid() const noexcept { return valid_; }
  const IndexLeaf<F>* leaf() const noexcept { return as_index_leaf<F>(node_[leaf_level()]); }
  unsigned slot() const noexcept { return idx_[leaf_level()]; }
  const Item* item() const noexcept { return leaf()->item[slot()]; }
  IndexHash hash() const noexcept { return leaf()->hash[slot()]; }

  // The first entry >= p (strict=false) or > p (strict=true).
  bool seek(const IndexProbe& p, bool strict) noexcept {
    valid_ = false;
    const IndexNode* nd = view_.root;
    if (!nd || nd->n == 0) return false;
    unsigned level = 0;
    while (!nd->leaf) {
      const unsigned i = index_child<F>(as_index_inner<F>(nd), p, *view_.spec);
      node_[level] = nd;
      idx_[level] = static_cast<std::uint16_t>(i);
      nd = as_index_inner<F>(nd)->child[i];
      prefetch_index_node<F>(nd);
      ++level;
    }
    const auto* lf = as_index_leaf<F>(nd);
    const unsigned pos = strict ? index_land<true>(lf, p, *view_.spec).pos : index_land<false>(lf, p, *view_.spec).pos;
    node_[level] = nd;
    valid_ = true;
    if (pos < nd->n) {
      idx_[level] = static_cast<std::uint16_t>(pos);
      return true;
    }
    idx_[level] = static_cast<std::uint16_t>(nd->n - 1);
    return next();
  }

  bool next() noexcept {
    if (!valid_) return false;
    const unsigned leaf_at = leaf_level();
    if (++idx_[leaf_at] < node_[leaf_at]->n) return true;
    unsigned level = leaf_at;
    while (level > 0 && idx_[level - 1] + 1u >= node_[level - 1]->n) --level;
    if (level == 0) return valid_ = false;
    ++idx_[--level];
    for (unsigned l = level; l < leaf_at; ++l) {
      node_[l + 1] = as_index_inner<F>(node_[l])->child[idx_[l]];
      idx_[l + 1] = 0;
    }
    return true;
  }

 private:
  unsigned leaf_level() const noexcept { return view_.height - 1; }

  IndexView<F> view_;
  std::array<const IndexNode*, kMaxDepth> node_{};
  std::array<std::uint16_t, kMaxDepth> idx_{};
  bool valid_ = false;
};

// The entries of one value whose keys lie in a scan's range, in key order: one of the runs
// scan_index merges.
template <unsigned F>
class IndexRun {
 public:
  IndexRun(const IndexView<F>& view, std::string_view value, const std::optional<std::string>& end)
      : walker_(view), spec_(view.spec), value_(value), hash_(value_hash(value)), end_(&end),
        overlay_(view.overlay(hash_, value)) {}

  // Positions at the first entry whose key is >= from (> from when strict).
  void start(std::string_view from, bool strict) noexcept {
    walker_.seek(IndexProbe{hash_, value_, from, false}, strict);
    settle();
    const auto& added = overlay_.added;
    added_at_ = static_cast<std::size_t>(
        (strict ? std::upper_bound(added.begin(), added.end(), from, [](std::string_view k, const Item* it) { return k < it->key(); })
                : std::lower_bound(added.begin(), added.end(), from, [](const Item* it, std::string_view k) { return it->key() < k; })) -
        added.begin());
    pick();
  }
  void advance() noexcept {
    if (from_tree_) {
      walker_.next();
      settle();
    } else {
      ++added_at_;
    }
    pick();
  }
  // The current entry's item; null once the run is over.
  const Item* item() const noexcept { return item_; }

 private:
  // Takes the walker's entry (or the newer item it names now) if it is still this value's
  // and inside the range, passing over entries the epoch removed. Entering a leaf, asks for
  // the items of the run in it at once: each is read (value, key, selector), and their misses
  // then overlap instead of arriving one per entry.
  void settle() noexcept {
    tree_item_ = nullptr;
    for (; walker_.valid() && walker_.hash() == hash_; walker_.next()) {
      if (walker_.leaf() != fetched_) {
        fetched_ = walker_.leaf();
        for (unsigned j = walker_.slot(); j < fetched_->n && fetched_->hash[j] == hash_; ++j)
          prefetch_item(fetched_->item[j], 2);
      }
      const Item* entry = walker_.item();
      if (entry_value(*entry, *spec_) != value_) return;
      const Item* it = overlay_.resolve(entry);
      if (!it) continue;
      if (*end_ && !(it->key() < std::string_view(**end_))) return;
      tree_item_ = it;
      return;
    }
  }
  // The run's next item: the tree's or an added one, whichever key comes first.
  void pick() noexcept {
    const Item* added = nullptr;
    if (added_at_ < overlay_.added.size()) {
      added = overlay_.added[added_at_];
      if (*end_ && !(added->key() < std::string_view(**end_))) added = nullptr;
    }
    from_tree_ = tree_item_ && (!added || tree_item_->key() < added->key());
    item_ = from_tree_ ? tree_item_ : added;
  }

  IndexWalker<F> walker_;
  const IndexSpec* spec_;
  std::string_view value_;
  IndexHash hash_;
  const std::optional<std::string>* end_;
  RunOverlay overlay_;
  const IndexLeaf<F>* fetched_ = nullptr;
  const Item* tree_item_ = nullptr;
  std::size_t added_at_ = 0;
  bool from_tree_ = false;
  const Item* item_ = nullptr;
};

inline std::vector<std::string_view> distinct_values(std::vector<std::string_view> values) {
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return values;
}

// Where a scan with `opts` starts: the key and whether it is excluded (scan()'s rule: a start
// before the prefix is clamped to it).
inline std::pair<std::string_view, bool> scan_start(const ScanOptions& opts) noexcept {
  if (opts.start && *opts.start >= opts.prefix) return {*opts.start, !opts.start_inclusive};
  return {opts.prefix, false};
}

}  // namespace detail

// The items of a snapshot whose value under the index `spec` is one of `values` and which
// `pred` accepts, in key order: exactly what scan(snap, opts, pred) returns when pred also
// requires that value (and in that case the same next_key and remaining, which describe the
// scanned key range, not the candidates; see scan()). `scanned` counts the candidates
// examined. Cost O(v (log n + k) + c log v) for v values, k changes of a value's hash since
// the last fold and c candidates examined, against scan()'s O(log n + range). std::invalid_argument when the snapshot has no such index.
// Thread-safe; call it with the GIL released.
template <unsigned F, class Pred = SelectAll>
BasicScanResult<F> scan_index(const BasicSnapshot<F>& snap, const IndexSpec& spec,
                              const std::vector<std::string_view>& values, const ScanOptions& opts,
                              const Pred& pred = {}) {
  const detail::IndexView<F> index = detail::require_index(snap, spec);
  BasicScanResult<F> out;
  out.snapshot = snap;
  const std::optional<std::string> end = detail::prefix_end(opts.prefix);
  const auto [from, strict] = detail::scan_start(opts);
  const std::vector<std::string_view> wanted = detail::distinct_values(values);

  std::vector<detail::IndexRun<F>> runs;
  runs.reserve(wanted.size());
  for (const std::string_view v : wanted) {
    runs.emplace_back(index, v, end);
    runs.back().start(from, strict);
  }
  // A min-heap of the runs not yet over, by their current key: runs of distinct values never
  // hold the same item, so the merge is the range's candidates in key order.
  std::vector<detail::IndexRun<F>*> heap;
  for (auto& r : runs)
    if (r.item()) heap.push_back(&r);
  const auto later = [](const detail::IndexRun<F>* a, const detail::IndexRun<F>* b) {
    return a->item()->key() > b->item()->key();
  };
  std::make_heap(heap.begin(), heap.end(), later);

  bool limited = false;
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    detail::IndexRun<F>* run = heap.back();
    const Item* it = run->item();
    ++out.scanned;
    if (pred(*it)) {
      out.items.push_back(it);
      if (opts.limit && out.items.size() == opts.limit) {
        limited = true;
        break;
      }
    }
    run->advance();
    if (run->item())
      std::push_heap(heap.begin(), heap.end(), later);
    else
      heap.pop_back();
  }
  if (limited) {
    // As scan(): a cut page continues when any item of the range, selected or not, follows
    // its last item; the tree of the same version answers that in O(log n).
    const detail::View<F>& view = snap.view();
    const std::string_view last = out.items.back()->key();
    const std::size_t upto = end ? view.template rank<false>(*end) : view.size;
    const std::size_t through_last = view.template rank<true>(last);
    if (upto > through_last) {
      out.next_key = std::string(last) + '\0';
      out.remaining = upto - through_last;
    }
  }
  return out;
}

// How many entries of the index `spec` have one of `values` and a key in the range `opts`
// describes (prefix and start; the limit is ignored): the candidates scan_index would examine
// without a limit, so the exact number of matching items when the selector is that index's
// requirement alone. O(v (log n + k)), from the subtree counts and the epoch's changes.
// Thread-safe.
template <unsigned F>
std::size_t count_index(const BasicSnapshot<F>& snap, const IndexSpec& spec,
                        const std::vector<std::string_view>& values, const ScanOptions& opts) {
  const detail::IndexView<F> index = detail::require_index(snap, spec);
  const std::optional<std::string> end = detail::prefix_end(opts.prefix);
  const auto [from, strict] = detail::scan_start(opts);
  std::size_t total = 0;
  for (const std::string_view v : detail::distinct_values(values))
    total += index.count_run(v, from, !strict, end ? std::optional<std::string_view>(*end) : std::nullopt);
  return total;
}

// Checks every index a snapshot carries against the snapshot's tree (IndexView::check).
template <unsigned F>
void check_indexes(const BasicSnapshot<F>& snap) {
  const detail::IndexRoots* roots = snap.indexes().get();
  if (!roots) return;
  for (std::size_t i = 0; i < roots->specs->size(); ++i) {
    const detail::IndexRoot& r = roots->roots[i];
    detail::IndexView<F>{&(*roots->specs)[i], r.node, r.height, r.size, roots->epoch.get(), snap.version(),
                         static_cast<std::uint32_t>(i)}
        .check(snap.view(), snap.version());
  }
}

}  // namespace watchcache
