// single_threaded(): whether the process has never started a second thread, so that the
// engine's own locks and locked adds may be skipped, as glibc's malloc skips its locks.
//
// Why: a locked instruction (xchg, lock xadd) waits until every store before it has reached
// the cache. A write's stores are cold ones (the path copy; from Python, also the
// interpreter's reference counts on the key and value), so each such instruction on the
// way waits out their misses instead of letting them drain behind later work. Skipping the
// ItemHeap's lock and the locked node-count adds while single-threaded, against taking
// them, in engine_bench's rows (`make bench-native`; fb7401b against 2435699, builds run
// alternately): "write after fresh snapshot" 2.2-2.3 -> 1.9 us, "full scan" 28-29 -> 21-22
// ns/item, "update, older snapshot alive" unchanged. A put from Python gains more, as the
// interpreter's stores come first (git show fb7401b). Item counts and reference counts keep
// their locked adds: skipping those too measured slower, for reasons not found.
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
