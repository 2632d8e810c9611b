// The workloads ab_engine.cpp times, written once and compiled twice: once per engine variant,
// with the `watchcache` and `wcbench` namespaces renamed by the includer (see ab_engine.cpp).
// Each call runs one short batch and returns nanoseconds per operation; the includer
// alternates the two variants' batches.
//
// Every workload is a 1M-key tree (keys as in bench_common.hpp, 100-byte values, one label):
//   update    puts of random existing keys with one older snapshot alive
//   snap_put  snapshot, put, drop, with a reader snapshot alive (a snapshot per write)
//   window    snapshot then put, keeping the last 1000 snapshots (the watch cache's history)
//   get       random gets on the live tree
//   scan      scan 500 from a random key of a snapshot
// and, on a second 1M-key tree grown by puts in random order (as a cache fills from watch
// events; built on first use, so runs without them do not pay for it):
//   grown_update  update on that tree, one older snapshot alive
//   grown_get     random gets on that tree
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string_view>

namespace AB_VARIANT {

using namespace wcbench;

class Workloads {
 public:
  Workloads(std::size_t n, std::size_t value_bytes) : ds_(make_dataset(n, value_bytes, kDefaultSeed)) {
    tree_ = std::make_unique<watchcache::Tree>();
    tree_->assign_sorted(make_items(ds_, app_label));
    rv_ = static_cast<std::int64_t>(n) + 1;
    gets_ = random_keys(ds_, std::size_t{1} << 15, rng_);
    starts_ = random_keys(ds_, 2048, rng_, n - 501);
  }

  double run(std::string_view name, std::size_t batch) {
    if (name == "update") return update(batch);
    if (name == "snap_put") return snap_put(batch);
    if (name == "window") return window(batch);
    if (name == "get") return get(batch);
    if (name == "scan") return scan(batch);
    if (name == "grown_update") return grown_update(batch);
    if (name == "grown_get") return grown_get(batch);
    return -1;
  }

  // A fresh older snapshot, so that the next updates copy leaves again.
  void renew_old_snapshot() {
    old_.reset();
    old_.emplace(tree_->snapshot());
    if (grown_) {
      grown_old_.reset();
      grown_old_.emplace(grown_->snapshot());
    }
  }

  std::size_t checksum() const { return acc_; }

 private:
  template <class Fn>
  static double timed(std::size_t count, Fn&& fn) {
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < count; ++i) fn(i);
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
           static_cast<double>(count);
  }
  std::vector<watchcache::ItemRef> fresh(std::size_t count) {
    auto batch = update_items(ds_, count, rng_, rv_, app_label);
    rv_ += static_cast<std::int64_t>(count);
    return batch;
  }

  double update(std::size_t count) {
    if (!old_) renew_old_snapshot();
    auto batch = fresh(count);
    return timed(count, [&](std::size_t i) { acc_ += tree_->put(std::move(batch[i])); });
  }
  double snap_put(std::size_t count) {
    if (!reader_) reader_.emplace(tree_->snapshot());
    auto batch = fresh(count);
    return timed(count, [&](std::size_t i) {
      const watchcache::Snapshot s = tree_->snapshot();
      acc_ += tree_->put(std::move(batch[i]));
    });
  }
  double window(std::size_t count) {
    auto batch = fresh(count);
    return timed(count, [&](std::size_t i) {
      window_.push_back(tree_->snapshot());
      if (window_.size() > 1000) window_.pop_front();
      acc_ += tree_->put(std::move(batch[i]));
    });
  }
  watchcache::Tree& grown() {
    if (!grown_) {
      grown_ = std::make_unique<watchcache::Tree>();
      auto items = make_items(ds_, app_label, /*scatter=*/true);
      Rng order_rng(kDefaultSeed + 1);
      for (std::size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[order_rng.below(i)]);
      for (auto& item : items) grown_->put(std::move(item));
    }
    return *grown_;
  }
  double grown_update(std::size_t count) {
    watchcache::Tree& tree = grown();
    if (!grown_old_) grown_old_.emplace(tree.snapshot());
    auto batch = fresh(count);
    return timed(count, [&](std::size_t i) { acc_ += tree.put(std::move(batch[i])); });
  }
  double grown_get(std::size_t count) {
    const watchcache::Tree& tree = grown();
    return timed(count, [&](std::size_t) {
      acc_ += reinterpret_cast<std::uintptr_t>(tree.get(gets_[next_get_++ % gets_.size()]));
    });
  }
  double get(std::size_t count) {
    return timed(count, [&](std::size_t) {
      acc_ += reinterpret_cast<std::uintptr_t>(tree_->get(gets_[next_get_++ % gets_.size()]));
    });
  }
  double scan(std::size_t count) {
    if (!reader_) reader_.emplace(tree_->snapshot());
    watchcache::ScanOptions o;
    o.prefix = kPrefix;
    o.limit = 500;
    return timed(count, [&](std::size_t) {
      o.start = starts_[next_scan_++ % starts_.size()];
      const auto res = watchcache::scan(*reader_, o);
      acc_ += res.items.size() + res.remaining;
    });
  }

  Rng rng_{kDefaultSeed};
  Dataset ds_;
  std::unique_ptr<watchcache::Tree> tree_, grown_;
  std::int64_t rv_ = 0;
  std::optional<watchcache::Snapshot> old_, reader_, grown_old_;
  std::deque<watchcache::Snapshot> window_;
  Probes gets_, starts_;
  std::size_t next_get_ = 0, next_scan_ = 0;
  std::size_t acc_ = 0;
};

}  // namespace AB_VARIANT
