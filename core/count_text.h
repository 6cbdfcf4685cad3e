// A count as users type it in a flag (a step number, a rank): a non-negative decimal number and
// nothing else ("12"; not "", "-1", "+3", "1e3", "12 ", "0x10").
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace partrain {

std::optional<int64_t> parse_count(std::string_view text);

}  // namespace partrain
