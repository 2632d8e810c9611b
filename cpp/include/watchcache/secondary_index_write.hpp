// Secondary indexes, part 3: the write path. IndexSet is the live state of a tree's indexes
// (specs and roots), written by the tree's own writer inside each of its writes: BasicTree
// calls on_put / on_erase before it hands the write's retirements to the reclaim domain, so
// the item an entry names is still alive while the entry is moved or removed. Copy-on-write,
// splits, borrows and merges follow the tree's rules (btree.hpp); node memory comes from the
// tree (its stock, its write's retirement batch, its accounting) through the three hooks
// documented at Host below. The design is at the top of secondary_index.hpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "watchcache/btree_read.hpp"
#include "watchcache/item.hpp"
#include "watchcache/secondary_index_node.hpp"
#include "watchcache/secondary_index_read.hpp"

namespace watchcache::detail {

// Host is the BasicTree<F> that owns the set. It provides:
//   version()                                    the version writes are born in
//   take_index_node(bool leaf) -> void*          memory of its leaf or internal node size
//   drop_index_node(void*, birth, bool leaf)     a node the write no longer uses: back to the
//                                                stock if born now, else retired at version()
//   release_index_node(void*, birth, death, pinned, bool leaf)
//                                                clear / destruction (BasicTree::release_all)
template <unsigned F>
class IndexSet {
  using Leaf = IndexLeaf<F>;
  using Inner = IndexInner<F>;
  static_assert(kIndexNodesFit<F>, "index nodes must fit the tree's node sizes");

 public:
  IndexSet() : specs_(std::make_shared<const std::vector<IndexSpec>>()) {}
  IndexSet(const IndexSet&) = delete;
  IndexSet& operator=(const IndexSet&) = delete;

  const std::vector<IndexSpec>& specs() const noexcept { return *specs_; }
  std::size_t size() const noexcept { return live_.size(); }
  IndexView<F> view(std::size_t i) const noexcept {
    return {&(*specs_)[i], live_[i].node, live_[i].height, live_[i].size};
  }

  // Rejects a spec that cannot be added: std::invalid_argument for an empty name or one
  // already declared, std::length_error past kMaxIndexes.
  void validate(const IndexSpec& spec) const {
    if (spec.name.empty()) throw std::invalid_argument("index name must not be empty");
    if (std::find(specs_->begin(), specs_->end(), spec) != specs_->end())
      throw std::invalid_argument("an index on " + describe(spec) + " already exists");
    if (specs_->size() >= kMaxIndexes)
      throw std::length_error("a tree carries at most " + std::to_string(kMaxIndexes) + " indexes");
  }

  // Declares `spec` (validate() first) and fills it from the live tree `main`. O(n log n).
  // Snapshots taken before have no such index; the specs they carry are their own.
  template <class Host>
  void add(Host& host, IndexSpec spec, const View<F>& main) {
    validate(spec);
    auto specs = std::make_shared<std::vector<IndexSpec>>(*specs_);
    specs->push_back(std::move(spec));
    live_.emplace_back();
    specs_ = std::move(specs);
    build(host, live_.size() - 1, main);
  }

  // The write of `now` in place of `old` (null when the key was new), in every index: an
  // entry whose value stays is repointed in place; otherwise the old entry goes and the new
  // one comes.
  template <class Host>
  void on_put(Host& host, const Item* old, const Item* now) {
    for (std::size_t i = 0; i < live_.size(); ++i) {
      const IndexSpec& spec = (*specs_)[i];
      const std::optional<std::string_view> value = indexed_value(*now, spec);
      if (old) {
        const std::optional<std::string_view> was = indexed_value(*old, spec);
        if (was && value && same_bytes(*was, *value)) {
          repoint(host, live_[i], spec, IndexProbe::of(old, *was, true), now);
          continue;
        }
        if (was) erase(host, live_[i], spec, IndexProbe::of(old, *was, true));
      }
      if (value) insert(host, live_[i], spec, IndexProbe::of(now, *value, false), now);
    }
  }

  // The removal of `gone` (still alive: its retirement is not flushed yet).
  template <class Host>
  void on_erase(Host& host, const Item* gone) {
    for (std::size_t i = 0; i < live_.size(); ++i) {
      const IndexSpec& spec = (*specs_)[i];
      if (const std::optional<std::string_view> was = indexed_value(*gone, spec))
        erase(host, live_[i], spec, IndexProbe::of(gone, *was, true));
    }
  }

  // Every index refilled from `main` after a bulk load (the indexes were released by it).
  template <class Host>
  void rebuild(Host& host, const View<F>& main) {
    for (std::size_t i = 0; i < live_.size(); ++i) build(host, i, main);
  }

  // Hands every node to the host as leaving at `death` (BasicTree::release_all); the indexes
  // stay declared, empty.
  template <class Host>
  void release(Host& host, std::uint64_t death, bool pinned) {
    for (IndexRoot& r : live_) {
      if (r.node) release_subtree(host, const_cast<IndexNode*>(r.node), death, pinned);
      r = {};
    }
  }

  // The roots for a snapshot of the current version: the last record published while no
  // root changed since (a write after a snapshot always copies the roots it touches), else
  // a new one. O(indexes); one allocation per version that wrote.
  IndexRootsRef publish() {
    const IndexRoots* last = published_.get();
    bool same = last && last->specs == specs_;
    for (std::size_t i = 0; same && i < live_.size(); ++i) same = last->roots[i] == live_[i];
    if (same) return published_;
    auto* roots = new IndexRoots();
    roots->specs = specs_;
    for (std::size_t i = 0; i < live_.size(); ++i) std::construct_at(&roots->roots[i], live_[i]);
    published_ = IndexRootsRef::adopt(roots);
    return published_;
  }

  void check(const View<F>& main, std::uint64_t max_birth) const {
    for (std::size_t i = 0; i < live_.size(); ++i) view(i).check(main, max_birth);
  }

 private:
  // What an insert below a node reports to its parent: the new right sibling if the node
  // split (bottom-up, only when an entry is added).
  struct Split {
    IndexNode* sibling = nullptr;
    Count sibling_count = 0;
  };

  static IndexNode* mut(const IndexNode* n) noexcept { return const_cast<IndexNode*>(n); }

  template <class Host>
  Leaf* new_leaf(Host& host) {
    return new (host.take_index_node(true)) Leaf(host.version());
  }
  template <class Host>
  Inner* new_inner(Host& host) {
    return new (host.take_index_node(false)) Inner(host.version());
  }
  template <class Host>
  static void drop(Host& host, IndexNode* n) {
    host.drop_index_node(n, n->birth, n->leaf);
  }

  // The copy-on-write primitive, as BasicTree::make_writable: the node itself if born in
  // this version, else a copy of its used slots while the original is retired.
  template <class Host>
  IndexNode* writable(Host& host, IndexNode* n) {
    if (n->birth == host.version()) return n;
    IndexNode* copy;
    if (n->leaf) {
      Leaf* c = new_leaf(host);
      copy_slots(c, 0, as_index_leaf<F>(n), 0, n->n);
      copy = c;
    } else {
      Inner* c = new_inner(host);
      copy_slots(c, 0, as_index_inner<F>(n), 0, n->n);
      copy = c;
    }
    copy->n = n->n;
    drop(host, n);
    return copy;
  }

  template <class Kind>
  static void copy_slots(Kind* dst, unsigned to, const Kind* src, unsigned from, unsigned count) noexcept {
    Kind::zip_slots(*dst, *src, [&](auto* d, const auto* s) { std::memmove(d + to, s + from, count * sizeof(*d)); });
  }
  template <class Kind>
  static void open_slot(Kind* nd, unsigned pos) noexcept {
    copy_slots(nd, pos + 1, nd, pos, nd->n - pos);
    ++nd->n;
  }
  template <class Kind>
  static void close_slot(Kind* nd, unsigned pos) noexcept {
    copy_slots(nd, pos, nd, pos + 1, nd->n - pos - 1u);
    --nd->n;
  }

  // Slot i of p holds its child's minimum hash again (after the child changed).
  static void set_separator(Inner* p, unsigned i) noexcept {
    const IndexNode* c = p->child[i];
    p->hash[i] = c->leaf ? as_index_leaf<F>(c)->hash[0] : as_index_inner<F>(c)->hash[0];
  }

  static Count subtree_count(const IndexNode* n) noexcept {
    return n->leaf ? n->n : static_cast<Count>(as_index_inner<F>(n)->total());
  }
  static unsigned min_fill(const IndexNode* n) noexcept {
    return n->leaf ? kIndexMinFill<Leaf> : kIndexMinFill<Inner>;
  }

  // Moves the upper half of the full (writable) node into a new sibling, returned.
  template <class Host, class Kind>
  Kind* split_off(Host& host, Kind* full) {
    Kind* s;
    if constexpr (std::is_same_v<Kind, Leaf>)
      s = new_leaf(host);
    else
      s = new_inner(host);
    const unsigned mid = Kind::kCapacity / 2, moved = Kind::kCapacity - mid;
    copy_slots(s, 0, full, mid, moved);
    s->n = static_cast<std::uint16_t>(moved);
    full->n = static_cast<std::uint16_t>(mid);
    return s;
  }

  template <class Host>
  void insert(Host& host, IndexRoot& t, const IndexSpec& spec, const IndexProbe& p, const Item* it) {
    if (!t.node) {
      Leaf* lf = new_leaf(host);
      lf->hash[0] = p.hash;
      lf->item[0] = it;
      lf->n = 1;
      t = {lf, 1, 1};
      return;
    }
    IndexNode* root = writable(host, mut(t.node));
    const Split grown = insert_below(host, root, spec, p, it);
    if (grown.sibling) {
      Inner* top = new_inner(host);
      top->child[0] = root;
      top->count[0] = static_cast<Count>(t.size + 1 - grown.sibling_count);
      top->child[1] = grown.sibling;
      top->count[1] = grown.sibling_count;
      top->n = 2;
      set_separator(top, 0);
      set_separator(top, 1);
      root = top;
      ++t.height;
    }
    t.node = root;
    ++t.size;
  }

  template <class Host>
  Split insert_below(Host& host, IndexNode* nd, const IndexSpec& spec, const IndexProbe& p, const Item* it) {
    if (nd->leaf) {
      Leaf* lf = as_index_leaf<F>(nd);
      const IndexLanding at = index_land<false>(lf, p, spec);
      if (at.equal) throw std::logic_error("index on " + describe(spec) + ": entry already present");
      unsigned pos = at.pos;
      Leaf* target = lf;
      Leaf* sibling = nullptr;
      if (lf->n == Leaf::kCapacity) {
        sibling = split_off(host, lf);
        if (pos > lf->n) {
          pos -= lf->n;
          target = sibling;
        }
      }
      open_slot(target, pos);
      target->hash[pos] = p.hash;
      target->item[pos] = it;
      return sibling ? Split{sibling, sibling->n} : Split{};
    }
    Inner* in = as_index_inner<F>(nd);
    const unsigned i = index_child<F>(in, p, spec);
    prefetch_index_node<F>(in->child[i]);
    IndexNode* c = writable(host, in->child[i]);
    in->child[i] = c;
    const Split below = insert_below(host, c, spec, p, it);
    ++in->count[i];
    set_separator(in, i);
    if (!below.sibling) return {};
    in->count[i] -= below.sibling_count;
    unsigned pos = i + 1;
    Inner* target = in;
    Inner* sibling = nullptr;
    if (in->n == Inner::kCapacity) {
      sibling = split_off(host, in);
      if (pos > in->n) {
        pos -= in->n;
        target = sibling;
      }
    }
    open_slot(target, pos);
    target->child[pos] = below.sibling;
    target->count[pos] = below.sibling_count;
    set_separator(target, pos);
    return sibling ? Split{sibling, subtree_count(sibling)} : Split{};
  }

  // Points the entry at p (present) to `now`, an item with the same key and value. The path
  // is copied as any write's; the separators (hashes) stay.
  template <class Host>
  void repoint(Host& host, IndexRoot& t, const IndexSpec& spec, const IndexProbe& p, const Item* now) {
    IndexNode* nd = writable(host, mut(t.node));
    t.node = nd;
    while (!nd->leaf) {
      Inner* in = as_index_inner<F>(nd);
      const unsigned i = index_child<F>(in, p, spec);
      prefetch_index_node<F>(in->child[i]);
      nd = in->child[i] = writable(host, in->child[i]);
    }
    Leaf* lf = as_index_leaf<F>(nd);
    const IndexLanding at = index_land<false>(lf, p, spec);
    if (!at.equal) throw std::logic_error("index on " + describe(spec) + ": entry to repoint is missing");
    lf->item[at.pos] = now;
  }

  template <class Host>
  void erase(Host& host, IndexRoot& t, const IndexSpec& spec, const IndexProbe& p) {
    IndexNode* root = writable(host, mut(t.node));
    erase_below(host, root, spec, p);
    --t.size;
    if (root->leaf) {
      if (root->n == 0) {
        drop(host, root);
        t = {};
        return;
      }
    } else if (root->n == 1) {
      IndexNode* only = as_index_inner<F>(root)->child[0];
      drop(host, root);
      root = only;
      --t.height;
    }
    t.node = root;
  }

  template <class Host>
  void erase_below(Host& host, IndexNode* nd, const IndexSpec& spec, const IndexProbe& p) {
    if (nd->leaf) {
      Leaf* lf = as_index_leaf<F>(nd);
      const IndexLanding at = index_land<false>(lf, p, spec);
      if (!at.equal) throw std::logic_error("index on " + describe(spec) + ": entry to erase is missing");
      close_slot(lf, at.pos);
      return;
    }
    Inner* in = as_index_inner<F>(nd);
    const unsigned i = index_child<F>(in, p, spec);
    prefetch_index_node<F>(in->child[i]);
    IndexNode* c = writable(host, in->child[i]);
    in->child[i] = c;
    erase_below(host, c, spec, p);
    --in->count[i];
    if (c->n < min_fill(c))
      rebalance(host, in, i);
    else
      set_separator(in, i);
  }

  // Child i of p fell below minimum fill: borrow from a sibling or merge with it.
  template <class Host>
  void rebalance(Host& host, Inner* p, unsigned i) {
    const bool use_left = i > 0;
    const unsigned j = use_left ? i - 1 : i + 1;
    p->child[j] = writable(host, p->child[j]);
    IndexNode* c = p->child[i];
    IndexNode* sib = p->child[j];
    if (sib->n > min_fill(sib)) {
      const unsigned from = use_left ? sib->n - 1u : 0u;
      const unsigned to = use_left ? 0u : c->n;
      const Count moved = sib->leaf ? 1 : as_index_inner<F>(sib)->count[from];
      move_slot(sib, from, c, to);
      p->count[i] += moved;
      p->count[j] -= moved;
      set_separator(p, i);
      set_separator(p, j);
      return;
    }
    const unsigned l = std::min(i, j), r = std::max(i, j);
    IndexNode* left = p->child[l];
    IndexNode* right = p->child[r];
    if (left->leaf)
      copy_slots(as_index_leaf<F>(left), left->n, as_index_leaf<F>(right), 0, right->n);
    else
      copy_slots(as_index_inner<F>(left), left->n, as_index_inner<F>(right), 0, right->n);
    left->n = static_cast<std::uint16_t>(left->n + right->n);
    p->count[l] += p->count[r];
    close_slot(p, r);
    drop(host, right);
    set_separator(p, l);
  }

  static void move_slot(IndexNode* src, unsigned from, IndexNode* dst, unsigned to) noexcept {
    auto move = [&](auto* s, auto* d) {
      open_slot(d, to);
      copy_slots(d, to, s, from, 1);
      close_slot(s, from);
    };
    if (src->leaf)
      move(as_index_leaf<F>(src), as_index_leaf<F>(dst));
    else
      move(as_index_inner<F>(src), as_index_inner<F>(dst));
  }

  // Fills index i (empty) from `main` by a bulk load: the entries in index order, nodes
  // packed full. O(n log n) for the sort; no item is read during it (each entry keeps a view
  // of its value).
  template <class Host>
  void build(Host& host, std::size_t i, const View<F>& main) {
    const IndexSpec& spec = (*specs_)[i];
    struct Entry {
      IndexHash hash;
      std::string_view value;
      const Item* item;
    };
    std::vector<Entry> entries;
    Walker<F> w(main);
    for (bool ok = w.seek_first(); ok; ok = w.next())
      if (const std::optional<std::string_view> v = indexed_value(*w.item(), spec))
        entries.push_back({value_hash(*v), *v, w.item()});
    // Stable: the walk gave each value's entries in key order already.
    std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
      return a.hash != b.hash ? a.hash < b.hash : a.value < b.value;
    });
    IndexRoot& t = live_[i];
    t = {};
    if (entries.empty()) return;
    const std::size_t n = entries.size();
    std::vector<IndexNode*> level;
    std::vector<Count> counts;
    const std::size_t nleaves = (n + Leaf::kCapacity - 1) / Leaf::kCapacity;
    std::size_t pos = 0;
    for (std::size_t l = 0; l < nleaves; ++l) {
      const std::size_t take = n / nleaves + (l < n % nleaves ? 1 : 0);
      Leaf* lf = new_leaf(host);
      for (std::size_t j = 0; j < take; ++j, ++pos) {
        lf->hash[j] = entries[pos].hash;
        lf->item[j] = entries[pos].item;
      }
      lf->n = static_cast<std::uint16_t>(take);
      level.push_back(lf);
      counts.push_back(static_cast<Count>(take));
    }
    unsigned height = 1;
    while (level.size() > 1) {
      const std::size_t m = level.size();
      const std::size_t nparents = (m + Inner::kCapacity - 1) / Inner::kCapacity;
      std::vector<IndexNode*> up;
      std::vector<Count> up_counts;
      std::size_t c = 0;
      for (std::size_t q = 0; q < nparents; ++q) {
        const std::size_t take = m / nparents + (q < m % nparents ? 1 : 0);
        Inner* in = new_inner(host);
        Count total = 0;
        for (std::size_t j = 0; j < take; ++j, ++c) {
          in->child[j] = level[c];
          in->count[j] = counts[c];
          total += counts[c];
        }
        in->n = static_cast<std::uint16_t>(take);
        for (unsigned j = 0; j < in->n; ++j) set_separator(in, j);
        up.push_back(in);
        up_counts.push_back(total);
      }
      level.swap(up);
      counts.swap(up_counts);
      ++height;
    }
    t = {level.empty() ? nullptr : level.front(), n, height};  // never empty: n > 0
  }

  template <class Host>
  static void release_subtree(Host& host, IndexNode* nd, std::uint64_t death, bool pinned) {
    if (!nd->leaf) {
      Inner* in = as_index_inner<F>(nd);
      for (unsigned i = 0; i < nd->n; ++i) release_subtree(host, in->child[i], death, pinned);
    }
    host.release_index_node(nd, nd->birth, death, pinned, nd->leaf);
  }

  std::shared_ptr<const std::vector<IndexSpec>> specs_;
  std::vector<IndexRoot> live_;  // per spec: the live root, size and height
  IndexRootsRef published_;      // the record the last snapshot got
};

}  // namespace watchcache::detail
