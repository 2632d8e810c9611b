// write_probe: the engine's hot operations in isolation, for valgrind. Wall-clock numbers on
// a shared machine move by 10-30% between runs; instruction counts and simulated cache
// misses per operation do not, so layout changes are judged with this probe:
//
//   valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no --cache-sim=yes
//       --LL=2097152,16,64 build/bench/write_probe write      (one command line)
//   callgrind_annotate callgrind.out.<pid> | head   (totals / the op count printed below)
//
// --LL is the level whose misses matter: this machine's per-core L2 (2 MB) is the last
// level private to the writer. Building the dataset and the bulk load run uninstrumented;
// the simulation starts before the warm-up and then runs without a break, and only the
// measured operations are counted (CALLGRIND_TOGGLE_COLLECT). Starting and stopping the
// instrumentation around each batch instead would empty the simulated caches every time,
// so that anything reused more than a batch apart, such as the nodes a window of
// snapshots recycles, would count as a miss.
//
// Modes (a 1M-key tree, keys as in bench_common.hpp, 100 B values by default):
//   write   a snapshot then one put per step, keeping the last --window snapshots (1000;
//           the watch cache: one snapshot per event); also prints the bytes pinned per snapshot
//   update  puts with one old snapshot alive (the first write into a node copies it)
//   get     random gets on the live tree
//   scan    scan 500 from a random key of a snapshot
// Each mode warms the simulated caches with uncounted operations of its own kind first.
//
// Usage: write_probe MODE [--size N] [--ops N] [--window N] [--value-bytes N]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "engine.hpp"

using namespace wcbench;

namespace {

struct Args {
  std::string mode;
  std::size_t size = 1'000'000;
  std::size_t ops = 20'000;
  std::size_t window = 1000;
  std::size_t value_bytes = 100;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--size" && i + 1 < argc)
      a.size = std::stoull(argv[++i]);
    else if (s == "--ops" && i + 1 < argc)
      a.ops = std::stoull(argv[++i]);
    else if (s == "--window" && i + 1 < argc)
      a.window = std::stoull(argv[++i]);
    else if (s == "--value-bytes" && i + 1 < argc)
      a.value_bytes = std::stoull(argv[++i]);
    else if (a.mode.empty() && s[0] != '-')
      a.mode = s;
    else
      throw std::invalid_argument("unknown argument " + s);
  }
  if (a.mode != "write" && a.mode != "update" && a.mode != "get" && a.mode != "scan")
    throw std::invalid_argument(
        "usage: write_probe write|update|get|scan [--size N] [--ops N] [--window N] [--value-bytes N]");
  return a;
}

}  // namespace

int main(int argc, char** argv) try {
  const Args args = parse(argc, argv);
  const Dataset ds = make_dataset(args.size, args.value_bytes, seed_from_env());
  watchcache::Tree tree;
  tree.assign_sorted(make_items(ds, no_labels, true));
  Rng rng(kDefaultSeed);
  std::int64_t rv = static_cast<std::int64_t>(args.size) + 1;
  std::size_t acc = 0;

  // Counted: only what runs inside `counted`; simulated: everything from here on.
  auto counted = [](auto&& fn) {
    CALLGRIND_TOGGLE_COLLECT;
    fn();
    CALLGRIND_TOGGLE_COLLECT;
  };
  const std::size_t warm_ops = std::max<std::size_t>(args.ops / 4, 1000);

  if (args.mode == "write") {
    const std::size_t window_size = args.window;
    std::deque<watchcache::Snapshot> window;
    auto step = [&](watchcache::ItemRef& item) {
      window.push_back(tree.snapshot());
      if (window.size() > window_size) window.pop_front();
      acc += tree.put(std::move(item));
    };
    auto warm = update_items(ds, 4 * window_size, rng, rv);
    rv += static_cast<std::int64_t>(warm.size());
    CALLGRIND_START_INSTRUMENTATION;
    for (auto& it : warm) step(it);
    // Items are made in batches right before they are written, as the binding makes one
    // right before put(): made all up front they would be cold by their turn.
    double elapsed_ns = 0;
    for (std::size_t done = 0; done < args.ops; done += 100) {
      auto items = update_items(ds, std::min<std::size_t>(100, args.ops - done), rng, rv);
      rv += 100;
      const auto start = Clock::now();
      counted([&] {
        for (auto& it : items) step(it);
      });
      elapsed_ns += std::chrono::duration<double, std::nano>(Clock::now() - start).count();
    }
    CALLGRIND_STOP_INSTRUMENTATION;
    std::printf("wall: %.0f ns/op (outside valgrind only)\n", elapsed_ns / static_cast<double>(args.ops));
    std::printf("pinned B/snapshot: %.0f\n",
                static_cast<double>(tree.domain()->retired_bytes()) / static_cast<double>(window.size()));
  } else if (args.mode == "update") {
    const watchcache::Snapshot old = tree.snapshot();
    auto warm = update_items(ds, warm_ops, rng, rv);
    rv += static_cast<std::int64_t>(warm.size());
    auto items = update_items(ds, args.ops, rng, rv);
    CALLGRIND_START_INSTRUMENTATION;
    for (auto& it : warm) acc += tree.put(std::move(it));
    counted([&] {
      for (auto& it : items) acc += tree.put(std::move(it));
    });
    CALLGRIND_STOP_INSTRUMENTATION;
  } else if (args.mode == "get") {
    const Probes probes = random_keys(ds, warm_ops + args.ops, rng);
    CALLGRIND_START_INSTRUMENTATION;
    for (std::size_t i = 0; i < warm_ops; ++i) acc += tree.get(probes[i]) != nullptr;
    counted([&] {
      for (std::size_t i = warm_ops; i < probes.size(); ++i) acc += tree.get(probes[i]) != nullptr;
    });
    CALLGRIND_STOP_INSTRUMENTATION;
  } else {
    const watchcache::Snapshot snap = tree.snapshot();
    const Probes probes = random_keys(ds, warm_ops + args.ops, rng);
    watchcache::ScanOptions opts;
    opts.limit = 500;
    auto scan_from = [&](std::size_t i) {
      opts.start = probes[i];
      acc += watchcache::scan(snap, opts).items.size();
    };
    CALLGRIND_START_INSTRUMENTATION;
    for (std::size_t i = 0; i < warm_ops; ++i) scan_from(i);
    counted([&] {
      for (std::size_t i = warm_ops; i < probes.size(); ++i) scan_from(i);
    });
    CALLGRIND_STOP_INSTRUMENTATION;
  }
  tree.check_invariants();
  std::printf("%s: %zu ops (checksum %zu)\n", args.mode.c_str(), args.ops, acc);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "write_probe: %s\n", e.what());
  return 2;
}
