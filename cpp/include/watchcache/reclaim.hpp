// ReclaimDomain: version-interval reclamation for the nodes and items of one Tree.
//
// Why not per-node refcounts: copying a node under refcounting must bump the count of every
// child (or item) it points to — one cache miss each, 32+ per copied node — and a write right
// after a snapshot copies a whole root-to-leaf path. Here copying touches nothing but the copy.
//
// The scheme. The tree has a version counter V. snapshot() freezes version V and moves the
// tree to V+1. Every node and every item slot records its birth version b. When the writer
// replaces or removes an object at tree version d, the object was part of the live trees of
// versions b..d-1, so exactly the snapshots with a version in [b, d) can reach it. It is
// "retired" with that interval and freed once no live snapshot's version lies in [b, d).
// An object born in the current version (b == d) was never seen by a snapshot and is freed
// at once; that is also why the writer may mutate such objects in place.
//
//   versions:   1     2     3     4     5        live snapshots: {2, 5}
//   node A:     [b=1 ........ d=4)                -> pinned by 2
//   node B:           [b=3 .. d=4)                -> freeable (no live version in [3, 4))
//
// Pins: every Snapshot object pins its version (pin on construction/copy, unpin on
// destruction) from any thread; the registry and Python-held snapshots are just Snapshots.
// Collection: the retired list is ordered by death version (the writer retires at the
// current version, which never decreases), so everything whose death <= the oldest pinned
// version is a prefix of the list: unpinning the oldest snapshot frees that prefix in
// O(freed). Objects stuck behind an old pin but in no live interval ("holes", e.g. an old
// snapshot kept while newer ones come and go) are found by a full sweep, which the writer
// runs when the retired list has doubled since the last sweep, so it is amortized O(log s)
// per retirement. One kind of hole is common enough to free at once: the newest snapshot
// dropped while an older one lives (a snapshot around each write during a long LIST). All
// it kept alone was retired after it was taken, so it is the list's tail, still in cache;
// unpin frees that tail (a bounded stretch of it) right away.
//
// Recycling: a node freed here is parked, not deleted, and handed to the writer's stock on
// its next retire(), under the lock that call takes anyway. This is tier 2 of the node
// memory tiers, which node_memory.hpp describes and whose policy it owns (ParkedNodes).
//
// Thread-safety: one mutex guards the pin set, the retired list (and the frees it does) and
// the parked nodes.
// Lifetime: held by shared_ptr from the Tree and every Snapshot; the last holder frees
// whatever is still retired.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "watchcache/item.hpp"
#include "watchcache/node_memory.hpp"

namespace watchcache::detail {

inline constexpr std::uint64_t kForever = std::numeric_limits<std::uint64_t>::max();

class ReclaimDomain {
 public:
  static constexpr std::size_t kNewestScan = 64;  // bounds the work of one unpin (free_newest_locked)
  static constexpr std::size_t kPrefetchAhead = 16;  // retired entries whose items an unpin prefetches

  explicit ReclaimDomain(NodeHooks hooks) noexcept : hooks_(hooks) {}
  ReclaimDomain(const ReclaimDomain&) = delete;
  ReclaimDomain& operator=(const ReclaimDomain&) = delete;
  ~ReclaimDomain() {
    for (const Retired& r : retired_) free_one(r);
    settle_locked();
    parked_.discard_all(hooks_);
  }

  void pin(std::uint64_t version) {
    std::lock_guard lock(mu_);
    if (live_pins_begin() == pins_.end() || pins_.back().version < version) {
      pins_.push_back({version, 1});
      return;
    }
    auto it = find_pin(version);
    if (it != pins_.end() && it->version == version) {
      if (it->count++ == 0) --zero_pins_;
    } else {
      pins_.insert(it, {version, 1});
    }
  }

  // Freeing happens under the lock: it is a handful of free() calls per unpin, and keeping
  // it here avoids a heap-allocated list of victims on every snapshot release.
  void unpin(std::uint64_t version) noexcept {
    std::lock_guard lock(mu_);
    auto it = find_pin(version);
    if (it == pins_.end() || it->version != version || it->count == 0) return;  // unreachable
    if (--it->count > 0) return;
    ++zero_pins_;
    const bool was_newest = std::next(it) == pins_.end();
    drop_zero_pins();
    free_prefix_locked();
    if (was_newest) free_newest_locked(version);
    settle_locked();
  }

  // An object that left the live tree at version `death` after living since `birth`.
  struct Retired {
    void* ptr;
    std::uint64_t birth;
    std::uint64_t death;
    std::size_t bytes;
    bool is_item;
  };
  static Retired node(void* node, std::uint64_t birth, std::uint64_t death, std::size_t bytes) noexcept {
    return {node, birth, death, bytes, false};
  }
  static Retired item(const Item* item, std::uint64_t birth, std::uint64_t death) noexcept {
    return {const_cast<Item*>(item), birth, death, item->nbytes(), true};
  }

  // Hands objects to the domain, one lock for the batch (a write retires a path at once).
  // Objects no snapshot can reach are freed at once. Clears `batch`. Under the same lock,
  // refills the writer's `stocks` with parked nodes (ParkedNodes::restock).
  void retire(std::vector<Retired>& batch, std::span<NodeStock> stocks = {}) {
    if (batch.empty()) return;
    std::lock_guard lock(mu_);
    for (const Retired& r : batch) {
      if (!any_pin_in_locked(r.birth, r.death)) {
        free_one(r);
      } else {
        retired_.push_back(r);
        retired_bytes_ += r.bytes;
      }
    }
    batch.clear();
    if (retired_.size() >= sweep_threshold_) sweep_locked();
    settle_locked();
    parked_.restock(stocks);
  }
  void retire_node(void* n, std::uint64_t birth, std::uint64_t death, std::size_t bytes) {
    std::vector<Retired> one{node(n, birth, death, bytes)};
    retire(one);
  }
  void retire_item(const Item* it, std::uint64_t birth, std::uint64_t death) {
    std::vector<Retired> one{item(it, birth, death)};
    retire(one);
  }

  // Frees every retired object no live snapshot can reach. Returns the bytes freed.
  std::size_t collect() {
    std::lock_guard lock(mu_);
    const std::size_t before = retired_bytes_;
    free_prefix_locked();
    sweep_locked();
    settle_locked();
    return before - retired_bytes_;
  }

  // Bytes of retired objects still held for live snapshots, with the items whose retirement
  // the writer defers for its index trees (hold_bytes).
  std::size_t retired_bytes() const {
    std::lock_guard lock(mu_);
    return retired_bytes_ + static_cast<std::size_t>(deferred_bytes_.load(std::memory_order_relaxed));
  }
  // The writer keeps `delta` more (or, negative, fewer) bytes of items out of the retired
  // list for a while, for the snapshots of its index epoch (BasicTree::defer_item_retirement).
  void hold_bytes(std::int64_t delta) noexcept { deferred_bytes_.fetch_add(delta, std::memory_order_relaxed); }
  std::size_t retired_count() const {
    std::lock_guard lock(mu_);
    return retired_.size();
  }
  std::uint64_t oldest_pin() const {
    std::lock_guard lock(mu_);
    return oldest_pin_locked();
  }

  // For each pinned version, the bytes only it keeps alive: retired objects whose interval
  // holds no other pinned version. O(retired * log pins).
  std::vector<std::pair<std::uint64_t, std::size_t>> exclusive_bytes() const {
    std::lock_guard lock(mu_);
    std::vector<std::pair<std::uint64_t, std::size_t>> out;
    for (auto p = live_pins_begin(); p != pins_.end(); ++p)
      if (p->count > 0) out.emplace_back(p->version, 0);
    for (const Retired& r : retired_) {
      auto lo = std::lower_bound(out.begin(), out.end(), r.birth,
                                 [](const auto& e, std::uint64_t v) { return e.first < v; });
      if (lo != out.end() && lo->first < r.death &&
          (std::next(lo) == out.end() || std::next(lo)->first >= r.death))
        lo->second += r.bytes;
    }
    return out;
  }

 private:
  struct Pin {
    std::uint64_t version;
    std::uint32_t count;
  };

  void free_one(const Retired& r) noexcept {
    if (r.is_item) {
      static_cast<const Item*>(r.ptr)->release();
      return;
    }
    // Parked or deleted, the node leaves the live accounting.
    owed_nodes_ -= 1;
    owed_bytes_ -= static_cast<std::int64_t>(r.bytes);
    parked_.park(r.ptr, r.bytes, hooks_);
  }

  void settle_locked() noexcept {
    if (owed_nodes_ == 0 && owed_bytes_ == 0) return;
    hooks_.count(owed_nodes_, owed_bytes_);
    owed_nodes_ = owed_bytes_ = 0;
  }

  // Pins are a sorted vector whose dropped front is skipped by an offset (compacted when
  // it grows), so the binary searches run over contiguous memory.
  std::vector<Pin>::iterator live_pins_begin() noexcept { return pins_.begin() + static_cast<std::ptrdiff_t>(head_); }
  std::vector<Pin>::const_iterator live_pins_begin() const noexcept {
    return pins_.begin() + static_cast<std::ptrdiff_t>(head_);
  }
  std::vector<Pin>::iterator find_pin(std::uint64_t version) {
    return std::lower_bound(live_pins_begin(), pins_.end(), version,
                            [](const Pin& p, std::uint64_t v) { return p.version < v; });
  }
  std::vector<Pin>::const_iterator find_pin(std::uint64_t version) const {
    return std::lower_bound(live_pins_begin(), pins_.end(), version,
                            [](const Pin& p, std::uint64_t v) { return p.version < v; });
  }

  // Zero-count pins are dropped from the front at once and compacted elsewhere lazily, so
  // unpinning in any order stays O(log s) amortized.
  void drop_zero_pins() {
    while (head_ < pins_.size() && pins_[head_].count == 0) {
      ++head_;
      --zero_pins_;
    }
    const std::size_t live = pins_.size() - head_;
    if (head_ > 64 && head_ * 2 > pins_.size()) {
      pins_.erase(pins_.begin(), live_pins_begin());
      head_ = 0;
    }
    if (zero_pins_ > 16 && zero_pins_ * 2 > live) {
      std::erase_if(pins_, [](const Pin& p) { return p.count == 0; });
      head_ = 0;
      zero_pins_ = 0;
    }
  }

  std::uint64_t oldest_pin_locked() const {
    for (auto p = live_pins_begin(); p != pins_.end(); ++p)
      if (p->count > 0) return p->version;
    return kForever;
  }

  bool any_pin_in_locked(std::uint64_t birth, std::uint64_t death) const {
    if (birth >= death || live_pins_begin() == pins_.end()) return false;
    // The common case answers in O(1): the newest pin (taken right before the write that
    // retires this object) is inside the interval.
    const Pin& newest = pins_.back();
    if (newest.version < birth) return false;
    if (newest.version < death && newest.count > 0) return true;
    for (auto it = find_pin(birth); it != pins_.end() && it->version < death; ++it)
      if (it->count > 0) return true;
    return false;
  }

  void free_prefix_locked() {
    const std::uint64_t oldest = oldest_pin_locked();
    while (!retired_.empty() && retired_.front().death <= oldest) {
      retired_bytes_ -= retired_.front().bytes;
      free_one(retired_.front());
      retired_.pop_front();
    }
    prefetch_front_items();
  }

  // With a window of snapshots (the registry), each unpin frees the next prefix, made of
  // objects retired a window ago and long gone from the cache. Nodes are parked without
  // being read, but an item's free reads and writes its first line (refcount, size, the
  // ItemHeap's list link): asking for that line now, an unpin ahead, takes the miss off the
  // writer's next unpin. Only what dropping the oldest pin would free, so that nothing is fetched
  // in vain for a pin that stays (a reader held while snapshots come and go at the newest end).
  void prefetch_front_items() const noexcept {
    auto pin = live_pins_begin();
    while (pin != pins_.end() && pin->count == 0) ++pin;
    if (pin != pins_.end()) ++pin;
    while (pin != pins_.end() && pin->count == 0) ++pin;
    if (pin == pins_.end()) return;
    const std::uint64_t next_oldest = pin->version;
    const std::size_t ahead = std::min<std::size_t>(retired_.size(), kPrefetchAhead);
    for (std::size_t i = 0; i < ahead && retired_[i].death <= next_oldest; ++i) {
      const Retired& r = retired_[i];
      if (!r.is_item) continue;
      __builtin_prefetch(r.ptr, 1);
    }
  }

  // After the newest pin `version` went (see "Collection" above). Bounded to kNewestScan
  // entries so an unpin stays O(1); the rest waits for the sweep as before.
  void free_newest_locked(std::uint64_t version) noexcept {
    while (pins_.size() > head_ && pins_.back().count == 0) {
      pins_.pop_back();
      --zero_pins_;
    }
    std::size_t m = 0;
    while (m < kNewestScan && m < retired_.size() && retired_[retired_.size() - 1 - m].death > version) ++m;
    // Compacted in place, in order (the list stays sorted by death); only pop_back shrinks
    // it, which never allocates.
    std::size_t w = retired_.size() - m;
    for (std::size_t j = w; j < retired_.size(); ++j) {
      const Retired r = retired_[j];
      if (any_pin_in_locked(r.birth, r.death)) {
        retired_[w++] = r;
      } else {
        retired_bytes_ -= r.bytes;
        free_one(r);
      }
    }
    while (retired_.size() > w) retired_.pop_back();
  }

  void sweep_locked() {
    std::deque<Retired> kept;
    for (const Retired& r : retired_) {
      if (any_pin_in_locked(r.birth, r.death)) {
        kept.push_back(r);
      } else {
        retired_bytes_ -= r.bytes;
        free_one(r);
      }
    }
    retired_.swap(kept);
    sweep_threshold_ = std::max<std::size_t>(1024, 2 * retired_.size());
  }

  NodeHooks hooks_;
  std::int64_t owed_nodes_ = 0, owed_bytes_ = 0;  // node counts not yet settled (settle_locked)
  ParkedNodes parked_;
  mutable std::mutex mu_;
  std::vector<Pin> pins_;
  std::size_t head_ = 0;
  std::size_t zero_pins_ = 0;
  std::deque<Retired> retired_;
  std::size_t retired_bytes_ = 0;
  std::atomic<std::int64_t> deferred_bytes_{0};  // hold_bytes
  std::size_t sweep_threshold_ = 1024;
};

}  // namespace watchcache::detail
