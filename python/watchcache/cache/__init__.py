"""The watch cache: state, no I/O. WatchCache keeps one key prefix in a persistent
tree with snapshots and serves LIST and WATCH from it; the planner decides where each
LIST is served from."""
