// render: writes a Kubernetes-style list body straight from scanned items:
//
//   {"kind":K,"apiVersion":V,"metadata":M,"items":[v1,v2,...]}
//
// Item values are already JSON objects (the cache stores each object's JSON with
// metadata.resourceVersion set), so rendering is a measured-size buffer and one memcpy per
// item: no parsing, no per-item allocation. The caller sizes the output with rendered_size()
// and renders into memory it owns (the binding renders into a Python bytes object).
// `metadata` must be a JSON object text; kind and apiVersion are escaped here.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "watchcache/item.hpp"

namespace watchcache {

namespace detail {

// JSON string escaping per RFC 8259: quote, backslash and control characters.
inline std::string json_quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('"');
  static constexpr char kHex[] = "0123456789abcdef";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out.push_back(kHex[c >> 4]);
          out.push_back(kHex[c & 0xF]);
        } else {
          out.push_back(ch);
        }
    }
  }
  out.push_back('"');
  return out;
}

}  // namespace detail

class ListRenderer {
 public:
  ListRenderer(std::string_view kind, std::string_view api_version, std::string_view metadata)
      : head_("{\"kind\":" + detail::json_quote(kind) + ",\"apiVersion\":" + detail::json_quote(api_version) +
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
