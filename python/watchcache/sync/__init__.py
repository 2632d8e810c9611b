"""Keeping a WatchCache in sync with etcd: the reflector (list, then watch), consistent
reads (freshness), the cache-vs-etcd consistency checker, and SyncedCache, which wires
them together."""
