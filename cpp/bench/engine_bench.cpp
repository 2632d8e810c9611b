// engine_bench: the default-fan-out engine (watchcache::Tree, F = WATCHCACHE_FANOUT) against
// the design's native targets (docs/architecture.md §7, "Performance targets"), at 1M
// Kubernetes-shaped keys (bench_common.hpp) whose items carry one label {app: x-N}.
//
// Rows (medians of repetitions; loops timed in short batches, robust to preemption; writes
// create their items in untimed batches right before the timed puts):
//   snapshot() + drop        at 1M; "O(1)" compares it with the same at 10k
//   get                      random existing key on the live tree (no target)
//   update, old snapshot     one snapshot, then n/10 random updates (first write into a
//                            node copies it, later ones in the same version do not)
//   write after snapshot     per event: registry.add(rv, tree.snapshot()), prune to the last
//                            1000, put (the watch cache's one-snapshot-per-event pattern)
//   prefix count             count() of one random namespace (~1000 of 1M)
//   scan 500                 scan() from a random key, limit 500, on a snapshot
//   full scan                Cursor over all items reading each key (ns/item)
//   render 500 x 1 KB        scan 500 from a random key of a 300k x 1 KB tree, size the body
//                            with ListRenderer::size and render into a preallocated buffer
//   selector scan            scan() of every item with a label selector matching none (ms):
//                            n x 100 B against 20 ns/item (the full-scan target), and
//                            300k x 1 KB against the LIST target (20 ms, which also covers
//                            Python and HTTP: the native part must be well below)
//   memory                   RSS delta per item after bulk load minus key+value+label bytes
//   pinned/snapshot          registry.pinned_bytes() / snapshots held, window of 1000
// Informational rows (no target) have "-" in the target column.
//
// Usage: engine_bench [--n 1000000] [--reps 5]. Env: WATCHCACHE_SEED.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bench_common.hpp"
#include "engine.hpp"

using namespace wcbench;
using watchcache::Snapshot;
using watchcache::Tree;

namespace {

struct Row {
  std::string name;
  double value;
  std::string unit;
  std::optional<double> limit;  // value <= limit passes
};

std::size_t label_bytes(std::size_t index) {
  std::string storage;
  std::size_t total = 0;
  for (const auto& [k, v] : app_label(index, storage)) total += k.size() + v.size();
  return total;
}

watchcache::Selector matching_none() {
  return watchcache::Selector({watchcache::LabelRequirement{"app", watchcache::LabelOp::Equals, {"none"}, 0}}, {});
}

// scan() of every item with a selector that matches none; ms per scan.
double selector_scan_ms(const Snapshot& snap, int reps, std::uintptr_t& acc) {
  const watchcache::Selector sel = matching_none();
  watchcache::ScanOptions o;
  o.prefix = kPrefix;
  std::vector<double> v;
  for (int r = 0; r < reps; ++r) {
    std::size_t scanned = 0, matched = 0;
    v.push_back(time_ns([&] {
                  const auto res = watchcache::scan(snap, o, sel);
                  scanned = res.scanned;
                  matched = res.items.size();
                }) /
                1e6);
    if (scanned != snap.size() || matched != 0) throw std::logic_error("selector scan saw the wrong items");
    acc += scanned;
  }
  return *std::min_element(v.begin(), v.end());  // one long call: the least preempted run
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t n = 1'000'000;
  int reps = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--n" && i + 1 < argc)
      n = std::stoull(argv[++i]);
    else if (a == "--reps" && i + 1 < argc)
      reps = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--n N] [--reps R]\n", argv[0]);
      return 2;
    }
  }
  const std::uint64_t seed = seed_from_env();
  const auto t_start = Clock::now();
  std::vector<Row> rows;
  std::uintptr_t acc = 0;
  Rng rng(seed * 7 + 1);
  auto med = [&](auto&& fn) {
    std::vector<double> v;
    for (int r = 0; r < reps; ++r) v.push_back(fn());
    return median(v);
  };

  std::fprintf(stderr, "dataset n=%zu ...\n", n);
  const Dataset ds = make_dataset(n, 100, seed);
  double raw = ds.raw_bytes_per_item;
  {
    double labels = 0;
    for (std::size_t i = 0; i < 100; ++i) labels += static_cast<double>(label_bytes(i));
    raw += labels / 100;
  }

  // Item::create and bulk load (informational).
  {
    std::vector<double> create, load;
    for (int r = 0; r < std::min(reps, 3); ++r) {
      std::vector<watchcache::ItemRef> items;
      create.push_back(time_ns([&] { items = make_items(ds, app_label); }) / static_cast<double>(n));
      Tree t;
      load.push_back(time_ns([&] { t.assign_sorted(std::move(items)); }) / static_cast<double>(n));
    }
    rows.push_back({"Item::create (35 B key, 100 B value, 1 label)", *std::min_element(create.begin(), create.end()),
                    "ns", std::nullopt});
    rows.push_back({"bulk load (assign_sorted)", *std::min_element(load.begin(), load.end()), "ns/item", std::nullopt});
  }

  std::fprintf(stderr, "tree ...\n");
  trim_heap();
  const std::size_t rss0 = rss_bytes();
  auto tree = std::make_unique<Tree>();
  tree->assign_sorted(make_items(ds, app_label));
  const double rss_per_item = static_cast<double>(rss_bytes() - rss0) / static_cast<double>(n);

  // snapshot() at 1M and at 10k.
  auto snapshot_cost = [&](Tree& t) {
    return med([&] {
      return per_op_ns(50'000, 1000, [&](std::size_t) {
        const Snapshot s = t.snapshot();
        acc += s.version();
      });
    });
  };
  const double snap_big = snapshot_cost(*tree);
  double snap_small = 0;
  {
    const Dataset small = make_dataset(10'000, 100, seed);
    Tree t;
    t.assign_sorted(make_items(small, app_label));
    snap_small = snapshot_cost(t);
  }
  rows.push_back({"snapshot() + drop", snap_big, "ns", 300});
  rows.push_back({"snapshot() at " + size_tag(n) + " / at 10k (O(1): <= 1.5)", snap_big / snap_small, "x", 1.5});

  {
    const Probes p = random_keys(ds, 1u << 15, rng);
    rows.push_back({"get (random key)", med([&] {
                      return per_op_ns(p.size(), 256, [&](std::size_t i) { acc += reinterpret_cast<std::uintptr_t>(tree->get(p[i])); });
                    }),
                    "ns", std::nullopt});
  }

  {
    const Snapshot snap = tree->snapshot();
    {
      Probes lo, hi;
      for (int i = 0; i < 8192; ++i) {
        const std::string pre = namespace_prefix(static_cast<unsigned>(rng.below(kNamespaces)));
        lo.add(pre);
        hi.add(*watchcache::detail::prefix_end(pre));
      }
      rows.push_back({"prefix count (1 namespace of 1000)", med([&] {
                        return per_op_ns(lo.size(), 256, [&](std::size_t i) { acc += snap.count(lo[i], hi[i]); });
                      }),
                      "ns", 2000});
    }
    {
      const Probes p = random_keys(ds, 1000, rng, n - 501);
      watchcache::ScanOptions o;
      o.prefix = kPrefix;
      o.limit = 500;
      rows.push_back({"scan 500 from a random key (snapshot)", med([&] {
                        return per_op_ns(p.size(), 16, [&](std::size_t i) {
                          o.start = p[i];
                          const auto res = watchcache::scan(snap, o);
                          acc += res.items.size() + res.remaining;
                        });
                      }),
                      "ns", 8000});
    }
    rows.push_back({"full scan (Cursor, reads each key)", med([&] {
                      std::vector<double> chunks;
                      watchcache::Cursor c(snap);
                      c.seek_first();
                      while (c.valid()) {
                        const auto t0 = Clock::now();
                        std::size_t k = 0;
                        for (; k < 8192 && c.valid(); ++k, c.next()) acc += c.item()->key().size();
                        chunks.push_back(static_cast<double>((Clock::now() - t0).count()) / static_cast<double>(k));
                      }
                      return robust_mean(chunks);
                    }),
                    "ns/item", 20});
    rows.push_back({"selector scan, " + size_tag(n) + " x 100 B, matches none", selector_scan_ms(snap, reps, acc), "ms",
                     20.0 * static_cast<double>(n) / 1e6});
  }

  // Writes create their items batch by batch, untimed, right before the timed puts.
  std::vector<watchcache::ItemRef> batch;
  std::size_t batch_begin = 0;
  std::int64_t item_rv = static_cast<std::int64_t>(n) + 1;
  auto fresh_items = [&](std::size_t begin, std::size_t end) {
    batch = update_items(ds, end - begin, rng, item_rv, app_label);
    item_rv += static_cast<std::int64_t>(end - begin);
    batch_begin = begin;
  };
  auto put_fresh = [&](std::size_t i) { acc += tree->put(std::move(batch[i - batch_begin])); };

  rows.push_back({"update, older snapshot alive (n/10 puts)", med([&] {
                    const Snapshot old = tree->snapshot();
                    return per_op_ns_prepared(n / 10, 500, fresh_items, put_fresh);
                  }),
                  "ns", 1200});

  {
    const std::size_t window = 1000, m = 20'000;
    std::vector<double> v, pinned;
    std::int64_t rv = 1;
    for (int r = 0; r < reps; ++r) {
      watchcache::SnapshotRegistry registry;
      auto step = [&](std::size_t i) {
        registry.add(rv, tree->snapshot());
        registry.prune_below(rv - static_cast<std::int64_t>(window) + 1);
        ++rv;
        put_fresh(i);
      };
      fresh_items(0, window);
      for (std::size_t i = 0; i < window; ++i) step(i);
      v.push_back(per_op_ns_prepared(m, 200, fresh_items, step));
      pinned.push_back(static_cast<double>(registry.pinned_bytes()) / static_cast<double>(registry.size()));
    }
    rows.push_back({"write after fresh snapshot (registry of 1000)", median(v), "ns", 2000});
    rows.push_back({"pinned per stored snapshot (registry)", median(pinned), "B", 4096});
  }
  rows.push_back({"memory: RSS per item - key/value/label bytes", rss_per_item - raw, "B", 96});
  tree.reset();

  // 300k x 1 KB: render 500 and the LIST-shaped selector scan.
  {
    std::fprintf(stderr, "300k x 1 KB tree ...\n");
    const Dataset big = make_dataset(std::min<std::size_t>(n, 300'000), 1024, seed + 1);
    Tree t;
    t.assign_sorted(make_items(big, app_label));
    const Snapshot snap = t.snapshot();
    const watchcache::ListRenderer renderer("PodList", "v1", R"({"resourceVersion":"123456"})");
    std::vector<char> buf(600 * 1100 + 4096);
    const Probes p = random_keys(big, 1000, rng, big.n - 501);
    watchcache::ScanOptions o;
    o.prefix = kPrefix;
    o.limit = 500;
    {
      o.start = p[0];
      const auto res = watchcache::scan(snap, o);
      const std::string body = renderer.render(res.items);
      if (body.size() < 500 * 1024 || body.compare(0, 17, "{\"kind\":\"PodList\"") != 0 || body.back() != '}')
        throw std::logic_error("render produced an unexpected body");
    }
    rows.push_back({"render 500 x 1 KB (scan + size + render)", med([&] {
                      return per_op_ns(p.size(), 8, [&](std::size_t i) {
                        o.start = p[i];
                        const auto res = watchcache::scan(snap, o);
                        const std::size_t size = renderer.size(res.items);
                        renderer.render(res.items, buf.data());
                        acc += size + static_cast<unsigned char>(buf[size - 1]);
                      });
                    }),
                    "ns", 60'000});
    rows.push_back({"selector scan, " + size_tag(big.n) + " x 1 KB, matches none", selector_scan_ms(snap, reps, acc), "ms",
                     20.0 * static_cast<double>(big.n) / 300e3});
  }
  keep(acc);

  std::printf("\nwatchcache engine_bench: Tree (F=%u), %zu keys /registry/pods/ns-%%05d/pod-%%07d, label {app: x-N}, "
              "seed %llu\n\n",
              watchcache::kDefaultFanout, n, static_cast<unsigned long long>(seed));
  std::printf("%-50s %12s %-8s %12s  %s\n", "operation", "measured", "unit", "target", "");
  std::size_t pass = 0, judged = 0;
  for (const Row& r : rows) {
    const char* verdict = "";
    std::string target = "-";
    if (r.limit) {
      ++judged;
      const bool ok = r.value <= *r.limit;
      pass += ok;
      verdict = ok ? "PASS" : "MISS";
      target = "<= " + fmt(*r.limit);
    }
    std::printf("%-50s %12s %-8s %12s  %s\n", r.name.c_str(), fmt(r.value).c_str(), r.unit.c_str(), target.c_str(), verdict);
  }
  std::printf("\n%zu/%zu targets met (native; the Python-side targets are measured by bench/)\n", pass, judged);
  std::fflush(stdout);
  std::fprintf(stderr, "total %.1f s\n", std::chrono::duration<double>(Clock::now() - t_start).count());
  return 0;
}
