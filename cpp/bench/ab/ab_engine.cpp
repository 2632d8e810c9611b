// ab_engine: two builds of the engine in one process, timed in alternating short batches,
// so that both see the same phase of a shared, noisy machine. Built and run by
// scripts/ab-engine.sh, which explains the setup; not part of the CMake build.
//
// The baseline's headers are a copy of cpp/include/watchcache from another revision, put in
// a directory named watchcache_base with their includes rewritten to match, and its copy of
// bench_common.hpp likewise; both variants are compiled into one program by renaming their
// namespaces with the preprocessor (each keeps its own singletons: node pool, item heap,
// live counters). Output: per round the median time per operation of each and their ratio
// candidate/baseline, then the median ratio: below 1 means the candidate is faster. Memory
// placement gives a bias of a few percent either way; run with the same revision on both
// sides to see it.
//
// Usage: ab_engine SCENARIO [ROUNDS] [KEYS]   (SCENARIO: update snap_put window get scan
//                                             grown_update grown_get)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define watchcache watchcache_base
#define wcbench wcbench_base
#include "watchcache_base/btree.hpp"
#include "watchcache_base/registry.hpp"
#include "bench_common_base.hpp"
#define AB_VARIANT baseline
#include "scenarios.hpp"
#undef AB_VARIANT
#undef watchcache
#undef wcbench

#include "watchcache/btree.hpp"
#include "watchcache/registry.hpp"
#include "bench_common.hpp"
#define AB_VARIANT candidate
#include "scenarios.hpp"
#undef AB_VARIANT

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::size_t batch_for(const std::string& scenario) {
  if (scenario == "window") return 200;
  if (scenario == "get" || scenario == "grown_get") return 1000;
  if (scenario == "scan") return 20;
  return 500;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: ab_engine update|snap_put|window|get|scan|grown_update|grown_get [ROUNDS] [KEYS]\n");
    return 2;
  }
  const std::string scenario = argv[1];
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 4;
  const std::size_t keys = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 1'000'000;
  const std::size_t batch = batch_for(scenario);
  baseline::Workloads base(keys, 100);
  candidate::Workloads cand(keys, 100);
  std::vector<double> ratios;
  for (int r = 0; r < rounds; ++r) {
    std::vector<double> tb, tc;
    for (int k = 0; k < 200; ++k) {
      if (k % 2 == 0) {
        tb.push_back(base.run(scenario, batch));
        tc.push_back(cand.run(scenario, batch));
      } else {
        tc.push_back(cand.run(scenario, batch));
        tb.push_back(base.run(scenario, batch));
      }
    }
    if (tb.front() < 0) {
      std::fprintf(stderr, "unknown scenario %s\n", scenario.c_str());
      return 2;
    }
    if (scenario == "update" || scenario == "grown_update") {
      base.renew_old_snapshot();
      cand.renew_old_snapshot();
    }
    const double mb = median(tb), mc = median(tc);
    ratios.push_back(mc / mb);
    std::printf("%-8s round %d: baseline %6.0f ns  candidate %6.0f ns  candidate/baseline %.3f\n", scenario.c_str(), r,
                mb, mc, mc / mb);
  }
  std::printf("%-8s median candidate/baseline %.3f\n", scenario.c_str(), median(ratios));
  return base.checksum() + cand.checksum() == 42;  // keeps the work observable
}
