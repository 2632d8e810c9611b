// Secondary indexes: persistent like the tree, written in the tree's own writes, seen by
// every snapshot as of its version. This file is the entry point: the design, a map of where
// each operation is implemented, and the public names. The code is in
// secondary_index_node.hpp (specs, entry order, node layout, the roots a snapshot carries),
// secondary_index_epoch.hpp (the changes since the last fold, and their net effect),
// secondary_index_read.hpp (walks, ranks, overlays, scan_index, count_index, the invariant
// check) and secondary_index_write.hpp (IndexSet: the writer and the fold).
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
// value then orders) items are read, as few as can be (index_land): a fold that removes an
// entry finds it by its item pointer, and a search by key reads keys alone and
// confirms its landing by the values of its two neighbours. An internal slot keeps only the
// hash of its child's minimum entry (16 B a slot: hash, count, child); a tie reads the entry
// from the child's leftmost leaf.
//
// Same writes, same versions, trees written by folds. BasicTree::put, exchange, take and
// erase record each index's changes inside the same call, by the same single writer, as an
// epoch's changes (secondary_index_epoch.hpp): "entry X goes", "entry Y comes", or both at once
// for an update that keeps the value (the entry names the new item from this version on); an
// update that changes the value is a going and a coming in two runs; an item without a label
// leaves (or never enters) that label's index. The index trees themselves are written only by
// a fold: when an epoch holds IndexEpoch::kCapacity changes (4,096), the next write first
// applies their net effect (IndexNet: by pointer, so a pod created, bound, updated and deleted
// inside one epoch costs the trees nothing) in hash order, all in its own version, so each
// node is copied at most once per fold instead of once per write: removals, then entries that
// name a newer item, then new entries. Index nodes are copied on write with the tree's rule
// (born in the current version: written in place; else copied and the original retired) and
// retired into the tree's own ReclaimDomain with (birth, death), so the version-interval
// reclamation of reclaim.hpp frees them exactly when it frees the tree's nodes of the same
// versions. Their sizes are the tree's leaf and internal node sizes (56 entries of 12 B per
// 704 B leaf, 62 children of 16 B per 1,024 B internal node at F=32: three levels hold
// 150,000 entries), so they come from the same stock, go to the same shelves when freed, and
// join the write's one batch of retirements (one domain lock per write, as before).
// assign_sorted and clear rebuild or release the trees and start a new epoch.
//
// Reading an epoch. A snapshot sees the trees of the last fold before it and the epoch's
// changes up to its version. The epoch chains the changes of each (index, value hash), newest
// first, from a table of heads; a reader of a value walks its chain, nets the changes it may
// see (RunOverlay: the tree entries that left, the tree entries that name a newer item, the
// entries the trees lack, in key order) and merges that with the value's run in the trees.
// Changes are written once and published by a release store of their chain's head, and an
// epoch's arrays are allocated whole when it starts, so readers on other threads never see a
// change half written or an array moved. The epoch is shared by the roots records of its
// versions (below) and dropped with the last of them.
//
// Lifetimes. A tree entry that an epoch's change took out (the item replaced or removed) is
// still in the trees until the fold, and readers of the epoch compare tree entries while they
// walk (a separator's tie, a landing's neighbours), as does the fold that removes it. So the
// writer defers that item's retirement (BasicTree::defer_item_retirement) until the fold, and
// retires it then with the fold's version as its death: every snapshot up to the fold keeps
// it, and it is freed by the same reclamation as everything else; meanwhile its bytes count
// as retired (ReclaimDomain::hold_bytes). Deferred items also keep their addresses, so the
// netting by pointer cannot mistake a new item for a tree entry; an item that an epoch both
// added and took out is never compared, only matched by pointer, in the order of the changes.
//
// Snapshots. BasicTree::snapshot() gives the snapshot an IndexRoots record: every index's
// root, size and height as of the last fold, the epoch, and the specs. It is shared by the
// snapshots of every version until the next fold (a write changes the epoch, not the record),
// reference counted because snapshots are copied and dropped on any thread; the registry
// stores snapshots, so it holds the roots of each resourceVersion with no change of its own.
// The record owns no node: the snapshot's pin does, as for the tree. A tree without indexes
// gives none (an empty pointer in the snapshot), so its writes and snapshots cost what they
// did.
//
// Invariants (IndexView::check, run by Tree::check_invariants and check_indexes on any
// snapshot): each index tree is a valid counted B+tree (fill, counts, separators = the hash
// of the child's minimum entry, births no later than the parent's), its entries strictly
// ascending, each under its item's value hash; every change of the epoch up to the version
// takes out or renames an entry the tree holds, a renamed entry keeping its key and value;
// and the entries the version sees (the tree's with those changes) are each the item the same
// version's tree holds at its key, as many as the items with a value — so every item with an
// indexed value has exactly its entry and no entry is stale. A field index holds every item
// (an absent field reads as "", as Selector reads it); a label index only the items with the
// label.
//
// Costs (n entries, v values asked, c candidates, k changes of a value since the fold).
// Write with one index: one or two changes appended (40 B each) with a store to their chain's
// head, and the net effect's hash table updated; no item read, no node copied. Fold: per
// renamed entry a leaf's hashes searched and one pointer written (renames descend together,
// reading no item); per removal or new entry a descent as a single write's (a new entry reads
// the items of its run that a search by key visits); each node copied at most once, ~2,700
// leaves at 150k entries for 4,096 changes. Measured at 150,000 pods on 5,000 nodes, same-run
// ratios, 2 shared cores, `python bench/index_apply_cost.py` (WatchCache.apply with the index
// over without, median of rounds of 4,500 events, each holding a fold; two runs): status
// updates 1.15-1.19x, pod lifecycles (create, bind, five updates, delete) 1.09x, moves to
// another node 1.53-1.56x; before epochs, with a path copy per write, the same script gave
// 1.22-1.28x, 1.45-1.51x and 1.84-1.87x. A fold of 4,096 status updates takes ~1.3 ms in that
// cache (the apply that folds: the longest of 40,000); a lifecycle's changes mostly net to
// nothing within an epoch. build/bench/index_bench's write step (snapshot, registry of 1,000,
// put; every step, folds included): 1.31-1.40x (keeps) and 2.38-2.39x (moves) against
// 1.37-1.38x and 2.51-2.59x with a path copy per write, the same hour. Callgrind (2 MB last
// level, `index_bench --probe keeps --tree plain|indexed`, per write step, indexed minus
// plain, the fold's share included): +2.1 k instructions, +12 last-level read misses and +16
// write misses, against +2.6 k, +22 and +40 with a path copy per write: the cache lines a
// write brings in, not its instructions, were the cost (perf of the cache's apply then put
// half of the index's time in the tree's own copies and descents, slowed beside the index's).
// Memory: 12 B per entry in a full leaf, under 1 B above it: measured 12.6 B RSS per entry
// bulk-built, 18.7 B grown by random puts (target 48); an epoch's arrays, 288 KB, allocated
// when it starts, one per 4,096 changes and dropped with its last snapshot; the items a fold
// has yet to take out of the trees, held past their own retirement until it (at most an
// epoch's replaced items). Pinned per stored snapshot (index_bench, registry of 1,000): 5.3 KB
// with the index, 5.2 KB without (11.3 KB with a path copy per write).
// A LIST of one node's 30 pods takes 4-5 us against 19 ms for the full scan; count_index of a
// node ~1 us. Snapshot: O(indexes), and a small allocation per fold. scan_index: O(v (log n +
// k) + c log v), against scan()'s O(range); count_index: O(v (log n + k)).
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
// 4.3, count_index 1.4-1.5 us against 0.75. What (7) and (8) seemed to leave (wrongly: the epochs
// above batch enough changes per fold to share leaves and descents): a repoint costs a descent
// and a leaf however it is batched; only entries that no update keeping the value touches would
// spare it, i.e. entries that name the item's key rather than the item (a read then finds each
// candidate again in the snapshot's tree: build/bench/index_bench's "found again by key" row,
// 13.4-14.1 us for a node's 30 pods against 3.35 us, three runs). (9) Their write path,
// approximated on this layout (an update keeping the value writes no index; a removal finds its
// entry by key, as it then must): bench/index_apply_cost.py gave status updates 1.05-1.06x but
// lifecycles still 1.46-1.48x (two runs), the bind 2.45-2.57x and the delete 1.85-1.92x (their
// searches by key read cold items), the status steps 1.20-1.34x. So such a layout alone does not
// bring lifecycles under 1.3x either: a lifecycle's one move (the bind) adds more than a whole
// status update costs, and the target needs it, and the removals, about halved as well. The
// epochs above are what did: unlike (8), a fold comes every 4,096 changes rather than every 64
// snapshots (so changes share leaf copies), the writer nets changes by pointer in one hash
// table instead of chaining each key's records, renames reach their leaves in one walk that
// reads no item, and a reader nets only its value's chain. Two more alternatives measured
// then: asking for the entry's leaf before the tree's own descent, so that their misses
// overlap, changed nothing measurable (index_bench keeps 1.32-1.41x against 1.39x); a
// per-function profile of the cache's apply (perf, the lifecycles of index_apply_cost) put
// ~0.8 us of the index's ~2 us per event in its own code and ~1.2 us in the tree's copies,
// descents and reclamation, slowed beside it.
//
// Threads. As the tree: one writer; snapshots, and scans of their indexes, from any thread.
//
// Where each operation is implemented ("node", "read", "write", "epoch": the four files
// above; "btree": btree_write.hpp):
//   declare      BasicTree::add_index (btree) -> IndexSet::validate, add -> fold, build (write)
//   put          BasicTree::put (btree) -> IndexSet::on_put (write) -> make_room, change ->
//                IndexEpoch::append, IndexNet::apply (epoch); a tree entry taken out:
//                BasicTree::defer_item_retirement (btree)
//   erase        BasicTree::take (btree) -> IndexSet::on_erase -> as put
//   fold         IndexSet::make_room -> fold -> erase, rename_all, insert -> writable,
//                insert_below, erase_below, rebalance, split_off (write), index_land (node);
//                BasicTree::end_deferred_retirements (btree)
//   bulk load    BasicTree::assign_sorted (btree) -> IndexSet::rebuild -> build (write)
//   clear        BasicTree::release_all (btree) -> IndexSet::release (write) ->
//                BasicTree::release_deferred_retirements (btree)
//   node memory  BasicTree::take_index_node, drop_index_node, release_index_node (btree)
//   snapshot     BasicTree::snapshot (btree) -> IndexSet::publish (write) -> IndexRoots
//                (node), held by BasicSnapshot::indexes() (btree_read.hpp)
//   read         scan_index, count_index (read) -> IndexRun, IndexView::overlay ->
//                IndexEpoch::for_each_change, IndexNet (epoch) -> RunOverlay (read);
//                IndexWalker::seek, IndexView::rank -> index_land, index_child (node)
//   invariants   BasicTree::check_invariants, check_indexes -> IndexView::check (read)
#pragma once

#include "watchcache/btree.hpp"
#include "watchcache/secondary_index_epoch.hpp"
#include "watchcache/secondary_index_node.hpp"
#include "watchcache/secondary_index_read.hpp"
#include "watchcache/secondary_index_write.hpp"
