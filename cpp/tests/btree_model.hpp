// Model-based checking for the B+tree tests: a std::map oracle, a key universe built to
// stress the per-node inline prefixes, and comparisons of a tree version (live View or
// Snapshot) against the model through every read path (walk both ways, get, seek, rank,
// count), plus structural helpers that read node internals (reachable bytes, separators).
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "test_support.hpp"
#include "watchcache/btree.hpp"

namespace watchcache::testing {

struct ModelValue {
  std::string value;
  std::int64_t rev = 0;
};
using Model = std::map<std::string, ModelValue, std::less<>>;

// ~1200 distinct keys mixing the shapes the inline-prefix logic must survive: Kubernetes
// keys whose shared prefix is longer than kMaxSkip, 200-byte keys differing only at the end,
// chains of keys that are prefixes of one another, NUL and 0xFF bytes, all one-byte keys,
// and random binary keys with no common prefix.
inline std::vector<std::string> key_universe(std::mt19937_64& rng) {
  std::set<std::string> keys;
  const std::string ns1 = "/registry/pods/a-namespace-with-a-rather-long-name-0001/";
  const std::string ns2 = "/registry/pods/a-namespace-with-a-rather-long-name-0002/";
  static_assert(detail::kMaxSkip < 56, "the shared prefixes below must exceed the inline prefix");
  for (int i = 0; i < 300; ++i) keys.insert(ns1 + "pod-" + std::to_string(i));  // pod-1 < pod-10 < pod-100
  for (int i = 0; i < 100; ++i) keys.insert(ns2 + "pod-" + std::to_string(i * 7));
  const std::string long_prefix(200, 'x');
  for (int i = 0; i < 60; ++i) keys.insert(long_prefix + std::to_string(i));
  for (std::size_t len = 1; len <= 64; ++len) keys.insert(std::string(len, 'p'));
  for (std::size_t len = 0; len <= 10; ++len) {
    keys.insert("q" + std::string(len, '\0'));
    keys.insert("q" + std::string(len, '\xff'));
    keys.insert(std::string(len + 1, '\0'));
    keys.insert(std::string(len + 1, '\xff'));
  }
  for (int c = 0; c < 256; ++c) keys.insert(std::string(1, static_cast<char>(c)));
  const unsigned char extremes[] = {0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff};
  for (const unsigned char a : extremes)
    for (const unsigned char b : extremes) keys.insert(std::string{static_cast<char>(a), static_cast<char>(b)});
  const char alphabet[] = {'\0', '\xff', 'a', 'b', '/'};
  for (int i = 0; i < 400; ++i) {
    std::string k(uniform<std::size_t>(rng, 1, 20), '\0');
    for (char& c : k)
      c = chance(rng, 60) ? alphabet[uniform<std::size_t>(rng, 0, sizeof(alphabet) - 1)]
                          : static_cast<char>(uniform<int>(rng, 0, 255));
    keys.insert(k);
  }
  return {keys.begin(), keys.end()};
}

// A probe key for reads: usually from the universe (present or not), sometimes arbitrary.
inline std::string probe_key(std::mt19937_64& rng, const std::vector<std::string>& universe) {
  if (!universe.empty() && chance(rng, 70)) {
    std::string k = universe[uniform<std::size_t>(rng, 0, universe.size() - 1)];
    if (chance(rng, 20)) k.push_back(chance(rng, 50) ? '\0' : '\xff');
    if (chance(rng, 15) && k.size() > 1) k.pop_back();
    return k;
  }
  std::string k(uniform<std::size_t>(rng, 0, 6), '\0');
  for (char& c : k) c = static_cast<char>(uniform<int>(rng, 0, 255));
  return k;
}

inline ::testing::AssertionResult item_is(const Item* it, const Model::const_iterator& m) {
  if (it == nullptr) return ::testing::AssertionFailure() << "no item where the model has " << printable(m->first);
  if (it->key() != m->first || it->value() != m->second.value || it->mod_revision() != m->second.rev)
    return ::testing::AssertionFailure() << "item " << printable(it->key()) << "=" << printable(it->value()) << "@"
                                         << it->mod_revision() << " but the model has " << printable(m->first) << "="
                                         << printable(m->second.value) << "@" << m->second.rev;
  return ::testing::AssertionSuccess();
}

template <unsigned F>
bool seek_ge(detail::Walker<F>& w, std::string_view k) { return w.seek(k, false); }
template <unsigned F>
bool seek_gt(detail::Walker<F>& w, std::string_view k) { return w.seek(k, true); }
template <unsigned F>
bool seek_ge(BasicCursor<F>& c, std::string_view k) { return c.seek(k); }
template <unsigned F>
bool seek_gt(BasicCursor<F>& c, std::string_view k) { return c.seek_after(k); }

// Full forward and backward walks, then `probes` random seeks, ranks, counts and gets.
template <unsigned F, class Nav>
::testing::AssertionResult reads_match(const detail::View<F>& view, Nav& nav, const Model& model,
                                       std::mt19937_64& rng, const std::vector<std::string>& universe,
                                       int probes) {
  using ::testing::AssertionFailure;
  try {
    view.check(detail::kForever);
  } catch (const std::logic_error& e) {
    return AssertionFailure() << "check() failed: " << e.what();
  }
  if (view.size != model.size()) return AssertionFailure() << "size " << view.size << " != model " << model.size();

  auto m = model.begin();
  for (bool ok = nav.seek_first(); ok; ok = nav.next(), ++m) {
    if (m == model.end()) return AssertionFailure() << "forward walk goes past the model's end";
    if (auto r = item_is(nav.item(), m); !r) return r << " (forward walk)";
  }
  if (m != model.end()) return AssertionFailure() << "forward walk stops early before " << printable(m->first);
  if (nav.valid()) return AssertionFailure() << "cursor valid after the end";

  auto rm = model.rbegin();
  for (bool ok = nav.seek_last(); ok; ok = nav.prev(), ++rm) {
    if (rm == model.rend()) return AssertionFailure() << "backward walk goes past the model's start";
    if (auto r = item_is(nav.item(), std::prev(rm.base())); !r) return r << " (backward walk)";
  }
  if (rm != model.rend()) return AssertionFailure() << "backward walk stops early before " << printable(rm->first);

  for (auto it = model.begin(); it != model.end(); ++it)
    if (auto r = item_is(view.find(it->first), it); !r) return r << " (find)";

  for (int i = 0; i < probes; ++i) {
    const std::string k = probe_key(rng, universe);
    const auto lb = model.lower_bound(k);
    const auto ub = model.upper_bound(k);
    const auto lb_rank = static_cast<std::size_t>(std::distance(model.begin(), lb));
    const auto ub_rank = static_cast<std::size_t>(std::distance(model.begin(), ub));
    if (view.template rank<false>(k) != lb_rank)
      return AssertionFailure() << "rank<false>(" << printable(k) << ") = " << view.template rank<false>(k)
                                << ", model " << lb_rank;
    if (view.template rank<true>(k) != ub_rank)
      return AssertionFailure() << "rank<true>(" << printable(k) << ") = " << view.template rank<true>(k)
                                << ", model " << ub_rank;
    const Item* found = view.find(k);
    if ((found != nullptr) != (lb != model.end() && lb->first == k))
      return AssertionFailure() << "find(" << printable(k) << ") presence differs from the model";

    if (seek_ge(nav, k) != (lb != model.end())) return AssertionFailure() << "seek(" << printable(k) << ") validity";
    if (lb != model.end()) {
      if (auto r = item_is(nav.item(), lb); !r) return r << " (seek " << printable(k) << ")";
      const bool has_prev = nav.prev();
      if (has_prev != (lb != model.begin())) return AssertionFailure() << "prev after seek(" << printable(k) << ")";
      if (has_prev)
        if (auto r = item_is(nav.item(), std::prev(lb)); !r) return r << " (prev after seek)";
    }
    if (seek_gt(nav, k) != (ub != model.end()))
      return AssertionFailure() << "seek_after(" << printable(k) << ") validity";
    if (ub != model.end()) {
      if (auto r = item_is(nav.item(), ub); !r) return r << " (seek_after " << printable(k) << ")";
      const bool has_next = nav.next();
      if (has_next != (std::next(ub) != model.end()))
        return AssertionFailure() << "next after seek_after(" << printable(k) << ")";
    }

    const std::string k2 = probe_key(rng, universe);
    const std::optional<std::string_view> lo = chance(rng, 15) ? std::nullopt : std::optional<std::string_view>(k);
    const std::optional<std::string_view> hi = chance(rng, 15) ? std::nullopt : std::optional<std::string_view>(k2);
    const auto a = lo ? model.lower_bound(*lo) : model.begin();
    const auto b = hi ? model.lower_bound(*hi) : model.end();
    const std::size_t expect =
        (!lo || !hi || *lo < *hi) ? static_cast<std::size_t>(std::distance(a, b)) : std::size_t{0};
    if (view.count(lo, hi) != expect)
      return AssertionFailure() << "count(" << (lo ? printable(*lo) : "open") << ", " << (hi ? printable(*hi) : "open")
                                << ") = " << view.count(lo, hi) << ", model " << expect;
  }
  return ::testing::AssertionSuccess();
}

// The live tree's current version against the model (walked with a Walker: no snapshot).
template <unsigned F>
::testing::AssertionResult tree_matches(const BasicTree<F>& tree, const Model& model, std::mt19937_64& rng,
                                        const std::vector<std::string>& universe, int probes = 64) {
  try {
    tree.check_invariants();
  } catch (const std::logic_error& e) {
    return ::testing::AssertionFailure() << "check_invariants() failed: " << e.what();
  }
  if (tree.size() != model.size()) return ::testing::AssertionFailure() << "tree size differs from the model";
  detail::Walker<F> w(tree.view());
  return reads_match<F>(tree.view(), w, model, rng, universe, probes);
}

// A snapshot against the frozen copy of the model taken with it, read through a Cursor.
template <unsigned F>
::testing::AssertionResult snapshot_matches(const BasicSnapshot<F>& snap, const Model& model, std::mt19937_64& rng,
                                            const std::vector<std::string>& universe, int probes = 64) {
  if (snap.size() != model.size()) return ::testing::AssertionFailure() << "snapshot size differs from its model";
  for (auto it = model.begin(); it != model.end(); ++it)
    if (auto r = item_is(snap.get(it->first), it); !r) return r << " (Snapshot::get)";
  BasicCursor<F> cursor(snap);
  return reads_match<F>(snap.view(), cursor, model, rng, universe, probes);
}

// Bytes of every node and item reachable from a root: what nbytes() must report.
template <unsigned F>
std::size_t reachable_bytes(const detail::Node<F>* nd) {
  if (nd == nullptr) return 0;
  std::size_t bytes = detail::node_bytes(nd);
  for (unsigned i = 0; i < nd->n; ++i)
    bytes += nd->leaf ? nd->keys[i]->nbytes() : reachable_bytes<F>(detail::as_inner(nd)->child[i]);
  return bytes;
}

template <unsigned F>
std::size_t leaf_count(const detail::Node<F>* nd) {
  if (nd == nullptr) return 0;
  if (nd->leaf) return 1;
  std::size_t n = 0;
  for (unsigned i = 0; i < nd->n; ++i) n += leaf_count<F>(detail::as_inner(nd)->child[i]);
  return n;
}

// Keys that internal nodes use as separators (every slot of every internal node).
template <unsigned F>
void separator_keys(const detail::Node<F>* nd, std::vector<std::string>& out) {
  if (nd == nullptr || nd->leaf) return;
  for (unsigned i = 0; i < nd->n; ++i) {
    out.emplace_back(nd->key(i));
    separator_keys<F>(detail::as_inner(nd)->child[i], out);
  }
}

}  // namespace watchcache::testing
