// Reading the process environment, with typed accessors that say which variable was malformed.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace partrain::env {

std::optional<std::string> get(std::string_view name);
// The variable as an integer; nullopt when unset; an error naming it when set but not a number.
StatusOr<std::optional<long long>> get_int(std::string_view name);

// Whether TERM names a terminal that takes escape sequences (a colour, \r with "erase the line"):
// set and not `dumb` (Emacs' shell buffer, some CI logs, which show them as text).
bool terminal_takes_escapes();

}  // namespace partrain::env
