// The B+tree's nodes: their layout (Node, Leaf, Inner: what a slot holds), the inline key
// integers a slot keeps past its node's common prefix, and the edits that keep one node's
// slots, prefix and integers consistent with each other (open_slot, close_slot, move_slot,
// pack_prefixes, ...). Which nodes a write edits, copies, splits or merges is the write
// path's business (btree_write.hpp); finding a key in a node is the read path's
// (btree_read.hpp). The design behind the layout is at the top of btree.hpp.
//
// A per-slot field is declared in Leaf or Inner and listed in that kind's zip_slots(),
// through which every move of slots goes (copy, open, close, split, merge); beyond this
// file, a new field touches only the code that sets it (insert_in_leaf, make_writable,
// assign_sorted: btree_write.hpp) and View::check (btree_read.hpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string_view>
#include <type_traits>

#include "watchcache/item.hpp"

#ifndef WATCHCACHE_FANOUT
#define WATCHCACHE_FANOUT 32
#endif

namespace watchcache {

inline constexpr unsigned kDefaultFanout = WATCHCACHE_FANOUT;

namespace detail {

inline constexpr unsigned kMaxSkip = 48;

// The inline key bytes a slot keeps past the node's common prefix, compared as one
// big-endian integer: 10 in an internal node; a leaf's layout is described at Leaf. A leaf's
// prefix is long (its keys are neighbours: "/registry/pods/ns-00042/pod-000"), so a few more
// bytes end the key. An internal node's keys spread wider: past a prefix like
// "/registry/pods/ns-000", 8 bytes name only the namespace, so a probe ties with the
// separators of its namespace and each tie reads an item from memory; past 10 bytes the
// misses saved are few and every byte is copied with each internal node of a path. LL
// misses per get / per write after a snapshot / bytes pinned per snapshot at 1M keys (with
// 8-byte leaf integers), for internal widths of 8: 9.7 / 20.0 / 3,759; 10: 7.5 / 18.1 /
// 3,951; 12: 7.4 / 18.2 / 4,143; 16 in every node: 8.1 / 23.3 / 4,911. Measured with
// Inner::kKeyBytes set to each width by `valgrind --tool=callgrind ... build/bench/write_probe
// get` and `... write` (the full command is at the top of cpp/bench/write_probe.cpp); the
// write column predates ddb9de4, after which write_probe keeps the simulated caches warm
// between batches, so compare that column across widths only.
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

// btree.hpp's design note quotes these sizes for the build's fan-out: keep them true.
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

// Calls fn(node as its kind): for code written once for both kinds.
template <unsigned F, class Fn>
inline decltype(auto) as_kind(Node<F>* nd, Fn&& fn) {
  return nd->leaf ? fn(as_leaf(nd)) : fn(as_inner(nd));
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

// --- Editing one node ---------------------------------------------------------------------
// The node must be writable (born in the tree's current version: btree_write.hpp). Kind is
// Leaf<F> or Inner<F>.

// Copies `count` slots of src from `from` to dst at `to` (same kind; may be one node).
template <class Kind>
inline void copy_slots(Kind* dst, unsigned to, const Kind* src, unsigned from, unsigned count) noexcept {
  Kind::zip_slots(*dst, *src, [&](auto* d, const auto* s) { std::memmove(d + to, s + from, count * sizeof(*d)); });
}

// Re-derives the per-slot integers for a shorter prefix from the inline prefix bytes and
// the old integers; no key is dereferenced.
template <class Kind>
inline void shrink_skip(Kind* nd, std::size_t new_skip) noexcept {
  if (new_skip >= nd->skip) return;
  const std::size_t gap = nd->skip - new_skip;
  for (unsigned i = 0; i < nd->n; ++i) nd->set_bits(i, Kind::widened(nd->bits(i), nd->lcp + new_skip, gap));
  nd->skip = static_cast<std::uint8_t>(new_skip);
}

// Ensures every key of the node and `k` share the inline prefix, shrinking it if needed.
template <class Kind>
inline void adopt_key(Kind* nd, std::string_view k) noexcept {
  if (nd->n == 0) {
    nd->skip = static_cast<std::uint8_t>(std::min<std::size_t>(k.size(), kMaxSkip));
    std::memcpy(nd->lcp, k.data(), nd->skip);
    return;
  }
  shrink_skip(nd, common_prefix(nd->lcp, nd->skip, k.data(), k.size()));
}

// Sets the exact common prefix of a freshly packed node (keys sorted: first and last decide).
template <class Kind>
inline void pack_prefixes(Kind* nd) noexcept {
  const std::string_view a = nd->key(0), b = nd->key(nd->n - 1u);
  const std::size_t l = std::min<std::size_t>(common_prefix(a.data(), a.size(), b.data(), b.size()), kMaxSkip);
  nd->skip = static_cast<std::uint8_t>(l);
  std::memcpy(nd->lcp, a.data(), l);
  for (unsigned i = 0; i < nd->n; ++i) nd->set_bits(i, Kind::bits_of(nd->key(i), l));
}

// Points slot i at `it` (a new minimum or a replacement item), keeping the prefix valid.
template <unsigned F>
inline void set_key(Inner<F>* nd, unsigned i, const Item* it) noexcept {
  if (nd->keys[i] == it) return;
  adopt_key(nd, it->key());
  nd->keys[i] = it;
  nd->set_bits(i, Inner<F>::bits_of(it->key(), nd->skip));
}

// Opens slot `pos` (shifting the rest right) and fills its key; the caller fills the rest.
template <class Kind>
inline void open_slot(Kind* nd, unsigned pos, const Item* key_item) noexcept {
  adopt_key(nd, key_item->key());
  copy_slots(nd, pos + 1, nd, pos, nd->n - pos);
  nd->keys[pos] = key_item;
  nd->set_bits(pos, Kind::bits_of(key_item->key(), nd->skip));
  ++nd->n;
}

template <class Kind>
inline void close_slot(Kind* nd, unsigned pos) noexcept {
  copy_slots(nd, pos, nd, pos + 1, nd->n - pos - 1u);
  --nd->n;
}

// Moves slot `from` of `src` into slot `to` of `dst`: siblings of one kind, both writable,
// so born in the same version (a leaf slot's age stays right).
template <unsigned F>
inline void move_slot(Node<F>* src, unsigned from, Node<F>* dst, unsigned to) noexcept {
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

}  // namespace detail
}  // namespace watchcache
