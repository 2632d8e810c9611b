// The B+tree's read path: where a key lands in a node (land, child_index, leaf_find), a
// View of one version (find, rank, count, and the invariant checks), an in-order walk of a
// View (Walker), and what the public API builds on them: BasicSnapshot, BasicCursor (a
// Walker that keeps its snapshot alive) and scan(). Nothing here writes a node, which is
// why all of it is safe on a snapshot from any thread (btree.hpp: Threads). The node
// layout it reads is btree_node.hpp's.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "watchcache/btree_node.hpp"
#include "watchcache/item.hpp"
#include "watchcache/reclaim.hpp"
#include "watchcache/secondary_index_node.hpp"

namespace watchcache {
namespace detail {

inline constexpr unsigned kMaxDepth = 32;  // levels a Walker's path can hold

// Asks for every cache line of a node as soon as its address is known. A binary search makes
// dependent loads, and the slot it lands on needs its item or child pointer next: fetching
// the lines together overlaps their misses instead of paying them one after another. (A
// leaf is smaller than an internal node; the extra lines asked for are harmless.)
template <unsigned F>
inline void prefetch_node(const Node<F>* nd) noexcept {
  const char* p = reinterpret_cast<const char*>(nd);
  const char* end = p + sizeof(Inner<F>);
  for (; p < end; p += 64) __builtin_prefetch(p);
}

// Where a probe lands in a node: the first slot whose key is >= k (kStrict=false) or > k
// (kStrict=true), and whether a key equal to k was met on the way (at `pos` when not
// strict, at `pos - 1` when strict). Keys are unique, so a binary search that meets k
// converges on it; reporting the tie saves get and put a second comparison of the prefix
// and the integers.
struct Landing {
  unsigned pos = 0;
  bool equal = false;
};

// N is Leaf or Inner.
template <bool kStrict, class N>
inline Landing land(const N* nd, std::string_view k) noexcept {
  const unsigned n = nd->n;
  if (n == 0) return {};
  const int c = compare_to_node_prefix(nd, k);
  if (c < 0) return {};
  if (c > 0) return {n, false};
  const typename N::Bits kp = N::bits_of(k, nd->skip);
  const std::string_view ktail = k.substr(nd->skip);
  unsigned lo = 0, hi = n;
  bool equal = false;
  while (lo < hi) {
    const unsigned mid = (lo + hi) / 2;
    const typename N::Bits p = nd->bits(mid);
    int r;
    if (p != kp)
      r = p < kp ? -1 : 1;
    else if (N::whole(p))
      r = 0;
    else
      r = nd->key(mid).substr(nd->skip).compare(ktail);
    equal |= r == 0;
    if (kStrict ? r <= 0 : r < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return {lo, equal};
}

template <bool kStrict, class N>
inline unsigned search(const N* nd, std::string_view k) noexcept {
  return land<kStrict>(nd, k).pos;
}

template <unsigned F>
inline unsigned lower_bound(const Leaf<F>* nd, std::string_view k) noexcept { return search<false>(nd, k); }
template <unsigned F>
inline unsigned upper_bound(const Leaf<F>* nd, std::string_view k) noexcept { return search<true>(nd, k); }
// The slot of a leaf that holds k, or where k would go; `equal` says which.
template <unsigned F>
inline Landing leaf_find(const Leaf<F>* nd, std::string_view k) noexcept { return land<false>(nd, k); }

// The child of an internal node whose key range holds k: the last slot with min key <= k.
template <unsigned F>
inline unsigned child_index(const Inner<F>* nd, std::string_view k) noexcept {
  const unsigned ub = search<true>(nd, k);
  return ub == 0 ? 0 : ub - 1;
}

// A read-only view of one version of the tree: what Tree (live) and Snapshot share.
template <unsigned F>
struct View {
  const Node<F>* root = nullptr;
  unsigned height = 0;  // 0 = empty, 1 = root is a leaf
  std::size_t size = 0;

  const Item* find(std::string_view k) const noexcept {
    const Node<F>* nd = root;
    if (!nd) return nullptr;
    while (!nd->leaf) {
      nd = as_inner(nd)->child[child_index(as_inner(nd), k)];
      prefetch_node(nd);
    }
    const Landing at = leaf_find(as_leaf(nd), k);
    return at.equal ? nd->keys[at.pos] : nullptr;
  }

  // Number of keys < k (kStrict=false) or <= k (kStrict=true).
  template <bool kStrict>
  std::size_t rank(std::string_view k) const noexcept {
    const Node<F>* nd = root;
    if (!nd) return 0;
    std::size_t r = 0;
    while (!nd->leaf) {
      const auto* in = as_inner(nd);
      const unsigned i = child_index(in, k);
      for (unsigned j = 0; j < i; ++j) r += in->count[j];
      nd = in->child[i];
    }
    return r + search<kStrict>(as_leaf(nd), k);
  }

  // Keys in [lo, hi); nullopt bounds are open.
  std::size_t count(std::optional<std::string_view> lo, std::optional<std::string_view> hi) const noexcept {
    const std::size_t a = lo ? rank<false>(*lo) : 0;
    const std::size_t b = hi ? rank<false>(*hi) : size;
    return b > a ? b - a : 0;
  }

  // Nodes whose prefix is shorter than what their keys have in common (up to kMaxSkip): a
  // search there reads items it need not. Erases leave such nodes; inserts must not. O(n).
  std::size_t loose_prefixes() const { return root ? loose_below(root) : 0; }

  // Throws std::logic_error naming the first broken invariant. O(n).
  void check(std::uint64_t max_birth) const {
    if (!root) {
      if (size != 0 || height != 0) throw std::logic_error("empty tree with size or height");
      return;
    }
    const Item* prev = nullptr;
    std::size_t leaves_depth = 0;
    const std::size_t total = check_node(root, 1, max_birth, prev, leaves_depth);
    if (total != size) throw std::logic_error("size does not match the items in the tree");
    if (leaves_depth != height) throw std::logic_error("height does not match leaf depth");
  }

 private:
  static std::size_t loose_below(const Node<F>* nd) {
    const std::string_view a = nd->key(0), b = nd->key(nd->n - 1u);
    const std::size_t exact = std::min<std::size_t>(common_prefix(a.data(), a.size(), b.data(), b.size()), kMaxSkip);
    std::size_t loose = nd->skip < exact ? 1 : 0;
    if (!nd->leaf)
      for (unsigned i = 0; i < nd->n; ++i) loose += loose_below(as_inner(nd)->child[i]);
    return loose;
  }

  std::size_t check_node(const Node<F>* nd, std::size_t depth, std::uint64_t max_birth,
                         const Item*& prev, std::size_t& leaves_depth) const {
    auto fail = [](const char* what) { throw std::logic_error(what); };
    if (nd->birth > max_birth) fail("node born after its parent");
    if (nd->n > F) fail("node over capacity");
    if (nd != root && nd->n < F / 2) fail("node under minimum fill");
    if (nd == root && !nd->leaf && nd->n < 2) fail("internal root with fewer than 2 children");
    if (nd->skip > kMaxSkip) fail("skip beyond inline prefix");
    for (unsigned i = 0; i < nd->n; ++i) {
      const std::string_view k = nd->key(i);
      if (k.size() < nd->skip || std::memcmp(k.data(), nd->lcp, nd->skip) != 0)
        fail("key does not share the node prefix");
      const bool fresh = nd->leaf ? as_leaf(nd)->bits(i) == Leaf<F>::bits_of(k, nd->skip)
                                  : as_inner(nd)->bits(i) == Inner<F>::bits_of(k, nd->skip);
      if (!fresh) fail("stale inline key bytes");
      if (i > 0 && !(nd->key(i - 1) < k)) fail("keys out of order within a node");
    }
    if (nd->leaf) {
      if (leaves_depth == 0) leaves_depth = depth;
      if (leaves_depth != depth) fail("leaves at different depths");
      const auto* lf = as_leaf(nd);
      for (unsigned i = 0; i < nd->n; ++i) {
        if (prev && !(prev->key() < nd->key(i))) fail("keys out of order across leaves");
        if (lf->age[i] != kAgeUnknown && lf->age[i] > nd->birth) fail("item born before version 0");
        prev = nd->keys[i];
      }
      return nd->n;
    }
    const auto* in = as_inner(nd);
    std::size_t total = 0;
    for (unsigned i = 0; i < nd->n; ++i) {
      const Node<F>* c = in->child[i];
      if (c->n == 0) fail("empty child");
      if (nd->keys[i] != c->keys[0]) fail("separator is not the child's minimum item");
      const std::size_t sub = check_node(c, depth + 1, nd->birth, prev, leaves_depth);
      if (sub != in->count[i]) fail("stale subtree count");
      total += sub;
    }
    return total;
  }
};

// Iterates a View: a root-to-leaf path of (node, slot). Does not keep anything alive.
template <unsigned F>
class Walker {
 public:
  Walker() = default;
  explicit Walker(const View<F>& v) noexcept : view_(v) {}

  bool valid() const noexcept { return valid_; }
  const Item* item() const noexcept { return node_[leaf_level()]->keys[idx_[leaf_level()]]; }
  const Node<F>* leaf() const noexcept { return node_[leaf_level()]; }
  unsigned slot() const noexcept { return idx_[leaf_level()]; }

  // Number of items before the current one, from the counts along the path (nodes just
  // visited, so no cache misses).
  std::size_t position() const noexcept {
    std::size_t r = idx_[leaf_level()];
    for (unsigned l = 0; l < leaf_level(); ++l) {
      const auto* in = as_inner(node_[l]);
      for (unsigned j = 0; j < idx_[l]; ++j) r += in->count[j];
    }
    return r;
  }

  bool seek_first() noexcept { return descend_edge(false); }
  bool seek_last() noexcept { return descend_edge(true); }

  // First key >= k (strict=false) or > k (strict=true).
  bool seek(std::string_view k, bool strict = false) noexcept {
    valid_ = false;
    const Node<F>* nd = view_.root;
    if (!nd || nd->n == 0) return false;
    unsigned level = 0;
    while (!nd->leaf) {
      const unsigned i = child_index(as_inner(nd), k);
      node_[level] = nd;
      idx_[level] = static_cast<std::uint16_t>(i);
      nd = as_inner(nd)->child[i];
      detail::prefetch_node(nd);
      ++level;
    }
    const unsigned pos = strict ? upper_bound(as_leaf(nd), k) : lower_bound(as_leaf(nd), k);
    node_[level] = nd;
    if (pos < nd->n) {
      idx_[level] = static_cast<std::uint16_t>(pos);
      valid_ = true;
      return true;
    }
    idx_[level] = static_cast<std::uint16_t>(nd->n - 1);
    valid_ = true;
    return next();
  }

  // The step inside a leaf is forced inline and the leaf change is not: left to itself, GCC
  // stops inlining next() in a large translation unit (the Python module, engine_bench),
  // and a call per item keeps fewer iterations, so fewer item loads, in flight. engine_bench
  // (`make bench-native`), alternating builds with and without (0767269): "full scan" 18.7-19.6
  // -> 14.7-15.1 ns/item, "scan 500 from a random key" 3.1-3.2 -> 2.1-2.2 us.
  [[gnu::always_inline]] bool next() noexcept {
    if (!valid_) return false;
    const unsigned leaf = leaf_level();
    const unsigned slot = ++idx_[leaf];
    if (slot < node_[leaf]->n) [[likely]] {
      if (slot == 1) prefetch_right_leaf();
      return true;
    }
    return next_leaf();
  }

  // To the first slot of the next leaf (invalid past the last one): for walks that take a
  // leaf's remaining items at once.
  bool next_leaf_start() noexcept {
    if (!valid_) return false;
    idx_[leaf_level()] = static_cast<std::uint16_t>(node_[leaf_level()]->n - 1);
    return next();
  }

  // Split like next().
  [[gnu::always_inline]] bool prev() noexcept {
    if (!valid_) return false;
    const unsigned leaf = leaf_level();
    if (idx_[leaf] > 0) [[likely]] {
      --idx_[leaf];
      return true;
    }
    return prev_leaf();
  }

 private:
  unsigned leaf_level() const noexcept { return view_.height - 1; }

  // Before a leaf's first slot: climb to the deepest ancestor with a left neighbour and
  // descend its rightmost path.
  [[gnu::noinline]] bool prev_leaf() noexcept {
    const unsigned leaf = leaf_level();
    unsigned level = leaf;
    while (level > 0 && idx_[level - 1] == 0) --level;
    if (level == 0) return valid_ = false;
    --idx_[--level];
    for (unsigned l = level; l < leaf; ++l) {
      node_[l + 1] = as_inner(node_[l])->child[idx_[l]];
      idx_[l + 1] = static_cast<std::uint16_t>(node_[l + 1]->n - 1);
    }
    return true;
  }

  // Entering a leaf's second slot: start fetching the next leaf while this one is read.
  [[gnu::noinline]] void prefetch_right_leaf() const noexcept {
    const unsigned leaf = leaf_level();
    if (leaf > 0 && idx_[leaf - 1] + 1u < node_[leaf - 1]->n)
      prefetch_node(as_inner(node_[leaf - 1])->child[idx_[leaf - 1] + 1u]);
  }

  // Past a leaf's last slot: climb to the deepest ancestor with a right neighbour and
  // descend its leftmost path.
  [[gnu::noinline]] bool next_leaf() noexcept {
    const unsigned leaf = leaf_level();
    unsigned level = leaf;  // counts from 1
    while (level > 0 && idx_[level - 1] + 1u >= node_[level - 1]->n) --level;
    if (level == 0) return valid_ = false;
    ++idx_[--level];
    for (unsigned l = level; l < leaf; ++l) {
      node_[l + 1] = as_inner(node_[l])->child[idx_[l]];
      idx_[l + 1] = 0;
    }
    return true;
  }

  bool descend_edge(bool last) noexcept {
    valid_ = false;
    const Node<F>* nd = view_.root;
    if (!nd || nd->n == 0) return false;
    unsigned level = 0;
    for (;;) {
      node_[level] = nd;
      idx_[level] = static_cast<std::uint16_t>(last ? nd->n - 1 : 0);
      if (nd->leaf) break;
      nd = as_inner(nd)->child[idx_[level]];
      ++level;
    }
    return valid_ = true;
  }

  View<F> view_{};
  std::array<const Node<F>*, kMaxDepth> node_{};
  std::array<std::uint16_t, kMaxDepth> idx_{};
  bool valid_ = false;
};

// The smallest string greater than every string starting with `prefix`; nullopt if none
// (empty prefix, or all 0xFF bytes).
inline std::optional<std::string> prefix_end(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xFF) end.pop_back();
  if (end.empty()) return std::nullopt;
  end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
  return end;
}

// Whether a walker's key is below a range's end (none: no end). Staying inside the range
// must not cost a key dereference per item (each is a cache miss): the end is judged once
// per leaf against the leaf's common prefix — all keys below it, none, or undecided — and
// only an undecided leaf compares per slot, by its inline bytes. The per-item test is
// forced inline, for the reason given at Walker::next.
template <unsigned F>
class RangeEnd {
 public:
  explicit RangeEnd(const std::optional<std::string>& end) noexcept : end_(end) {}

  [[gnu::always_inline]] bool admits(const Walker<F>& w) noexcept {
    if (!end_) return true;
    if (w.leaf() != judged_) judge(w.leaf());
    if (verdict_ != 0) return verdict_ > 0;
    return admits_slot(w);
  }

 private:
  [[gnu::noinline]] void judge(const Node<F>* leaf) noexcept {
    judged_ = leaf;
    const int c = compare_to_node_prefix(leaf, *end_);
    verdict_ = c > 0 ? 1 : (c < 0 ? -1 : 0);
    if (verdict_ == 0) end_bits_ = Leaf<F>::bits_of(*end_, leaf->skip);
  }

  bool admits_slot(const Walker<F>& w) const noexcept {
    const auto bits = as_leaf(w.leaf())->bits(w.slot());
    if (bits != end_bits_) return bits < end_bits_;
    if (Leaf<F>::whole(bits)) return false;  // the key is the end itself
    return w.leaf()->key(w.slot()) < std::string_view(*end_);
  }

  const std::optional<std::string>& end_;
  const Node<F>* judged_ = nullptr;
  int verdict_ = 1;  // 1: every key of the judged leaf below the end; -1: none; 0: per slot
  typename Leaf<F>::Bits end_bits_ = 0;
};

}  // namespace detail

template <unsigned F>
class BasicTree;

// An immutable version of a tree. O(1) to take and to copy (each copy pins the version).
// Any number of threads may read one concurrently, without locks, while the writer goes on.
// It also carries the roots of the tree's secondary indexes at the same version
// (secondary_index.hpp), if the tree has any: the pin keeps their nodes alive as it keeps
// the tree's.
template <unsigned F = kDefaultFanout>
class BasicSnapshot {
 public:
  BasicSnapshot() = default;
  BasicSnapshot(const BasicSnapshot& o) : BasicSnapshot(o.domain_, o.view_, o.version_, o.nbytes_) {
    indexes_ = o.indexes_;
  }
  BasicSnapshot(BasicSnapshot&& o) noexcept
      : domain_(std::move(o.domain_)), view_(std::exchange(o.view_, {})), version_(o.version_),
        nbytes_(o.nbytes_), indexes_(std::move(o.indexes_)) {}
  BasicSnapshot& operator=(BasicSnapshot o) noexcept {
    swap(o);
    return *this;
  }
  ~BasicSnapshot() {
    if (domain_) domain_->unpin(version_);
  }
  void swap(BasicSnapshot& o) noexcept {
    std::swap(domain_, o.domain_);
    std::swap(view_, o.view_);
    std::swap(version_, o.version_);
    std::swap(nbytes_, o.nbytes_);
    std::swap(indexes_, o.indexes_);
  }

  const detail::View<F>& view() const noexcept { return view_; }
  std::size_t size() const noexcept { return view_.size; }
  std::uint64_t version() const noexcept { return version_; }
  // Bytes reachable from this snapshot (nodes and items), as accounted when it was taken.
  std::size_t nbytes() const noexcept { return nbytes_; }
  const Item* get(std::string_view k) const noexcept { return view_.find(k); }
  std::size_t count(std::optional<std::string_view> lo, std::optional<std::string_view> hi) const noexcept {
    return view_.count(lo, hi);
  }
  // The reclamation domain, shared with the tree; nullptr for a default-constructed snapshot.
  const std::shared_ptr<detail::ReclaimDomain>& domain() const noexcept { return domain_; }
  // The secondary indexes' roots at this version; empty when the tree had none.
  const detail::IndexRootsRef& indexes() const noexcept { return indexes_; }

 private:
  friend class BasicTree<F>;
  BasicSnapshot(std::shared_ptr<detail::ReclaimDomain> domain, detail::View<F> view,
                std::uint64_t version, std::size_t nbytes)
      : domain_(std::move(domain)), view_(view), version_(version), nbytes_(nbytes) {
    if (domain_) domain_->pin(version_);
  }

  std::shared_ptr<detail::ReclaimDomain> domain_;
  detail::View<F> view_{};
  std::uint64_t version_ = 0;
  std::size_t nbytes_ = 0;
  detail::IndexRootsRef indexes_;
};

// A position in a snapshot that keeps the snapshot alive: valid however the tree changes
// or is dropped. Not thread-safe itself (one cursor per thread).
template <unsigned F = kDefaultFanout>
class BasicCursor {
 public:
  explicit BasicCursor(BasicSnapshot<F> snap) : snap_(std::move(snap)), walker_(snap_.view()) {}
  bool valid() const noexcept { return walker_.valid(); }
  const Item* item() const noexcept { return walker_.valid() ? walker_.item() : nullptr; }
  bool seek(std::string_view k) noexcept { return walker_.seek(k, false); }
  bool seek_after(std::string_view k) noexcept { return walker_.seek(k, true); }
  bool seek_first() noexcept { return walker_.seek_first(); }
  bool seek_last() noexcept { return walker_.seek_last(); }
  bool next() noexcept { return walker_.next(); }
  bool prev() noexcept { return walker_.prev(); }
  const BasicSnapshot<F>& snapshot() const noexcept { return snap_; }

 private:
  BasicSnapshot<F> snap_;
  detail::Walker<F> walker_;
};

// What a scan returns: the selected items (valid as long as this result lives: it holds the
// snapshot), where to continue, and how many items of the range follow the last one returned.
template <unsigned F = kDefaultFanout>
struct BasicScanResult {
  BasicSnapshot<F> snapshot;
  std::vector<const Item*> items;
  // last returned key + "\0" when any item of the range (selected or not) follows it.
  std::optional<std::string> next_key;
  // Items of the range after the last returned one, selector ignored; 0 when not limited.
  std::size_t remaining = 0;
  // Items examined, selected or not.
  std::size_t scanned = 0;
};

struct ScanOptions {
  std::string_view prefix;
  std::optional<std::string_view> start;  // where to begin; clamped to the prefix
  bool start_inclusive = true;
  std::size_t limit = 0;  // selected items at most; 0 = no limit
};

struct SelectAll {
  bool operator()(const Item&) const noexcept { return true; }
};

// Scans a snapshot: seek, walk the prefix range, filter, stop at the limit, then report the
// continuation. O(log n + scanned). Thread-safe; call it with the GIL released. The range
// end is checked per leaf, not per key (RangeEnd).
template <unsigned F, class Pred = SelectAll>
BasicScanResult<F> scan(const BasicSnapshot<F>& snap, const ScanOptions& opts, const Pred& pred = {}) {
  BasicScanResult<F> out;
  out.snapshot = snap;
  const auto& view = snap.view();
  const std::optional<std::string> end = detail::prefix_end(opts.prefix);

  detail::RangeEnd<F> in_range(end);
  detail::Walker<F> w(view);
  if (opts.start && *opts.start >= opts.prefix)
    w.seek(*opts.start, !opts.start_inclusive);
  else
    w.seek(opts.prefix, false);
  if (opts.limit) out.items.reserve(std::min<std::size_t>(opts.limit, 1024));

  constexpr bool kFiltered = !std::is_same_v<Pred, SelectAll>;
  if constexpr (!kFiltered) {
    if (!opts.limit) {
      // Every item of the range, none tested: their number comes from the ranks (O(log n)),
      // so the result is sized once and each leaf's run of item pointers is copied whole,
      // with no per-item step or range test. A full LIST's scan is the wait before its
      // first byte: 150,000 items took 2.9 ms one by one.
      if (!w.valid()) return out;
      const std::size_t from = w.position();
      const std::size_t upto = end ? view.template rank<false>(*end) : view.size;
      std::size_t left = upto > from ? upto - from : 0;
      out.items.reserve(left);
      while (left && w.valid()) {
        const detail::Node<F>* leaf = w.leaf();
        const unsigned slot = w.slot();
        const std::size_t take = std::min<std::size_t>(leaf->n - slot, left);
        out.items.insert(out.items.end(), leaf->keys + slot, leaf->keys + slot + take);
        left -= take;
        if (left) w.next_leaf_start();
      }
      out.scanned = out.items.size();
      return out;
    }
  }
  const detail::Node<F>* fetched_leaf = nullptr;
  bool limited = false;
  while (w.valid() && in_range.admits(w)) {
    if constexpr (kFiltered) {
      // A selector reads every item: ask for all of this leaf's items at once so their
      // misses overlap rather than arriving one per item. The key, labels and fields of an
      // item come before its value (item.hpp), in its first lines.
      if (w.leaf() != fetched_leaf) {
        fetched_leaf = w.leaf();
        for (unsigned j = w.slot(); j < fetched_leaf->n; ++j) detail::prefetch_item(fetched_leaf->keys[j], 3);
      }
    }
    const Item* it = w.item();
    ++out.scanned;
    if (pred(*it)) {
      out.items.push_back(it);
      if (opts.limit && out.items.size() == opts.limit) {
        limited = true;
        break;
      }
    }
    w.next();
  }
  if (limited) {
    const std::size_t last_position = w.position();
    if (w.next() && in_range.admits(w)) {
      out.next_key = std::string(out.items.back()->key()) + '\0';
      const std::size_t upto = end ? view.template rank<false>(*end) : view.size;
      out.remaining = upto - (last_position + 1);
    }
  }
  return out;
}

}  // namespace watchcache
