// index_bench: what a secondary index (secondary_index.hpp) costs and gives, on the kubelet
// scenario of issue 24: pods spread over nodes (150,000 over 5,000 by default), each item
// carrying the nine selectable fields of a pod, indexed on spec.nodeName.
//
// Rows (medians of repetitions; writes timed in short batches, robust to preemption, their
// items created untimed right before, as engine_bench does):
//   memory: RSS per entry       RSS delta of add_index on a bulk-loaded tree of --mem-n pods
//                               (leaves packed full), per entry; target <= 48 B
//   memory: grown by puts       index node bytes per entry (the engine's accounting, exact)
//                               of an index declared empty and grown by puts in random order
//   write after fresh snapshot  the watch cache's step per event (registry.add(rv,
//                               tree.snapshot()), prune to the last 1000, put), on two trees
//                               of the same pods, one without and one with the index, in
//                               alternating rounds of the same run: ns per write for each,
//                               the mean of every step (the index's folds included), and
//                               their ratio, of the means and the median of the rounds'.
//                               "keeps node": a status update; "moves": the pod changes node
//                               (its entry moves between runs)
//   pinned per snapshot         registry.pinned_bytes() / snapshots held, window of 1000,
//                               without and with the index (what writes' copies keep)
//   LIST by node                one node's pods: scan_index against a full scan with the
//                               field selector spec.nodeName=X (the same items), us per LIST;
//                               scan_index then a get by key of each item it gave (what a
//                               read costs if index entries named keys, not items: the
//                               design note's (9)); and count_index of one node, ns
//
// Usage: index_bench [--n 150000] [--nodes 5000] [--mem-n 1000000] [--value 1024] [--reps 5]
//                    [--probe keeps|moves --tree plain|indexed]
// Env: WATCHCACHE_SEED. Built by `make bench-native` (which runs every cpp/bench/*_bench).
//
// --probe runs only the write step of one kind on one of the two trees, for valgrind: the
// memory and LIST rows are skipped, and only the measured steps are counted, the simulated
// caches running from the windows' filling on (as write_probe.cpp explains). What the index
// adds to a write, in instructions and last-level misses, is the indexed tree's count minus
// the plain one's, per step:
//   valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no --cache-sim=yes
//       --LL=2097152,16,64 build/bench/index_bench --probe keeps --tree indexed   (one line)
#include <algorithm>
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
using watchcache::IndexSource;
using watchcache::IndexSpec;
using watchcache::ItemRef;
using watchcache::Snapshot;
using watchcache::Tree;

namespace {

const IndexSpec kNodeIndex{IndexSource::Field, "spec.nodeName"};

struct Row {
  std::string name;
  double value;
  std::string unit;
  std::optional<double> limit;  // value <= limit passes
};

std::string node_name(std::size_t node) {
  char buf[32];
  const int len = std::snprintf(buf, sizeof buf, "node-%05zu", node);
  return std::string(buf, static_cast<std::size_t>(len));
}

// A pod's item: its key, a value of the dataset's size, the nine selectable fields of a pod
// (resources.py's PODS plus metadata.name and metadata.namespace), scheduled on `node`.
ItemRef pod_item(const Dataset& ds, std::size_t index, std::size_t node, std::int64_t rv) {
  const std::string& key = ds.keys[index];
  const std::string ns = key.substr(kPrefix.size(), 8);
  const std::string name = key.substr(kPrefix.size() + 9);
  const std::string on = node_name(node);
  std::vector<watchcache::StringPair> fields{{"metadata.name", name},
                                             {"metadata.namespace", ns},
                                             {"spec.nodeName", on},
                                             {"spec.restartPolicy", "Always"},
                                             {"spec.schedulerName", "default-scheduler"},
                                             {"spec.serviceAccountName", "default"},
                                             {"status.phase", "Running"},
                                             {"status.podIP", "10.0.0.1"},
                                             {"status.nominatedNodeName", ""}};
  std::vector<watchcache::StringPair> labels{{"app", "web"}};
  return ItemRef::adopt(
      watchcache::Item::create(key, make_value(key, rv, ds.value_bytes), rv, std::move(labels), std::move(fields)));
}

struct Pods {
  Dataset ds;
  std::vector<std::size_t> node_of;  // the node each pod is on
};

Pods make_pods(std::size_t n, std::size_t nodes, std::size_t value_bytes, std::uint64_t seed) {
  Pods p{make_dataset(n, value_bytes, seed), {}};
  Rng rng(seed * 31 + 7);
  p.node_of.resize(n);
  for (auto& node : p.node_of) node = rng.below(nodes);
  return p;
}

std::vector<ItemRef> pod_items(const Pods& p) {
  std::vector<ItemRef> items;
  items.reserve(p.ds.n);
  for (std::size_t i = 0; i < p.ds.n; ++i)
    items.push_back(pod_item(p.ds, i, p.node_of[i], static_cast<std::int64_t>(i + 1)));
  return items;
}

std::size_t index_node_bytes(const watchcache::detail::IndexNode* nd) {
  using watchcache::kDefaultFanout;
  namespace d = watchcache::detail;
  if (nd == nullptr) return 0;
  if (nd->leaf) return d::IndexLeaf<kDefaultFanout>::kBytes;
  std::size_t bytes = d::IndexInner<kDefaultFanout>::kBytes;
  for (unsigned i = 0; i < nd->n; ++i) bytes += index_node_bytes(d::as_index_inner<kDefaultFanout>(nd)->child[i]);
  return bytes;
}

// One tree of the write comparison, with its own registry and its own copy of the pods'
// placement (both trees receive the same sequence of updates).
struct Subject {
  std::unique_ptr<Tree> tree = std::make_unique<Tree>();
  watchcache::SnapshotRegistry registry;
  std::vector<std::size_t> node_of;
  std::int64_t rv = 0;
  std::vector<ItemRef> batch;  // the items of updates [batch_begin, batch_begin + size)
  std::size_t batch_begin = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::size_t n = 150'000, nodes = 5'000, mem_n = 1'000'000, value_bytes = 1024;
  int reps = 5;
  std::string probe, probe_tree = "indexed";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::size_t {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return std::stoull(argv[++i]);
    };
    if (a == "--n")
      n = next();
    else if (a == "--nodes")
      nodes = next();
    else if (a == "--mem-n")
      mem_n = next();
    else if (a == "--value")
      value_bytes = next();
    else if (a == "--reps")
      reps = static_cast<int>(next());
    else if (a == "--probe" && i + 1 < argc)
      probe = argv[++i];
    else if (a == "--tree" && i + 1 < argc)
      probe_tree = argv[++i];
    else {
      std::fprintf(stderr,
                   "usage: %s [--n N] [--nodes K] [--mem-n M] [--value BYTES] [--reps R] "
                   "[--probe keeps|moves --tree plain|indexed]\n",
                   argv[0]);
      return 2;
    }
  }
  if (!probe.empty() && ((probe != "keeps" && probe != "moves") || (probe_tree != "plain" && probe_tree != "indexed"))) {
    std::fprintf(stderr, "--probe is keeps or moves, --tree plain or indexed\n");
    return 2;
  }
  if (n < 2000 || nodes == 0 || nodes > n || reps < 1) {
    std::fprintf(stderr, "need --n >= 2000, 0 < --nodes <= --n, --reps >= 1\n");
    return 2;
  }
  const std::uint64_t seed = seed_from_env();
  const auto t_start = Clock::now();
  std::vector<Row> rows;
  std::uintptr_t acc = 0;
  Rng rng(seed * 7 + 3);

  // Memory, first, while the node pool holds no free nodes that would hide new ones.
  if (probe.empty()) {
    std::fprintf(stderr, "memory: %zu pods ...\n", mem_n);
    const Pods pods = make_pods(mem_n, std::max<std::size_t>(1, mem_n / 30), 100, seed + 11);
    Tree t;
    t.assign_sorted(pod_items(pods));
    trim_heap();
    const std::size_t rss0 = rss_bytes();
    t.add_index(kNodeIndex);
    trim_heap();  // the build's sort buffer is malloc'ed and freed
    const std::size_t rss1 = rss_bytes();
    rows.push_back({"memory: RSS per entry, bulk-built index (" + size_tag(mem_n) + " pods)",
                    static_cast<double>(rss1 - rss0) / static_cast<double>(mem_n), "B", 48});
  }
  if (probe.empty()) {
    const Pods pods = make_pods(n, nodes, 100, seed + 12);
    std::vector<std::size_t> order(n);
    for (std::size_t i = 0; i < n; ++i) order[i] = i;
    for (std::size_t i = n; i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
    Tree t;
    t.add_index(kNodeIndex);
    for (const std::size_t i : order) t.put(pod_item(pods.ds, i, pods.node_of[i], 1));
    const Snapshot s = t.snapshot();
    const auto& root = s.indexes().get()->roots[0];
    rows.push_back({"memory: index bytes per entry, grown by random puts (" + size_tag(n) + ")",
                    static_cast<double>(index_node_bytes(root.node)) / static_cast<double>(root.size), "B", 48});
  }

  std::fprintf(stderr, "two trees of %zu pods on %zu nodes, %zu B values ...\n", n, nodes, value_bytes);
  const Pods pods = make_pods(n, nodes, value_bytes, seed);
  Subject plain, indexed;
  for (Subject* s : {&plain, &indexed}) {
    s->tree->assign_sorted(pod_items(pods));
    s->node_of = pods.node_of;
  }
  indexed.tree->add_index(kNodeIndex);

  // The watch cache's step, alternating between the trees batch by batch.
  constexpr std::size_t kWindow = 1000, kBatch = 200, kPerRound = 4000;
  auto step = [&](Subject& s, std::size_t i) {
    ++s.rv;
    s.registry.add(s.rv, s.tree->snapshot());
    s.registry.prune_below(s.rv - static_cast<std::int64_t>(kWindow) + 1);
    acc += s.tree->put(std::move(s.batch[i - s.batch_begin]));
  };
  // The next `count` updates, drawn once and given to both trees: random pods that keep
  // their node, or move to a random other one.
  auto draw_updates = [&](std::size_t count, bool moves) {
    std::vector<std::pair<std::size_t, std::size_t>> updates(count);
    for (auto& [pod, node] : updates) {
      pod = rng.below(n);
      node = moves ? rng.below(nodes) : std::size_t(-1);
    }
    return updates;
  };
  auto prepare = [&](Subject& s, const std::vector<std::pair<std::size_t, std::size_t>>& updates, std::size_t begin,
                     std::size_t end) {
    s.batch.clear();
    s.batch_begin = begin;
    for (std::size_t i = begin; i < end; ++i) {
      const auto [pod, node] = updates[i];
      if (node != std::size_t(-1)) s.node_of[pod] = node;
      s.batch.push_back(pod_item(pods.ds, pod, s.node_of[pod], s.rv + 1 + static_cast<std::int64_t>(i - begin)));
    }
  };
  auto timed_batches = [&](Subject& s, const std::vector<std::pair<std::size_t, std::size_t>>& updates) {
    return per_op_ns_prepared(
        updates.size(), kBatch, [&](std::size_t b, std::size_t e) { prepare(s, updates, b, e); },
        [&](std::size_t i) { step(s, i); });
  };
  // The mean over every step of a round, in ns: the indexed tree folds its index changes
  // into its index trees once per epoch (a fold in about one round of four thousand steps),
  // and a median of batches would leave the folds out.
  auto timed_round = [&](Subject& s, const std::vector<std::pair<std::size_t, std::size_t>>& updates) {
    std::int64_t ns = 0;
    for (std::size_t b = 0; b < updates.size(); b += kBatch) {
      const std::size_t e = std::min(updates.size(), b + kBatch);
      prepare(s, updates, b, e);
      const auto t0 = Clock::now();
      for (std::size_t i = b; i < e; ++i) step(s, i);
      ns += std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
    }
    return static_cast<double>(ns) / static_cast<double>(updates.size());
  };
  if (!probe.empty()) {
    Subject& s = probe_tree == "plain" ? plain : indexed;
    const bool moves = probe == "moves";
    CALLGRIND_START_INSTRUMENTATION;
    timed_batches(s, draw_updates(kWindow, moves));  // fill the window, warm the simulated caches
    const auto updates = draw_updates(kPerRound, moves);
    for (std::size_t b = 0; b < updates.size(); b += kBatch) {
      const std::size_t e = std::min(updates.size(), b + kBatch);
      prepare(s, updates, b, e);
      CALLGRIND_TOGGLE_COLLECT;
      for (std::size_t i = b; i < e; ++i) step(s, i);
      CALLGRIND_TOGGLE_COLLECT;
    }
    CALLGRIND_STOP_INSTRUMENTATION;
    s.tree->check_invariants();
    keep(acc);
    std::printf("probe %s on the %s tree: %zu steps counted\n", probe.c_str(), probe_tree.c_str(), updates.size());
    return 0;
  }
  for (Subject* s : {&plain, &indexed}) timed_batches(*s, draw_updates(kWindow, false));  // fill the windows

  for (const bool moves : {false, true}) {
    std::vector<double> a, b, ratio;
    for (int r = 0; r < 2 * reps; ++r) {
      const auto updates = draw_updates(kPerRound, moves);
      // Alternate which tree goes first, so neither always meets the other's cache state.
      const bool plain_first = r % 2 == 0;
      const double first = timed_round(plain_first ? plain : indexed, updates);
      const double second = timed_round(plain_first ? indexed : plain, updates);
      const double t_plain = plain_first ? first : second, t_indexed = plain_first ? second : first;
      a.push_back(t_plain);
      b.push_back(t_indexed);
      ratio.push_back(t_indexed / t_plain);
    }
    const std::string what = moves ? "update moves the pod to another node" : "update keeps the node";
    const auto mean = [](const std::vector<double>& v) {
      double t = 0;
      for (const double x : v) t += x;
      return t / static_cast<double>(v.size());
    };
    rows.push_back({"write after fresh snapshot, no index (" + what + ")", mean(a), "ns", std::nullopt});
    rows.push_back({"write after fresh snapshot, 1 index (" + what + ")", mean(b), "ns", std::nullopt});
    rows.push_back({"  ratio indexed / not (same run, all steps, folds included)", mean(b) / mean(a), "x",
                    std::nullopt});
    rows.push_back({"  ratio indexed / not (same run, median of rounds)", median(ratio), "x", std::nullopt});
  }
  rows.push_back({"pinned per stored snapshot (registry of 1000), no index",
                  static_cast<double>(plain.registry.pinned_bytes()) / static_cast<double>(plain.registry.size()), "B",
                  std::nullopt});
  rows.push_back({"pinned per stored snapshot (registry of 1000), 1 index",
                  static_cast<double>(indexed.registry.pinned_bytes()) / static_cast<double>(indexed.registry.size()),
                  "B", std::nullopt});
  plain.registry.clear();
  plain.tree.reset();

  // LIST by node on the indexed tree: the index against a full scan with the selector.
  {
    const Snapshot snap = indexed.tree->snapshot();
    Probes probes;
    for (int i = 0; i < 256; ++i) probes.add(node_name(rng.below(nodes)));
    std::vector<double> via_index, via_scan, counting, resolving;
    std::size_t checked = 0;
    for (int r = 0; r < reps; ++r) {
      via_index.push_back(per_op_ns(probes.size(), 16, [&](std::size_t i) {
                            const std::vector<std::string_view> values{probes[i]};
                            const auto res = watchcache::scan_index(snap, kNodeIndex, values, {});
                            acc += res.items.size();
                          }) /
                          1e3);
      resolving.push_back(per_op_ns(probes.size(), 16, [&](std::size_t i) {
                            const std::vector<std::string_view> values{probes[i]};
                            const auto res = watchcache::scan_index(snap, kNodeIndex, values, {});
                            for (const auto* it : res.items) acc += snap.get(it->key()) != nullptr;
                          }) /
                          1e3);
      counting.push_back(per_op_ns(probes.size(), 64, [&](std::size_t i) {
        const std::vector<std::string_view> values{probes[i]};
        acc += watchcache::count_index(snap, kNodeIndex, values, {});
      }));
      via_scan.push_back(time_ns([&] {
                           for (std::size_t i = 0; i < 8; ++i) {
                             const watchcache::Selector sel({}, {{"spec.nodeName", false, std::string(probes[i])}});
                             const auto res = watchcache::scan(snap, {}, sel);
                             const std::vector<std::string_view> values{probes[i]};
                             if (res.items != watchcache::scan_index(snap, kNodeIndex, values, {}).items)
                               throw std::logic_error("the index and the scan disagree on " + std::string(probes[i]));
                             ++checked;
                           }
                         }) /
                         8 / 1e3);
    }
    rows.push_back({"LIST by node: scan_index (" + size_tag(n) + " pods, ~" + std::to_string(n / nodes) + " per node)",
                    median(via_index), "us", std::nullopt});
    rows.push_back({"LIST by node: scan_index, then each item found again by key", median(resolving), "us", std::nullopt});
    rows.push_back({"LIST by node: full scan with the field selector", median(via_scan), "us", std::nullopt});
    rows.push_back({"count_index of one node", median(counting), "ns", std::nullopt});
    acc += checked;
  }
  keep(acc);

  std::printf("\nwatchcache index_bench: Tree (F=%u), %zu pods on %zu nodes, %zu B values, index on spec.nodeName, "
              "seed %llu\n\n",
              watchcache::kDefaultFanout, n, nodes, value_bytes, static_cast<unsigned long long>(seed));
  std::printf("%-72s %10s %-5s %10s  %s\n", "operation", "measured", "unit", "target", "");
  for (const Row& r : rows) {
    const char* verdict = "";
    std::string target = "-";
    if (r.limit) {
      verdict = r.value <= *r.limit ? "PASS" : "MISS";
      target = "<= " + fmt(*r.limit);
    }
    std::printf("%-72s %10s %-5s %10s  %s\n", r.name.c_str(), fmt(r.value).c_str(), r.unit.c_str(), target.c_str(),
                verdict);
  }
  std::fflush(stdout);
  std::fprintf(stderr, "total %.1f s\n", std::chrono::duration<double>(Clock::now() - t_start).count());
  return 0;
}
