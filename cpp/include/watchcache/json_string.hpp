// JSON strings as Go's encoding/json writes them (json.Marshal, HTML escaping on): the one
// string escaper of the engine, used for list bodies (render.hpp) and continue tokens
// (continue_token.hpp), so that both are byte-identical to what a Go apiserver sends.
//
// Beyond RFC 8259 Go escapes <, > and & as \u003c, \u003e, \u0026 and the JavaScript line
// terminators U+2028/U+2029, writes \b and \f short (Go >= 1.22), other control characters
// as \u00xx in lower case, and each byte that does not start a valid UTF-8 sequence as the
// escape \ufffd (then goes on with the next byte).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace watchcache::json {

// Length of the UTF-8 sequence starting at s[i], or 0 when it is not a valid one (overlong,
// surrogate, above U+10FFFF, truncated): the rules of Python's strict decoder and Go's.
inline std::size_t utf8_sequence(std::string_view s, std::size_t i) noexcept {
  const auto at = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = at(i);
  if (c < 0x80) return 1;
  const auto cont = [&](std::size_t k) { return k < s.size() && (at(k) & 0xC0) == 0x80; };
  if (c >= 0xC2 && c <= 0xDF) return cont(i + 1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(i + 1) || !cont(i + 2)) return 0;
    const unsigned char c1 = at(i + 1);
    if (c == 0xE0 && c1 < 0xA0) return 0;  // overlong
    if (c == 0xED && c1 >= 0xA0) return 0;  // UTF-16 surrogate
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(i + 1) || !cont(i + 2) || !cont(i + 3)) return 0;
    const unsigned char c1 = at(i + 1);
    if (c == 0xF0 && c1 < 0x90) return 0;  // overlong
    if (c == 0xF4 && c1 >= 0x90) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

// Appends the body of the JSON string for `s` (no quotes).
inline void append_go_string_body(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  const auto escape_u00 = [&](unsigned char c) {
    out += "\\u00";
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 0xF]);
  };
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const std::size_t n = utf8_sequence(s, i);
      if (n == 0) {
        out += "\\ufffd";
        ++i;
        continue;
      }
      // U+2028 and U+2029 are E2 80 A8 / E2 80 A9.
      if (n == 3 && c == 0xE2 && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
          (static_cast<unsigned char>(s[i + 2]) & 0xFE) == 0xA8) {
        out += s[i + 2] == '\xA8' ? "\\u2028" : "\\u2029";
      } else {
        out.append(s.substr(i, n));
      }
      i += n;
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '<': case '>': case '&': escape_u00(c); break;
      default:
        if (c < 0x20)
          escape_u00(c);
        else
          out.push_back(static_cast<char>(c));
    }
    ++i;
  }
}

// The quoted JSON string for `s`.
inline std::string quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('"');
  append_go_string_body(out, s);
  out.push_back('"');
  return out;
}

}  // namespace watchcache::json
