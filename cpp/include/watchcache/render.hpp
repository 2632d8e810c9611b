// render: writes a Kubernetes-style list body straight from scanned items:
//
//   {"kind":K,"apiVersion":V,"metadata":M,"items":[v1,v2,...]}
//
// Item values are already JSON objects (the cache stores each object's JSON with
// metadata.resourceVersion set), so rendering is a measured-size buffer and one memcpy per
// item: no parsing, no per-item allocation. The caller sizes the output with size() and
// renders into memory it owns (the binding renders into a Python bytes object).
// `metadata` must be a JSON object text; kind and apiVersion are escaped here, as Go does.
//
// Pieces. A body can also be rendered as consecutive pieces, each the items [begin, end) of
// the list: the head goes with the piece that starts at item 0, a comma before every item but
// the first of the list, and the tail `]}` with the piece that ends at the last item. The
// pieces of a partition of [0, n) into consecutive non-empty ranges (of an empty list: the
// one range [0, 0)) concatenate to exactly the whole body (KEP-5116's rule for streamed
// lists: the same bytes as the body encoded at once), so a LIST is sent in pieces of bounded
// size straight from its snapshot (piece_end() picks where each ends) without the whole
// body ever existing.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "watchcache/item.hpp"
#include "watchcache/json_string.hpp"

namespace watchcache {

class ListRenderer {
 public:
  ListRenderer(std::string_view kind, std::string_view api_version, std::string_view metadata)
      : head_("{\"kind\":" + json::quote(kind) + ",\"apiVersion\":" + json::quote(api_version) +
              ",\"metadata\":" + std::string(metadata.empty() ? std::string_view("{}") : metadata) + ",\"items\":[") {}

  // Exact size of the body for these items. An empty value renders as `null`.
  std::size_t size(const std::vector<const Item*>& items) const noexcept { return size(items, 0, items.size()); }

  // Writes exactly size(items) bytes to out.
  void render(const std::vector<const Item*>& items, char* out) const noexcept { render(items, 0, items.size(), out); }

  std::string render(const std::vector<const Item*>& items) const {
    std::string out(size(items), '\0');
    render(items, out.data());
    return out;
  }

  // Exact size of the piece holding items [begin, end) (begin <= end <= items.size()).
  std::size_t size(const std::vector<const Item*>& items, std::size_t begin, std::size_t end) const noexcept {
    std::size_t n = (begin == 0 ? head_.size() : 0) + (end == items.size() ? 2 : 0);  // head, "]}"
    for (std::size_t i = begin; i < end; ++i) n += value_size(items[i]) + (i > 0 ? 1 : 0);  // comma
    return n;
  }

  // Writes exactly size(items, begin, end) bytes to out.
  void render(const std::vector<const Item*>& items, std::size_t begin, std::size_t end, char* out) const noexcept {
    if (begin == 0) {
      std::memcpy(out, head_.data(), head_.size());
      out += head_.size();
    }
    for (std::size_t i = begin; i < end; ++i) {
      if (i > 0) *out++ = ',';
      const std::string_view v = items[i]->value();
      if (v.empty()) {
        std::memcpy(out, "null", 4);
        out += 4;
      } else {
        copy_value(out, v);
        out += v.size();
      }
    }
    if (end == items.size()) {
      *out++ = ']';
      *out++ = '}';
    }
  }

  // Where the piece that starts at item `begin` ends: it takes items while it is smaller than
  // `target` bytes, and at least one item when any is left (a piece may therefore pass the
  // target by one item, the head or the tail). Reads one item header per item taken.
  std::size_t piece_end(const std::vector<const Item*>& items, std::size_t begin, std::size_t target) const noexcept {
    std::size_t bytes = begin == 0 ? head_.size() : 0, end = begin;
    do {
      if (end == items.size()) break;
      bytes += value_size(items[end]) + (end > 0 ? 1 : 0);
      ++end;
    } while (bytes < target);
    return end;
  }

 private:
  // A value past a few hundred bytes is copied by a plain forward loop of 64-byte blocks
  // (inlined moves), not by one memcpy call per value: with 500 x 1 KB values that are each
  // a cache miss away, engine_bench's "render 500 x 1 KB" row (`make bench-native`) took
  // 69-98 us with glibc's memcpy and 46-57 us with this loop (f229917 against its parent,
  // builds run alternately), and glibc's AVX-512, AVX2 and SSE2 variants were alike. Why
  // memcpy's larger-size path streams worse here was not pinned down. Short values are as
  // fast either way and keep the single call.
  static void copy_value(char* out, std::string_view v) noexcept {
    constexpr std::size_t kBlock = 64, kShort = 256;
    const char* src = v.data();
    std::size_t n = v.size();
    if (n > kShort) {
      for (; n >= kBlock; n -= kBlock, src += kBlock, out += kBlock) std::memcpy(out, src, kBlock);
    }
    std::memcpy(out, src, n);
  }

  static std::size_t value_size(const Item* it) noexcept {
    const std::size_t n = it->value().size();
    return n == 0 ? 4 : n;  // an empty value renders as `null`
  }

  std::string head_;
};

}  // namespace watchcache
