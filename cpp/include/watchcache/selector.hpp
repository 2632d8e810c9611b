// Selector: a compiled Kubernetes label + field selector, evaluated against an Item's
// stored labels and fields during scans (no JSON parsing, no Python, thread-safe).
//
// Semantics (apimachinery labels/fields): every requirement must hold. For labels,
// `!=` and `notin` also match items without the key; `exists`/`!` test presence; `gt`/`lt`
// need the key present with an integer value. For fields, an absent field reads as "".
// Parsing selector strings is the Python layer's job (selectors.py); this is the matcher.
// Cost: O(requirements × labels) per item, labels and fields being short sorted tables.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "watchcache/item.hpp"

namespace watchcache {

enum class LabelOp : std::uint8_t { Equals, NotEquals, In, NotIn, Exists, DoesNotExist, GreaterThan, LessThan };

struct LabelRequirement {
  std::string key;
  LabelOp op;
  std::vector<std::string> values;  // sorted; one value for Equals/NotEquals, none for (Does)Exist(s)
  std::int64_t number = 0;          // the bound for GreaterThan/LessThan
};

struct FieldRequirement {
  std::string key;
  bool negated;  // `!=` rather than `=`
  std::string value;
};

inline std::optional<std::int64_t> parse_int64(std::string_view s) noexcept {
  std::int64_t v = 0;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, v);
  if (ec != std::errc() || ptr != end || s.empty()) return std::nullopt;
  return v;
}

inline LabelOp parse_label_op(std::string_view op) {
  if (op == "=") return LabelOp::Equals;  // the parser normalizes "==" to "="
  if (op == "!=") return LabelOp::NotEquals;
  if (op == "in") return LabelOp::In;
  if (op == "notin") return LabelOp::NotIn;
  if (op == "exists") return LabelOp::Exists;
  if (op == "!") return LabelOp::DoesNotExist;
  if (op == "gt") return LabelOp::GreaterThan;
  if (op == "lt") return LabelOp::LessThan;
  throw std::invalid_argument("unknown label selector operator '" + std::string(op) + "'");
}

class Selector {
 public:
  Selector() = default;

  // Validates arity and values; throws std::invalid_argument with the offending requirement.
  Selector(std::vector<LabelRequirement> labels, std::vector<FieldRequirement> fields)
      : labels_(std::move(labels)), fields_(std::move(fields)) {
    for (auto& r : labels_) {
      if (r.key.empty()) throw std::invalid_argument("label selector key must not be empty");
      const std::size_t n = r.values.size();
      switch (r.op) {
        case LabelOp::Equals:
        case LabelOp::NotEquals:
          if (n != 1) throw std::invalid_argument("label requirement '" + r.key + "': operator needs exactly one value");
          break;
        case LabelOp::In:
        case LabelOp::NotIn:
          if (n == 0) throw std::invalid_argument("label requirement '" + r.key + "': set operator needs at least one value");
          break;
        case LabelOp::Exists:
        case LabelOp::DoesNotExist:
          if (n != 0) throw std::invalid_argument("label requirement '" + r.key + "': existence operator takes no values");
          break;
        case LabelOp::GreaterThan:
        case LabelOp::LessThan: {
          if (n != 1) throw std::invalid_argument("label requirement '" + r.key + "': gt/lt need exactly one value");
          auto v = parse_int64(r.values[0]);
          if (!v) throw std::invalid_argument("label requirement '" + r.key + "': gt/lt value '" + r.values[0] + "' is not an integer");
          r.number = *v;
          break;
        }
      }
      std::sort(r.values.begin(), r.values.end());
      r.values.erase(std::unique(r.values.begin(), r.values.end()), r.values.end());
    }
    // An empty field name is valid (Kubernetes' field grammar allows "=x"): no object has
    // such a field, so it reads as "" like any absent one.
  }

  bool empty() const noexcept { return labels_.empty() && fields_.empty(); }
  const std::vector<LabelRequirement>& labels() const noexcept { return labels_; }
  const std::vector<FieldRequirement>& fields() const noexcept { return fields_; }

  // `label(key)` and `field(key)` return std::optional<std::string_view>.
  template <class LabelLookup, class FieldLookup>
  bool matches(const LabelLookup& label, const FieldLookup& field) const {
    for (const auto& r : labels_) {
      const std::optional<std::string_view> v = label(r.key);
      bool ok = false;
      switch (r.op) {
        case LabelOp::Equals: ok = v && detail::same_bytes(*v, r.values[0]); break;
        case LabelOp::NotEquals: ok = !v || !detail::same_bytes(*v, r.values[0]); break;
        case LabelOp::In: ok = v && contains(r.values, *v); break;
        case LabelOp::NotIn: ok = !v || !contains(r.values, *v); break;
        case LabelOp::Exists: ok = v.has_value(); break;
        case LabelOp::DoesNotExist: ok = !v.has_value(); break;
        case LabelOp::GreaterThan:
        case LabelOp::LessThan: {
          if (!v) break;
          const auto n = parse_int64(*v);
          ok = n && (r.op == LabelOp::GreaterThan ? *n > r.number : *n < r.number);
          break;
        }
      }
      if (!ok) return false;
    }
    for (const auto& f : fields_) {
      const std::string_view v = field(f.key).value_or(std::string_view{});
      if (detail::same_bytes(v, f.value) == f.negated) return false;
    }
    return true;
  }

  bool operator()(const Item& item) const {
    return matches([&item](std::string_view k) { return item.find_label(k); },
                   [&item](std::string_view k) { return item.find_field(k); });
  }

 private:
  static bool contains(const std::vector<std::string>& sorted, std::string_view v) {
    return std::binary_search(sorted.begin(), sorted.end(), v,
                              [](std::string_view a, std::string_view b) { return a < b; });
  }

  std::vector<LabelRequirement> labels_;
  std::vector<FieldRequirement> fields_;
};

}  // namespace watchcache
