// Guards the label/field selector matcher (selector.hpp) against apimachinery semantics:
// every label operator including absent labels and non-integer values for gt/lt, fields
// where an absent field reads as "", conjunction of requirements, and the validation
// errors (arity, integer bounds, empty keys, unknown operators).
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "test_support.hpp"
#include "watchcache/selector.hpp"

namespace watchcache {
namespace {

using testing::make_item;

LabelRequirement req(std::string key, LabelOp op, std::vector<std::string> values = {}) {
  LabelRequirement r;
  r.key = std::move(key);
  r.op = op;
  r.values = std::move(values);
  return r;
}

FieldRequirement field(std::string key, bool negated, std::string value) {
  FieldRequirement f;
  f.key = std::move(key);
  f.negated = negated;
  f.value = std::move(value);
  return f;
}

class SelectorTest : public testing::LeakCheckedTest {
 protected:
  void SetUp() override {
    LeakCheckedTest::SetUp();
    pod_ = make_item("/registry/pods/ns/web-1", "{}", 3,
                     {{"app", "web"},
                      {"tier", "frontend"},
                      {"replicas", "3"},
                      {"weight", "-7"},
                      {"big", "9223372036854775807"},
                      {"notnum", "3a"},
                      {"empty", ""}},
                     {{"metadata.name", "web-1"}, {"status.phase", "Running"}, {"spec.empty", ""}});
  }
  void TearDown() override {
    pod_ = ItemRef();
    LeakCheckedTest::TearDown();
  }
  bool label(std::string key, LabelOp op, std::vector<std::string> values = {}) const {
    return Selector({req(std::move(key), op, std::move(values))}, {})(*pod_);
  }
  bool fieldsel(std::string key, bool negated, std::string value) const {
    return Selector({}, {field(std::move(key), negated, std::move(value))})(*pod_);
  }

  ItemRef pod_;
};

TEST_F(SelectorTest, EqualsNeedsThePresentLabelWithThatValue) {
  EXPECT_TRUE(label("app", LabelOp::Equals, {"web"}));
  EXPECT_FALSE(label("app", LabelOp::Equals, {"db"}));
  EXPECT_FALSE(label("app", LabelOp::Equals, {"we"}));
  EXPECT_FALSE(label("missing", LabelOp::Equals, {"web"}));
  EXPECT_FALSE(label("missing", LabelOp::Equals, {""}));
  EXPECT_TRUE(label("empty", LabelOp::Equals, {""}));
}

TEST_F(SelectorTest, NotEqualsAlsoMatchesAbsentLabels) {
  EXPECT_TRUE(label("app", LabelOp::NotEquals, {"db"}));
  EXPECT_FALSE(label("app", LabelOp::NotEquals, {"web"}));
  EXPECT_TRUE(label("missing", LabelOp::NotEquals, {"web"}));
  EXPECT_FALSE(label("empty", LabelOp::NotEquals, {""}));
}

TEST_F(SelectorTest, InNeedsThePresentLabelInTheSet) {
  EXPECT_TRUE(label("app", LabelOp::In, {"db", "web"}));
  EXPECT_TRUE(label("app", LabelOp::In, {"web"}));
  EXPECT_FALSE(label("app", LabelOp::In, {"db", "cache"}));
  EXPECT_FALSE(label("missing", LabelOp::In, {"web"}));
}

TEST_F(SelectorTest, NotInAlsoMatchesAbsentLabels) {
  EXPECT_TRUE(label("app", LabelOp::NotIn, {"db"}));
  EXPECT_FALSE(label("app", LabelOp::NotIn, {"db", "web"}));
  EXPECT_TRUE(label("missing", LabelOp::NotIn, {"web"}));
}

TEST_F(SelectorTest, ExistsAndDoesNotExistTestPresenceOnly) {
  EXPECT_TRUE(label("app", LabelOp::Exists));
  EXPECT_TRUE(label("empty", LabelOp::Exists)) << "present with an empty value";
  EXPECT_FALSE(label("missing", LabelOp::Exists));
  EXPECT_FALSE(label("metadata.name", LabelOp::Exists)) << "a field is not a label";
  EXPECT_TRUE(label("missing", LabelOp::DoesNotExist));
  EXPECT_FALSE(label("app", LabelOp::DoesNotExist));
  EXPECT_FALSE(label("empty", LabelOp::DoesNotExist));
}

TEST_F(SelectorTest, GreaterAndLessThanCompareIntegers) {
  EXPECT_TRUE(label("replicas", LabelOp::GreaterThan, {"2"}));
  EXPECT_FALSE(label("replicas", LabelOp::GreaterThan, {"3"}));
  EXPECT_TRUE(label("replicas", LabelOp::GreaterThan, {"-1"}));
  EXPECT_TRUE(label("replicas", LabelOp::LessThan, {"4"}));
  EXPECT_FALSE(label("replicas", LabelOp::LessThan, {"3"}));
  EXPECT_TRUE(label("weight", LabelOp::GreaterThan, {"-8"}));
  EXPECT_TRUE(label("weight", LabelOp::LessThan, {"-6"}));
  EXPECT_FALSE(label("weight", LabelOp::LessThan, {"-7"}));
  EXPECT_TRUE(label("big", LabelOp::GreaterThan, {"9223372036854775806"}));
  EXPECT_FALSE(label("big", LabelOp::GreaterThan, {"9223372036854775807"}));
}

TEST_F(SelectorTest, GreaterAndLessThanNeverMatchAbsentOrNonIntegerLabels) {
  for (const LabelOp op : {LabelOp::GreaterThan, LabelOp::LessThan}) {
    EXPECT_FALSE(label("missing", op, {"0"}));
    EXPECT_FALSE(label("notnum", op, {"0"}));
    EXPECT_FALSE(label("notnum", op, {"100"}));
    EXPECT_FALSE(label("app", op, {"0"}));
    EXPECT_FALSE(label("empty", op, {"0"}));
  }
  EXPECT_FALSE(label("missing", LabelOp::LessThan, {"9223372036854775807"}));
}

TEST_F(SelectorTest, FieldsCompareExactlyWithAbsentReadingAsEmpty) {
  EXPECT_TRUE(fieldsel("metadata.name", false, "web-1"));
  EXPECT_FALSE(fieldsel("metadata.name", false, "web-2"));
  EXPECT_TRUE(fieldsel("metadata.name", true, "web-2"));
  EXPECT_FALSE(fieldsel("status.phase", true, "Running"));
  EXPECT_TRUE(fieldsel("spec.nodeName", false, "")) << "absent reads as empty";
  EXPECT_FALSE(fieldsel("spec.nodeName", true, ""));
  EXPECT_FALSE(fieldsel("spec.nodeName", false, "node-1"));
  EXPECT_TRUE(fieldsel("spec.nodeName", true, "node-1"));
  EXPECT_TRUE(fieldsel("spec.empty", false, ""));
  EXPECT_FALSE(fieldsel("app", false, "web")) << "a label is not a field";
  // The field grammar allows an empty name ("=x"): like any field an object lacks, it reads "".
  EXPECT_TRUE(fieldsel("", false, ""));
  EXPECT_FALSE(fieldsel("", false, "x"));
  EXPECT_TRUE(fieldsel("", true, "x"));
}

// Short and long strings take different compare paths (item.hpp, same_bytes): around the
// switch and at Kubernetes' longest label value (63), a difference in any byte counts.
TEST_F(SelectorTest, KeysAndValuesOfEveryLengthCompareEveryByte) {
  for (const std::size_t len : {1u, 7u, 8u, 16u, 31u, 32u, 33u, 63u, 200u}) {
    const std::string key = "k" + std::string(len - 1, 'a');
    const std::string value(len, 'v');
    const ItemRef item = make_item("/registry/pods/ns/p", "{}", 1, {{key, value}}, {{key, value}});
    EXPECT_TRUE(Selector({req(key, LabelOp::Equals, {value})}, {})(*item)) << len;
    EXPECT_TRUE(Selector({}, {field(key, false, value)})(*item)) << len;
    for (const std::size_t at : {std::size_t{0}, len / 2, len - 1}) {
      std::string other_value = value, other_key = key;
      other_value[at] = 'w';
      other_key[at] = 'b';
      EXPECT_FALSE(Selector({req(key, LabelOp::Equals, {other_value})}, {})(*item)) << len << " at " << at;
      EXPECT_TRUE(Selector({req(key, LabelOp::NotEquals, {other_value})}, {})(*item)) << len << " at " << at;
      EXPECT_FALSE(Selector({req(other_key, LabelOp::Exists)}, {})(*item)) << len << " at " << at;
      EXPECT_FALSE(Selector({}, {field(key, false, other_value)})(*item)) << len << " at " << at;
      EXPECT_TRUE(Selector({}, {field(other_key, false, "")})(*item)) << len << " at " << at;
    }
    // One byte longer or shorter is another string.
    EXPECT_FALSE(Selector({req(key, LabelOp::Equals, {value + "v"})}, {})(*item)) << len;
    EXPECT_FALSE(Selector({req(key, LabelOp::Equals, {value.substr(1)})}, {})(*item)) << len;
  }
}

TEST_F(SelectorTest, EveryRequirementMustHold) {
  const Selector both({req("app", LabelOp::Equals, {"web"}), req("tier", LabelOp::In, {"frontend", "edge"})},
                      {field("status.phase", false, "Running")});
  EXPECT_TRUE(both(*pod_));
  const Selector one_label_fails({req("app", LabelOp::Equals, {"web"}), req("tier", LabelOp::Equals, {"backend"})}, {});
  EXPECT_FALSE(one_label_fails(*pod_));
  const Selector field_fails({req("app", LabelOp::Equals, {"web"})}, {field("status.phase", false, "Pending")});
  EXPECT_FALSE(field_fails(*pod_));
  const Selector second_field_fails({}, {field("metadata.name", false, "web-1"), field("status.phase", true, "Running")});
  EXPECT_FALSE(second_field_fails(*pod_));
}

TEST_F(SelectorTest, EmptySelectorMatchesEverything) {
  const Selector all;
  EXPECT_TRUE(all.empty());
  EXPECT_TRUE(all(*pod_));
  ItemRef bare = make_item("k", "v");
  EXPECT_TRUE(all(*bare));
  EXPECT_FALSE(Selector({req("app", LabelOp::Exists)}, {}).empty());
  EXPECT_FALSE(Selector({}, {field("f", false, "")}).empty());
}

TEST_F(SelectorTest, MatchesWorksWithAnyLookup) {
  const Selector sel({req("app", LabelOp::NotIn, {"db"})}, {field("f", false, "x")});
  auto labels = [](std::string_view k) -> std::optional<std::string_view> {
    return k == "app" ? std::optional<std::string_view>("web") : std::nullopt;
  };
  auto fields_x = [](std::string_view k) -> std::optional<std::string_view> {
    return k == "f" ? std::optional<std::string_view>("x") : std::nullopt;
  };
  auto no_fields = [](std::string_view) -> std::optional<std::string_view> { return std::nullopt; };
  EXPECT_TRUE(sel.matches(labels, fields_x));
  EXPECT_FALSE(sel.matches(labels, no_fields));
}

TEST_F(SelectorTest, SetValuesAreSortedAndDeduplicated) {
  const Selector sel({req("app", LabelOp::In, {"web", "db", "web", "api"}), req("n", LabelOp::GreaterThan, {"-12"})}, {});
  ASSERT_EQ(sel.labels().size(), 2u);
  EXPECT_EQ(sel.labels()[0].values, (std::vector<std::string>{"api", "db", "web"}));
  EXPECT_EQ(sel.labels()[1].number, -12);
  EXPECT_TRUE(sel.labels()[0].op == LabelOp::In);
  EXPECT_TRUE(Selector({req("app", LabelOp::In, {"web", "db", "web"})}, {})(*pod_));
}

TEST(SelectorValidationTest, ArityIsCheckedPerOperator) {
  using V = std::vector<std::string>;
  auto build = [](LabelOp op, V values) { return Selector({req("k", op, std::move(values))}, {}); };
  EXPECT_THROW(build(LabelOp::Equals, {}), std::invalid_argument);
  EXPECT_THROW(build(LabelOp::Equals, V{"a", "b"}), std::invalid_argument);
  EXPECT_THROW(build(LabelOp::NotEquals, {}), std::invalid_argument);
  EXPECT_THROW(build(LabelOp::NotEquals, V{"a", "b"}), std::invalid_argument);
  EXPECT_THROW(build(LabelOp::In, {}), std::invalid_argument);
  EXPECT_THROW(build(LabelOp::NotIn, {}), std::invalid_argument);
  EXPECT_THROW(build(LabelOp::Exists, V{"a"}), std::invalid_argument);
  EXPECT_THROW(build(LabelOp::DoesNotExist, V{"a"}), std::invalid_argument);
  EXPECT_THROW(build(LabelOp::GreaterThan, {}), std::invalid_argument);
  EXPECT_THROW(build(LabelOp::LessThan, V{"1", "2"}), std::invalid_argument);
  EXPECT_NO_THROW(build(LabelOp::Equals, V{"a"}));
  EXPECT_NO_THROW(build(LabelOp::In, V{"a", "b"}));
  EXPECT_NO_THROW(build(LabelOp::Exists, {}));
  EXPECT_NO_THROW(build(LabelOp::GreaterThan, V{"5"}));
}

TEST(SelectorValidationTest, GreaterAndLessThanNeedAnIntegerBound) {
  for (const LabelOp op : {LabelOp::GreaterThan, LabelOp::LessThan}) {
    for (const char* bad : {"abc", "1.5", "", " 1", "1 ", "0x10", "99999999999999999999", "1e3"})
      EXPECT_THROW(Selector({req("k", op, {bad})}, {}), std::invalid_argument) << "bound '" << bad << "'";
    EXPECT_NO_THROW(Selector({req("k", op, {"-9223372036854775808"})}, {}));
  }
}

TEST(SelectorValidationTest, LabelKeysMustNotBeEmpty) {
  EXPECT_THROW(Selector({req("", LabelOp::Exists)}, {}), std::invalid_argument);
}

TEST(SelectorValidationTest, ParseLabelOpKnowsEveryOperator) {
  EXPECT_TRUE(parse_label_op("=") == LabelOp::Equals);
  EXPECT_TRUE(parse_label_op("!=") == LabelOp::NotEquals);
  EXPECT_TRUE(parse_label_op("in") == LabelOp::In);
  EXPECT_TRUE(parse_label_op("notin") == LabelOp::NotIn);
  EXPECT_TRUE(parse_label_op("exists") == LabelOp::Exists);
  EXPECT_TRUE(parse_label_op("!") == LabelOp::DoesNotExist);
  EXPECT_TRUE(parse_label_op("gt") == LabelOp::GreaterThan);
  EXPECT_TRUE(parse_label_op("lt") == LabelOp::LessThan);
  // Canonical spellings only: the Python parser normalizes "==" to "=".
  for (const char* bad : {"", "==", "IN", "=~", "<", "not in", "!!"})
    EXPECT_THROW(parse_label_op(bad), std::invalid_argument) << "operator '" << bad << "'";
}

TEST(SelectorValidationTest, ParseInt64AcceptsExactlyDecimalIntegers) {
  EXPECT_EQ(parse_int64("0"), std::optional<std::int64_t>(0));
  EXPECT_EQ(parse_int64("-42"), std::optional<std::int64_t>(-42));
  EXPECT_EQ(parse_int64("007"), std::optional<std::int64_t>(7));
  EXPECT_EQ(parse_int64("9223372036854775807"), std::optional<std::int64_t>(INT64_MAX));
  EXPECT_EQ(parse_int64("-9223372036854775808"), std::optional<std::int64_t>(INT64_MIN));
  for (const char* bad : {"", "-", "9223372036854775808", "12x", "x12", " 1", "1.0"})
    EXPECT_FALSE(parse_int64(bad).has_value()) << "'" << bad << "'";
}

}  // namespace
}  // namespace watchcache
