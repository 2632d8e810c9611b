// Secondary indexes, part 3: the write path. IndexSet is the live state of a tree's indexes
// (specs, the roots of their trees, the epoch of changes since the last fold and its net
// effect), changed by the tree's own writer inside each of its writes: BasicTree calls
// on_put / on_erase before it hands the write's retirements to the reclaim domain, so that
// an item the index trees name can be kept from retiring until the fold (the Host hooks
// below). The fold writes the trees: copy-on-write, splits, borrows and merges follow the
// tree's rules (btree.hpp); node memory comes from the tree (its stock, its write's
// retirement batch, its accounting) through the Host hooks. The design is at the top of
// secondary_index.hpp.
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
#include "watchcache/secondary_index_epoch.hpp"
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
//   defer_item_retirement(const Item*)           an item this write retires that the index
//                                                trees still name: kept until the fold
//   end_deferred_retirements()                   the fold: they retire now
//   release_deferred_retirements(death, pinned)  clear / destruction
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
  // Index i as a snapshot of `version` (the current one) will see it.
  IndexView<F> view(std::size_t i, std::uint64_t version) const noexcept {
    return {&(*specs_)[i], live_[i].node, live_[i].height, live_[i].size, epoch_.get(), version,
            static_cast<std::uint32_t>(i)};
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
    fold(host);
    auto specs = std::make_shared<std::vector<IndexSpec>>(*specs_);
    specs->push_back(std::move(spec));
    live_.emplace_back();
    net_.emplace_back();
    specs_ = std::move(specs);
    build(host, live_.size() - 1, main);
  }

  // The write of `now` in place of `old` (null when the key was new), in every index, as
  // changes of the epoch: an entry whose value stays names `now` from this version on;
  // otherwise the old entry goes and the new one comes. A full epoch is folded first.
  template <class Host>
  void on_put(Host& host, const Item* old, const Item* now) {
    make_room(host, 2 * static_cast<std::uint32_t>(live_.size()));
    for (std::size_t i = 0; i < live_.size(); ++i) {
      const IndexSpec& spec = (*specs_)[i];
      const std::optional<std::string_view> value = indexed_value(*now, spec);
      if (old) {
        const std::optional<std::string_view> was = indexed_value(*old, spec);
        if (was && value && same_bytes(*was, *value)) {
          change(host, i, value_hash(*was), old, now);
          continue;
        }
        if (was) change(host, i, value_hash(*was), old, nullptr);
      }
      if (value) change(host, i, value_hash(*value), nullptr, now);
    }
  }

  // The removal of `gone` (still alive: its retirement is not flushed yet).
  template <class Host>
  void on_erase(Host& host, const Item* gone) {
    make_room(host, static_cast<std::uint32_t>(live_.size()));
    for (std::size_t i = 0; i < live_.size(); ++i) {
      const IndexSpec& spec = (*specs_)[i];
      if (const std::optional<std::string_view> was = indexed_value(*gone, spec))
        change(host, i, value_hash(*was), gone, nullptr);
    }
  }

  // Brings the index trees up to date with the epoch's changes, in the current version (so
  // each node is copied at most once), and starts a new epoch. The changes are applied by
  // their net effect (IndexNet), in hash order: removals, then entries that name a newer
  // item, then new entries.
  template <class Host>
  void fold(Host& host) {
    for (std::size_t i = 0; i < live_.size(); ++i) {
      IndexNet& net = net_[i];
      if (net.empty()) continue;
      const IndexSpec& spec = (*specs_)[i];
      std::vector<IndexNet::Removed> removed = net.removed();
      std::sort(removed.begin(), removed.end(), [](const auto& a, const auto& b) { return a.hash < b.hash; });
      for (const IndexNet::Removed& r : removed)
        erase(host, live_[i], spec, IndexProbe::of(r.item, entry_value(*r.item, spec), true));
      std::vector<Rename> renames;
      std::vector<IndexNet::Added> added;
      net.for_each_added([&](const IndexNet::Added& a) {
        if (a.origin)
          renames.push_back({a.hash, a.origin, a.item, false});
        else
          added.push_back(a);
      });
      rename_all(host, live_[i], spec, renames);
      std::sort(added.begin(), added.end(), [](const auto& a, const auto& b) { return a.hash < b.hash; });
      for (const IndexNet::Added& a : added)
        insert(host, live_[i], spec, IndexProbe::of(a.item, entry_value(*a.item, spec), false), a.item);
      net.clear();
    }
    host.end_deferred_retirements();
    epoch_ = {};
  }

  // Changes an epoch holds before the writer folds it (tests lower it to fold often).
  void set_epoch_capacity(std::uint32_t changes) {
    if (changes < 2 * kMaxIndexes) throw std::invalid_argument("an epoch holds at least two changes per index");
    epoch_capacity_ = changes;
    if (epoch_ && epoch_->size() == 0) epoch_ = {};
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
    for (IndexNet& net : net_) net.clear();
    host.release_deferred_retirements(death, pinned);
    epoch_ = {};
  }

  // The roots for a snapshot of the current version: the last record published while no
  // root and no epoch changed since (writes between folds change neither: a snapshot reads
  // the epoch up to its own version), else a new one. O(indexes); one allocation per fold.
  IndexRootsRef publish() {
    const IndexRoots* last = published_.get();
    bool same = last && last->specs == specs_ && last->epoch == epoch_;
    for (std::size_t i = 0; same && i < live_.size(); ++i) same = last->roots[i] == live_[i];
    if (same) return published_;
    auto* roots = new IndexRoots();
    roots->specs = specs_;
    roots->epoch = epoch_;
    for (std::size_t i = 0; i < live_.size(); ++i) std::construct_at(&roots->roots[i], live_[i]);
    published_ = IndexRootsRef::adopt(roots);
    return published_;
  }

  void check(const View<F>& main, std::uint64_t version) const {
    for (std::size_t i = 0; i < live_.size(); ++i) view(i, version).check(main, version);
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
  void make_room(Host& host, std::uint32_t changes) {
    if (epoch_ && !epoch_->room_for(changes)) fold(host);
    if (!epoch_) epoch_ = IndexEpochRef::adopt(new IndexEpoch(epoch_capacity_));
  }
  template <class Host>
  void change(Host& host, std::size_t i, IndexHash hash, const Item* gone, const Item* come) {
    epoch_->append(static_cast<std::uint32_t>(i), hash, host.version(), gone, come);
    if (const Item* out = net_[i].apply(hash, gone, come)) host.defer_item_retirement(out);
  }


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

  // An entry of the trees that names a newer item after the fold: same key, value and hash,
  // so the same place.
  struct Rename {
    IndexHash hash;
    const Item* from;
    const Item* to;
    bool done;
  };

  // Points every renamed entry to its newer item in one walk down the trees, in hash order:
  // a node is visited (and copied) once for all the renames below it, and an entry is found
  // by its hash and pointer alone, reading no item. A child's entries have hashes from its
  // separator to the next one, that one included (a value's run may straddle the boundary),
  // so a rename at a boundary hash is offered to both children and taken by the one that
  // holds it.
  template <class Host>
  void rename_all(Host& host, IndexRoot& t, const IndexSpec& spec, std::vector<Rename>& renames) {
    if (renames.empty()) return;
    std::sort(renames.begin(), renames.end(), [](const Rename& a, const Rename& b) { return a.hash < b.hash; });
    IndexNode* root = writable(host, mut(t.node));
    t.node = root;
    rename_below(host, root, renames.data(), renames.data() + renames.size());
    for (const Rename& r : renames)
      if (!r.done) throw std::logic_error("index on " + describe(spec) + ": entry to repoint is missing");
  }

  template <class Host>
  void rename_below(Host& host, IndexNode* nd, Rename* first, Rename* last) {
    if (nd->leaf) {
      Leaf* lf = as_index_leaf<F>(nd);
      for (Rename* r = first; r != last; ++r) {
        if (r->done) continue;
        unsigned i = static_cast<unsigned>(std::lower_bound(lf->hash, lf->hash + lf->n, r->hash) - lf->hash);
        for (; i < lf->n && lf->hash[i] == r->hash; ++i) {
          if (lf->item[i] == r->from) {
            lf->item[i] = r->to;
            r->done = true;
            break;
          }
        }
      }
      return;
    }
    Inner* in = as_index_inner<F>(nd);
    Rename* from = first;
    for (unsigned c = 0; c < in->n && from != last; ++c) {
      const bool last_child = c + 1 == in->n;
      Rename* to = from;
      while (to != last && (last_child || to->hash <= in->hash[c + 1])) ++to;
      if (std::any_of(from, to, [](const Rename& r) { return !r.done; })) {
        prefetch_index_node<F>(in->child[c]);
        in->child[c] = writable(host, in->child[c]);
        rename_below(host, in->child[c], from, to);
      }
      if (!last_child)
        while (from != last && from->hash < in->hash[c + 1]) ++from;
    }
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
  std::vector<IndexNet> net_;    // per spec: the epoch's changes by their net effect
  std::uint32_t epoch_capacity_ = IndexEpoch::kCapacity;
  IndexEpochRef epoch_;          // the changes since the last fold (none yet: empty)
};

}  // namespace watchcache::detail
