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
        std::memcpy(out, v.data(), v.size());
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
  std::string head_;
};

}  // namespace watchcache
