// Guards ListRenderer (render.hpp): the exact bytes of a list body for 0, 1 and n items,
// JSON escaping of kind and apiVersion, `null` for empty values, the default `{}` metadata,
// and that size() is exactly what render() writes (no byte before or after); and the pieces
// of a body: any partition into ranges concatenates to the whole body, each piece's size()
// is what its render() writes, and piece_end() cuts where it says.
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

// Renders items [begin, end) between guard bytes, as render_guarded does for a whole body.
std::string piece_guarded(const ListRenderer& r, const std::vector<const Item*>& its, std::size_t begin,
                          std::size_t end) {
  const std::size_t n = r.size(its, begin, end);
  std::string buf(n + 16, '#');
  r.render(its, begin, end, buf.data() + 8);
  EXPECT_EQ(buf.substr(0, 8), "########") << "piece [" << begin << "," << end << ") wrote before the buffer";
  EXPECT_EQ(buf.substr(n + 8), "########") << "piece [" << begin << "," << end << ") wrote past size()";
  return buf.substr(8, n);
}

TEST_F(RenderTest, PiecesOfEveryPartitionConcatenateToTheBody) {
  const ListRenderer r("PodList", "v1", R"({"resourceVersion":"7"})");
  for (std::size_t n = 0; n <= 6; ++n) {
    std::vector<std::string_view> values;
    for (std::size_t i = 0; i < n; ++i) values.push_back(i % 4 == 1 ? std::string_view() : std::string_view(R"({"i":1})"));
    const auto its = items(values);
    const std::string whole = r.render(its);
    // Every subset of the n - 1 inner cut points (an empty list: the one range [0, 0)).
    for (unsigned mask = 0; mask < (1u << (n > 0 ? n - 1 : 0)); ++mask) {
      std::vector<std::size_t> cuts{0};
      for (std::size_t i = 1; i < n; ++i)
        if (mask & (1u << (i - 1))) cuts.push_back(i);
      cuts.push_back(n);
      std::string joined;
      for (std::size_t c = 0; c + 1 < cuts.size(); ++c) joined += piece_guarded(r, its, cuts[c], cuts[c + 1]);
      EXPECT_EQ(joined, whole) << n << " items, cuts mask " << mask;
    }
  }
}

TEST_F(RenderTest, PieceEndTakesItemsWhileUnderTheTargetAndAtLeastOne) {
  const ListRenderer r("K", "v", "{}");
  const std::size_t head = std::string_view(R"({"kind":"K","apiVersion":"v","metadata":{},"items":[)").size();
  const auto its = items({"1234567890", "1234567890", "", "1234567890", "1234567890"});  // 10, 10, null, 10, 10
  EXPECT_EQ(r.piece_end(its, 0, 1), 1u) << "at least one item, even past the target";
  EXPECT_EQ(r.piece_end(its, 0, head + 10), 1u) << "the piece reached the target with its first item";
  EXPECT_EQ(r.piece_end(its, 0, head + 11), 2u) << "under the target after one item: one more";
  EXPECT_EQ(r.piece_end(its, 1, 11), 1u + 1u) << "a later piece: comma and value, 11 bytes";
  EXPECT_EQ(r.piece_end(its, 1, 12), 3u);
  EXPECT_EQ(r.piece_end(its, 2, 5), 3u) << "null is 4 bytes, with its comma 5";
  EXPECT_EQ(r.piece_end(its, 2, 6), 4u);
  EXPECT_EQ(r.piece_end(its, 0, 1u << 20), its.size()) << "everything fits";
  EXPECT_EQ(r.piece_end(its, its.size(), 1), its.size()) << "nothing left: an empty piece (the tail)";
  EXPECT_EQ(r.piece_end({}, 0, 1), 0u) << "an empty list: one piece, head and tail";
  // Walking a body by piece_end covers every item once and rebuilds the body.
  for (std::size_t target : {1u, 20u, 50u, 61u, 70u, 1000u}) {
    std::string joined;
    std::size_t begin = 0, pieces = 0;
    do {
      const std::size_t end = r.piece_end(its, begin, target);
      EXPECT_GT(end, begin) << "no progress at " << begin;
      joined += piece_guarded(r, its, begin, end);
      begin = end;
      ++pieces;
    } while (begin < its.size() && pieces < 100);
    EXPECT_EQ(joined, r.render(its)) << "target " << target;
  }
}

}  // namespace
}  // namespace watchcache
