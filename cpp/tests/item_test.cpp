// Guards Item (item.hpp): the single-allocation layout and its accessors, label/field
// normalization (sorted, last duplicate wins), exact nbytes(), argument validation, and the
// ItemRef ownership rules, with the engine's live counters back at their start afterwards.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "test_support.hpp"
#include "watchcache/item.hpp"

namespace watchcache {
namespace {

using testing::make_item;

class ItemTest : public testing::LeakCheckedTest {};

TEST_F(ItemTest, CreateStoresKeyValueAndRevision) {
  ItemRef it = make_item("/registry/pods/ns/a", "{\"kind\":\"Pod\"}", 42);
  EXPECT_EQ(it->key(), "/registry/pods/ns/a");
  EXPECT_EQ(it->value(), "{\"kind\":\"Pod\"}");
  EXPECT_EQ(it->mod_revision(), 42);
  EXPECT_EQ(it->label_count(), 0u);
  EXPECT_EQ(it->field_count(), 0u);
  EXPECT_EQ(it->refcount(), 1u);
  EXPECT_EQ(live_items(), 1);
}

TEST_F(ItemTest, KeysAndValuesMayHoldAnyBytes) {
  const std::string key("a\0b\xff", 4);
  const std::string value("\0\0\xff\x01", 4);
  ItemRef it = make_item(key, value, 0);
  EXPECT_EQ(it->key(), key);
  EXPECT_EQ(it->value(), value);
  EXPECT_EQ(it->mod_revision(), 0);
  ItemRef empty_value = make_item("k", "", 1);
  EXPECT_TRUE(empty_value->value().empty());
}

TEST_F(ItemTest, LabelsAndFieldsAreSortedByKey) {
  ItemRef it = make_item("k", "v", 1, {{"tier", "web"}, {"app", "x"}, {"env", "prod"}},
                         {{"spec.nodeName", "n1"}, {"metadata.namespace", "ns"}});
  ASSERT_EQ(it->label_count(), 3u);
  EXPECT_EQ(it->label(0), StringPair("app", "x"));
  EXPECT_EQ(it->label(1), StringPair("env", "prod"));
  EXPECT_EQ(it->label(2), StringPair("tier", "web"));
  ASSERT_EQ(it->field_count(), 2u);
  EXPECT_EQ(it->field(0), StringPair("metadata.namespace", "ns"));
  EXPECT_EQ(it->field(1), StringPair("spec.nodeName", "n1"));
}

TEST_F(ItemTest, DuplicateLabelOrFieldKeepsTheLastValue) {
  ItemRef it = make_item("k", "v", 1, {{"b", "1"}, {"a", "first"}, {"b", "2"}, {"a", "second"}, {"b", "3"}},
                         {{"f", "x"}, {"f", "y"}});
  ASSERT_EQ(it->label_count(), 2u);
  EXPECT_EQ(it->label(0), StringPair("a", "second"));
  EXPECT_EQ(it->label(1), StringPair("b", "3"));
  ASSERT_EQ(it->field_count(), 1u);
  EXPECT_EQ(it->field(0), StringPair("f", "y"));
}

TEST_F(ItemTest, FindLabelAndFieldLookUpTheirOwnTables) {
  ItemRef it = make_item("k", "v", 1, {{"app", "web"}, {"empty", ""}, {"shared", "label"}},
                         {{"shared", "field"}, {"status.phase", "Running"}});
  EXPECT_EQ(it->find_label("app"), std::optional<std::string_view>("web"));
  // Present with an empty value is not absent.
  ASSERT_TRUE(it->find_label("empty").has_value());
  EXPECT_EQ(*it->find_label("empty"), "");
  EXPECT_FALSE(it->find_label("missing").has_value());
  EXPECT_FALSE(it->find_label("ap").has_value());
  EXPECT_FALSE(it->find_label("appx").has_value());
  EXPECT_FALSE(it->find_label("status.phase").has_value()) << "a field is not a label";
  EXPECT_EQ(it->find_label("shared"), std::optional<std::string_view>("label"));
  EXPECT_EQ(it->find_field("shared"), std::optional<std::string_view>("field"));
  EXPECT_EQ(it->find_field("status.phase"), std::optional<std::string_view>("Running"));
  EXPECT_FALSE(it->find_field("app").has_value()) << "a label is not a field";

  ItemRef bare = make_item("k", "v", 1);
  EXPECT_FALSE(bare->find_label("app").has_value());
  EXPECT_FALSE(bare->find_field("app").has_value());
}

TEST_F(ItemTest, NbytesIsHeaderPlusLengthTablePlusPayload) {
  ItemRef bare = make_item("key", "value", 1);
  EXPECT_EQ(bare->nbytes(), sizeof(Item) + 3 + 5);

  // Two labels after deduplication, one field: 3 pairs, 2 lengths of 4 bytes each.
  ItemRef full = make_item("key", "value", 1, {{"a", "1"}, {"bb", "22"}, {"a", "xyz"}}, {{"f", "vvvv"}});
  const std::size_t payload = 3 + 5 + (1 + 3) + (2 + 2) + (1 + 4);
  EXPECT_EQ(full->nbytes(), sizeof(Item) + 3 * 2 * sizeof(std::uint32_t) + payload);

  EXPECT_EQ(live_bytes(), static_cast<std::int64_t>(bare->nbytes() + full->nbytes()));
}

TEST_F(ItemTest, EmptyKeyIsRejected) {
  EXPECT_THROW(Item::create("", "v", 1), std::invalid_argument);
  EXPECT_EQ(live_items(), 0);
  EXPECT_EQ(live_bytes(), 0);
}

TEST_F(ItemTest, NegativeRevisionIsRejected) {
  EXPECT_THROW(Item::create("k", "v", -1), std::invalid_argument);
  EXPECT_THROW(Item::create("k", "v", INT64_MIN), std::invalid_argument);
  EXPECT_EQ(live_items(), 0);
  ItemRef zero = make_item("k", "v", 0);  // zero is allowed
  EXPECT_EQ(zero->mod_revision(), 0);
}

TEST_F(ItemTest, ItemRefAdoptTakesOverTheCreatorsReference) {
  Item* raw = Item::create("k", "v", 1);
  EXPECT_EQ(raw->refcount(), 1u);
  {
    ItemRef r = ItemRef::adopt(raw);
    EXPECT_EQ(r.get(), raw);
    EXPECT_EQ(raw->refcount(), 1u);
    EXPECT_EQ(live_items(), 1);
  }
  EXPECT_EQ(live_items(), 0);
}

TEST_F(ItemTest, ItemRefShareCopyMoveAndAssignCountReferences) {
  ItemRef a = make_item("k", "v", 1);
  const Item* raw = a.get();
  {
    ItemRef shared = ItemRef::share(raw);
    EXPECT_EQ(raw->refcount(), 2u);
    ItemRef copy = shared;  // NOLINT(performance-unnecessary-copy-initialization)
    EXPECT_EQ(raw->refcount(), 3u);
    ItemRef moved = std::move(copy);
    EXPECT_EQ(raw->refcount(), 3u);
    EXPECT_FALSE(copy);  // NOLINT(bugprone-use-after-move): a moved-from ref is empty
    EXPECT_EQ(moved.get(), raw);

    ItemRef other = make_item("other", "v", 1);
    EXPECT_EQ(live_items(), 2);
    other = moved;  // drops "other", shares raw
    EXPECT_EQ(live_items(), 1);
    EXPECT_EQ(raw->refcount(), 4u);
    other = std::move(moved);
    EXPECT_EQ(raw->refcount(), 3u);
    other = other;  // self-assignment keeps the reference
    EXPECT_EQ(raw->refcount(), 3u);
    ASSERT_TRUE(other);
    EXPECT_EQ(other->key(), "k");
  }
  EXPECT_EQ(raw->refcount(), 1u);
  ItemRef none = ItemRef::share(nullptr);
  EXPECT_FALSE(none);
  EXPECT_EQ(none.get(), nullptr);
}

TEST_F(ItemTest, ReleaseOwnershipHandsTheReferenceOver) {
  ItemRef a = make_item("k", "v", 1);
  Item* raw = a.release_ownership();
  EXPECT_FALSE(a);
  EXPECT_EQ(raw->refcount(), 1u);
  EXPECT_EQ(live_items(), 1);
  raw->release();
  EXPECT_EQ(live_items(), 0);
  EXPECT_EQ(live_bytes(), 0);
}

TEST_F(ItemTest, ManyLabelsStayAddressable) {
  std::vector<std::string> storage;
  storage.reserve(400);
  std::vector<StringPair> labels;
  for (int i = 199; i >= 0; --i) {
    storage.push_back("label-" + std::to_string(1000 + i));
    storage.push_back(std::string(static_cast<std::size_t>(i % 7), 'v') + std::to_string(i));
    labels.emplace_back(storage[storage.size() - 2], storage.back());
  }
  ItemRef it = make_item("k", "v", 1, labels);
  ASSERT_EQ(it->label_count(), 200u);
  for (std::size_t i = 0; i < 200; ++i) {
    const int n = static_cast<int>(i);
    const std::string key = "label-" + std::to_string(1000 + n);
    const std::string value = std::string(static_cast<std::size_t>(n % 7), 'v') + std::to_string(n);
    EXPECT_EQ(it->label(i), StringPair(key, value));
    EXPECT_EQ(it->find_label(key), std::optional<std::string_view>(value));
  }
}

}  // namespace
}  // namespace watchcache
