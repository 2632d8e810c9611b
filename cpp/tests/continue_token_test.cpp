// Guards the canonical continue-token codec (continue_token.hpp): tokens Go wrote decode and
// re-encode byte for byte, Go's escapes, base64url without padding for every length, and
// that every shape other than the canonical one is declined (nullopt), never misread.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "watchcache/continue_token.hpp"

namespace watchcache::token {
namespace {

// Minted by a Go apiserver: rv 12345 and -1, start "/ns/name\x00" (docs/semantics.md §1.1).
constexpr std::string_view kGo12345 = "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTIzNDUsInN0YXJ0IjoiL25zL25hbWVcdTAwMDAifQ";
constexpr std::string_view kGoMinus1 = "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6LTEsInN0YXJ0IjoiL25zL25hbWVcdTAwMDAifQ";

const std::string kNameNul("/ns/name\0", 9);

TEST(ContinueToken, EncodesWhatGoWrites) {
  EXPECT_EQ(encode(kNameNul, 12345), std::string(kGo12345));
  EXPECT_EQ(encode(kNameNul, -1), std::string(kGoMinus1));
}

TEST(ContinueToken, DecodesWhatGoWrites) {
  const auto a = decode(kGo12345);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->rv, 12345);
  EXPECT_EQ(a->start, kNameNul);
  const auto b = decode(kGoMinus1);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->rv, -1);
}

TEST(ContinueToken, EscapesAsGoJsonMarshal) {
  const std::string start = "<>&\"\\\b\f\n\r\t\x01\x7f\xe2\x80\xa8\xe2\x80\xa9\xc3\xa9";
  const std::string token = encode(start, 1);
  const std::string json = std::string(kHead) + "1" + std::string(kStartMember) +
                           R"(\u003c\u003e\u0026\"\\\b\f\n\r\t\u0001)" "\x7f" R"(\u2028\u2029)" "\xc3\xa9\"}";
  EXPECT_EQ(token, detail::base64url(json));
  const auto back = decode(token);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->start, start);
}

TEST(ContinueToken, RoundTripsEveryLengthAndTheInt64Extremes) {
  std::string start;
  for (int n = 0; n < 70; ++n) {
    for (const std::int64_t rv : {std::numeric_limits<std::int64_t>::max(), std::int64_t{-1},
                                  std::numeric_limits<std::int64_t>::min() + 1}) {
      const std::string token = encode(start, rv);
      EXPECT_EQ(token.find('='), std::string::npos);
      const auto back = decode(token);
      ASSERT_TRUE(back) << n;
      EXPECT_EQ(back->rv, rv);
      EXPECT_EQ(back->start, start);
    }
    start.push_back(static_cast<char>('a' + n % 26));
  }
}

TEST(ContinueToken, EncodesEachInvalidUtf8ByteAsTheReplacementEscape) {
  const auto start_of = [](std::string_view start) {
    const auto d = decode(encode(start, 1));
    return d ? d->start : std::string("<declined>");
  };
  const std::string fffd = "\xef\xbf\xbd";  // U+FFFD
  EXPECT_EQ(start_of("a\xff"), "a" + fffd);
  EXPECT_EQ(start_of("\xed\xa0\x80"), fffd + fffd + fffd);  // an encoded surrogate
  EXPECT_EQ(start_of("\xc0\x80"), fffd + fffd);              // overlong
  EXPECT_EQ(start_of("\xe2\x82"), fffd + fffd);              // truncated
}

TEST(ContinueToken, DeclinesEveryOtherShape) {
  const auto json_token = [](std::string_view json) { return detail::base64url(json); };
  for (const std::string_view json : {
           R"({"v":"meta.k8s.io/v1","rv":5,"start":"a"} )",
           R"({"rv":5,"v":"meta.k8s.io/v1","start":"a"})",
           R"({"v":"meta.k8s.io/v1","rv":05,"start":"a"})",
           R"({"v":"meta.k8s.io/v1","rv":0,"start":"a"})",
           R"({"v":"meta.k8s.io/v1","rv":+5,"start":"a"})",
           R"({"v":"meta.k8s.io/v1","rv":9223372036854775808,"start":"a"})",
           R"({"v":"meta.k8s.io/v1","rv":5,"start":"\ud800"})",
           R"({"v":"meta.k8s.io/v1","rv":5,"start":"\udc00"})",
           R"({"v":"meta.k8s.io/v1","rv":5,"start":"\x"})",
           R"({"v":"meta.k8s.io/v1","rv":5,"start":"a)",
           R"({"v":"meta.k8s.io/v2","rv":5,"start":"a"})",
       }) {
    EXPECT_FALSE(decode(json_token(json))) << json;
  }
  EXPECT_FALSE(decode(json_token(std::string(kHead) + "5,\"start\":\"a\tb\"}")));
  EXPECT_FALSE(decode(json_token(std::string(kHead) + "5,\"start\":\"\xff\"}")));
  EXPECT_FALSE(decode(std::string(kGo12345) + "="));
  EXPECT_FALSE(decode(std::string(kGo12345.substr(0, 10)) + "\n" + std::string(kGo12345.substr(10))));
  EXPECT_FALSE(decode("e"));
  EXPECT_FALSE(decode(""));
}

TEST(ContinueToken, DecodesSurrogatePairEscapes) {
  const auto d = decode(detail::base64url(std::string(kHead) + R"(5,"start":"\ud83d\ude00\u00e9\/"})"));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->start, "\xf0\x9f\x98\x80\xc3\xa9/");
}

}  // namespace
}  // namespace watchcache::token
