// Persistent (copy-on-write) B+tree: Tree (the single writer), Snapshot (immutable view),
// Cursor (a position that keeps its snapshot alive) and scan().
//
// Shape. Items live only in leaves; an internal node keeps, per child, the child's pointer,
// its subtree item count (so rank/count of a range is O(F log n)) and the item holding the
// child's smallest key (so separators never outlive their bytes: see "Separators").
//
//            [ a  | g  | p ]            internal: min key, child, count per slot
//            /     |      |
//   [a b c d e] [g h k m] [p q x]       leaves: items (key, value, revision, labels, fields)
//
// Copy-on-write. Every node records the tree version it was born in. The writer mutates a
// node in place only if it was born in the current version — then no snapshot can reach it;
// otherwise make_writable() copies it and retires the original (reclaim.hpp). A write
// walks top-down, making each node on its path writable before touching it, so a write
// after a snapshot copies exactly one root-to-leaf path and a later write in the same
// version copies nothing. snapshot() is O(1): it shares the root and bumps the version.
// Reclamation is by version interval, not refcount, so a copy never touches children or
// items (the expensive part of refcounted persistent trees: one cache miss per child).
//
// Keys. A comparison that dereferences an item's key is a cache miss. Each node therefore
// keeps the common prefix of its keys (first `skip` bytes, up to kMaxSkip, stored inline)
// and, per slot, the next key bytes as a big-endian integer (in a leaf 7 and the key's
// length past the prefix, in an internal node 10: see Leaf and Inner). A search compares
// the probe with the node prefix once, then binary-searches the integers; only a tie on all
// of those bytes dereferences a key, and in a leaf not even that when the key is short
// enough to be held whole.
// Kubernetes keys share long prefixes ("/registry/pods/ns-00042/pod-"), which is exactly
// what the per-node skip absorbs. In place the prefix only ever shrinks (inserting a key
// outside it), which re-derives the integers from the inline prefix without touching any
// key; a split gives both halves their exact prefix again (repack_halves).
//
// Separators. An internal slot's key is a pointer to the item that is the child's minimum.
// Whenever a write changes a child's minimum (insert in front, erase of the minimum, a
// replaced item, a borrow or merge), the path back up is rewritten, which the path copy
// does anyway. So a separator never points to an item that left the tree in the current
// version, and old versions keep their own (retired, still pinned) items.
//
// Fan-out. F slots per node, a template parameter; the build uses WATCHCACHE_FANOUT = 32,
// chosen with cpp/bench/fanout_bench.cpp (make bench-native) at 1M keys over F = 8..128.
// F=16 and F=32 tie on a write right after a snapshot (2.61-2.77 us either way); F=32
// updates faster under an old snapshot (1.15-1.16 vs 1.34-1.38 us: the target is
// 1.2 us) and scans 5-15% faster (twice the items per leaf), which is the LIST path. Its
// cost is the path a write copies: 704 B per leaf and 1,024 B per internal node at F=32,
// 3.95 KB pinned per stored snapshot at 1M keys (write_probe). Minimum fill F/2 except at
// the root. Nodes split bottom-up and only when a key is added, so updating values in a
// bulk-loaded (100% full) tree never splits.
//
// Costs (n items, F fan-out): get, put, erase O(log n) node visits with ~1 key dereference
// at the leaf; snapshot O(1); count/rank O(F log n); scan O(log n + k); a write after a
// snapshot allocates and copies log_F(n) nodes (0.7-1 KB each at F=32), taken from the
// nodes the reclaim domain parked when older snapshots went (node_memory.hpp: the tiers
// node memory passes through).
//
// Threads. One writer owns a Tree; Tree reads are not safe concurrently with its writes.
// Snapshots, cursors and scans over snapshots are safe from any thread without locks while
// the writer continues: nothing a snapshot reaches is ever written again.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "watchcache/item.hpp"
#include "watchcache/node_memory.hpp"
#include "watchcache/reclaim.hpp"
#include "watchcache/sanitizers.hpp"
#include "watchcache/single_thread.hpp"

#ifndef WATCHCACHE_FANOUT
#define WATCHCACHE_FANOUT 32
#endif

namespace watchcache {

inline constexpr unsigned kDefaultFanout = WATCHCACHE_FANOUT;

namespace detail {

inline constexpr unsigned kMaxSkip = 48;
inline constexpr unsigned kMaxDepth = 32;

// The inline key bytes a slot keeps past the node's common prefix, compared as one
// big-endian integer: 10 in an internal node; a leaf's layout is described at Leaf. A leaf's
// prefix is long (its keys are neighbours: "/registry/pods/ns-00042/pod-000"), so a few more
// bytes end the key. An internal node's keys spread wider: past a prefix like
// "/registry/pods/ns-000", 8 bytes name only the namespace, so a probe ties with the
// separators of its namespace and each tie reads an item from memory. Measured with
// write_probe under callgrind at 1M keys, with 8 bytes in leaves (LL misses per get / per
// write after a snapshot / bytes pinned per snapshot): internal 8 bytes 9.7 / 20.0 / 3,759;
// 10 bytes 7.5 / 18.1 / 3,951; 12 bytes 7.4 / 18.2 / 4,143; 16 everywhere (the old layout)
// 8.1 / 23.3 / 4,911. (The write column came from the probe's old way of counting, which
// emptied the simulated caches between batches; the comparison stands, the level does not.)
__extension__ using Bits96 = unsigned __int128;

template <unsigned W>
using KeyBitsOf = std::conditional_t<W == 8, std::uint64_t, Bits96>;

inline std::uint64_t load_be64(const unsigned char* buf) noexcept {
  std::uint64_t v;
  std::memcpy(&v, buf, 8);
  return __builtin_bswap64(v);
}
inline std::uint32_t load_be32(const unsigned char* buf) noexcept {
  std::uint32_t v;
  std::memcpy(&v, buf, 4);
  return __builtin_bswap32(v);
}

// W bytes at buf (which has 4 readable bytes past W when W > 8), big-endian.
template <unsigned W>
inline KeyBitsOf<W> load_bits(const unsigned char* buf) noexcept {
  static_assert(W == 8 || (W > 8 && W <= 12));
  if constexpr (W == 8)
    return load_be64(buf);
  else
    return (static_cast<Bits96>(load_be64(buf)) << (8 * (W - 8))) | (load_be32(buf + 8) >> (8 * (12 - W)));
}

template <unsigned W>
inline void store_bits(KeyBitsOf<W> v, unsigned char* buf) noexcept {
  const std::uint64_t hi = __builtin_bswap64(static_cast<std::uint64_t>(v >> (8 * (W - 8))));
  std::memcpy(buf, &hi, 8);
  if constexpr (W > 8) {
    const std::uint32_t lo = __builtin_bswap32(static_cast<std::uint32_t>(v) << (8 * (12 - W)));
    std::memcpy(buf + 8, &lo, W - 8);
  }
}

// W key bytes from `offset`, zero padded, as an integer: integer order equals byte order,
// with ties when the bytes (or padding) agree.
template <unsigned W>
inline KeyBitsOf<W> key_bits(std::string_view key, std::size_t offset) noexcept {
  unsigned char buf[16] = {};
  if (key.size() > offset) std::memcpy(buf, key.data() + offset, std::min<std::size_t>(W, key.size() - offset));
  return load_bits<W>(buf);
}

inline std::size_t common_prefix(const char* a, std::size_t alen, const char* b, std::size_t blen) {
  std::size_t n = std::min(alen, blen), i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

template <unsigned F>
struct Node {
  static_assert(F >= 4 && F <= 1024, "fan-out out of range");
  std::uint64_t birth;
  std::uint16_t n = 0;
  bool leaf;
  std::uint8_t skip = 0;
  char lcp[kMaxSkip];
  const Item* keys[F];  // leaf: the items; internal: the item holding the child's minimum key

  Node(std::uint64_t b, bool is_leaf) noexcept : birth(b), leaf(is_leaf) {}
  std::string_view key(unsigned i) const noexcept { return keys[i]->key(); }
};

// A leaf slot's item birth, as its distance below the leaf's own birth: 4 bytes instead of
// 8 per slot. A distance too large to store reads as birth 0, which is safe: an item taken
// to be older than it is stays pinned for the snapshots in between, never the reverse.
inline constexpr std::uint32_t kAgeUnknown = std::numeric_limits<std::uint32_t>::max();

// Ages `n` slots by `older` versions (a leaf copied `older` versions after its birth): a
// saturating add, so an unknown age stays unknown and an overflow becomes unknown.
inline void age_slots(std::uint32_t* dst, const std::uint32_t* src, unsigned n, std::uint64_t older) noexcept {
  const std::uint32_t step = older >= kAgeUnknown ? kAgeUnknown : static_cast<std::uint32_t>(older);
  for (unsigned i = 0; i < n; ++i) {
    const std::uint32_t sum = src[i] + step;
    dst[i] = sum < step ? kAgeUnknown : sum;
  }
}

// A leaf slot's inline bytes: the first 7 key bytes past the node prefix (zero padded) in
// the high 56 bits and the number of key bytes past the prefix, capped at 8, in the low 8.
// Integer order still follows key order (a shorter key whose bytes agree is its longer
// neighbour's prefix, so it sorts first), and when the count is under 8 the integer holds
// the whole key: equal integers then mean equal keys and nothing is read from the item.
// A put that replaces an item, or a get, so skips the cache miss of comparing the stored
// key, for every key whose tail past its leaf's prefix is at most 7 bytes (in a leaf of
// "/registry/pods/ns-00042/pod-0001234"-like neighbours, all of them).
inline constexpr unsigned kLeafTailBytes = 7;
inline constexpr std::uint64_t kLeafCountMask = 0xFF;

template <unsigned F>
struct Leaf : Node<F> {
  using Bits = std::uint64_t;
  Bits pfx[F];
  std::uint32_t age[F];  // leaf birth - item birth, or kAgeUnknown
  explicit Leaf(std::uint64_t b) noexcept : Node<F>(b, true) {}

  // The inline bytes of `key` in a node whose prefix is `offset` bytes long (<= key size).
  static Bits bits_of(std::string_view key, std::size_t offset) noexcept {
    unsigned char buf[8] = {};
    const std::size_t tail = key.size() > offset ? key.size() - offset : 0;
    if (tail) std::memcpy(buf, key.data() + offset, std::min<std::size_t>(tail, kLeafTailBytes));
    return (load_be64(buf) & ~kLeafCountMask) | std::min<std::size_t>(tail, kLeafTailBytes + 1);
  }
  // Whether the bits hold the key's whole tail.
  static bool whole(Bits b) noexcept { return (b & kLeafCountMask) <= kLeafTailBytes; }
  // The bits after the node prefix lost its last `gap` bytes, `gained` (no item is read).
  static Bits widened(Bits b, const char* gained, std::size_t gap) noexcept {
    unsigned char buf[16] = {};
    const std::size_t from = std::min<std::size_t>(gap, kLeafTailBytes);
    std::memcpy(buf, gained, from);
    const std::uint64_t old_bytes = __builtin_bswap64(b);
    std::memcpy(buf + from, &old_bytes, kLeafTailBytes);
    const std::uint64_t count = std::min<std::uint64_t>((b & kLeafCountMask) + gap, kLeafTailBytes + 1);
    return (load_be64(buf) & ~kLeafCountMask) | count;
  }

  Bits bits(unsigned i) const noexcept { return pfx[i]; }
  void set_bits(unsigned i, Bits b) noexcept { pfx[i] = b; }
  std::uint64_t item_birth(unsigned i) const noexcept {
    return age[i] == kAgeUnknown ? 0 : this->birth - age[i];
  }
  // Calls fn(dst_array, src_array) for every per-slot array, so that moving slots is written once.
  template <class Fn>
  static void zip_slots(Leaf& dst, const Leaf& src, Fn&& fn) {
    fn(dst.keys, src.keys);
    fn(dst.pfx, src.pfx);
    fn(dst.age, src.age);
  }
};

// Subtree counts are 32-bit: half the bytes a path copy moves for them, and no tree gets
// near 4G items (Tree::put and assign_sorted refuse to pass kMaxItems).
using Count = std::uint32_t;
inline constexpr std::size_t kMaxItems = std::numeric_limits<Count>::max();

template <unsigned F>
struct Inner : Node<F> {
  static constexpr unsigned kKeyBytes = 10;
  using Bits = KeyBitsOf<kKeyBytes>;
  std::uint64_t pfx_hi[F];  // the first 8 of the key bytes
  std::uint16_t pfx_lo[F];  // the last 2
  Node<F>* child[F];
  Count count[F];
  explicit Inner(std::uint64_t b) noexcept : Node<F>(b, false) {}

  static Bits bits_of(std::string_view key, std::size_t offset) noexcept { return key_bits<kKeyBytes>(key, offset); }
  // Internal nodes keep no length: a tie always reads the separator's item.
  static bool whole(Bits) noexcept { return false; }
  static Bits widened(Bits b, const char* gained, std::size_t gap) noexcept {
    unsigned char buf[2 * kKeyBytes + 4] = {};
    const std::size_t from = std::min<std::size_t>(gap, kKeyBytes);
    std::memcpy(buf, gained, from);
    store_bits<kKeyBytes>(b, buf + from);
    return load_bits<kKeyBytes>(buf);
  }
  Bits bits(unsigned i) const noexcept { return (static_cast<Bits>(pfx_hi[i]) << 16) | pfx_lo[i]; }
  void set_bits(unsigned i, Bits b) noexcept {
    pfx_hi[i] = static_cast<std::uint64_t>(b >> 16);
    pfx_lo[i] = static_cast<std::uint16_t>(b);
  }
  std::uint64_t total() const noexcept {
    std::uint64_t t = 0;
    for (unsigned i = 0; i < this->n; ++i) t += count[i];
    return t;
  }
  template <class Fn>
  static void zip_slots(Inner& dst, const Inner& src, Fn&& fn) {
    fn(dst.keys, src.keys);
    fn(dst.pfx_hi, src.pfx_hi);
    fn(dst.pfx_lo, src.pfx_lo);
    fn(dst.child, src.child);
    fn(dst.count, src.count);
  }
};

// The file comment quotes these sizes for the build's fan-out: keep them true.
static_assert(sizeof(Leaf<32>) == 704 && sizeof(Inner<32>) == 1024);

template <unsigned F>
inline Leaf<F>* as_leaf(Node<F>* n) noexcept { return static_cast<Leaf<F>*>(n); }
template <unsigned F>
inline const Leaf<F>* as_leaf(const Node<F>* n) noexcept { return static_cast<const Leaf<F>*>(n); }
template <unsigned F>
inline Inner<F>* as_inner(Node<F>* n) noexcept { return static_cast<Inner<F>*>(n); }
template <unsigned F>
inline const Inner<F>* as_inner(const Node<F>* n) noexcept { return static_cast<const Inner<F>*>(n); }

template <unsigned F>
inline std::size_t node_bytes(const Node<F>* n) noexcept {
  return n->leaf ? sizeof(Leaf<F>) : sizeof(Inner<F>);
}

// Sign of probe `k` against the node's common prefix: <0 below every key in the node, >0
// above every key, 0 when k shares the prefix (then the integers decide).
template <unsigned F>
inline int compare_to_node_prefix(const Node<F>* nd, std::string_view k) noexcept {
  const std::size_t m = std::min<std::size_t>(k.size(), nd->skip);
  if (m) {
    const int r = std::memcmp(k.data(), nd->lcp, m);
    if (r) return r;
  }
  return k.size() < nd->skip ? -1 : 0;
}

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
  // and a call per item keeps fewer iterations, so fewer item loads, in flight. Measured at
  // 1M keys, a Cursor reading each key: 17-18 ns per item with the call, 13-14 inline.
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
template <unsigned F = kDefaultFanout>
class BasicSnapshot {
 public:
  BasicSnapshot() = default;
  BasicSnapshot(const BasicSnapshot& o) : BasicSnapshot(o.domain_, o.view_, o.version_, o.nbytes_) {}
  BasicSnapshot(BasicSnapshot&& o) noexcept
      : domain_(std::move(o.domain_)), view_(std::exchange(o.view_, {})), version_(o.version_),
        nbytes_(o.nbytes_) {}
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
  const detail::Node<F>* fetched_leaf = nullptr;
  bool limited = false;
  while (w.valid() && in_range.admits(w)) {
    if constexpr (kFiltered) {
      // A selector reads every item: ask for all of this leaf's items at once so their
      // misses overlap rather than arriving one per item. The key, labels and fields of an
      // item come before its value (item.hpp), in its first lines.
      if (w.leaf() != fetched_leaf) {
        fetched_leaf = w.leaf();
        for (unsigned j = w.slot(); j < fetched_leaf->n; ++j) {
          const char* head = reinterpret_cast<const char*>(fetched_leaf->keys[j]);
          __builtin_prefetch(head);
          __builtin_prefetch(head + 64);
          __builtin_prefetch(head + 128);
        }
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

// The live tree. One writer; see the file comment for the copy-on-write rules.
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
  detail::View<F> view() const noexcept { return {root_, height_, size_}; }
  const Item* get(std::string_view k) const noexcept { return view().find(k); }
  const std::shared_ptr<detail::ReclaimDomain>& domain() const noexcept { return domain_; }

  // O(1). Later writes copy what they touch instead of changing what the snapshot sees.
  Snapshot snapshot() {
    Snapshot s(domain_, view(), version_, bytes_);
    ++version_;
    return s;
  }

  // Inserts or replaces; takes over the caller's reference. Returns true if the key was new.
  bool put(ItemRef ref) {
    if (!ref) throw std::invalid_argument("null item");
    if (size_ >= detail::kMaxItems && !get(ref->key())) throw std::length_error("tree is full");
    const Item* item = ref.release_ownership();
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
      pack_prefixes(top);
      root_ = top;
      ++height_;
    }
    if (grown.inserted) ++size_;
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
      pack_prefixes(lf);
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
        pack_prefixes(in);
        up.push_back(in);
        up_counts.push_back(total);
      }
      level.swap(up);
      counts.swap(up_counts);
      ++height_;
    }
    root_ = level[0];
    size_ = n;
    settle_node_counts();
  }

  // Frees what no live snapshot can reach; returns the bytes freed.
  std::size_t collect() { return domain_->collect(); }

  void check_invariants() const { view().check(version_); }

 private:
  // Node memory comes from the writer's stock, and a node no snapshot has seen goes back
  // to it: node_memory.hpp has the tiers and the policy.
  template <class Kind>
  Kind* allocate() {
    Kind* n = new (stock_for(std::is_same_v<Kind, Leaf>).take()) Kind(version_);
    owe_nodes(+1, sizeof(Kind));
    bytes_ += sizeof(Kind);
    return n;
  }
  detail::NodeStock& stock_for(bool leaf) noexcept { return stock_[leaf ? 0 : 1]; }
  Leaf* new_leaf() { return allocate<Leaf>(); }
  Inner* new_inner() { return allocate<Inner>(); }

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

  // Calls fn(node as its kind): for code written once for both kinds.
  template <class Fn>
  static decltype(auto) as_kind(Node* nd, Fn&& fn) {
    return nd->leaf ? fn(detail::as_leaf(nd)) : fn(detail::as_inner(nd));
  }

  // The one copy-on-write primitive: the node itself if this version owns it, else a copy
  // (born now) while the original is retired for the snapshots that still reach it.
  Node* make_writable(Node* n) {
    if (n->birth == version_) return n;
    Node* copy = as_kind(n, [this](auto* src) -> Node* {
      using Kind = std::remove_cvref_t<decltype(*src)>;
      Kind* c = allocate<Kind>();
      // Copy only the header and the used slots: the copy lands in cold memory, and every
      // line written costs a read-for-ownership, so the unused tail (a third of a node on
      // average) is not worth copying. Slots at or past n are never read.
      copy_slots(c, 0, src, 0, src->n);
      if constexpr (std::is_same_v<Kind, Leaf>) detail::age_slots(c->age, src->age, src->n, version_ - src->birth);
      return c;
    });
    copy->n = n->n;
    copy->skip = n->skip;
    std::memcpy(copy->lcp, n->lcp, n->skip);
    retire_node(n);
    return copy;
  }

  // Copies `count` slots of src from `from` to dst at `to` (same kind; may be one node).
  template <class Kind>
  static void copy_slots(Kind* dst, unsigned to, const Kind* src, unsigned from, unsigned count) noexcept {
    Kind::zip_slots(*dst, *src, [&](auto* d, const auto* s) { std::memmove(d + to, s + from, count * sizeof(*d)); });
  }

  // Ensures every key of the node and `k` share the inline prefix, shrinking it if needed.
  template <class Kind>
  static void adopt_key(Kind* nd, std::string_view k) noexcept {
    if (nd->n == 0) {
      nd->skip = static_cast<std::uint8_t>(std::min<std::size_t>(k.size(), detail::kMaxSkip));
      std::memcpy(nd->lcp, k.data(), nd->skip);
      return;
    }
    shrink_skip(nd, detail::common_prefix(nd->lcp, nd->skip, k.data(), k.size()));
  }

  // Re-derives the per-slot integers for a shorter prefix from the inline prefix bytes and
  // the old integers; no key is dereferenced.
  template <class Kind>
  static void shrink_skip(Kind* nd, std::size_t new_skip) noexcept {
    if (new_skip >= nd->skip) return;
    const std::size_t gap = nd->skip - new_skip;
    for (unsigned i = 0; i < nd->n; ++i) nd->set_bits(i, Kind::widened(nd->bits(i), nd->lcp + new_skip, gap));
    nd->skip = static_cast<std::uint8_t>(new_skip);
  }

  // Sets the exact common prefix of a freshly packed node (keys sorted: first and last decide).
  template <class Kind>
  static void pack_prefixes(Kind* nd) noexcept {
    const std::string_view a = nd->key(0), b = nd->key(nd->n - 1u);
    const std::size_t l = std::min<std::size_t>(detail::common_prefix(a.data(), a.size(), b.data(), b.size()),
                                                detail::kMaxSkip);
    nd->skip = static_cast<std::uint8_t>(l);
    std::memcpy(nd->lcp, a.data(), l);
    for (unsigned i = 0; i < nd->n; ++i) nd->set_bits(i, Kind::bits_of(nd->key(i), l));
  }

  // Gives both halves of a split their own exact prefix. A split copies the full node's
  // prefix, and inserts only ever shorten one, so without this a tree grown by inserts in
  // random order keeps, in every node, the prefix its first few keys had in common
  // ("/registry/pods/ns-"): the inline bytes of a whole namespace then tie and each step of
  // a search reads an item, a cache miss (get and update on a 1M tree grown that way took
  // twice as long as on a bulk-loaded one). Re-deriving the inline bytes reads every key of
  // the node, once per F/2 inserts into it; the reads are issued together.
  template <class Kind>
  static void repack_halves(Kind* left, Kind* right) noexcept {
    for (const Kind* half : {left, right}) {
      for (unsigned i = 0; i < half->n; ++i) {
        const char* item = reinterpret_cast<const char*>(half->keys[i]);
        __builtin_prefetch(item);
        __builtin_prefetch(item + 64);
      }
    }
    pack_prefixes(left);
    pack_prefixes(right);
  }

  // Points slot i at `it` (a new minimum or a replacement item), keeping the prefix valid.
  static void set_key(Inner* nd, unsigned i, const Item* it) noexcept {
    if (nd->keys[i] == it) return;
    adopt_key(nd, it->key());
    nd->keys[i] = it;
    nd->set_bits(i, Inner::bits_of(it->key(), nd->skip));
  }

  // Opens slot `pos` (shifting the rest right) and fills its key; the caller fills the rest.
  template <class Kind>
  static void open_slot(Kind* nd, unsigned pos, const Item* key_item) noexcept {
    adopt_key(nd, key_item->key());
    copy_slots(nd, pos + 1, nd, pos, nd->n - pos);
    nd->keys[pos] = key_item;
    nd->set_bits(pos, Kind::bits_of(key_item->key(), nd->skip));
    ++nd->n;
  }

  template <class Kind>
  static void close_slot(Kind* nd, unsigned pos) noexcept {
    copy_slots(nd, pos, nd, pos + 1, nd->n - pos - 1u);
    --nd->n;
  }

  // Moves slot `from` of `src` into slot `to` of `dst`: siblings of one kind, both writable,
  // so born in the same version (a leaf slot's age stays right).
  static void move_slot(Node* src, unsigned from, Node* dst, unsigned to) noexcept {
    as_kind(src, [&](auto* s) {
      auto* d = static_cast<decltype(s)>(static_cast<void*>(dst));
      using Kind = std::remove_cvref_t<decltype(*s)>;
      const Item* key_item = s->keys[from];
      open_slot(d, to, key_item);
      copy_slots(d, to, s, from, 1);
      d->set_bits(to, Kind::bits_of(key_item->key(), d->skip));  // d's own prefix
      close_slot(s, from);
    });
  }

  static detail::Count weight(const Node* nd, unsigned i) noexcept {
    return nd->leaf ? 1 : detail::as_inner(nd)->count[i];
  }

  // Moves the upper half of the full (writable) node c into a new sibling, returned.
  Node* split_off(Node* c) {
    return as_kind(c, [this](auto* full) -> Node* {
      using Kind = std::remove_cvref_t<decltype(*full)>;
      Kind* s = allocate<Kind>();
      const unsigned mid = F / 2, moved = F - mid;
      s->skip = full->skip;
      std::memcpy(s->lcp, full->lcp, full->skip);
      copy_slots(s, 0, full, mid, moved);
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
      // after it, when its size is read for the accounting (retire_item).
      const detail::Landing at = detail::leaf_find(detail::as_leaf(child), k);
      if (at.equal) __builtin_prefetch(child->keys[at.pos]);
      c = make_writable(child);
      in->child[i] = c;
      below = insert_in_leaf(detail::as_leaf(c), at, item);
    } else {
      c = make_writable(child);
      in->child[i] = c;
      below = insert(c, item);
    }
    if (below.inserted) ++in->count[i];
    set_key(in, i, c->keys[0]);
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
    open_slot(detail::as_inner(target), pos, below.sibling->keys[0]);
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
    open_slot(target, pos, item);
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
      close_slot(lf, pos);
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
      set_key(in, i, c->keys[0]);
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
      move_slot(sib, from, c, to);
      p->count[i] += w;
      p->count[j] -= w;
      set_key(p, i, c->keys[0]);
      set_key(p, j, sib->keys[0]);
      return;
    }
    const unsigned l = std::min(i, j), r = std::max(i, j);
    Node* left = p->child[l];
    Node* right = p->child[r];
    const std::size_t shared = std::min<std::size_t>(
        detail::common_prefix(left->lcp, left->skip, right->lcp, right->skip), std::min(left->skip, right->skip));
    as_kind(left, [&](auto* l_kind) {
      auto* r_kind = static_cast<decltype(l_kind)>(static_cast<void*>(right));
      shrink_skip(l_kind, shared);
      shrink_skip(r_kind, shared);
      copy_slots(l_kind, l_kind->n, r_kind, 0, r_kind->n);  // both born now: ages agree
    });
    left->n = static_cast<std::uint16_t>(left->n + right->n);
    p->count[l] += p->count[r];
    close_slot(p, r);
    retire_node(right);
    set_key(p, l, left->keys[0]);
  }

  // Hands every live node and item to the domain as leaving at `death` (kForever when the
  // tree itself goes away). With no snapshot pinned, frees directly.
  void release_all(std::uint64_t death) {
    if (!root_) return;
    const bool pinned = domain_->oldest_pin() != detail::kForever;
    release_subtree(root_, death, pinned);
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
  std::int64_t owed_nodes_ = 0, owed_bytes_ = 0;  // see settle_node_counts()
  Node* root_ = nullptr;
  unsigned height_ = 0;
  std::size_t size_ = 0;
  std::size_t bytes_ = 0;
  // Starts at 1 so that version 0 never names a real snapshot.
  std::uint64_t version_ = 1;
  // Where exchange() wants the replaced item; null outside exchange().
  ItemRef* replaced_ = nullptr;
};

using Tree = BasicTree<kDefaultFanout>;
using Snapshot = BasicSnapshot<kDefaultFanout>;
using Cursor = BasicCursor<kDefaultFanout>;
using ScanResult = BasicScanResult<kDefaultFanout>;

}  // namespace watchcache
