// render: writes a Kubernetes-style list body straight from scanned items:
//
//   {"kind":K,"apiVersion":V,"metadata":M,"items":[v1,v2,...]}
//
// Item values are already JSON objects (the cache stores each object's JSON with
// metadata.resourceVersion set), so rendering is a measured-size buffer and one memcpy per
// item: no parsing, no per-item allocation. The caller sizes the output with rendered_size()
// and renders into memory it owns (the binding renders into a Python bytes object).
// `metadata` must be a JSON object text; kind and apiVersion are escaped here, as Go does.
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
  std::size_t size(const std::vector<const Item*>& items) const noexcept {
    std::size_t n = head_.size() + 2;  // "]}"
    for (const Item* it : items) n += it->value().empty() ? 4 : it->value().size();
    if (items.size() > 1) n += items.size() - 1;  // commas
    return n;
  }

  // Writes exactly size(items) bytes to out.
  void render(const std::vector<const Item*>& items, char* out) const noexcept {
    std::memcpy(out, head_.data(), head_.size());
    out += head_.size();
    bool first = true;
    for (const Item* it : items) {
      if (!first) *out++ = ',';
      first = false;
      const std::string_view v = it->value();
      if (v.empty()) {
        std::memcpy(out, "null", 4);
        out += 4;
      } else {
        copy_value(out, v);
        out += v.size();
      }
    }
    *out++ = ']';
    *out++ = '}';
  }

  std::string render(const std::vector<const Item*>& items) const {
    std::string out(size(items), '\0');
    render(items, out.data());
    return out;
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

  std::string head_;
};

}  // namespace watchcache
