// A small input file the user names (a --config TOML, a model, GPU or cluster JSON), read whole
// with a bound: a device that never ends (/dev/zero) or a huge file is refused naming it, instead
// of being read until memory runs out. A pipe is read as `cat` reads one, so process substitution
// (--config <(...)) works; a named FIFO waits for its writer, as `cat` does.
#pragma once

#include <cstddef>
#include <filesystem>
#include <istream>
#include <string>
#include <string_view>

#include "core/status.h"

namespace partrain {

// Such files hold a few KiB; a Hugging Face config.json is under 10 KiB.
inline constexpr size_t kInputFileMaxBytes = size_t{16} << 20;

// The text of `in` (named `name` in errors), kUnreadable (exit 3) past `max_bytes`.
StatusOr<std::string> read_input_text(std::istream& in, std::string_view name,
                                      size_t max_bytes = kInputFileMaxBytes);

// The text of the file at `path`; kUnreadable (exit 3) when it cannot be opened or holds more
// than `max_bytes`.
StatusOr<std::string> read_input_file(const std::filesystem::path& path,
                                      size_t max_bytes = kInputFileMaxBytes);

}  // namespace partrain
