// Secondary indexes: persistent like the tree, written in the tree's own writes, seen by
// every snapshot as of its version. This file is the entry point: the design, a map of where
// each operation is implemented, and the public names. The code is in
// secondary_index_node.hpp (specs, entry order, node layout, the roots a snapshot carries),
// secondary_index_read.hpp (walks, ranks, scan_index, count_index, the invariant check) and
// secondary_index_write.hpp (IndexSet: the writer).
//
// What. A tree declares indexes (BasicTree::add_index): a selectable field (pods:
// spec.nodeName) or a label key; namespace and name need none, they are the key's prefix.
// An index maps each item's value to the item: scan_index(snapshot, spec, values, opts,
// pred) returns the items whose value is one of `values`, in key order, from a start key, up
// to a limit, filtered by a selector — the page scan() returns with that requirement in its
// selector (same items, next_key and remaining) — and count_index counts the candidates in
// O(log n). Both work on any snapshot, so at every resourceVersion the cache serves: latest,
// Exact, and continued pages.
//
// Why. The kubelet LIST (issue 24): 150,000 pods on 5,000 nodes, each kubelet asking for its
// 30; a scan reads 150,000 items for them. Kubernetes' watch cache keeps a map from value to
// keys for its newest state only; here every snapshot must see its own version's index,
// because pages and Exact reads are served from old versions.
//
// Shape. Each index is a second persistent B+tree, counted like the tree, whose entries are
// the tree's own item pointers (no copy of an item's bytes, no reference of their own),
// ordered by (32-bit hash of the value, value, key):
//
//                  [ h3 | h7 ]                  internal: min entry's hash, count, child
//                   |      |
//   [(h3 item) (h3 item) (h5 item)] [(h7 item) (h7 item) ...]     leaves: hash, item
//
// A value's entries are one run in key order; an `in` of several values merges their runs
// (a heap on their current keys). Ordering by the hash first makes every comparison outside
// the probe's own run an integer compare of the inline hash, even for values that share long
// prefixes (node names "ip-10-0-12-..."); only equality of values is ever asked, so the
// order among values does not matter. Inside the run (and on a hash collision, which the
// value then orders) items are read, as few as can be (index_land): a write that repoints or
// removes an entry finds it by its item pointer, and a search by key reads keys alone and
// confirms its landing by the values of its two neighbours. An internal slot keeps only the
// hash of its child's minimum entry (16 B a slot: hash, count, child); a tie reads the entry
// from the child's leftmost leaf.
//
// Same writes, same versions. BasicTree::put, exchange, take, erase, assign_sorted and
// clear update the indexes inside the same call, by the same single writer, before the
// write's retirements go to the reclaim domain (so an entry's old item is still alive while
// it is compared). An update that keeps the value repoints the entry to the new item (its
// place is the same); one that changes the value moves it (erase + insert); an item without
// a label leaves (or never enters) that label's index. Index nodes are copied on write with
// the tree's rule (born in the current version: written in place; else copied and the
// original retired) and retired into the tree's own ReclaimDomain with (birth, death), so the
// version-interval reclamation of reclaim.hpp frees them exactly when it frees the tree's
// nodes of the same versions. Their sizes are the tree's leaf and internal node sizes (56
// entries of 12 B per 704 B leaf, 62 children of 16 B per 1,024 B internal node at F=32:
// three levels hold 150,000 entries), so they come from the same stock, go to the same
// shelves when freed, and join the write's one batch of retirements (one domain lock per
// write, as before).
//
// Snapshots. BasicTree::snapshot() gives the snapshot an IndexRoots record: every index's
// root, size and height at that version, and the specs. It is shared by the snapshots of a
// version (and by later ones while no write changed a root), reference counted because
// snapshots are copied and dropped on any thread; the registry stores snapshots, so it holds
// the roots of each resourceVersion with no change of its own. The record owns no node: the
// snapshot's pin does, as for the tree. A tree without indexes gives none (an empty pointer
// in the snapshot), so its writes and snapshots cost what they did.
//
// Invariants (IndexView::check, run by Tree::check_invariants and check_indexes on any
// snapshot): each index is a valid counted B+tree (fill, counts, separators = the hash of
// the child's minimum entry, births no later than the parent's); entries strictly ascending; every entry
// is the item the same version's tree holds at its key, under that item's value and hash;
// and there are as many entries as items with a value — so every item with an indexed value
// has exactly its entry and no entry is stale. A field index holds every item (an absent
// field reads as "", as Selector reads it); a label index only the items with the label.
//
// Costs (n entries, v values asked, c candidates). Write with one index: one more O(log n)
// descent and path copy (3 nodes at 150k entries, ~2.4 KB) per put or erase, two on a value
// change. A repoint or removal reads no item (its entry is found by pointer, also at a
// separator whose hash ties: index_land); an insert reads the items of its run that a search
// by key visits, cold ones. Memory: 12 B per entry in a full leaf, under 1 B above it:
// measured 12.6 B RSS per entry bulk-built, 18.7 B grown by random puts (target 48). A
// snapshot after a write pins the index path too: 11.3 KB per stored snapshot against 5.2
// KB without. Measured at 150,000 pods on 5,000 nodes, same-run ratios, 2 shared cores
// whose memory answers a dependent load in ~185 ns at 64 MB: `python
// bench/index_apply_cost.py` gives WatchCache.apply 1.23-1.28x with the index for status
// updates (+1.0 us), 1.84-1.87x for moves to another node (+3.8 us: two paths and an
// insert's search by key) and 1.49-1.50x over pod lifecycles (create, bind, five updates,
// delete); build/bench/index_bench's write step (snapshot, registry, put) 1.25-1.34x
// (keeps) and 2.41-2.51x (moves). By lifecycle step (the same script's per-step lines;
// apply, us, without -> with): create 4.2 -> 5.3, bind 3.4 -> 8.0, status 3.4 -> 4.9,
// delete 3.7 -> 5.0 (the reclamation of one step's nodes lands in a later step's). Issue 24's 1.3x holds for
// status updates and not over lifecycles: there every event pays a path copy into nodes
// freed a window of versions ago (~1-1.4 us here: perf puts it in the copies' stores and
// in the reclamation of the nodes they retire, and the tree's own copies slow down beside
// them), and the bind also an insert's cold reads. A lifecycle under 1.3x needs repoints
// that copy no path at all (5 of its 9 index writes) and an insert that places its entry
// without reading items, neither of which this layout gives; (7) and (8) below try the first,
// (9) measures what it alone would give.
// Callgrind (2 MB last level, `index_bench --probe keeps|moves --tree plain|indexed`, per
// write step, indexed minus plain): a repoint +2.6 k instructions, +22 last-level read
// misses and +40 write misses (~2.6 KB of copies, 41 lines).
// A LIST of one node's 30 pods takes 5 us against 19 ms for the full scan; count_index of a
// node ~1 us.
// Snapshot: O(indexes) and one small allocation per version that wrote. scan_index: O(v log
// n + c log v), against scan()'s O(range); count_index: O(v log n).
//
// Rejected. (1) Entries as items of a second BasicTree keyed by value + NUL + key: an item per
// entry copies the key (~50 B) and an item header (40 B), over twice the memory target of 48 B per
// entry, and doubles the item frees. (2) The first layout here: 64-bit hashes and the separator's
// item in internal slots (16 and 28 B slots, four levels at 150,000 entries): a write read as many
// lines and wrote a sixth more (callgrind, write_probe-like loop). Ties at the leaves' parents are
// not few (a run of ~30 pods straddles a leaf boundary on most writes), but a repoint or removal
// settles them by its entry's pointer and an insert reads the separator's item in one go
// (index_land). (3) A map value -> persistent set of keys per value: one more level of nodes to
// copy per write, and counts across values for an `in` need a second structure. (4) Ordering by
// (value, key) with inline value bytes like the tree's key prefixes: values share long prefixes, so
// the inline bytes tie and every search reads items; values are only ever compared for equality,
// which a hash answers. (5) Index roots inline in every snapshot: grows the snapshots of trees
// without indexes. (6) Keeping only the newest version indexed (as Kubernetes does): pages and
// Exact reads would fall back to scans exactly when they are old. (7) A repoint log in each leaf
// (four records "from version v, slot i is item X", read at the snapshot's version, folded into the
// copy when the leaf is copied; 50 entries per leaf instead of 56): 80% of repoints then copied
// nothing, and per keeps-node write the index added 1.65 k instructions and 1 last-level write miss
// instead of 2.7 k and 41 (callgrind, as above). But the time did not follow: index_bench's keeps
// ratio 1.46x against 1.47x, and over pod lifecycles bench/index_apply_cost.py gave 1.65-1.70x
// against 1.52-1.59x (three runs each, same machine, same hour; likely cost: each search checked
// the log on every entry it read). (8) A log of index writes per tree, folded every 64 snapshots:
// a snapshot reads the roots of the last fold and the records since (entries gone, entries come;
// a key's records chained, so a fold makes one change per key), the log pinning the fold's version
// so that every entry it names stays readable; a fold applies its changes in hash order, their
// leaves prefetched together. Per keeps-node write (callgrind as above, indexed minus plain) it
// halved the write misses, +21.8 against +39.5 (the upper levels are copied once per fold), kept
// the read misses (+20.2 against +21.6: each change still descends to its own leaf, one of
// ~2,700, and copies it) and added instructions (+3.7 k against +2.6 k: appends, chain walks, the
// fold's sort). Timed, it was no faster: index_bench keeps 1.94-2.05 us against 1.75-1.80 (plain
// 1.29-1.44), bench/index_apply_cost.py 1.37-1.41x (keeps) and 1.49-1.51x (lifecycles) against
// 1.22x and 1.51x, the same hour; and reads paid for the records: LIST by node 5.4-5.6 us against
// 4.3, count_index 1.4-1.5 us against 0.75. What (7) and (8) leave: a repoint costs a descent and
// a leaf however it is batched; only entries that no update keeping the value touches would
// spare it, i.e. entries that name the item's key rather than the item (a read then finds each
// candidate again in the snapshot's tree: build/bench/index_bench's "found again by key" row,
// 13.4-14.1 us for a node's 30 pods against 3.35 us, three runs). (9) Their write path,
// approximated on this layout (an update keeping the value writes no index; a removal finds its
// entry by key, as it then must): bench/index_apply_cost.py gave status updates 1.05-1.06x but
// lifecycles still 1.46-1.48x (two runs), the bind 2.45-2.57x and the delete 1.85-1.92x (their
// searches by key read cold items), the status steps 1.20-1.34x. So such a layout alone does not
// bring lifecycles under 1.3x either: a lifecycle's one move (the bind) adds more than a whole
// status update costs, and the target needs it, and the removals, about halved as well.
//
// Threads. As the tree: one writer; snapshots, and scans of their indexes, from any thread.
//
// Where each operation is implemented ("node", "read", "write": the three files above;
// "btree": btree_write.hpp):
//   declare      BasicTree::add_index (btree) -> IndexSet::validate, add -> build (write)
//   put          BasicTree::put (btree) -> IndexSet::on_put (write) -> repoint (same value),
//                or erase and insert -> writable, insert_below, split_off, index_land (node)
//   erase        BasicTree::take (btree) -> IndexSet::on_erase -> erase -> erase_below,
//                rebalance (write)
//   bulk load    BasicTree::assign_sorted (btree) -> IndexSet::rebuild -> build (write)
//   clear        BasicTree::release_all (btree) -> IndexSet::release (write)
//   node memory  BasicTree::take_index_node, drop_index_node, release_index_node (btree)
//   snapshot     BasicTree::snapshot (btree) -> IndexSet::publish (write) -> IndexRoots
//                (node), held by BasicSnapshot::indexes() (btree_read.hpp)
//   read         scan_index, count_index (read) -> IndexRun, IndexWalker::seek,
//                IndexView::rank -> index_land, index_child (node)
//   invariants   BasicTree::check_invariants, check_indexes -> IndexView::check (read)
#pragma once

#include "watchcache/btree.hpp"
#include "watchcache/secondary_index_node.hpp"
#include "watchcache/secondary_index_read.hpp"
#include "watchcache/secondary_index_write.hpp"
