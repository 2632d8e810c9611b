// SnapshotRegistry: resourceVersion -> Snapshot, the cache's memory of past states.
//
// The watch cache stores one snapshot per applied rv (O(1) each; their cost is paid later
// as path copies) and prunes them as its event window moves, so paginated and Exact-rv
// LISTs are served from the state they name. Stored rvs are strictly increasing, which keeps
// the store a deque: add and prune at the ends, exact and floor lookups by binary search.
//
// Memory. pinned_bytes() is what snapshots keep alive beyond the live tree: the retired
// nodes and items their reclamation domains still hold (reclaim.hpp), read from the
// engine's live accounting rather than estimated. Any live Snapshot pins memory (also those
// held by Python or cursors); the registry reports the domains it holds snapshots of.
// With a budget, add() evicts the oldest snapshots until the pinned bytes fit (the newest
// is never evicted). usage() splits each snapshot's reachable bytes into what it alone
// keeps alive and what it shares.
//
// Thread-safety: every method locks; readers on other threads may get() while the writer
// adds and prunes. Snapshots are returned by value (each copy pins its version).
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "watchcache/btree.hpp"

namespace watchcache {

struct SnapshotUsage {
  std::int64_t resource_version;
  std::size_t exclusive_bytes;
  std::size_t shared_bytes;
};

template <unsigned F = kDefaultFanout>
class BasicSnapshotRegistry {
 public:
  using Snapshot = BasicSnapshot<F>;
  using Entry = std::pair<std::int64_t, Snapshot>;

  explicit BasicSnapshotRegistry(std::size_t budget_bytes = 0) : budget_(budget_bytes) {}

  // rv must be > 0 and not below any stored rv (std::invalid_argument otherwise). An rv
  // equal to the newest replaces its snapshot: one etcd transaction can change several keys
  // at one revision, and that revision's state is the one after all of them.
  void add(std::int64_t rv, Snapshot snap) {
    std::optional<Snapshot> replaced;  // unpinned after the lock is released
    std::lock_guard lock(mu_);
    if (rv <= 0) throw std::invalid_argument("resource version must be positive, got " + std::to_string(rv));
    if (!entries_.empty() && rv < entries_.back().first)
      throw std::invalid_argument("resource version " + std::to_string(rv) +
                                  " is below the newest stored " + std::to_string(entries_.back().first));
    track_domain_locked(snap.domain().get(), +1);
    if (!entries_.empty() && rv == entries_.back().first) {
      track_domain_locked(entries_.back().second.domain().get(), -1);
      replaced.emplace(std::exchange(entries_.back().second, std::move(snap)));
    } else {
      entries_.emplace_back(rv, std::move(snap));
    }
    enforce_budget_locked();
  }

  std::optional<Snapshot> get(std::int64_t rv) const {
    std::lock_guard lock(mu_);
    auto it = lower(rv);
    if (it == entries_.end() || it->first != rv) return std::nullopt;
    return it->second;
  }

  // The newest snapshot with rv <= the given one.
  std::optional<Entry> floor(std::int64_t rv) const {
    std::lock_guard lock(mu_);
    auto it = std::upper_bound(entries_.begin(), entries_.end(), rv,
                               [](std::int64_t v, const Entry& e) { return v < e.first; });
    if (it == entries_.begin()) return std::nullopt;
    return *std::prev(it);
  }

  // floor(rv)'s rv alone: answers "is there a snapshot at or below rv" without copying one
  // (a copy pins its version in the reclaim domain, under that domain's lock).
  std::optional<std::int64_t> floor_resource_version(std::int64_t rv) const {
    std::lock_guard lock(mu_);
    auto it = std::upper_bound(entries_.begin(), entries_.end(), rv,
                               [](std::int64_t v, const Entry& e) { return v < e.first; });
    if (it == entries_.begin()) return std::nullopt;
    return std::prev(it)->first;
  }

  std::optional<Entry> latest() const {
    std::lock_guard lock(mu_);
    if (entries_.empty()) return std::nullopt;
    return entries_.back();
  }
  std::optional<Entry> oldest() const {
    std::lock_guard lock(mu_);
    if (entries_.empty()) return std::nullopt;
    return entries_.front();
  }

  // Drops snapshots with rv < the given one; returns how many.
  std::size_t prune_below(std::int64_t rv) {
    std::vector<Snapshot> dropped;
    std::lock_guard lock(mu_);
    while (!entries_.empty() && entries_.front().first < rv) dropped.push_back(pop_oldest_locked());
    return dropped.size();
  }

  void clear() {
    std::deque<Entry> dropped;
    std::lock_guard lock(mu_);
    dropped.swap(entries_);
    domains_.clear();
  }

  std::size_t size() const {
    std::lock_guard lock(mu_);
    return entries_.size();
  }
  bool contains(std::int64_t rv) const {
    std::lock_guard lock(mu_);
    auto it = lower(rv);
    return it != entries_.end() && it->first == rv;
  }
  std::vector<std::int64_t> resource_versions() const {
    std::lock_guard lock(mu_);
    std::vector<std::int64_t> out;
    out.reserve(entries_.size());
    for (const auto& e : entries_) out.push_back(e.first);
    return out;
  }

  std::size_t budget_bytes() const {
    std::lock_guard lock(mu_);
    return budget_;
  }
  void set_budget_bytes(std::size_t budget) {
    std::lock_guard lock(mu_);
    budget_ = budget;
    enforce_budget_locked();
  }
  std::size_t evicted() const {
    std::lock_guard lock(mu_);
    return evicted_;
  }

  std::size_t pinned_bytes() const {
    std::lock_guard lock(mu_);
    return pinned_bytes_locked();
  }

  std::vector<SnapshotUsage> usage() const {
    std::lock_guard lock(mu_);
    std::vector<SnapshotUsage> out;
    std::vector<std::pair<const detail::ReclaimDomain*, std::vector<std::pair<std::uint64_t, std::size_t>>>> tables;
    for (const auto& [rv, snap] : entries_) {
      const detail::ReclaimDomain* d = snap.domain().get();
      std::size_t exclusive = 0;
      if (d) {
        auto t = std::find_if(tables.begin(), tables.end(), [d](const auto& e) { return e.first == d; });
        if (t == tables.end()) {
          tables.emplace_back(d, d->exclusive_bytes());
          t = std::prev(tables.end());
        }
        auto hit = std::lower_bound(t->second.begin(), t->second.end(), snap.version(),
                                    [](const auto& e, std::uint64_t v) { return e.first < v; });
        if (hit != t->second.end() && hit->first == snap.version()) exclusive = hit->second;
      }
      out.push_back({rv, exclusive, snap.nbytes() > exclusive ? snap.nbytes() - exclusive : 0});
    }
    return out;
  }

 private:
  typename std::deque<Entry>::const_iterator lower(std::int64_t rv) const {
    return std::lower_bound(entries_.begin(), entries_.end(), rv,
                            [](const Entry& e, std::int64_t v) { return e.first < v; });
  }

  // O(domains), almost always one: add() runs this once per event when a budget is set, so
  // it must not walk the stored snapshots.
  std::size_t pinned_bytes_locked() const {
    std::size_t total = 0;
    for (const auto& [domain, count] : domains_) total += domain->retired_bytes();
    return total;
  }

  void track_domain_locked(const detail::ReclaimDomain* d, int delta) {
    if (!d) return;
    auto it = std::find_if(domains_.begin(), domains_.end(), [d](const auto& e) { return e.first == d; });
    if (it == domains_.end()) {
      domains_.emplace_back(d, 0);
      it = std::prev(domains_.end());
    }
    it->second = static_cast<std::size_t>(static_cast<std::ptrdiff_t>(it->second) + delta);
    if (it->second == 0) domains_.erase(it);
  }

  // Removes the oldest entry and hands its snapshot to the caller, who decides where the
  // unpin (which may free memory) happens.
  Snapshot pop_oldest_locked() {
    Snapshot gone = std::move(entries_.front().second);
    entries_.pop_front();
    track_domain_locked(gone.domain().get(), -1);
    return gone;
  }

  // Eviction frees memory only when the evicted snapshot is unpinned, so each step drops
  // the oldest entry right away (the domain collects under its own lock) before re-measuring.
  void enforce_budget_locked() {
    if (budget_ == 0) return;
    while (entries_.size() > 1 && pinned_bytes_locked() > budget_) {
      pop_oldest_locked();  // dropped here: the unpin frees what only it kept alive
      ++evicted_;
    }
  }

  mutable std::mutex mu_;
  std::deque<Entry> entries_;
  // The reclaim domains of the stored snapshots, with how many entries each has.
  std::vector<std::pair<const detail::ReclaimDomain*, std::size_t>> domains_;
  std::size_t budget_ = 0;
  std::size_t evicted_ = 0;
};

using SnapshotRegistry = BasicSnapshotRegistry<kDefaultFanout>;

}  // namespace watchcache
