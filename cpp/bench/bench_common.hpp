// Shared helpers for the native microbenchmarks (fanout_bench.cpp, engine_bench.cpp):
// the Kubernetes-shaped key set, item factories, probe buffers, timing and memory probes.
//
// Keys: /registry/pods/ns-%05d/pod-%07d with the namespace drawn uniformly from 0..999 and
// the pod number the key's creation index (so keys are unique), ~35 bytes; sorted once and
// reused by every fan-out. Values: a compact JSON object padded to an exact size. All
// randomness derives from one seed: WATCHCACHE_SEED (decimal) or kDefaultSeed.
//
// Timed loops read their probe keys from a flat, sequentially laid out buffer, so a probe
// costs no cache miss of its own (a random std::string in a 1M vector would cost two).
//
// Callgrind's client requests (write_probe.cpp and index_bench --probe count only the
// operations they measure) compile to nothing where valgrind's header is missing.
#pragma once

#include <malloc.h>
#include <unistd.h>

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#define CALLGRIND_TOGGLE_COLLECT
#endif

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <numeric>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "watchcache/item.hpp"

namespace wcbench {

using Clock = std::chrono::steady_clock;
inline constexpr std::uint64_t kDefaultSeed = 20240601;
inline constexpr unsigned kNamespaces = 1000;
inline constexpr std::string_view kPrefix = "/registry/pods/";

inline std::uint64_t seed_from_env() {
  const char* s = std::getenv("WATCHCACHE_SEED");
  if (!s || !*s) return kDefaultSeed;
  return std::strtoull(s, nullptr, 10);
}

// splitmix64: small, fast, good enough to draw keys and probes.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : s_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound).
  std::size_t below(std::size_t bound) {
    return static_cast<std::size_t>(next() % static_cast<std::uint64_t>(bound));
  }

 private:
  std::uint64_t s_;
};

// Keeps a value (and everything it points to) alive past the optimizer.
template <class T>
inline void keep(const T& v) {
  asm volatile("" : : "r,m"(v) : "memory");
}
inline void clobber() { asm volatile("" : : : "memory"); }

template <class Fn>
inline double time_ns(Fn&& fn) {
  const auto t0 = Clock::now();
  fn();
  const auto t1 = Clock::now();
  return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// The mean of a sequence of batch times after replacing each by the median of the 5
// batches centred on it. On a shared machine a descheduled thread charges the whole time
// slice it lost to the one batch it was in; that spike is dropped, while a trend along the
// sequence (e.g. fewer copies as a version's writes go on) is kept.
inline double robust_mean(const std::vector<double>& batches) {
  if (batches.empty()) return 0;
  if (batches.size() < 5) return median(batches);
  double sum = 0;
  for (std::size_t i = 0; i < batches.size(); ++i) {
    const std::size_t lo = i < 2 ? 0 : std::min(i - 2, batches.size() - 5);
    sum += median(std::vector<double>(batches.begin() + static_cast<std::ptrdiff_t>(lo),
                                      batches.begin() + static_cast<std::ptrdiff_t>(lo + 5)));
  }
  return sum / static_cast<double>(batches.size());
}

// Runs body(i) for i in [0, count) in timed batches of `batch` calls; ns per call, robust
// to preemption (robust_mean over the batches). An untimed prepare(begin, end) runs before
// each batch: writes create their items there, so an item is as fresh in cache as one the
// binding creates right before put(), and Item::create is not charged to the tree.
template <class Prepare, class Fn>
inline double per_op_ns_prepared(std::size_t count, std::size_t batch, Prepare&& prepare, Fn&& body) {
  std::vector<double> times;
  times.reserve(count / batch + 1);
  for (std::size_t begin = 0; begin < count; begin += batch) {
    const std::size_t end = std::min(count, begin + batch);
    prepare(begin, end);
    const auto t0 = Clock::now();
    for (std::size_t i = begin; i < end; ++i) body(i);
    const auto t1 = Clock::now();
    times.push_back(static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()) /
                    static_cast<double>(end - begin));
  }
  return robust_mean(times);
}

// per_op_ns_prepared with nothing to prepare.
template <class Fn>
inline double per_op_ns(std::size_t count, std::size_t batch, Fn&& body) {
  return per_op_ns_prepared(count, batch, [](std::size_t, std::size_t) {}, std::forward<Fn>(body));
}

// Resident set size in bytes (second field of /proc/self/statm).
inline std::size_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  std::size_t pages_total = 0, pages_resident = 0;
  f >> pages_total >> pages_resident;
  return pages_resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

// Returns freed heap pages to the OS so the next RSS delta measures new allocations.
inline void trim_heap() { malloc_trim(0); }

inline std::int64_t live_bytes() {
  return watchcache::detail::live_counters().bytes.load(std::memory_order_relaxed);
}

inline std::string format_key(unsigned ns, std::size_t pod) {
  char buf[64];
  const int len = std::snprintf(buf, sizeof buf, "/registry/pods/ns-%05u/pod-%07zu", ns, pod);
  return std::string(buf, static_cast<std::size_t>(len));
}

inline std::string namespace_prefix(unsigned ns) {
  char buf[64];
  const int len = std::snprintf(buf, sizeof buf, "/registry/pods/ns-%05u/", ns);
  return std::string(buf, static_cast<std::size_t>(len));
}

// A compact JSON object naming the key, padded with a "pad" string to exactly `size` bytes
// (never shorter than the unpadded object).
inline std::string make_value(std::string_view key, std::int64_t rv, std::size_t size) {
  std::string v = "{\"metadata\":{\"key\":\"";
  v.append(key);
  v += "\",\"resourceVersion\":\"" + std::to_string(rv) + "\"},\"pad\":\"";
  const std::size_t tail = 2;  // "}
  if (v.size() + tail < size) v.append(size - v.size() - tail, 'x');
  v += "\"}";
  return v;
}

struct Dataset {
  std::size_t n = 0;
  std::size_t value_bytes = 0;
  std::vector<std::string> keys;  // ascending, unique
  double raw_bytes_per_item = 0;  // mean key + value bytes
};

inline Dataset make_dataset(std::size_t n, std::size_t value_bytes, std::uint64_t seed) {
  Dataset ds;
  ds.n = n;
  ds.value_bytes = value_bytes;
  Rng rng(seed ^ (0xA5A5A5A5ull * n));
  ds.keys.reserve(n);
  for (std::size_t i = 0; i < n; ++i)
    ds.keys.push_back(format_key(static_cast<unsigned>(rng.below(kNamespaces)), i));
  std::sort(ds.keys.begin(), ds.keys.end());
  std::size_t key_total = 0;
  for (const auto& k : ds.keys) key_total += k.size();
  ds.raw_bytes_per_item = static_cast<double>(key_total) / static_cast<double>(n) + static_cast<double>(value_bytes);
  return ds;
}

using Labeler = std::vector<watchcache::StringPair> (*)(std::size_t index, std::string& storage);

inline std::vector<watchcache::StringPair> no_labels(std::size_t, std::string&) { return {}; }

// {app: x-N}, N = index % 100.
inline std::vector<watchcache::StringPair> app_label(std::size_t index, std::string& storage) {
  storage = "x-" + std::to_string(index % 100);
  return {{"app", storage}};
}

inline watchcache::ItemRef make_item(const Dataset& ds, std::size_t index, std::int64_t rv,
                                     Labeler labeler = no_labels) {
  std::string label_storage;
  auto labels = labeler(index, label_storage);
  return watchcache::ItemRef::adopt(
      watchcache::Item::create(ds.keys[index], make_value(ds.keys[index], rv, ds.value_bytes), rv, std::move(labels)));
}

// One item per key, in key order. With `scatter`, the items are allocated in a random
// order, so neighbours in the tree are not neighbours in memory (a long-running cache).
inline std::vector<watchcache::ItemRef> make_items(const Dataset& ds, Labeler labeler = no_labels,
                                                   bool scatter = false, std::uint64_t seed = 1) {
  std::vector<watchcache::ItemRef> items(ds.n);
  std::vector<std::size_t> order(ds.n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  if (scatter) {
    Rng rng(seed);
    for (std::size_t i = ds.n; i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  }
  for (const std::size_t i : order) items[i] = make_item(ds, i, static_cast<std::int64_t>(i + 1), labeler);
  return items;
}

// Probe keys laid out back to back in one buffer, in probe order.
class Probes {
 public:
  void add(std::string_view k) {
    offsets_.push_back(buf_.size());
    buf_.append(k);
  }
  std::size_t size() const { return offsets_.size(); }
  std::string_view operator[](std::size_t i) const {
    const std::size_t end = i + 1 < offsets_.size() ? offsets_[i + 1] : buf_.size();
    return std::string_view(buf_).substr(offsets_[i], end - offsets_[i]);
  }

 private:
  std::string buf_;
  std::vector<std::size_t> offsets_;
};

// `count` random keys of the dataset with index < limit (default: all).
inline Probes random_keys(const Dataset& ds, std::size_t count, Rng& rng, std::size_t limit = 0) {
  Probes p;
  const std::size_t bound = limit ? std::min(limit, ds.n) : ds.n;
  for (std::size_t i = 0; i < count; ++i) p.add(ds.keys[rng.below(bound)]);
  return p;
}

// `count` fresh items (values at a new rv) for random existing keys.
inline std::vector<watchcache::ItemRef> update_items(const Dataset& ds, std::size_t count, Rng& rng,
                                                     std::int64_t rv, Labeler labeler = no_labels) {
  std::vector<watchcache::ItemRef> out;
  out.reserve(count);
  for (std::size_t i = 0; i < count; ++i) out.push_back(make_item(ds, rng.below(ds.n), rv + static_cast<std::int64_t>(i), labeler));
  return out;
}

// "1M", "100k" or the plain number, for table headings.
inline std::string size_tag(std::size_t n) {
  if (n % 1'000'000 == 0) return std::to_string(n / 1'000'000) + "M";
  if (n % 1'000 == 0) return std::to_string(n / 1'000) + "k";
  return std::to_string(n);
}

// Three significant-ish digits: 1234, 12.3, 1.23.
inline std::string fmt(double v) {
  char buf[32];
  const double a = std::fabs(v);
  std::snprintf(buf, sizeof buf, a >= 100 ? "%.0f" : (a >= 10 ? "%.1f" : "%.2f"), v);
  return buf;
}

}  // namespace wcbench
