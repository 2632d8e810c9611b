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
#include <utility>
#include <vector>

#include "watchcache/btree_node.hpp"
#include "watchcache/item.hpp"

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

// 64-bit FNV-1a with murmur3's finalizer: entries are ordered by this first, so that a value's
// entries are one run and values that share long prefixes ("ip-10-0-12-") still differ in the
// inline integer. Only equality of values is ever asked, so hash order loses nothing.
inline std::uint64_t value_hash(std::string_view v) noexcept {
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
  return h;
}

// A position in an index's order: (hash, value, key). With past_run, after every key of the
// value (the end of its run).
struct IndexProbe {
  std::uint64_t hash = 0;
  std::string_view value;
  std::string_view key;
  bool past_run = false;

  static IndexProbe at(std::string_view value, std::string_view key) noexcept {
    return {value_hash(value), value, key, false};
  }
  static IndexProbe after_run(std::string_view value) noexcept { return {value_hash(value), value, {}, true}; }
};

inline int sign(int c) noexcept { return (c > 0) - (c < 0); }

// The entry (h, it) against the probe: -1 below, 0 equal, 1 above. Reads the item only when
// the hashes tie, which within a node means the probe's own value's run (or a collision).
inline int compare_entry(std::uint64_t h, const Item* it, const IndexProbe& p, const IndexSpec& spec) noexcept {
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
// shelves are claimed by size: a third size would take one of them from the tree.
template <unsigned F>
struct IndexLeaf : IndexNode {
  static constexpr std::size_t kBytes = sizeof(Leaf<F>);
  static constexpr unsigned kCapacity =
      static_cast<unsigned>((kBytes - sizeof(IndexNode)) / (sizeof(std::uint64_t) + sizeof(const Item*)));
  std::uint64_t hash[kCapacity];  // value_hash of the entry's value
  const Item* item[kCapacity];    // the entry: the tree's own item, no reference of its own
  explicit IndexLeaf(std::uint64_t b) noexcept : IndexNode(b, true) {}

  template <class Fn>
  static void zip_slots(IndexLeaf& dst, const IndexLeaf& src, Fn&& fn) {
    fn(dst.hash, src.hash);
    fn(dst.item, src.item);
  }
};

template <unsigned F>
struct IndexInner : IndexNode {
  static constexpr std::size_t kBytes = sizeof(Inner<F>);
  static constexpr unsigned kCapacity = static_cast<unsigned>(
      (kBytes - sizeof(IndexNode)) /
      (sizeof(std::uint64_t) + sizeof(const Item*) + sizeof(IndexNode*) + sizeof(Count)));
  std::uint64_t hash[kCapacity];  // the child's minimum entry: its hash
  const Item* item[kCapacity];    // ... and its item (so a separator never outlives its bytes)
  IndexNode* child[kCapacity];
  Count count[kCapacity];  // entries below the child
  explicit IndexInner(std::uint64_t b) noexcept : IndexNode(b, false) {}

  std::uint64_t total() const noexcept {
    std::uint64_t t = 0;
    for (unsigned i = 0; i < n; ++i) t += count[i];
    return t;
  }
  template <class Fn>
  static void zip_slots(IndexInner& dst, const IndexInner& src, Fn&& fn) {
    fn(dst.hash, src.hash);
    fn(dst.item, src.item);
    fn(dst.child, src.child);
    fn(dst.count, src.count);
  }
};

template <unsigned F>
inline constexpr bool kIndexNodesFit = sizeof(IndexLeaf<F>) <= IndexLeaf<F>::kBytes &&
                                       sizeof(IndexInner<F>) <= IndexInner<F>::kBytes &&
                                       IndexLeaf<F>::kCapacity >= 4 && IndexInner<F>::kCapacity >= 4;
// The build's fan-out: 43 entries per leaf, 36 children per internal node (the design note).
static_assert(kIndexNodesFit<kDefaultFanout>);
static_assert(IndexLeaf<32>::kCapacity == 43 && IndexInner<32>::kCapacity == 36);

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

// Minimum fill of a non-root node.
template <class Kind>
inline constexpr unsigned kIndexMinFill = Kind::kCapacity / 2;

// Asks for the first lines of the items a search inside [lo, hi) may compare: all of them
// when few, else those the first three halvings read. A comparison there reads the item's
// value and key (in its first lines: item.hpp), a cache miss each, and the halvings would
// otherwise pay them one after another.
template <class Kind>
inline void prefetch_run(const Kind* nd, unsigned lo, unsigned hi) noexcept {
  auto fetch = [](const Item* it) {
    const char* p = reinterpret_cast<const char*>(it);
    __builtin_prefetch(p);
    __builtin_prefetch(p + 64);
  };
  const unsigned width = hi - lo;
  if (width <= 16) {
    for (unsigned i = lo; i < hi; ++i) fetch(nd->item[i]);
    return;
  }
  for (unsigned k = 1; k < 8; ++k) fetch(nd->item[lo + width * k / 8]);
}

// Where a probe lands in a node: the first slot >= the probe (kStrict=false) or > it
// (kStrict=true), and whether an entry equal to the probe was met (as btree_read.hpp's
// Landing). The inline hashes narrow the search to the probe's run without reading an item;
// only inside it are items compared.
struct IndexLanding {
  unsigned pos = 0;
  bool equal = false;
};

template <bool kStrict, class Kind>
inline IndexLanding index_land(const Kind* nd, const IndexProbe& p, const IndexSpec& spec) noexcept {
  const std::uint64_t* first = nd->hash;
  const std::uint64_t* last = nd->hash + nd->n;
  unsigned lo = static_cast<unsigned>(std::lower_bound(first, last, p.hash) - first);
  unsigned hi = static_cast<unsigned>(std::upper_bound(first + lo, last, p.hash) - first);
  if (lo == hi) return {lo, false};
  prefetch_run(nd, lo, hi);
  bool equal = false;
  while (lo < hi) {
    const unsigned mid = (lo + hi) / 2;
    const int r = compare_entry(nd->hash[mid], nd->item[mid], p, spec);
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

// The roots of every index of a tree at one version, with the specs they were declared
// with. Immutable once published; shared by every snapshot of the version (and the ones after
// it while no write changed a root), reference counted because snapshots are copied and
// dropped on any thread. It owns no node: the nodes' lifetime is the reclaim domain's, by
// version (reclaim.hpp), and a snapshot holds both the pin and this record.
struct IndexRoots {
  std::shared_ptr<const std::vector<IndexSpec>> specs;
  std::array<IndexRoot, kMaxIndexes> roots{};
  mutable std::atomic<std::uint32_t> refs{1};

  // The position of `spec` among the specs, or nullopt.
  std::optional<std::size_t> find(const IndexSpec& spec) const noexcept {
    for (std::size_t i = 0; i < specs->size(); ++i)
      if ((*specs)[i] == spec) return i;
    return std::nullopt;
  }
};

// An owning reference to an IndexRoots; empty for a tree without indexes (then a snapshot
// costs nothing more than before indexes existed).
class IndexRootsRef {
 public:
  IndexRootsRef() noexcept = default;
  static IndexRootsRef adopt(IndexRoots* roots) noexcept {
    IndexRootsRef r;
    r.roots_ = roots;
    return r;
  }
  IndexRootsRef(const IndexRootsRef& o) noexcept : roots_(o.roots_) {
    if (roots_) roots_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  IndexRootsRef(IndexRootsRef&& o) noexcept : roots_(std::exchange(o.roots_, nullptr)) {}
  IndexRootsRef& operator=(IndexRootsRef o) noexcept {
    std::swap(roots_, o.roots_);
    return *this;
  }
  ~IndexRootsRef() {
    if (roots_ && roots_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete roots_;
  }

  const IndexRoots* get() const noexcept { return roots_; }
  explicit operator bool() const noexcept { return roots_ != nullptr; }
  // The declared specs, empty when there are none.
  std::vector<IndexSpec> specs() const {
    return roots_ ? *roots_->specs : std::vector<IndexSpec>{};
  }

 private:
  const IndexRoots* roots_ = nullptr;
};

}  // namespace detail
}  // namespace watchcache
