// Secondary indexes, part 4: the epoch, the index changes written since the index trees were
// last brought up to date (a fold). A write appends its changes here instead of copying a path
// of each index tree; every IndexEpoch::kCapacity changes the writer folds them into the trees
// in one version, so that a node is copied once per fold rather than once per write. A
// snapshot sees the trees of the last fold before it and the changes of that fold's epoch up
// to its own version. The design is at the top of secondary_index.hpp.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "watchcache/counted_ref.hpp"
#include "watchcache/item.hpp"

namespace watchcache::detail {

// The 32-bit hash of an indexed value that orders an index tree (value_hash in
// secondary_index_node.hpp, which says why 32 bits).
using IndexHash = std::uint32_t;

// One change of one index: the entry `gone` leaves, the entry `come` arrives (either may be
// null; both set: an update that kept the value, the entry now names `come`). Chained to the
// previous change of the same index and hash, newest first, for the readers of that value.
struct IndexChange {
  std::uint64_t version;
  const Item* gone;
  const Item* come;
  std::uint32_t prev;  // the previous change of (index, hash), plus one; 0: none
  IndexHash hash;
  std::uint32_t index;
};

// The changes of one epoch, immutable once written, and the newest change of each (index,
// hash) for the readers. One writer appends; readers on any thread walk a chain from its head
// and skip the changes newer than their version. Records and heads are allocated at their
// full capacity when the epoch starts, so nothing a reader holds ever moves.
class IndexEpoch {
 public:
  // Changes per epoch. More changes per fold share more node copies (4,096 over the ~2,700
  // leaves of 150,000 entries) and net out more (a pod's whole life inside one epoch costs the
  // trees nothing); fewer bound a fold's pause (~1.3 ms for 4,096 status updates in the watch
  // cache: bench/index_apply_cost.py), a reader's chain and the items held for the fold.
  static constexpr std::uint32_t kCapacity = 4096;

  explicit IndexEpoch(std::uint32_t capacity)
      : capacity_(capacity),
        changes_(std::make_unique<IndexChange[]>(capacity)),
        slots_(std::make_unique<Slot[]>(slot_count(capacity))),
        mask_(slot_count(capacity) - 1) {}
  IndexEpoch(const IndexEpoch&) = delete;
  IndexEpoch& operator=(const IndexEpoch&) = delete;

  std::uint32_t size() const noexcept { return size_.load(std::memory_order_acquire); }
  std::uint32_t capacity() const noexcept { return capacity_; }
  bool room_for(std::uint32_t n) const noexcept { return size_.load(std::memory_order_relaxed) + n <= capacity_; }

  // Writer: appends a change (room_for first) and makes it the head of its chain.
  void append(std::uint32_t index, IndexHash hash, std::uint64_t version, const Item* gone, const Item* come) noexcept {
    Slot& s = claim_slot(key_of(index, hash));
    const std::uint32_t at = size_.load(std::memory_order_relaxed);
    changes_[at] = {version, gone, come, s.head.load(std::memory_order_relaxed), hash, index};
    s.head.store(at + 1, std::memory_order_release);
    size_.store(at + 1, std::memory_order_release);
  }
  // The changes of (index, hash) at or before `version`, newest first.
  template <class Fn>
  void for_each_change(std::uint32_t index, IndexHash hash, std::uint64_t version, Fn&& fn) const {
    const Slot* s = find_slot(key_of(index, hash));
    if (!s) return;
    for (std::uint32_t at = s->head.load(std::memory_order_acquire); at != 0;) {
      const IndexChange& c = changes_[at - 1];
      if (c.version <= version) fn(c);
      at = c.prev;
    }
  }
  // Every change at or before `version`, oldest first (the invariant check).
  template <class Fn>
  void for_each_change(std::uint64_t version, Fn&& fn) const {
    const std::uint32_t n = size();
    for (std::uint32_t at = 0; at < n; ++at)
      if (changes_[at].version <= version) fn(changes_[at]);
  }

  // Reference counting (CountedRef), as IndexRoots: held by the writer and the roots records.
  void retain() const noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release() const noexcept {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

 private:
  struct Slot {
    std::atomic<std::uint64_t> key{0};   // (index + 1) << 32 | hash; 0: free
    std::atomic<std::uint32_t> head{0};  // the newest change, plus one
  };
  static std::size_t slot_count(std::uint32_t capacity) noexcept {
    std::size_t n = 16;
    while (n < 2 * static_cast<std::size_t>(capacity)) n *= 2;
    return n;
  }
  static std::uint64_t key_of(std::uint32_t index, IndexHash hash) noexcept {
    return (static_cast<std::uint64_t>(index) + 1) << 32 | hash;
  }
  static std::size_t spread(std::uint64_t key) noexcept {
    return static_cast<std::size_t>((key * 0x9e3779b97f4a7c15ull) >> 32);
  }
  // Writer: the slot of `key`, claimed when absent (at most one claim per change, so the
  // table, twice the capacity, never fills).
  Slot& claim_slot(std::uint64_t key) noexcept {
    for (std::size_t i = spread(key);; ++i) {
      Slot& s = slots_[i & mask_];
      const std::uint64_t k = s.key.load(std::memory_order_relaxed);
      if (k == key) return s;
      if (k == 0) {
        s.key.store(key, std::memory_order_release);  // head is 0 until the change is written
        return s;
      }
    }
  }
  const Slot* find_slot(std::uint64_t key) const noexcept {
    for (std::size_t i = spread(key);; ++i) {
      const Slot& s = slots_[i & mask_];
      const std::uint64_t k = s.key.load(std::memory_order_acquire);
      if (k == key) return &s;
      if (k == 0) return nullptr;
    }
  }

  mutable std::atomic<std::uint32_t> refs_{1};
  std::uint32_t capacity_;
  std::atomic<std::uint32_t> size_{0};
  std::unique_ptr<IndexChange[]> changes_;
  std::unique_ptr<Slot[]> slots_;
  std::size_t mask_;
};

// An owning reference to an IndexEpoch.
using IndexEpochRef = CountedRef<IndexEpoch>;

// The net effect of a sequence of changes of one index on its trees, kept by pointer: which
// entries of the trees left (`removed`), and which items are entries now that the trees do
// not name (`added`, each with the entry of the trees it replaced, or null). Folding a
// change in reads no item. Open addressing with backward-shift deletion.
class IndexNet {
 public:
  struct Added {
    const Item* item;
    const Item* origin;  // the trees' entry this one replaced (same key and value), or null
    IndexHash hash;
  };
  struct Removed {
    const Item* item;
    IndexHash hash;
  };

  // Applies one change. Returns the trees' entry that this change takes out for the first
  // time (the caller keeps it alive), or null.
  const Item* apply(IndexHash hash, const Item* gone, const Item* come) {
    const Item* origin = nullptr;  // the trees' entry that `come` stands for, if any
    const Item* newly_out = nullptr;
    if (gone) {
      if (Added* a = find(gone)) {
        origin = a->origin;
        erase(a);
      } else {
        origin = newly_out = gone;
      }
      if (!come && origin) removed_.push_back({origin, hash});
    }
    if (come) insert({come, origin, hash});
    return newly_out;
  }

  const std::vector<Removed>& removed() const noexcept { return removed_; }
  template <class Fn>
  void for_each_added(Fn&& fn) const {
    for (const Added& a : slots_)
      if (a.item) fn(a);
  }
  bool empty() const noexcept { return size_ == 0 && removed_.empty(); }
  void clear() {
    removed_.clear();
    if (size_) std::fill(slots_.begin(), slots_.end(), Added{nullptr, nullptr, 0});
    size_ = 0;
  }
  const Added* find_added(const Item* it) const noexcept { return const_cast<IndexNet*>(this)->find(it); }

 private:
  std::size_t home(const Item* it) const noexcept {
    return static_cast<std::size_t>((reinterpret_cast<std::uintptr_t>(it) >> 4) * 0x9e3779b97f4a7c15ull >> 32) &
           (slots_.size() - 1);
  }
  Added* find(const Item* it) noexcept {
    if (slots_.empty()) return nullptr;
    for (std::size_t i = home(it);; i = (i + 1) & (slots_.size() - 1)) {
      Added& a = slots_[i];
      if (a.item == it) return &a;
      if (!a.item) return nullptr;
    }
  }
  void insert(const Added& add) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    for (std::size_t i = home(add.item);; i = (i + 1) & (slots_.size() - 1)) {
      if (!slots_[i].item) {
        slots_[i] = add;
        ++size_;
        return;
      }
    }
  }
  void erase(Added* a) noexcept {
    const std::size_t mask = slots_.size() - 1;
    std::size_t hole = static_cast<std::size_t>(a - slots_.data());
    for (std::size_t i = (hole + 1) & mask; slots_[i].item; i = (i + 1) & mask) {
      const std::size_t want = home(slots_[i].item);
      // Moves back every entry whose home is not in (hole, i].
      if (((i - want) & mask) >= ((i - hole) & mask)) {
        slots_[hole] = slots_[i];
        hole = i;
      }
    }
    slots_[hole] = {nullptr, nullptr, 0};
    --size_;
  }
  void grow() {
    std::vector<Added> old(std::max<std::size_t>(64, 2 * slots_.size()), Added{nullptr, nullptr, 0});
    old.swap(slots_);
    size_ = 0;
    for (const Added& a : old)
      if (a.item) insert(a);
  }

  std::vector<Added> slots_;
  std::size_t size_ = 0;
  std::vector<Removed> removed_;
};

}  // namespace watchcache::detail
