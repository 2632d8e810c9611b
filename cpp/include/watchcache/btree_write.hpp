// The B+tree's write path: BasicTree, the live tree and its single writer. Copy-on-write
// (make_writable), insert with splits (insert, insert_in_leaf, split_off, repack_halves),
// erase with borrows and merges (erase_from, rebalance), the bulk load (assign_sorted) and
// handing what a write replaced to the reclamation domain (retire_node, retire_item,
// release_all: reclaim.hpp). What a write does to one node's slots and prefix is
// btree_node.hpp's; where its node memory comes from is node_memory.hpp's. The rules these
// follow are at the top of btree.hpp. A tree with secondary indexes records their changes in
// the same writes and defers the retirement of the items their trees still name until the
// next fold (indexes_, defer_item_retirement: secondary_index.hpp); a tree without pays a
// null test per write.
#pragma once

#include <algorithm>
#include <array>
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

#include "watchcache/btree_node.hpp"
#include "watchcache/btree_read.hpp"
#include "watchcache/item.hpp"
#include "watchcache/node_memory.hpp"
#include "watchcache/reclaim.hpp"
#include "watchcache/secondary_index_write.hpp"

namespace watchcache {

// The live tree. One writer; the copy-on-write rules are at the top of btree.hpp.
template <unsigned F = kDefaultFanout>
class BasicTree {
  using Node = detail::Node<F>;
  using Leaf = detail::Leaf<F>;
  using Inner = detail::Inner<F>;

 public:
  using Snapshot = BasicSnapshot<F>;
  static constexpr unsigned kFanout = F;

  BasicTree() : domain_(std::make_shared<detail::ReclaimDomain>(detail::kNodeHooks)) {
    stock_[0].bytes = sizeof(Leaf);
    stock_[1].bytes = sizeof(Inner);
  }
  BasicTree(const BasicTree&) = delete;
  BasicTree& operator=(const BasicTree&) = delete;
  ~BasicTree() {
    release_all(detail::kForever);
    settle_node_counts();  // an empty tree whose last write threw
    for (detail::NodeStock& stock : stock_) stock.discard_all();
  }

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  std::uint64_t version() const noexcept { return version_; }
  std::size_t nbytes() const noexcept { return bytes_; }
  // Items the tree replaced or removed whose retirement waits for the next fold of its index
  // changes (defer_item_retirement): not in nbytes(), counted in the domain's retired bytes.
  std::size_t deferred_bytes() const noexcept { return deferred_bytes_; }
  detail::View<F> view() const noexcept { return {root_, height_, size_}; }
  const Item* get(std::string_view k) const noexcept { return view().find(k); }
  const std::shared_ptr<detail::ReclaimDomain>& domain() const noexcept { return domain_; }

  // O(1). Later writes copy what they touch instead of changing what the snapshot sees.
  Snapshot snapshot() {
    Snapshot s(domain_, view(), version_, bytes_);
    if (indexes_) s.indexes_ = indexes_->publish();
    ++version_;
    return s;
  }

  // Declares a secondary index and fills it from the current contents, O(n log n); later
  // writes keep it (secondary_index.hpp). std::invalid_argument for an empty name or a
  // repeated spec, std::length_error past kMaxIndexes; the tree is unchanged then.
  void add_index(IndexSpec spec) {
    std::unique_ptr<detail::IndexSet<F>> first = indexes_ ? nullptr : std::make_unique<detail::IndexSet<F>>();
    (first ? *first : *indexes_).validate(spec);
    if (first) indexes_ = std::move(first);
    indexes_->add(*this, std::move(spec), view());
    flush_retired();  // what folding the other indexes first replaced
  }
  // How many index changes the writer gathers before it folds them into the index trees
  // (secondary_index_epoch.hpp); tests lower it so that folds happen often.
  void set_index_epoch_capacity(std::uint32_t changes) {
    if (!indexes_) throw std::logic_error("no index declared");
    indexes_->set_epoch_capacity(changes);
  }
  // The declared indexes, in declaration order.
  std::vector<IndexSpec> indexes() const {
    return indexes_ ? indexes_->specs() : std::vector<IndexSpec>{};
  }

  // Inserts or replaces; takes over the caller's reference. Returns true if the key was new.
  bool put(ItemRef ref) {
    if (!ref) throw std::invalid_argument("null item");
    if (size_ >= detail::kMaxItems && !get(ref->key())) throw std::length_error("tree is full");
    const Item* item = ref.release_ownership();
    displaced_ = nullptr;
    if (!root_) {
      root_ = new_leaf();
      height_ = 1;
    } else {
      root_ = make_writable(root_);
    }
    const Grown grown = insert(root_, item);
    if (grown.sibling) {
      Inner* top = new_inner();
      top->child[0] = root_;
      top->keys[0] = root_->keys[0];
      top->count[0] = static_cast<detail::Count>(size_ + (grown.inserted ? 1 : 0) - grown.sibling_count);
      top->child[1] = grown.sibling;
      top->keys[1] = grown.sibling->keys[0];
      top->count[1] = grown.sibling_count;
      top->n = 2;
      detail::pack_prefixes(top);
      root_ = top;
      ++height_;
    }
    if (grown.inserted) ++size_;
    // Before the flush: the displaced item is retired with it and may be freed there.
    if (indexes_) indexes_->on_put(*this, displaced_, item);
    flush_retired();
    return grown.inserted;
  }

  // put() that also hands back the item it replaced (empty if the key was new), found on
  // the same descent: the watch cache needs the previous object of every event.
  ItemRef exchange(ItemRef ref) {
    ItemRef previous;
    replaced_ = &previous;
    struct Reset {
      ItemRef*& slot;
      ~Reset() { slot = nullptr; }
    } reset{replaced_};
    put(std::move(ref));
    return previous;
  }

  // Removes k; returns whether it was present. A missing key copies nothing.
  bool erase(std::string_view k) { return static_cast<bool>(take(k)); }

  // erase() that also hands back the removed item (empty if k was absent), from the same
  // lookup: the watch cache needs the previous object of a deletion.
  ItemRef take(std::string_view k) {
    ItemRef removed = ItemRef::share(get(k));
    if (!removed) return removed;
    root_ = make_writable(root_);
    erase_from(root_, k);
    --size_;
    if (root_->leaf) {
      if (root_->n == 0) {
        retire_node(root_);
        root_ = nullptr;
        height_ = 0;
      }
    } else if (root_->n == 1) {
      Node* old = root_;
      root_ = detail::as_inner(old)->child[0];
      retire_node(old);
      --height_;
    }
    if (indexes_) indexes_->on_erase(*this, removed.get());
    flush_retired();
    return removed;
  }

  void clear() {
    release_all(version_);
    root_ = nullptr;
    height_ = 0;
    size_ = 0;
    bytes_ = 0;
  }

  // Replaces the contents with `items`, which must have strictly ascending keys (else
  // std::invalid_argument and the tree is unchanged). Nodes are packed full. O(n).
  void assign_sorted(std::vector<ItemRef> items) {
    for (std::size_t i = 1; i < items.size(); ++i)
      if (!(items[i - 1]->key() < items[i]->key()))
        throw std::invalid_argument("keys are not strictly ascending at index " + std::to_string(i) +
                                    ": '" + std::string(items[i]->key()) + "'");
    if (items.size() > detail::kMaxItems) throw std::length_error("too many items for one tree");
    clear();
    if (items.empty()) return;
    std::vector<Node*> level;
    const std::size_t n = items.size();
    const std::size_t nleaves = (n + F - 1) / F;
    level.reserve(nleaves);
    std::size_t pos = 0;
    for (std::size_t l = 0; l < nleaves; ++l) {
      const std::size_t take = n / nleaves + (l < n % nleaves ? 1 : 0);
      Leaf* lf = new_leaf();
      for (std::size_t j = 0; j < take; ++j, ++pos) {
        const Item* it = items[pos].release_ownership();
        lf->keys[j] = it;
        lf->age[j] = 0;
        bytes_ += it->nbytes();
      }
      lf->n = static_cast<std::uint16_t>(take);
      detail::pack_prefixes(lf);
      level.push_back(lf);
    }
    std::vector<detail::Count> counts(level.size());
    for (std::size_t i = 0; i < level.size(); ++i) counts[i] = level[i]->n;
    height_ = 1;
    while (level.size() > 1) {
      const std::size_t m = level.size();
      const std::size_t nparents = (m + F - 1) / F;
      std::vector<Node*> up;
      std::vector<detail::Count> up_counts;
      std::size_t c = 0;
      for (std::size_t p = 0; p < nparents; ++p) {
        const std::size_t take = m / nparents + (p < m % nparents ? 1 : 0);
        Inner* in = new_inner();
        detail::Count total = 0;
        for (std::size_t j = 0; j < take; ++j, ++c) {
          in->child[j] = level[c];
          in->count[j] = counts[c];
          in->keys[j] = level[c]->keys[0];
          total += counts[c];
        }
        in->n = static_cast<std::uint16_t>(take);
        detail::pack_prefixes(in);
        up.push_back(in);
        up_counts.push_back(total);
      }
      level.swap(up);
      counts.swap(up_counts);
      ++height_;
    }
    root_ = level[0];
    size_ = n;
    if (indexes_) indexes_->rebuild(*this, view());
    settle_node_counts();
  }

  // Frees what no live snapshot can reach; returns the bytes freed.
  std::size_t collect() { return domain_->collect(); }

  // The tree's structure and every index's agreement with it.
  void check_invariants() const {
    view().check(version_);
    if (indexes_) indexes_->check(view(), version_);
  }

 private:
  // Node memory comes from the writer's stock, and a node no snapshot has seen goes back
  // to it: node_memory.hpp has the tiers and the policy.
  template <class Kind>
  Kind* allocate() {
    Kind* n = new (stock_for(std::is_same_v<Kind, Leaf>).template take<Kind>()) Kind(version_);
    owe_nodes(+1, sizeof(Kind));
    bytes_ += sizeof(Kind);
    return n;
  }
  detail::NodeStock& stock_for(bool leaf) noexcept { return stock_[leaf ? 0 : 1]; }
  Leaf* new_leaf() { return allocate<Leaf>(); }
  Inner* new_inner() { return allocate<Inner>(); }

  // Node memory for the secondary indexes (the Host of secondary_index_write.hpp). Their
  // nodes have the sizes of this tree's leaves and internal nodes, so they come from the
  // same stock, are counted and retired like the tree's own, and go in the same batch of
  // retirements (one domain lock per write).
  friend class detail::IndexSet<F>;
  static constexpr std::size_t node_size(bool leaf) noexcept { return leaf ? sizeof(Leaf) : sizeof(Inner); }
  void* take_index_node(bool leaf) {
    void* n = leaf ? stock_for(true).template take<Leaf>() : stock_for(false).template take<Inner>();
    owe_nodes(+1, node_size(leaf));
    bytes_ += node_size(leaf);
    return n;
  }
  void drop_index_node(void* n, std::uint64_t birth, bool leaf) {
    bytes_ -= node_size(leaf);
    if (birth == version_) {  // never visible to a snapshot
      owe_nodes(-1, node_size(leaf));
      stock_for(leaf).give_back(n);
      return;
    }
    retiring_.push_back(detail::ReclaimDomain::node(n, birth, version_, node_size(leaf)));
  }
  void release_index_node(void* n, std::uint64_t birth, std::uint64_t death, bool pinned, bool leaf) {
    if (pinned) {
      retiring_.push_back(detail::ReclaimDomain::node(n, birth, death, node_size(leaf)));
    } else {
      owe_nodes(-1, node_size(leaf));
      detail::discard_node(n, node_size(leaf));
    }
  }

  // An item this write retires (queued in retiring_) that the index trees still name while
  // the index epoch says it left them: its retirement waits for the fold that takes it out
  // of the trees (end_deferred_retirements), so that every snapshot whose index trees name
  // it, up to the fold, can compare it. Its bytes count as retired meanwhile.
  void defer_item_retirement(const Item* it) {
    for (auto r = retiring_.rbegin(); r != retiring_.rend(); ++r) {
      if (r->is_item && r->ptr == it) {
        deferred_items_.push_back(*r);
        deferred_bytes_ += r->bytes;
        domain_->hold_bytes(static_cast<std::int64_t>(r->bytes));
        retiring_.erase(std::next(r).base());
        return;
      }
    }
  }
  void end_deferred_retirements() {
    for (detail::ReclaimDomain::Retired& r : deferred_items_) {
      r.death = version_;
      retiring_.push_back(r);
    }
    stop_deferring();
  }
  void stop_deferring() {
    domain_->hold_bytes(-static_cast<std::int64_t>(deferred_bytes_));
    deferred_items_.clear();
    deferred_bytes_ = 0;
  }
  void release_deferred_retirements(std::uint64_t death, bool pinned) {
    for (detail::ReclaimDomain::Retired& r : deferred_items_) {
      if (pinned) {
        r.death = death;
        retiring_.push_back(r);
      } else {
        static_cast<const Item*>(r.ptr)->release();
      }
    }
    stop_deferring();
  }

  // Retirements of one write are queued and handed over together (one lock per write).
  // Nothing in the queue is touched again by the writer, so freeing it later is safe.
  void retire_node(Node* n) {
    bytes_ -= detail::node_bytes(n);
    if (n->birth == version_) {  // never visible to a snapshot
      owe_nodes(-1, detail::node_bytes(n));
      stock_for(n->leaf).give_back(n);
      return;
    }
    retiring_.push_back(detail::ReclaimDomain::node(n, n->birth, version_, detail::node_bytes(n)));
  }
  void retire_item(const Item* it, std::uint64_t birth) {
    bytes_ -= it->nbytes();
    retiring_.push_back(detail::ReclaimDomain::item(it, birth, version_));
  }
  void flush_retired() {
    settle_node_counts();
    domain_->retire(retiring_, stock_);
  }

  // The writer's own node allocations and frees are counted in the engine-wide accounting
  // (live_counters) once per write, not per node: a locked add per node waited for the copy
  // just written into the node before it, which lands in cold memory, so a path copy paid
  // its store misses one level after another. Settled by every write (flush_retired), by
  // assign_sorted and by the destructor, so the totals are exact between operations.
  void owe_nodes(int sign, std::size_t bytes) noexcept {
    owed_nodes_ += sign;
    owed_bytes_ += sign * static_cast<std::int64_t>(bytes);
  }
  void settle_node_counts() noexcept {
    if (owed_nodes_ == 0 && owed_bytes_ == 0) return;
    detail::count_nodes(owed_nodes_, owed_bytes_);
    owed_nodes_ = owed_bytes_ = 0;
  }

  // The one copy-on-write primitive: the node itself if this version owns it, else a copy
  // (born now) while the original is retired for the snapshots that still reach it.
  Node* make_writable(Node* n) {
    if (n->birth == version_) return n;
    Node* copy = detail::as_kind(n, [this](auto* src) -> Node* {
      using Kind = std::remove_cvref_t<decltype(*src)>;
      Kind* c = allocate<Kind>();
      // Copy only the header and the used slots: the copy lands in cold memory, and every
      // line written costs a read-for-ownership, so the unused tail (a third of a node on
      // average) is not worth copying. Slots at or past n are never read.
      detail::copy_slots(c, 0, src, 0, src->n);
      if constexpr (std::is_same_v<Kind, Leaf>) detail::age_slots(c->age, src->age, src->n, version_ - src->birth);
      return c;
    });
    copy->n = n->n;
    copy->skip = n->skip;
    std::memcpy(copy->lcp, n->lcp, n->skip);
    retire_node(n);
    return copy;
  }

  // Gives both halves of a split their own exact prefix. A split copies the full node's
  // prefix, and inserts only ever shorten one, so without this a tree grown by inserts in
  // random order keeps, in every node, the prefix its first few keys had in common
  // ("/registry/pods/ns-"): the inline bytes of a whole namespace then tie and each step of
  // a search reads an item, a cache miss. On a 1M tree grown by random puts, get took 0.41
  // and update 0.53 of the time without this (`scripts/ab-engine.sh e377ef5~1 grown_get
  // grown_update`, run at e377ef5). Re-deriving the inline bytes reads every key of the
  // node, once per F/2 inserts into it; the reads are issued together.
  template <class Kind>
  static void repack_halves(Kind* left, Kind* right) noexcept {
    for (const Kind* half : {left, right}) {
      for (unsigned i = 0; i < half->n; ++i) detail::prefetch_item(half->keys[i], 2);
    }
    detail::pack_prefixes(left);
    detail::pack_prefixes(right);
  }

  static detail::Count weight(const Node* nd, unsigned i) noexcept {
    return nd->leaf ? 1 : detail::as_inner(nd)->count[i];
  }

  // Moves the upper half of the full (writable) node c into a new sibling, returned.
  Node* split_off(Node* c) {
    return detail::as_kind(c, [this](auto* full) -> Node* {
      using Kind = std::remove_cvref_t<decltype(*full)>;
      Kind* s = allocate<Kind>();
      const unsigned mid = F / 2, moved = F - mid;
      s->skip = full->skip;
      std::memcpy(s->lcp, full->lcp, full->skip);
      detail::copy_slots(s, 0, full, mid, moved);
      s->n = static_cast<std::uint16_t>(moved);
      full->n = static_cast<std::uint16_t>(mid);
      return s;
    });
  }

  // A subtree never holds more than the tree, which put() keeps within kMaxItems.
  static detail::Count subtree_count(const Node* nd) noexcept {
    return nd->leaf ? nd->n : static_cast<detail::Count>(detail::as_inner(nd)->total());
  }

  // What an insert below a node reports to its parent: whether the key was new, and the new
  // right sibling if the node had to split (splits happen only when a key is added, bottom-up,
  // so replacing a value in a full node never splits it).
  struct Grown {
    bool inserted = false;
    Node* sibling = nullptr;
    detail::Count sibling_count = 0;
  };

  Grown insert(Node* nd, const Item* item) {
    const std::string_view k = item->key();
    if (nd->leaf) return insert_in_leaf(detail::as_leaf(nd), detail::leaf_find(detail::as_leaf(nd), k), item);
    auto* in = detail::as_inner(nd);
    const unsigned i = detail::child_index(in, k);
    Node* child = in->child[i];
    detail::prefetch_node(child);
    Grown below;
    Node* c;
    if (child->leaf) {
      // The leaf is searched before it is copied (a copy has the same slots, so the landing
      // holds for it): a replaced item is then asked for while the copy is made, instead of
      // after it, when its size is read for the accounting (retire_item). With indexes the
      // write then reads the replaced item's indexed values, past its labels and fields: its
      // first six lines (a pod's head) are asked for at once.
      const detail::Landing at = detail::leaf_find(detail::as_leaf(child), k);
      if (at.equal) {
        if (indexes_)
          detail::prefetch_item(child->keys[at.pos], 6);
        else
          detail::prefetch_item(child->keys[at.pos], 1);
      }
      c = make_writable(child);
      in->child[i] = c;
      below = insert_in_leaf(detail::as_leaf(c), at, item);
    } else {
      c = make_writable(child);
      in->child[i] = c;
      below = insert(c, item);
    }
    if (below.inserted) ++in->count[i];
    detail::set_key(in, i, c->keys[0]);
    if (!below.sibling) return {below.inserted, nullptr, 0};
    in->count[i] -= below.sibling_count;
    Node* target = nd;
    Node* sibling = nullptr;
    unsigned pos = i + 1;
    if (nd->n == F) {
      sibling = split_off(nd);
      if (pos > nd->n) {
        pos -= nd->n;
        target = sibling;
      }
    }
    detail::open_slot(detail::as_inner(target), pos, below.sibling->keys[0]);
    detail::as_inner(target)->child[pos] = below.sibling;
    detail::as_inner(target)->count[pos] = below.sibling_count;
    if (sibling) repack_halves(in, detail::as_inner(sibling));
    return {below.inserted, sibling, sibling ? subtree_count(sibling) : 0};
  }

  // Puts `item` into the writable leaf nd, where `at` says its key lands.
  Grown insert_in_leaf(Leaf* lf, detail::Landing at, const Item* item) {
    unsigned pos = at.pos;
    if (at.equal) {
      const Item* old = lf->keys[pos];
      const std::uint64_t old_birth = lf->item_birth(pos);
      lf->keys[pos] = item;  // same key: the inline bytes stay right
      lf->age[pos] = 0;
      bytes_ += item->nbytes();
      displaced_ = old;
      // Take the reference before retiring: with no snapshot pinning it, the old item
      // may be freed by this very put.
      if (replaced_) *replaced_ = ItemRef::share(old);
      retire_item(old, old_birth);
      return {};
    }
    bytes_ += item->nbytes();
    Leaf* target = lf;
    Leaf* sibling = nullptr;
    if (lf->n == F) {
      sibling = detail::as_leaf(split_off(lf));
      if (pos > lf->n) {
        pos -= lf->n;
        target = sibling;
      }
    }
    detail::open_slot(target, pos, item);
    target->age[pos] = 0;
    if (sibling) repack_halves(lf, sibling);
    return {true, sibling, sibling ? sibling->n : 0u};
  }


  // Erases k (known to be present) below the writable node nd.
  void erase_from(Node* nd, std::string_view k) {
    if (nd->leaf) {
      auto* lf = detail::as_leaf(nd);
      const unsigned pos = detail::lower_bound(lf, k);
      const Item* old = nd->keys[pos];
      const std::uint64_t birth = lf->item_birth(pos);
      detail::close_slot(lf, pos);
      retire_item(old, birth);
      return;
    }
    auto* in = detail::as_inner(nd);
    const unsigned i = detail::child_index(in, k);
    Node* c = make_writable(in->child[i]);
    in->child[i] = c;
    erase_from(c, k);
    --in->count[i];
    if (c->n < F / 2)
      rebalance(in, i);
    else
      detail::set_key(in, i, c->keys[0]);
  }

  // Child i of p fell below minimum fill: borrow from a sibling or merge with it.
  void rebalance(Inner* p, unsigned i) {
    const bool use_left = i > 0;
    const unsigned j = use_left ? i - 1 : i + 1;
    p->child[j] = make_writable(p->child[j]);
    Node* c = p->child[i];
    Node* sib = p->child[j];
    if (sib->n > F / 2) {
      const unsigned from = use_left ? sib->n - 1u : 0u;
      const unsigned to = use_left ? 0u : c->n;
      const detail::Count w = weight(sib, from);
      detail::move_slot(sib, from, c, to);
      p->count[i] += w;
      p->count[j] -= w;
      detail::set_key(p, i, c->keys[0]);
      detail::set_key(p, j, sib->keys[0]);
      return;
    }
    const unsigned l = std::min(i, j), r = std::max(i, j);
    Node* left = p->child[l];
    Node* right = p->child[r];
    const std::size_t shared = std::min<std::size_t>(
        detail::common_prefix(left->lcp, left->skip, right->lcp, right->skip), std::min(left->skip, right->skip));
    detail::as_kind(left, [&](auto* l_kind) {
      auto* r_kind = static_cast<decltype(l_kind)>(static_cast<void*>(right));
      detail::shrink_skip(l_kind, shared);
      detail::shrink_skip(r_kind, shared);
      detail::copy_slots(l_kind, l_kind->n, r_kind, 0, r_kind->n);  // both born now: ages agree
    });
    left->n = static_cast<std::uint16_t>(left->n + right->n);
    p->count[l] += p->count[r];
    detail::close_slot(p, r);
    retire_node(right);
    detail::set_key(p, l, left->keys[0]);
  }

  // Hands every live node and item to the domain as leaving at `death` (kForever when the
  // tree itself goes away). With no snapshot pinned, frees directly.
  void release_all(std::uint64_t death) {
    // The index trees may hold entries while the tree is empty (removals not folded yet).
    if (!root_ && !indexes_) return;
    const bool pinned = domain_->oldest_pin() != detail::kForever;
    if (indexes_) indexes_->release(*this, death, pinned);  // no item is read: before the items go
    if (root_) release_subtree(root_, death, pinned);
    flush_retired();
  }

  void release_subtree(Node* nd, std::uint64_t death, bool pinned) {
    if (nd->leaf) {
      auto* lf = detail::as_leaf(nd);
      for (unsigned i = 0; i < nd->n; ++i) {
        if (pinned)
          retiring_.push_back(detail::ReclaimDomain::item(nd->keys[i], lf->item_birth(i), death));
        else
          nd->keys[i]->release();
      }
    } else {
      auto* in = detail::as_inner(nd);
      for (unsigned i = 0; i < nd->n; ++i) release_subtree(in->child[i], death, pinned);
    }
    if (pinned) {
      retiring_.push_back(detail::ReclaimDomain::node(nd, nd->birth, death, detail::node_bytes(nd)));
    } else {
      owe_nodes(-1, detail::node_bytes(nd));
      detail::discard_node(nd, detail::node_bytes(nd));
    }
  }

  std::shared_ptr<detail::ReclaimDomain> domain_;
  std::array<detail::NodeStock, 2> stock_;  // free leaves, free internal nodes (node_memory.hpp)
  std::vector<detail::ReclaimDomain::Retired> retiring_;
  std::vector<detail::ReclaimDomain::Retired> deferred_items_;  // defer_item_retirement
  std::size_t deferred_bytes_ = 0;
  std::int64_t owed_nodes_ = 0, owed_bytes_ = 0;  // see settle_node_counts()
  Node* root_ = nullptr;
  unsigned height_ = 0;
  std::size_t size_ = 0;
  std::size_t bytes_ = 0;
  // Starts at 1 so that version 0 never names a real snapshot.
  std::uint64_t version_ = 1;
  // Where exchange() wants the replaced item; null outside exchange().
  ItemRef* replaced_ = nullptr;
  // The item the current put() replaced (null when its key was new), for the indexes.
  const Item* displaced_ = nullptr;
  // The secondary indexes; null until add_index().
  std::unique_ptr<detail::IndexSet<F>> indexes_;
};

}  // namespace watchcache
