// WATCHCACHE_SANITIZED: 1 in ASan and TSan builds, else 0. The engine's own allocators
// (NodePool, ItemHeap) reuse memory behind the sanitizers' backs, so such builds use plain
// operator new/delete for nodes and items, and the sanitizers see every lifetime.
#pragma once

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define WATCHCACHE_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define WATCHCACHE_SANITIZED 1
#endif
#endif
#ifndef WATCHCACHE_SANITIZED
#define WATCHCACHE_SANITIZED 0
#endif
