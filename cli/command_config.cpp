#include "cli/command_config.h"

#include <fmt/format.h>

#include <iterator>
#include <sstream>
#include <string>

namespace partrain::cli {

namespace {

// What CLI11's lenient TOML reader would take as a value but TOML does not allow: a key with no
// value (`dp =`) and a string left open (`model = "llama-2-7b`). It read them as an empty value
// and as the text with its quote, and the error named the flag's value, not the file.
void check_toml_lines(const std::string& text) {
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    if (line.find("\"\"\"") != std::string::npos || line.find("'''") != std::string::npos) {
      continue;  // a multi-line string: left to the reader
    }
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#' || line[start] == '[') continue;
    const size_t equals = line.find('=');
    if (equals == std::string::npos) continue;
    std::string value;
    char quote = 0;
    for (size_t i = equals + 1; i < line.size(); ++i) {
      const char c = line[i];
      if (quote == 0 && c == '#') break;
      if (quote == '"' && c == '\\') {
        value += c;
        if (i + 1 < line.size()) value += line[++i];
        continue;
      }
      if (quote == 0 && (c == '"' || c == '\'')) {
        quote = c;
      } else if (c == quote) {
        quote = 0;
      }
      value += c;
    }
    const std::string key =
        line.substr(start, line.find_last_not_of(" \t", equals - 1) + 1 - start);
    if (quote != 0) {
      throw CLI::ConfigError(
          fmt::format("--config line {}: the string of '{}' is not closed (a {} is missing)",
                      number, key, quote == '"' ? "\"" : "'"));
    }
    if (value.find_first_not_of(" \t\r") == std::string::npos) {
      throw CLI::ConfigError(
          fmt::format("--config line {}: '{}' has no value (write {} = VALUE, or drop the line)",
                      number, key, key));
    }
  }
}

}  // namespace

std::vector<CLI::ConfigItem> CommandConfig::from_config(std::istream& input) const {
  const std::string text((std::istreambuf_iterator<char>(input)), std::istreambuf_iterator<char>());
  check_toml_lines(text);
  std::istringstream checked(text);
  std::vector<CLI::ConfigItem> config_items = CLI::ConfigTOML::from_config(checked);
  std::vector<std::string> path;
  for (const CLI::App* app = root_;;) {
    auto chosen = app->get_subcommands();
    if (chosen.empty()) break;
    app = chosen.front();
    path.push_back(app->get_name());
  }
  for (auto& item : config_items) {
    if (item.parents.empty() && item.name != "++" && item.name != "--" &&
        root_->get_option_no_throw("--" + item.name) == nullptr) {
      item.parents = path;
    }
  }
  return config_items;
}

}  // namespace partrain::cli
