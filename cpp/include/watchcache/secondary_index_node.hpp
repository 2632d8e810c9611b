// Secondary indexes, part 1: what an index is declared on (IndexSpec), the order of its
// entries (value hash, value, primary key) and the one comparison every path uses, the node
// layout (IndexLeaf, IndexInner) and the search inside one node, and the record of one
// version's index roots that a snapshot carries (IndexRoots, IndexRootsRef). The design is at
// the top of secondary_index.hpp; the read path is secondary_index_read.hpp, the writer
// secondary_index_write.hpp.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "watchcache/btree_node.hpp"
#include "watchcache/counted_ref.hpp"
#include "watchcache/item.hpp"
#include "watchcache/secondary_index_epoch.hpp"

namespace watchcache {

// Where an index takes each item's value from. A field index holds every item (an absent
// field reads as "", as Selector reads it, so `f=` finds the items without the field); a
// label index holds only the items that carry the label (`l=v` and `l in (...)` need it).
enum class IndexSource : std::uint8_t { Field, Label };

struct IndexSpec {
  IndexSource source = IndexSource::Field;
  std::string name;
  friend bool operator==(const IndexSpec&, const IndexSpec&) = default;
};

// "field spec.nodeName", "label app": for messages.
inline std::string describe(const IndexSpec& spec) {
  return (spec.source == IndexSource::Field ? "field " : "label ") + spec.name;
}

// Indexes one tree may carry: the roots of one version are a fixed array (IndexRoots), one
// allocation per published version.
inline constexpr std::size_t kMaxIndexes = 8;

namespace detail {

// The item's value under `spec`, or nullopt when the item has no entry in the index.
inline std::optional<std::string_view> indexed_value(const Item& item, const IndexSpec& spec) noexcept {
  if (spec.source == IndexSource::Label) return item.find_label(spec.name);
  return item.find_field(spec.name).value_or(std::string_view{});
}

// The value of an item that is in the index (a label index's items carry the label).
inline std::string_view entry_value(const Item& item, const IndexSpec& spec) noexcept {
  return indexed_value(item, spec).value_or(std::string_view{});
}

// The inline hash entries are ordered by first: the high half of 64-bit FNV-1a with
// murmur3's finalizer. Ordering by it makes a value's entries one run and lets values that
// share long prefixes ("ip-10-0-12-") differ in the inline integer; only equality of values
// is ever asked, so hash order loses nothing. 32 bits: a node holds a third more entries
// than with 64 (fewer levels, fewer bytes copied per write), and values whose hashes collide
// are still told apart, by the value (compare_entry).
static_assert(std::is_same_v<IndexHash, std::uint32_t>);

inline IndexHash value_hash(std::string_view v) noexcept {
  std::uint64_t h = 1469598103934665603ull;
  for (const char c : v) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return static_cast<IndexHash>(h >> 32);
}

// A position in an index's order: (hash, value, key). With past_run, after every key of the
// value (the end of its run). `entry`, when set, is the item whose entry the probe names
// (the writer knows it when it removes one): a slot holding that very pointer
// is the probe's, which a search then finds without reading any item.
struct IndexProbe {
  IndexHash hash = 0;
  std::string_view value;
  std::string_view key;
  bool past_run = false;
  const Item* entry = nullptr;
  // The writer places a new entry: only the items its search compares are read (a reader
  // goes on to read the run, so a search for it asks for the run's items all at once).
  bool placing = false;

  // Where `item`'s entry under `value` goes; `present` when the index holds it now.
  static IndexProbe of(const Item* item, std::string_view value, bool present) noexcept {
    return {value_hash(value), value, item->key(), false, present ? item : nullptr, !present};
  }
};

inline int sign(int c) noexcept { return (c > 0) - (c < 0); }

// The entry (h, it) against the probe: -1 below, 0 equal, 1 above. Reads the item only when
// the hashes tie, which within a node means the probe's own value's run (or a collision).
inline int compare_entry(IndexHash h, const Item* it, const IndexProbe& p, const IndexSpec& spec) noexcept {
  if (h != p.hash) return h < p.hash ? -1 : 1;
  if (const int c = entry_value(*it, spec).compare(p.value)) return sign(c);
  if (p.past_run) return -1;
  return sign(it->key().compare(p.key));
}

struct IndexNode {
  std::uint64_t birth;  // the tree version the node was born in (copy-on-write: btree.hpp)
  std::uint16_t n = 0;
  bool leaf;
  IndexNode(std::uint64_t b, bool is_leaf) noexcept : birth(b), leaf(is_leaf) {}
};

// An index node occupies exactly the memory of the tree's node of the same kind, so the two
// share the writer's stock and the reclaim domain's shelves (node_memory.hpp), whose two
// shelves are claimed by size: a third size would take one of them from the tree. The
// capacities leave 8 bytes for the padding between the arrays.
template <unsigned F>
struct IndexLeaf : IndexNode {
  static constexpr std::size_t kBytes = sizeof(Leaf<F>);
  static constexpr unsigned kCapacity =
      static_cast<unsigned>((kBytes - sizeof(IndexNode) - 8) / (sizeof(IndexHash) + sizeof(const Item*)));
  IndexHash hash[kCapacity];    // value_hash of the entry's value
  const Item* item[kCapacity];  // the entry: the tree's own item, no reference of its own
  explicit IndexLeaf(std::uint64_t b) noexcept : IndexNode(b, true) {}

  const Item* entry_item(unsigned i) const noexcept { return item[i]; }
  template <class Fn>
  static void zip_slots(IndexLeaf& dst, const IndexLeaf& src, Fn&& fn) {
    fn(dst.hash, src.hash);
    fn(dst.item, src.item);
  }
};

// An internal slot keeps the hash of its child's minimum entry, not the entry: a search
// reads the entry (leftmost leaf of the child, then its item) only when the hash ties the
// probe's, and a slot is 16 bytes instead of 24 (so 62 children at F=32: three levels of
// index hold 150,000 entries where 24-byte slots needed four).
template <unsigned F>
struct IndexInner : IndexNode {
  static constexpr std::size_t kBytes = sizeof(Inner<F>);
  static constexpr unsigned kCapacity = static_cast<unsigned>(
      (kBytes - sizeof(IndexNode) - 8) / (sizeof(IndexHash) + sizeof(Count) + sizeof(IndexNode*)));
  IndexHash hash[kCapacity];  // the hash of the child's minimum entry
  Count count[kCapacity];     // entries below the child
  IndexNode* child[kCapacity];
  static constexpr unsigned kFanout = F;
  explicit IndexInner(std::uint64_t b) noexcept : IndexNode(b, false) {}

  // The item of the child's minimum entry (the separator's entry).
  const Item* entry_item(unsigned i) const noexcept {
    const IndexNode* nd = child[i];
    while (!nd->leaf) nd = static_cast<const IndexInner*>(nd)->child[0];
    return static_cast<const IndexLeaf<F>*>(nd)->item[0];
  }
  std::uint64_t total() const noexcept {
    std::uint64_t t = 0;
    for (unsigned i = 0; i < n; ++i) t += count[i];
    return t;
  }
  template <class Fn>
  static void zip_slots(IndexInner& dst, const IndexInner& src, Fn&& fn) {
    fn(dst.hash, src.hash);
    fn(dst.count, src.count);
    fn(dst.child, src.child);
  }
};

template <unsigned F>
inline constexpr bool kIndexNodesFit = sizeof(IndexLeaf<F>) <= IndexLeaf<F>::kBytes &&
                                       sizeof(IndexInner<F>) <= IndexInner<F>::kBytes &&
                                       IndexLeaf<F>::kCapacity >= 4 && IndexInner<F>::kCapacity >= 4;
// The build's fan-out: 56 entries per leaf, 62 children per internal node (the design note).
static_assert(kIndexNodesFit<kDefaultFanout>);
static_assert(IndexLeaf<32>::kCapacity == 56 && IndexInner<32>::kCapacity == 62);

template <unsigned F>
inline IndexLeaf<F>* as_index_leaf(IndexNode* n) noexcept { return static_cast<IndexLeaf<F>*>(n); }
template <unsigned F>
inline const IndexLeaf<F>* as_index_leaf(const IndexNode* n) noexcept { return static_cast<const IndexLeaf<F>*>(n); }
template <unsigned F>
inline IndexInner<F>* as_index_inner(IndexNode* n) noexcept { return static_cast<IndexInner<F>*>(n); }
template <unsigned F>
inline const IndexInner<F>* as_index_inner(const IndexNode* n) noexcept {
  return static_cast<const IndexInner<F>*>(n);
}

// Asks for every line of a node as soon as its address is known, as btree_read.hpp's
// prefetch_node does for the tree: a search reads a few of them and a copy all it uses, and
// fetched together their misses overlap instead of arriving one after another.
template <unsigned F>
inline void prefetch_index_node(const IndexNode* nd) noexcept {
  const char* p = reinterpret_cast<const char*>(nd);
  for (std::size_t off = 0; off < IndexInner<F>::kBytes; off += 64) __builtin_prefetch(p + off);
}

// Minimum fill of a non-root node.
template <class Kind>
inline constexpr unsigned kIndexMinFill = Kind::kCapacity / 2;

// Asks for the lines of the items a search inside a leaf's [lo, hi) may compare: all of
// them when few, else those the first three halvings read. A comparison reads the item's
// header and key (its first three lines for a pod: item.hpp puts the key right after the
// length table), a cache miss each, and the halvings would otherwise pay them one after
// another. An internal node's entries are further away (in its children): not prefetched.
template <class Kind>
inline void prefetch_run(const Kind* nd, unsigned lo, unsigned hi) noexcept {
  if constexpr (requires { nd->item; }) {
    const unsigned width = hi - lo;
    if (width <= 16) {
      for (unsigned i = lo; i < hi; ++i) prefetch_item(nd->item[i], 3);
      return;
    }
    for (unsigned k = 1; k < 8; ++k) prefetch_item(nd->item[lo + width * k / 8], 3);
  }
}

// Where a probe lands in a node: the first slot >= the probe (kStrict=false) or > it
// (kStrict=true), and whether an entry equal to the probe was met (as btree_read.hpp's
// Landing). The inline hashes narrow the search to the probe's run without reading an item
// (the range of slots with the probe's hash); only inside it are entries read, and as few
// as can be, because each is a cache miss or two:
//  - in a leaf, the probe's own entry is found by its pointer when the writer names it;
//  - in a leaf, a probe with a key is searched for by keys alone (a value sits past the
//    labels and fields, another line of each item; a key right after the header), then the
//    landing is confirmed by its two neighbours, whose lines were just read: if both have
//    the probe's value and keys on either side of it, it is right, the range being ordered
//    by (value, key); if not (hash collision), the full comparison decides;
//  - otherwise, when the range's first and last entries have the probe's value, so has every
//    entry between them: a probe at the end or start of the run lands at the range's end or
//    start, and any other compares keys alone.
struct IndexLanding {
  unsigned pos = 0;
  bool equal = false;
};

template <bool kStrict, class Kind>
inline IndexLanding index_land(const Kind* nd, const IndexProbe& p, const IndexSpec& spec) noexcept {
  const IndexHash* first = nd->hash;
  const IndexHash* last = nd->hash + nd->n;
  unsigned lo = static_cast<unsigned>(std::lower_bound(first, last, p.hash) - first);
  unsigned hi = static_cast<unsigned>(std::upper_bound(first + lo, last, p.hash) - first);
  if (lo == hi) return {lo, false};
  if constexpr (requires { nd->item; }) {
    if (p.entry) {
      for (unsigned i = lo; i < hi; ++i)
        if (nd->item[i] == p.entry) return {kStrict ? i + 1 : i, true};
    }
    if (!p.past_run && !p.key.empty()) {
      // A placing writer asks for the two items the next halving may compare while it
      // compares this one, rather than for the whole run (up to 16 items of three lines,
      // asked for at once, most of which the search never reads): moves to another node,
      // index_bench's ratio 2.77-2.88x -> 2.41-2.51x (six runs each, alternating; its LIST
      // by node, a reader's search, unchanged either way).
      const auto fetch_key = [&](unsigned i) { prefetch_item(nd->item[i], 3); };
      if (p.placing)
        fetch_key((lo + hi) / 2);
      else
        prefetch_run(nd, lo, hi);
      const auto key_vs_probe = [&](unsigned i) { return sign(nd->item[i]->key().compare(p.key)); };
      unsigned a = lo, b = hi;
      while (a < b) {
        const unsigned mid = (a + b) / 2;
        if (p.placing) {
          if (mid > a) fetch_key((a + mid) / 2);
          if (mid + 1 < b) fetch_key((mid + 1 + b) / 2);
        }
        const int r = key_vs_probe(mid);
        if (kStrict ? r <= 0 : r < 0)
          a = mid + 1;
        else
          b = mid;
      }
      const bool below_ok = a == lo || (entry_value(*nd->item[a - 1], spec) == p.value &&
                                        (kStrict ? key_vs_probe(a - 1) <= 0 : key_vs_probe(a - 1) < 0));
      const bool above_ok = a == hi || (entry_value(*nd->item[a], spec) == p.value &&
                                        (kStrict ? key_vs_probe(a) > 0 : key_vs_probe(a) >= 0));
      if (below_ok && above_ok) {
        const bool equal = kStrict ? a > lo && key_vs_probe(a - 1) == 0 : a < hi && key_vs_probe(a) == 0;
        return {a, equal};
      }
    }
  } else if (kStrict && p.entry && nd->child[lo]->leaf) {
    // Children are leaves and the writer names its entry: a child whose minimum has the
    // probe's hash holds the entry only in its leading entries of that hash, so looking
    // for the pointer there decides, reading leaves the descent reads anyway instead of
    // the minimum's item (a cache miss on most writes: a run of ~30 pods straddles a leaf
    // boundary more often than not). Not there: it is in the run's part before them.
    for (unsigned i = lo; i < hi; ++i) {
      const auto* lf = static_cast<const IndexLeaf<Kind::kFanout>*>(nd->child[i]);
      for (unsigned j = 0; j < lf->n && lf->hash[j] == p.hash; ++j)
        if (lf->item[j] == p.entry) return {i + 1, true};
    }
    return {lo, false};
  }
  prefetch_run(nd, lo, hi);
  const unsigned first_at = lo, last_at = hi - 1;
  const Item* first_entry = nd->entry_item(first_at);
  const Item* last_entry = last_at == first_at ? first_entry : nd->entry_item(last_at);
  if constexpr (!requires { nd->item; }) {
    // A separator's entry, reached through the child: its value (past the labels and
    // fields) and its key are read next, so all their lines are asked for at once rather
    // than one after another (moves to another node: index_bench's ratio 2.86-2.91x ->
    // 2.78-2.80x, three runs each, alternating).
    prefetch_item(first_entry, 6);
    if (last_entry != first_entry) prefetch_item(last_entry, 6);
  }
  const bool one_value = entry_value(*first_entry, spec) == p.value &&
                         (last_entry == first_entry || entry_value(*last_entry, spec) == p.value);
  if (one_value && (p.past_run || p.key.empty()))  // no key of the run ties: it is all on one side
    return {p.past_run ? hi : lo, false};
  bool equal = false;
  while (lo < hi) {
    const unsigned mid = (lo + hi) / 2;
    const Item* it = mid == first_at ? first_entry : mid == last_at ? last_entry : nd->entry_item(mid);
    int r;
    if (it == p.entry)
      r = 0;
    else if (one_value)
      r = sign(it->key().compare(p.key));
    else
      r = compare_entry(nd->hash[mid], it, p, spec);
    equal |= r == 0;
    if (kStrict ? r <= 0 : r < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return {lo, equal};
}

// The child of an internal index node whose range holds the probe: the last slot whose
// minimum is <= the probe (slot 0 when none is).
template <unsigned F>
inline unsigned index_child(const IndexInner<F>* nd, const IndexProbe& p, const IndexSpec& spec) noexcept {
  const unsigned ub = index_land<true>(nd, p, spec).pos;
  return ub == 0 ? 0 : ub - 1;
}

// One index of one version, as a snapshot (or the writer) sees it.
struct IndexRoot {
  const IndexNode* node = nullptr;
  std::size_t size = 0;
  unsigned height = 0;  // 0 = empty, 1 = the root is a leaf
  friend bool operator==(const IndexRoot&, const IndexRoot&) = default;
};

// The roots of every index of a tree as of its last fold, with the epoch of changes since and
// the specs they were declared with. Immutable once published; shared by every snapshot until
// the next fold (each reads the epoch up to its own version), reference counted because
// snapshots are copied and dropped on any thread. It owns no node: the nodes' lifetime is the reclaim domain's, by
// version (reclaim.hpp), and a snapshot holds both the pin and this record.
//
// Layout: a record is made after every fold (and when an epoch starts) and dropped with the
// last snapshot that holds it, a window of versions later, when its lines are cold. The reference count, the
// specs and the first roots share the first line, and only the declared indexes' roots are written
// (the others are never read), so making and dropping a record touch one line with one
// index instead of four.
struct IndexRoots {
  mutable std::atomic<std::uint32_t> refs{1};
  std::shared_ptr<const std::vector<IndexSpec>> specs;
  IndexEpochRef epoch;  // the changes since the fold that wrote `roots`
  union {
    IndexRoot roots[kMaxIndexes];  // the first specs->size() are set (publish)
  };

  IndexRoots() noexcept {}  // leaves `roots` unwritten

  void retain() const noexcept { refs.fetch_add(1, std::memory_order_relaxed); }
  void release() const noexcept {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  // The position of `spec` among the specs, or nullopt.
  std::optional<std::size_t> find(const IndexSpec& spec) const noexcept {
    for (std::size_t i = 0; i < specs->size(); ++i)
      if ((*specs)[i] == spec) return i;
    return std::nullopt;
  }
};

// An owning reference to an IndexRoots; empty for a tree without indexes (then a snapshot
// costs nothing more than before indexes existed).
using IndexRootsRef = CountedRef<const IndexRoots>;

// The specs a snapshot's roots were declared with, empty when there are none.
inline std::vector<IndexSpec> specs_of(const IndexRootsRef& roots) {
  return roots ? *roots->specs : std::vector<IndexSpec>{};
}

}  // namespace detail
}  // namespace watchcache
