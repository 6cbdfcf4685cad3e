#include "core/json_fields.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

namespace partrain {
namespace {

// 3e9 is a float in JSON and 2^63 an unsigned: neither is an int64.
bool is_integer_from(const nlohmann::json& value, int64_t least) {
  if (!value.is_number_integer()) return false;
  if (value.is_number_unsigned()) {
    return value.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) &&
           value.get<int64_t>() >= least;
  }
  return value.get<int64_t>() >= least;
}

// "a positive integer", "an integer", "an integer of at least 0".
std::string integers_from(int64_t least) {
  if (least == 1) return "a positive integer";
  if (least == JsonFields::kAnyInteger) return "an integer";
  return fmt::format("an integer of at least {}", least);
}

// The array's items when `accept` takes each; nullopt for anything else.
template <typename T, typename Accept>
std::optional<std::vector<T>> items_of(const nlohmann::json& value, Accept accept) {
  if (!value.is_array()) return std::nullopt;
  std::vector<T> items;
  for (const nlohmann::json& item : value) {
    if (!accept(item)) return std::nullopt;
    items.push_back(item.get<T>());
  }
  return items;
}

}  // namespace

JsonFields::JsonFields(const nlohmann::json& object, std::string origin, StatusCode code,
                       std::string prefix)
    : object_(&object), origin_(std::move(origin)), code_(code), prefix_(std::move(prefix)) {}

bool JsonFields::has(std::string_view field) const { return object_->contains(field); }

const nlohmann::json* JsonFields::find(std::string_view field) {
  seen_.insert(std::string(field));
  auto it = object_->find(field);
  return it == object_->end() ? nullptr : &*it;
}

template <typename T, typename Accept>
Status JsonFields::read(std::string_view field, T& out, bool required, Accept accept,
                        std::string_view what) {
  const nlohmann::json* value = find(field);
  if (value == nullptr) {
    if (!required) return Status::ok();
    return error("missing field '{}'", path(field));
  }
  if (!accept(*value)) return error("field '{}' must be {} (got {})", path(field), what, value->dump());
  out = value->get<T>();
  return Status::ok();
}

Status JsonFields::integer(std::string_view field, int64_t& out, int64_t least, bool required,
                           int64_t most) {
  int64_t value = out;
  RETURN_IF_ERROR(read(
      field, value, required, [least](const auto& v) { return is_integer_from(v, least); },
      integers_from(least)));
  if (value > most) {
    return error("field '{}' must be at most {} (got {})", path(field), most, value);
  }
  out = value;
  return Status::ok();
}

Status JsonFields::integer(std::string_view field, int& out, int64_t least, bool required) {
  int64_t wide = out;
  RETURN_IF_ERROR(integer(field, wide, least, required));
  const int64_t from = std::max<int64_t>(least, std::numeric_limits<int>::min());
  if (wide < from || wide > std::numeric_limits<int>::max()) {
    return error("field '{}' must be an integer from {} to {} (got {})", path(field), from,
                 std::numeric_limits<int>::max(), wide);
  }
  out = static_cast<int>(wide);
  return Status::ok();
}

Status JsonFields::integer(std::string_view field, uint64_t& out, bool required) {
  return read(field, out, required, [](const auto& v) { return v.is_number_unsigned(); },
              "an integer of at least 0");
}

Status JsonFields::integers(std::string_view field, std::vector<int64_t>& out, int64_t least,
                            bool required) {
  auto accept = [least](const nlohmann::json& item) { return is_integer_from(item, least); };
  return read(field, out, required,
              [&](const auto& v) { return items_of<int64_t>(v, accept).has_value(); },
              least == kAnyInteger ? std::string("a list of integers")
                                   : fmt::format("a list of integers of at least {}", least));
}

Status JsonFields::positive_number(std::string_view field, double& out, bool required) {
  return read(field, out, required,
              [](const auto& v) {
                return v.is_number() && v.template get<double>() > 0 &&
                       std::isfinite(v.template get<double>());
              },
              "a positive number");
}

Status JsonFields::fraction(std::string_view field, double& out, bool required) {
  return read(
      field, out, required,
      [](const auto& v) {
        return v.is_number() && v.template get<double>() >= 0 && v.template get<double>() < 1;
      },
      "a number in [0, 1)");
}

Status JsonFields::boolean(std::string_view field, bool& out, bool required) {
  return read(field, out, required, [](const auto& v) { return v.is_boolean(); }, "true or false");
}

Status JsonFields::string(std::string_view field, std::string& out, bool required) {
  return read(field, out, required, [](const auto& v) { return v.is_string(); }, "a string");
}

Status JsonFields::strings(std::string_view field, std::vector<std::string>& out, bool required) {
  auto accept = [](const nlohmann::json& item) { return item.is_string(); };
  return read(field, out, required,
              [&](const auto& v) { return items_of<std::string>(v, accept).has_value(); },
              "a list of strings");
}

StatusOr<JsonFields> JsonFields::object(std::string_view field, bool required) {
  static const nlohmann::json kEmpty = nlohmann::json::object();
  const nlohmann::json* value = find(field);
  if (value == nullptr && required) return error("missing field '{}'", path(field));
  if (value != nullptr && !value->is_object()) {
    return error("field '{}' must be an object {{...}} (got {})", path(field), value->dump());
  }
  return JsonFields(value != nullptr ? *value : kEmpty, origin_, code_, path(field) + ".");
}

Status JsonFields::no_unknown_fields() const {
  for (const auto& [key, value] : object_->items()) {
    if (!seen_.contains(key)) return error("unknown field '{}'", path(key));
  }
  return Status::ok();
}

}  // namespace partrain
