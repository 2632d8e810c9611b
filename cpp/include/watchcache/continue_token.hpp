// Continue tokens in their canonical shape: the fast path of python/watchcache/tokens.py.
//
// A Kubernetes continue token is base64url (no padding) of exactly
//
//   {"v":"meta.k8s.io/v1","rv":<int64>,"start":"<key relative to the key prefix>"}
//
// as Go's encoding/json writes it. Every token a server mints has this shape, and a paged
// LIST decodes one and mints one per page. Done in Python (json, base64, re) that costs
// microseconds per token, several times more right after a page body has been rendered
// through the same core's caches, which is how pages are served (git show 94111c2 has the
// timings). Here it is one pass over the bytes.
//
// Encoding always writes the canonical shape. Decoding handles only that shape. Anything
// else (another member order, whitespace,
// unknown members, CR/LF in the token, invalid UTF-8, lone surrogate escapes) returns
// nullopt and tokens.py's general decoder, which follows Go's json.Unmarshal to the letter
// and words the 400 errors, takes over. So this file never decides that a token is bad, and
// a token accepted here decodes to what the general path would give.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "watchcache/json_string.hpp"

namespace watchcache::token {

inline constexpr std::string_view kHead = R"({"v":"meta.k8s.io/v1","rv":)";
inline constexpr std::string_view kStartMember = R"(,"start":")";

namespace detail {

inline constexpr char kBase64Url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

inline void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

inline std::string base64url(std::string_view data) {
  std::string out;
  out.reserve((data.size() * 4 + 2) / 3);
  const auto byte = [&](std::size_t k) { return static_cast<std::uint32_t>(static_cast<unsigned char>(data[k])); };
  std::size_t i = 0;
  for (; i + 3 <= data.size(); i += 3) {
    const std::uint32_t v = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
    out.push_back(kBase64Url[v >> 18]);
    out.push_back(kBase64Url[(v >> 12) & 63]);
    out.push_back(kBase64Url[(v >> 6) & 63]);
    out.push_back(kBase64Url[v & 63]);
  }
  const std::size_t rest = data.size() - i;
  if (rest) {
    const std::uint32_t v = byte(i) << 16 | (rest == 2 ? byte(i + 1) << 8 : 0u);
    out.push_back(kBase64Url[v >> 18]);
    out.push_back(kBase64Url[(v >> 12) & 63]);
    if (rest == 2) out.push_back(kBase64Url[(v >> 6) & 63]);
  }
  return out;
}

inline int base64url_digit(char ch) noexcept {
  if (ch >= 'A' && ch <= 'Z') return ch - 'A';
  if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
  if (ch >= '0' && ch <= '9') return ch - '0' + 52;
  if (ch == '-') return 62;
  if (ch == '_') return 63;
  return -1;
}

// Go's RawURLEncoding as the general path applies it: alphabet only, and the unused low bits
// of a last partial digit are ignored (Go is not strict there). nullopt for anything else,
// including CR/LF (which Go skips; the general path handles that rare case).
inline std::optional<std::string> unbase64url(std::string_view text) {
  if (text.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(text.size() * 3 / 4);
  std::uint32_t acc = 0;
  int bits = 0;
  for (const char ch : text) {
    const int d = base64url_digit(ch);
    if (d < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<std::uint32_t>(d);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

inline int hex_digit(char ch) noexcept {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}

inline std::optional<std::uint32_t> hex4(std::string_view s, std::size_t i) noexcept {
  if (i + 4 > s.size()) return std::nullopt;
  std::uint32_t v = 0;
  for (std::size_t k = i; k < i + 4; ++k) {
    const int d = hex_digit(s[k]);
    if (d < 0) return std::nullopt;
    v = v << 4 | static_cast<std::uint32_t>(d);
  }
  return v;
}

// Decodes a JSON string body starting at s[i] (just after the opening quote) up to its
// closing quote; `i` ends just past that quote. nullopt for raw control characters, unknown
// escapes, invalid UTF-8 and lone surrogate escapes (Go turns those into U+FFFD; the general
// path does the same).
inline std::optional<std::string> json_string(std::string_view s, std::size_t& i) {
  std::string out;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"') {
      ++i;
      return out;
    }
    if (c < 0x20) return std::nullopt;
    if (c >= 0x80) {
      const std::size_t n = json::utf8_sequence(s, i);
      if (n == 0) return std::nullopt;
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    if (c != '\\') {
      out.push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    if (i + 1 >= s.size()) return std::nullopt;
    const char e = s[i + 1];
    i += 2;
    switch (e) {
      case '"': out.push_back('"'); break;
      case '\\': out.push_back('\\'); break;
      case '/': out.push_back('/'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case 'u': {
        const auto hi = hex4(s, i);
        if (!hi) return std::nullopt;
        i += 4;
        std::uint32_t cp = *hi;
        if (cp >= 0xDC00 && cp <= 0xDFFF) return std::nullopt;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          if (i + 6 > s.size() || s[i] != '\\' || s[i + 1] != 'u') return std::nullopt;
          const auto lo = hex4(s, i + 2);
          if (!lo || *lo < 0xDC00 || *lo > 0xDFFF) return std::nullopt;
          i += 6;
          cp = 0x10000 + ((cp - 0xD800) << 10) + (*lo - 0xDC00);
        }
        append_utf8(out, cp);
        break;
      }
      default: return std::nullopt;
    }
  }
  return std::nullopt;  // no closing quote
}

}  // namespace detail

// The token for `start` (relative to the key prefix) at `rv`, byte for byte what
// Kubernetes' EncodeContinue writes (an invalid UTF-8 byte becomes the escape \ufffd).
inline std::string encode(std::string_view start, std::int64_t rv) {
  std::string text;
  text.reserve(kHead.size() + 20 + kStartMember.size() + start.size() + 8);
  text += kHead;
  char digits[24];
  const auto r = std::to_chars(digits, digits + sizeof digits, rv);
  text.append(digits, r.ptr);
  text += kStartMember;
  json::append_go_string_body(text, start);
  text += "\"}";
  return detail::base64url(text);
}

struct Decoded {
  std::int64_t rv;
  std::string start;  // UTF-8, as written in the token (may be empty: the caller rejects it)
};

// The rv and start of a token in the canonical shape; nullopt for any other token, good or
// bad (see the file comment). The rv is never 0 and has no leading zeros or plus sign.
inline std::optional<Decoded> decode(std::string_view token) {
  const auto text = detail::unbase64url(token);
  if (!text) return std::nullopt;
  const std::string_view s = *text;
  if (!s.starts_with(kHead)) return std::nullopt;
  std::size_t i = kHead.size();
  const std::size_t number_begin = i;
  if (i < s.size() && s[i] == '-') ++i;
  if (i >= s.size() || s[i] < '1' || s[i] > '9') return std::nullopt;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  std::int64_t rv = 0;
  const auto parsed = std::from_chars(s.data() + number_begin, s.data() + i, rv);
  if (parsed.ec != std::errc() || parsed.ptr != s.data() + i) return std::nullopt;  // outside int64
  if (s.substr(i, kStartMember.size()) != kStartMember) return std::nullopt;
  i += kStartMember.size();
  auto start = detail::json_string(s, i);
  if (!start || s.substr(i) != "}") return std::nullopt;
  return Decoded{rv, std::move(*start)};
}

}  // namespace watchcache::token
