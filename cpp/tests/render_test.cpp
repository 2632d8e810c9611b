// Guards ListRenderer (render.hpp): the exact bytes of a list body for 0, 1 and n items,
// JSON escaping of kind and apiVersion, `null` for empty values, the default `{}` metadata,
// and that size() is exactly what render() writes (no byte before or after).
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "test_support.hpp"
#include "watchcache/render.hpp"

namespace watchcache {
namespace {

using testing::make_item;

class RenderTest : public testing::LeakCheckedTest {
 protected:
  void TearDown() override {
    refs_.clear();
    LeakCheckedTest::TearDown();
  }
  std::vector<const Item*> items(std::vector<std::string_view> values) {
    std::vector<const Item*> out;
    for (const auto v : values) {
      refs_.push_back(make_item("k" + std::to_string(refs_.size()), v));
      out.push_back(refs_.back().get());
    }
    return out;
  }
  // Renders into a buffer with guard bytes on both sides and checks they survive.
  static std::string render_guarded(const ListRenderer& r, const std::vector<const Item*>& its) {
    const std::size_t n = r.size(its);
    std::string buf(n + 16, '#');
    r.render(its, buf.data() + 8);
    EXPECT_EQ(buf.substr(0, 8), "########") << "wrote before the buffer";
    EXPECT_EQ(buf.substr(n + 8), "########") << "wrote past size()";
    return buf.substr(8, n);
  }

  std::vector<ItemRef> refs_;
};

TEST_F(RenderTest, EmptyListHasEmptyItemsArray) {
  const ListRenderer r("PodList", "v1", R"({"resourceVersion":"7"})");
  const std::string want = R"({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[]})";
  EXPECT_EQ(r.render({}), want);
  EXPECT_EQ(r.size({}), want.size());
  EXPECT_EQ(render_guarded(r, {}), want);
}

TEST_F(RenderTest, OneItemIsCopiedVerbatim) {
  const ListRenderer r("PodList", "v1", R"({"resourceVersion":"7"})");
  const auto its = items({R"({"metadata":{"name":"a"}})"});
  const std::string want =
      R"({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[{"metadata":{"name":"a"}}]})";
  EXPECT_EQ(r.render(its), want);
  EXPECT_EQ(r.size(its), want.size());
  EXPECT_EQ(render_guarded(r, its), want);
}

TEST_F(RenderTest, ManyItemsAreCommaSeparatedAndEmptyValuesRenderNull) {
  const ListRenderer r("ConfigMapList", "v1", R"({"continue":"abc","remainingItemCount":3})");
  const auto its = items({R"({"a":1})", "", R"({"c":[1,2]})", "", "", R"("s")"});
  const std::string want = R"({"kind":"ConfigMapList","apiVersion":"v1","metadata":{"continue":"abc","remainingItemCount":3},)"
                           R"("items":[{"a":1},null,{"c":[1,2]},null,null,"s"]})";
  EXPECT_EQ(r.render(its), want);
  EXPECT_EQ(r.size(its), want.size());
  EXPECT_EQ(render_guarded(r, its), want);

  const auto only_empty = items({""});
  EXPECT_EQ(r.render(only_empty),
            R"({"kind":"ConfigMapList","apiVersion":"v1","metadata":{"continue":"abc","remainingItemCount":3},"items":[null]})");
}

TEST_F(RenderTest, EmptyMetadataRendersAsEmptyObject) {
  const ListRenderer r("List", "v1", "");
  EXPECT_EQ(r.render({}), R"({"kind":"List","apiVersion":"v1","metadata":{},"items":[]})");
}

TEST_F(RenderTest, KindAndApiVersionAreJsonEscaped) {
  const std::string kind = "Po\"d\\List\n\t\r\b\f\x01\x1f\x7f/\xc3\xa9";
  const std::string api(std::string_view("a\0b", 3));
  const ListRenderer r(kind, api, "{}");
  const std::string want = std::string(R"({"kind":"Po\"d\\List\n\t\r\b\f\u0001\u001f)") + "\x7f/\xc3\xa9" +
                           R"(","apiVersion":"a\u0000b","metadata":{},"items":[]})";
  EXPECT_EQ(r.render({}), want);
  EXPECT_EQ(r.size({}), want.size());
}

TEST_F(RenderTest, JsonQuoteEscapesEveryControlCharacter) {
  for (int c = 0; c < 0x20; ++c) {
    const std::string quoted = json::quote(std::string(1, static_cast<char>(c)));
    ASSERT_GE(quoted.size(), 4u);
    EXPECT_EQ(quoted.front(), '"');
    EXPECT_EQ(quoted.back(), '"');
    EXPECT_EQ(quoted[1], '\\') << "control character " << c << " left raw";
    for (const char ch : quoted) EXPECT_GE(static_cast<unsigned char>(ch), 0x20u);
  }
  EXPECT_EQ(json::quote(""), "\"\"");
  EXPECT_EQ(json::quote("plain"), "\"plain\"");
  EXPECT_EQ(json::quote("\x1b"), "\"\\u001b\"");
  // Go's HTML-safe escapes, its JavaScript line terminators, and an invalid byte.
  EXPECT_EQ(json::quote("<&>\xe2\x80\xa8\xe2\x80\xa9\xff"), R"("\u003c\u0026\u003e\u2028\u2029\ufffd")");
}

TEST_F(RenderTest, SizeMatchesRenderedLengthForManyShapes) {
  const ListRenderer r("K", "v", R"({"x":1})");
  std::vector<std::string_view> values;
  for (std::size_t n = 0; n < 40; ++n) {
    const auto its = items(values);
    EXPECT_EQ(r.size(its), r.render(its).size()) << n << " items";
    EXPECT_EQ(render_guarded(r, its), r.render(its));
    values.push_back(n % 3 == 0 ? std::string_view() : std::string_view(R"({"value":"some json"})"));
  }
}

// Values long enough for the block copy, at every remainder around its boundaries: each
// value's bytes (all distinct within a value) arrive whole, in place, in order.
TEST_F(RenderTest, LongValuesArriveWholeAtEveryLength) {
  const ListRenderer r("K", "v", "{}");
  std::vector<std::string> texts;
  for (std::size_t len : {255u, 256u, 257u, 319u, 320u, 321u, 383u, 1023u, 1024u, 1025u, 4097u}) {
    std::string t = "\"";
    for (std::size_t i = 0; t.size() + 1 < len; ++i) t.push_back(static_cast<char>('a' + (i * 7 + len) % 26));
    t.push_back('"');
    texts.push_back(std::move(t));
  }
  std::vector<std::string_view> values(texts.begin(), texts.end());
  const auto its = items(values);
  std::string want = R"({"kind":"K","apiVersion":"v","metadata":{},"items":[)";
  for (std::size_t i = 0; i < texts.size(); ++i) want += (i ? "," : "") + texts[i];
  want += "]}";
  EXPECT_EQ(render_guarded(r, its), want);
  EXPECT_EQ(r.size(its), want.size());
}

}  // namespace
}  // namespace watchcache
