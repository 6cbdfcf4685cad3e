#include "core/env.h"

#include <charconv>
#include <cstdlib>

namespace partrain::env {

std::optional<std::string> get(std::string_view name) {
  const char* value = std::getenv(std::string(name).c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

StatusOr<std::optional<long long>> get_int(std::string_view name) {
  auto text = get(name);
  if (!text) return std::optional<long long>();
  long long value = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (ec != std::errc() || end != text->data() + text->size()) {
    return invalid_argument("environment variable {}='{}' is not an integer", name, *text);
  }
  return std::optional<long long>(value);
}

bool terminal_takes_escapes() {
  const std::optional<std::string> term = get("TERM");
  return term && !term->empty() && *term != "dumb";
}

}  // namespace partrain::env
