// single_threaded(): whether the process has never started a second thread, so that the
// engine's own locks and locked adds may be skipped, as glibc's malloc skips its locks.
//
// Why: a locked instruction (xchg, lock xadd) waits until every store before it has reached
// the cache. A write's stores are cold ones (the path copy; from Python, also the
// interpreter's reference counts on the key and value), so each such instruction on the
// way waits out their misses instead of letting them drain behind later work. Measured as
// a put from Python into a 16k-key tree and into a 1M-key tree with a reader snapshot, in
// alternating runs of one probe (outside the repo), this session's ranges:
//   before the ItemHeap (malloc, which takes no lock):       600-920 ns, 670-1,020 ns
//   ItemHeap, spinlock always taken:                          740-1,170 ns, 1,050-1,200 ns
//   ItemHeap without its lock, node counts added locked:      770-1,050 ns, 1,060-1,190 ns
//   neither the lock nor locked node-count adds (this code):  650-900 ns, 790-990 ns
// Item counts and reference counts keep their locked adds: skipping those too measured
// 840-1,050 ns and 1,070-1,250 ns, for reasons not found. Builds that differ in code layout
// alone have moved these numbers by up to 20 %, so only the larger gaps are trusted.
//
// __libc_single_threaded is true until the process first creates a thread and stays false
// after, and only the thread running here could create one, so a section entered without
// the lock cannot be joined by another thread. Where the C library lacks it, locks are
// always taken.
#pragma once

#if __has_include(<sys/single_threaded.h>)
#include <sys/single_threaded.h>
#define WATCHCACHE_HAS_SINGLE_THREADED 1
#else
#define WATCHCACHE_HAS_SINGLE_THREADED 0
#endif

namespace watchcache::detail {

inline bool single_threaded() noexcept {
#if WATCHCACHE_HAS_SINGLE_THREADED
  return __libc_single_threaded != 0;
#else
  return false;
#endif
}

}  // namespace watchcache::detail
