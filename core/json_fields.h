// Reading the fields of a JSON object one by one, each with its type checked, so a file or a
// config that is not what partrain wrote gets an error naming the field ("model.json: field
// 'heads' must be a positive integer (got 0)") instead of an exception or a silent default.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace partrain {

class JsonFields {
 public:
  // The `least` of a field whose range is a rule checked elsewhere: any integer is read.
  static constexpr int64_t kAnyInteger = std::numeric_limits<int64_t>::min();

  // `origin` starts every message (a file, PARTRAIN_WORKLOAD_CONFIG); `code` is the errors'
  // (kUnreadable for a file, kInvalidArgument for a config). `object` must outlive the reader.
  JsonFields(const nlohmann::json& object, std::string origin, StatusCode code,
             std::string prefix = "");

  // Each reads `field` into `out`. An absent field is an error when `required`, else `out` keeps
  // its value; a present one of the wrong type or range always is.
  // `most`: a bound past which the number is a typo or damage, not a value ("must be at most").
  Status integer(std::string_view field, int64_t& out, int64_t least = 1, bool required = true,
                 int64_t most = std::numeric_limits<int64_t>::max());
  Status integer(std::string_view field, int& out, int64_t least = 1, bool required = true);
  Status integer(std::string_view field, uint64_t& out, bool required = true);
  Status integers(std::string_view field, std::vector<int64_t>& out, int64_t least = 1,
                  bool required = true);
  Status positive_number(std::string_view field, double& out, bool required = true);
  // A probability that can be 0 but not 1: [0, 1).
  Status fraction(std::string_view field, double& out, bool required = false);
  Status boolean(std::string_view field, bool& out, bool required = false);
  Status string(std::string_view field, std::string& out, bool required = false);
  Status strings(std::string_view field, std::vector<std::string>& out, bool required = false);
  // A name `parse` turns into an enum value; `allowed` lists the names for the message.
  template <typename Enum, typename Parse>
  Status choice(std::string_view field, Enum& out, Parse parse, std::string_view allowed,
                bool required = false) {
    std::string text;
    if (!has(field)) return string(field, text, required);  // an error only when required
    RETURN_IF_ERROR(string(field, text));
    auto parsed = parse(text);
    if (!parsed) {
      return error("field '{}' must be one of {} (got \"{}\")", path(field), allowed, text);
    }
    out = *parsed;
    return Status::ok();
  }
  // The object in `field`, read by a reader of its own whose messages say "field 'layout.tp'".
  StatusOr<JsonFields> object(std::string_view field, bool required = true);

  bool has(std::string_view field) const;
  // A field no call above has read: an error naming it (for inputs that must be exactly ours).
  Status no_unknown_fields() const;

 private:
  std::string path(std::string_view field) const { return prefix_ + std::string(field); }
  // The field, or nullptr when it is absent (after recording that it was read).
  const nlohmann::json* find(std::string_view field);
  // The field into `out` when `accept` takes it, else an error saying it must be `what`.
  template <typename T, typename Accept>
  Status read(std::string_view field, T& out, bool required, Accept accept, std::string_view what);
  template <typename... Args>
  Status error(fmt::format_string<Args...> format, Args&&... args) const {
    return Status(code_, origin_ + ": " + fmt::format(format, std::forward<Args>(args)...));
  }

  const nlohmann::json* object_;
  std::string origin_;
  StatusCode code_;
  std::string prefix_;  // "layout." for a nested object
  std::set<std::string, std::less<>> seen_;
};

}  // namespace partrain
