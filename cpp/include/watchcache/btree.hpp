// Persistent (copy-on-write) B+tree: Tree (the single writer), Snapshot (immutable view),
// Cursor (a position that keeps its snapshot alive) and scan(). This file is the entry point:
// the design, a map of where each operation is implemented, and the public names. The code is
// in btree_node.hpp (node layout), btree_read.hpp (search, views, walks, scans) and
// btree_write.hpp (the writer: copy-on-write, insert, erase).
//
// Shape. Items live only in leaves; an internal node keeps, per child, the child's pointer,
// its subtree item count (so rank/count of a range is O(F log n)) and the item holding the
// child's smallest key (so separators never outlive their bytes: see "Separators").
//
//            [ a  | g  | p ]            internal: min key, child, count per slot
//            /     |      |
//   [a b c d e] [g h k m] [p q x]       leaves: items (key, value, revision, labels, fields)
//
// Copy-on-write. Every node records the tree version it was born in. The writer mutates a
// node in place only if it was born in the current version — then no snapshot can reach it;
// otherwise make_writable() copies it and retires the original (reclaim.hpp). A write
// walks top-down, making each node on its path writable before touching it, so a write
// after a snapshot copies exactly one root-to-leaf path and a later write in the same
// version copies nothing. snapshot() is O(1): it shares the root and bumps the version.
// Reclamation is by version interval, not refcount, so a copy never touches children or
// items (the expensive part of refcounted persistent trees: one cache miss per child).
//
// Keys. A comparison that dereferences an item's key is a cache miss. Each node therefore
// keeps the common prefix of its keys (first `skip` bytes, up to kMaxSkip, stored inline)
// and, per slot, the next key bytes as a big-endian integer (in a leaf 7 and the key's
// length past the prefix, in an internal node 10: see Leaf and Inner in btree_node.hpp,
// which also says why those widths). A search compares
// the probe with the node prefix once, then binary-searches the integers; only a tie on all
// of those bytes dereferences a key, and in a leaf not even that when the key is short
// enough to be held whole.
// Kubernetes keys share long prefixes ("/registry/pods/ns-00042/pod-"), which is exactly
// what the per-node skip absorbs. In place the prefix only ever shrinks (inserting a key
// outside it), which re-derives the integers from the inline prefix without touching any
// key; a split gives both halves their exact prefix again (repack_halves).
//
// Separators. An internal slot's key is a pointer to the item that is the child's minimum.
// Whenever a write changes a child's minimum (insert in front, erase of the minimum, a
// replaced item, a borrow or merge), the path back up is rewritten, which the path copy
// does anyway. So a separator never points to an item that left the tree in the current
// version, and old versions keep their own (retired, still pinned) items.
//
// Fan-out. F slots per node, a template parameter; the build uses WATCHCACHE_FANOUT = 32,
// chosen by cpp/bench/fanout_bench.cpp (`make bench-native`; `build/bench/fanout_bench
// --sizes 1000000` alone), which times F = 8..128 at 1M keys. When F was chosen (df49888),
// F=16 and F=32 tied on its "write after snapshot" row, while F=32 took 14-16% less time
// on "update, old snap" (1.15 against 1.34 us; the target is 1.2 us) and 5-15% less
// on "scan 500" (twice the items per leaf), which is the LIST path. Its cost is the path a
// write copies: 704 B per leaf and 1,024 B per internal node at F=32, 3,951 B pinned per
// stored snapshot at 1M keys (`build/bench/write_probe write` prints it). Minimum fill F/2
// except at the root. Nodes split bottom-up and only when a key is added, so updating
// values in a bulk-loaded (100% full) tree never splits.
//
// Costs (n items, F fan-out): get, put, erase O(log n) node visits with ~1 key dereference
// at the leaf; snapshot O(1); count/rank O(F log n); scan O(log n + k); a write after a
// snapshot allocates and copies log_F(n) nodes (0.7-1 KB each at F=32), taken from the
// nodes the reclaim domain parked when older snapshots went (node_memory.hpp: the tiers
// node memory passes through).
//
// Threads. One writer owns a Tree; Tree reads are not safe concurrently with its writes.
// Snapshots, cursors and scans over snapshots are safe from any thread without locks while
// the writer continues: nothing a snapshot reaches is ever written again.
//
// Where each operation is implemented ("node", "read", "write": btree_node.hpp,
// btree_read.hpp, btree_write.hpp):
//   get          Tree::get, Snapshot::get -> View::find (read) -> child_index, leaf_find
//                -> land
//   put          Tree::put (write) -> make_writable -> insert, one level at a time:
//                child_index, make_writable of the child -> insert_in_leaf -> open_slot
//                (node); a full node: split_off -> repack_halves -> pack_prefixes (node);
//                the separators above: set_key (node); a split root: a new Inner in put.
//                exchange() is put handing back the replaced item.
//   erase        Tree::erase -> take (write) -> View::find, make_writable -> erase_from
//                -> close_slot (node); a child under minimum fill: rebalance -> move_slot
//                (node: borrow) or shrink_skip, copy_slots, close_slot (node: merge); then
//                take collapses a root left with one child.
//   snapshot     Tree::snapshot (write) -> BasicSnapshot (read) -> ReclaimDomain::pin
//   count        Snapshot::count -> View::count -> View::rank (read)
//   scan         scan (read) -> Walker::seek -> RangeEnd::admits, Walker::next; the items
//                left after a limit: Walker::position, View::rank
//   cursor       BasicCursor (read) -> Walker::seek, seek_first, seek_last, next, prev
//   bulk load    Tree::assign_sorted (write) -> pack_prefixes (node)
//   clear        Tree::clear -> release_all -> release_subtree (write)
//   retire       retire_node, retire_item -> flush_retired (write) -> ReclaimDomain::retire;
//                a dropped snapshot: ReclaimDomain::unpin -> free_one (reclaim.hpp)
//   node memory  BasicTree::allocate -> NodeStock::take; retire_node -> NodeStock::give_back;
//                ReclaimDomain::free_one -> ParkedNodes::park; ReclaimDomain::retire ->
//                ParkedNodes::restock (node_memory.hpp, which describes the tiers)
//   invariants   Tree::check_invariants -> View::check (read); View::loose_prefixes counts
//                the nodes whose prefix is shorter than their keys share
//   indexes      secondary indexes, changed by put / take / assign_sorted / clear (an item
//                the index trees name waits for their next fold to retire:
//                defer_item_retirement) and carried by snapshots: secondary_index.hpp has
//                their own design and map
#pragma once

#include "watchcache/btree_node.hpp"
#include "watchcache/btree_read.hpp"
#include "watchcache/btree_write.hpp"

namespace watchcache {

using Tree = BasicTree<kDefaultFanout>;
using Snapshot = BasicSnapshot<kDefaultFanout>;
using Cursor = BasicCursor<kDefaultFanout>;
using ScanResult = BasicScanResult<kDefaultFanout>;

}  // namespace watchcache
