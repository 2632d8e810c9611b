// Item: one immutable cache entry — key, value bytes, mod revision, labels, fields.
//
// Layout: a single allocation holds the header, a table of label/field string lengths
// and then every byte (key, value, label keys/values, field keys/values) back to back:
//
//   [ Header | u32 lens[2*(labels+fields)] | key | l0k l0v l1k ... | f0k f0v ... | value ]
//
// One allocation per item makes the memory an item costs exact (nbytes()). The value goes
// last so that everything a filtered scan reads (key, labels, fields) sits in the first
// cache lines, ahead of a value that is often a kilobyte or more: a selector then costs
// one or two adjacent lines per item, which prefetch together, instead of a second miss
// past the value. Labels and fields are few (typically < 10), so lookups are linear over
// the sorted table.
//
// Ownership: an intrusive atomic refcount. A Tree holds exactly one reference for as long
// as the item is reachable from the tree or any of its snapshots (see reclaim.hpp); copying
// a B+tree node therefore never touches item refcounts. Python objects and ScanResults that
// outlive their snapshot hold references of their own (ItemRef).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "watchcache/counted_ref.hpp"
#include "watchcache/item_heap.hpp"

namespace watchcache {

namespace detail {

// Engine-wide live object accounting: the leak tests require these to return to their
// starting values once every tree, snapshot and item is gone.
struct LiveCounters {
  std::atomic<std::int64_t> nodes{0};
  std::atomic<std::int64_t> items{0};
  std::atomic<std::int64_t> bytes{0};
};

inline LiveCounters& live_counters() {
  static LiveCounters counters;
  return counters;
}

}  // namespace detail

using StringPair = std::pair<std::string_view, std::string_view>;

namespace detail {
// Byte equality for the short strings of labels and fields. string_view's == calls memcmp
// out of line; for a few bytes the call costs more than the compare, and a selector scan
// makes two or more per item.
inline bool same_bytes(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  if (a.size() > 32) return std::memcmp(a.data(), b.data(), a.size()) == 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return false;
  return true;
}
}  // namespace detail

class Item {
 public:
  // Creates an item with refcount 1 owned by the caller. Labels and fields need not be
  // sorted; duplicate keys keep the last value. Throws std::invalid_argument for an empty
  // key or a negative revision, std::length_error for sizes beyond 4 GiB.
  static Item* create(std::string_view key, std::string_view value, std::int64_t mod_revision,
                      std::vector<StringPair> labels = {}, std::vector<StringPair> fields = {}) {
    if (key.empty()) throw std::invalid_argument("key must not be empty");
    if (mod_revision < 0) throw std::invalid_argument("mod_revision must not be negative");
    normalize(labels);
    normalize(fields);
    const std::size_t pairs = labels.size() + fields.size();
    if (pairs > 0xFFFF) throw std::length_error("too many labels or fields");
    std::size_t payload = key.size() + value.size();
    for (const auto& [k, v] : labels) payload += k.size() + v.size();
    for (const auto& [k, v] : fields) payload += k.size() + v.size();
    if (key.size() > 0xFFFFFFFFu || value.size() > 0xFFFFFFFFu || payload > 0xFFFFFFFFu)
      throw std::length_error("item too large");
    const std::size_t total = sizeof(Item) + 2 * pairs * sizeof(std::uint32_t) + payload;

    void* mem = detail::new_item_memory(total);
    auto* item = new (mem) Item();
    item->mod_revision_ = mod_revision;
    item->key_len_ = static_cast<std::uint32_t>(key.size());
    item->value_len_ = static_cast<std::uint32_t>(value.size());
    item->label_count_ = static_cast<std::uint16_t>(labels.size());
    item->field_count_ = static_cast<std::uint16_t>(fields.size());
    item->total_ = static_cast<std::uint32_t>(total);
    item->pairs_len_ = static_cast<std::uint32_t>(payload - key.size() - value.size());

    std::uint32_t* lens = item->lens();
    std::size_t li = 0;
    for (const auto& [k, v] : labels) {
      lens[li++] = static_cast<std::uint32_t>(k.size());
      lens[li++] = static_cast<std::uint32_t>(v.size());
    }
    for (const auto& [k, v] : fields) {
      lens[li++] = static_cast<std::uint32_t>(k.size());
      lens[li++] = static_cast<std::uint32_t>(v.size());
    }
    char* out = item->bytes();
    auto put = [&out](std::string_view s) {
      if (!s.empty()) std::memcpy(out, s.data(), s.size());
      out += s.size();
    };
    put(key);
    for (const auto& [k, v] : labels) put(k), put(v);
    for (const auto& [k, v] : fields) put(k), put(v);
    put(value);

    auto& counters = detail::live_counters();
    counters.items.fetch_add(1, std::memory_order_relaxed);
    counters.bytes.fetch_add(static_cast<std::int64_t>(total), std::memory_order_relaxed);
    return item;
  }

  Item(const Item&) = delete;
  Item& operator=(const Item&) = delete;

  std::string_view key() const noexcept { return {bytes(), key_len_}; }
  std::string_view value() const noexcept { return {bytes() + key_len_ + pairs_len_, value_len_}; }
  // Bytes from the start of the item to its value: what a filtered scan reads.
  std::size_t head_bytes() const noexcept {
    return static_cast<std::size_t>(bytes() + key_len_ + pairs_len_ - reinterpret_cast<const char*>(this));
  }
  std::int64_t mod_revision() const noexcept { return mod_revision_; }
  // Memory this item occupies, header and all bytes included (allocator overhead excluded).
  std::size_t nbytes() const noexcept { return total_; }

  std::size_t label_count() const noexcept { return label_count_; }
  std::size_t field_count() const noexcept { return field_count_; }
  StringPair label(std::size_t i) const noexcept { return pair_at(i); }
  StringPair field(std::size_t i) const noexcept { return pair_at(label_count_ + i); }
  std::optional<std::string_view> find_label(std::string_view k) const noexcept {
    return find(0, label_count_, k);
  }
  std::optional<std::string_view> find_field(std::string_view k) const noexcept {
    return find(label_count_, label_count_ + field_count_, k);
  }

  void retain() const noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release() const noexcept {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) destroy(const_cast<Item*>(this));
  }
  std::uint32_t refcount() const noexcept { return refs_.load(std::memory_order_relaxed); }

 private:
  Item() = default;
  ~Item() = default;

  static void destroy(Item* item) noexcept {
    auto& counters = detail::live_counters();
    counters.items.fetch_sub(1, std::memory_order_relaxed);
    counters.bytes.fetch_sub(static_cast<std::int64_t>(item->total_), std::memory_order_relaxed);
    const std::size_t total = item->total_;
    item->~Item();
    detail::delete_item_memory(item, total);
  }

  static void normalize(std::vector<StringPair>& pairs) {
    // Stable sort then keep the last of equal keys, like assigning into a map in order.
    std::vector<StringPair> sorted;
    sorted.reserve(pairs.size());
    for (std::size_t i = 0; i < pairs.size(); ++i) {
      bool superseded = false;
      for (std::size_t j = i + 1; j < pairs.size(); ++j)
        if (pairs[j].first == pairs[i].first) superseded = true;
      if (!superseded) sorted.push_back(pairs[i]);
    }
    std::sort(sorted.begin(), sorted.end(),
              [](const StringPair& a, const StringPair& b) { return a.first < b.first; });
    pairs = std::move(sorted);
  }

  std::uint32_t* lens() noexcept { return reinterpret_cast<std::uint32_t*>(this + 1); }
  const std::uint32_t* lens() const noexcept {
    return reinterpret_cast<const std::uint32_t*>(this + 1);
  }
  std::size_t pair_count() const noexcept {
    return static_cast<std::size_t>(label_count_) + field_count_;
  }
  char* bytes() noexcept { return reinterpret_cast<char*>(lens() + 2 * pair_count()); }
  const char* bytes() const noexcept {
    return reinterpret_cast<const char*>(lens() + 2 * pair_count());
  }

  StringPair pair_at(std::size_t index) const noexcept {
    const std::uint32_t* l = lens();
    const char* p = bytes() + key_len_;
    for (std::size_t i = 0; i < index; ++i) p += l[2 * i] + l[2 * i + 1];
    return {{p, l[2 * index]}, {p + l[2 * index], l[2 * index + 1]}};
  }

  std::optional<std::string_view> find(std::size_t from, std::size_t to,
                                       std::string_view k) const noexcept {
    const std::uint32_t* l = lens();
    const char* p = bytes() + key_len_;
    for (std::size_t i = 0; i < from; ++i) p += l[2 * i] + l[2 * i + 1];
    for (std::size_t i = from; i < to; ++i) {
      std::string_view candidate{p, l[2 * i]};
      if (detail::same_bytes(candidate, k)) return std::string_view{p + l[2 * i], l[2 * i + 1]};
      p += l[2 * i] + l[2 * i + 1];
    }
    return std::nullopt;
  }

  mutable std::atomic<std::uint32_t> refs_{1};
  std::uint32_t key_len_ = 0;
  std::uint32_t value_len_ = 0;
  std::uint32_t total_ = 0;
  std::uint32_t pairs_len_ = 0;  // label and field bytes, between the key and the value
  std::int64_t mod_revision_ = 0;
  std::uint16_t label_count_ = 0;
  std::uint16_t field_count_ = 0;
};

namespace detail {
// Asks for an item's first `lines` cache lines. Its header, length table, key, labels and
// fields come before its value, so the first three lines hold a typical pod's header and
// key, and the first six everything but its value: what a search by key or a selector reads.
inline void prefetch_item(const Item* item, int lines) noexcept {
  const char* p = reinterpret_cast<const char*>(item);
  for (int line = 0; line < lines; ++line) __builtin_prefetch(p + 64 * line);
}
}  // namespace detail

// An owning reference to an Item (intrusive refcount).
class ItemRef : public detail::CountedRef<const Item> {
  using Base = detail::CountedRef<const Item>;

 public:
  ItemRef() noexcept = default;
  ItemRef(Base&& r) noexcept : Base(std::move(r)) {}  // implicit: what adopt and share return
  // Adopts a reference the caller already owns (e.g. from Item::create).
  static ItemRef adopt(Item* item) noexcept { return Base::adopt(item); }
  // Takes a new reference to an item somebody else keeps alive.
  static ItemRef share(const Item* item) noexcept { return Base::share(item); }
  // Gives up ownership without releasing (the receiver now owns the reference).
  Item* release_ownership() noexcept { return const_cast<Item*>(Base::release_ownership()); }
};

}  // namespace watchcache
