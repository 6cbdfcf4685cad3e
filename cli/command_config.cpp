#include "cli/command_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "core/input_file.h"

namespace partrain::cli {

namespace {

// One `key = value` line of a --config file, as TOML reads it: the value without its comment,
// with the lines of an array that goes on below joined to it.
struct KeyLine {
  int number = 0;
  std::vector<std::string> parents;  // the [section] and a dotted key's leading parts
  std::string key;
  std::string value;
};

std::string trimmed(std::string_view text) {
  const size_t begin = text.find_first_not_of(" \t\r");
  if (begin == std::string_view::npos) return "";
  return std::string(text.substr(begin, text.find_last_not_of(" \t\r") + 1 - begin));
}

std::vector<std::string> dotted(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, '.');) parts.push_back(trimmed(part));
  if (parts.empty()) parts.emplace_back();  // `= 4`: a key with no name, for CLI11 to refuse
  return parts;
}

// A TOML number may group its digits with underscores (`7_500_000_000`); CLI11's reader keeps
// them and no flag converts them. An underscore between two digits of an unquoted value that is
// all number characters is dropped.
std::string without_digit_underscores(const std::string& value) {
  std::string out;
  char quote = 0;
  for (size_t i = 0; i < value.size(); ++i) {
    const char c = value[i];
    if (quote == 0 && (c == '"' || c == '\'')) {
      quote = c;
    } else if (c == quote) {
      quote = 0;
    }
    const bool between_digits = quote == 0 && c == '_' && i > 0 && i + 1 < value.size() &&
                                std::isdigit(static_cast<unsigned char>(value[i - 1])) &&
                                std::isdigit(static_cast<unsigned char>(value[i + 1]));
    if (between_digits) {
      const size_t begin = value.find_last_of(" \t,[=", i) + 1;
      size_t end = value.find_first_of(" \t,]#", i);
      if (end == std::string::npos) end = value.size();
      const std::string word = value.substr(begin, end - begin);
      if (word.find_first_not_of("0123456789_.eE+-") == std::string::npos) continue;
    }
    out += c;
  }
  return out;
}

// The values CLI11's reader makes of `value`: an array's elements, or an unquoted value split at
// its commas (else at its spaces). TOML has no such unquoted list: `lr = 0,001` is an error there.
std::vector<std::string> values_of(const std::string& value) {
  const bool array = value.size() > 1 && value.front() == '[';
  const std::string inside = array ? value.substr(1, value.size() - 2) : value;
  const bool commas = array || inside.find(',') != std::string::npos;
  std::vector<std::string> values(1);
  char quote = 0;
  for (const char c : inside) {
    if (quote == 0 && (c == '"' || c == '\'')) {
      quote = c;
    } else if (c == quote) {
      quote = 0;
    } else if (quote == 0 && (commas ? c == ',' : (c == ' ' || c == '\t'))) {
      if (!trimmed(values.back()).empty()) values.emplace_back();
      continue;
    }
    values.back() += c;
  }
  if (trimmed(values.back()).empty() && values.size() > 1) values.pop_back();
  return values;
}

// Where the quotes of `line` leave off at its end: 0, or the quote still open.
char open_quote(const std::string& text) {
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote == 0 && c == '#') break;
    if (quote == '"' && c == '\\') {
      ++i;
    } else if (quote == 0 && (c == '"' || c == '\'')) {
      quote = c;
    } else if (c == quote) {
      quote = 0;
    }
  }
  return quote;
}

// The text of `line` after '=' up to its comment, outside quotes.
std::string value_text(const std::string& line, size_t equals) {
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
  return trimmed(value);
}

// The names of the subcommands being run, from the root's.
std::vector<std::string> chosen_path(const CLI::App& root) {
  std::vector<std::string> path;
  for (const CLI::App* app = &root;;) {
    auto chosen = app->get_subcommands();
    if (chosen.empty()) return path;
    app = chosen.front();
    path.push_back(app->get_name());
  }
}

// The flag `key` under `parents` sets, or none: the subcommand the sections name (top-level keys
// go to the command being run unless the root has them), then its flag as CLI11 matches one.
const CLI::Option* flag_of(const CLI::App& root, const std::vector<std::string>& command_path,
                           const KeyLine& line) {
  std::vector<std::string> path = line.parents;
  if (path.empty() && root.get_option_no_throw("--" + line.key) == nullptr) path = command_path;
  const CLI::App* app = &root;
  for (const std::string& name : path) {
    auto found =
        app->get_subcommands([&name](const CLI::App* sub) { return sub->check_name(name); });
    if (found.empty()) return nullptr;
    app = found.front();
  }
  const CLI::Option* option = app->get_option_no_throw("--" + line.key);
  if (option == nullptr && line.key.size() == 1) option = app->get_option_no_throw("-" + line.key);
  return option;
}

bool takes_several(const CLI::Option& option) {
  return option.get_items_expected_max() > 1 ||
         option.get_multi_option_policy() == CLI::MultiOptionPolicy::TakeAll ||
         option.get_multi_option_policy() == CLI::MultiOptionPolicy::Join;
}

// What to write instead of a list for a flag that takes one value.
std::string one_value_hint(const CLI::Option& option, const KeyLine& line,
                           const std::vector<std::string>& values) {
  const std::string type = option.get_type_name();
  const bool whole = type.starts_with("INT") || type.starts_with("UINT");
  static const std::regex kInteger(R"([+-]?[0-9]+)");
  static const std::regex kFraction(R"([0-9]+([eE][+-]?[0-9]+)?)");
  const bool decimal_comma = line.value.front() != '[' && values.size() == 2 &&
                             std::regex_match(trimmed(values[0]), kInteger) &&
                             std::regex_match(trimmed(values[1]), kFraction);
  if (whole) return "write one whole number";
  if (decimal_comma) {
    return fmt::format("write a decimal point ({} = {}.{})", line.key, trimmed(values[0]),
                       trimmed(values[1]));
  }
  if (type.starts_with("FLOAT") || type.starts_with("NUMBER")) return "write one number";
  std::string joined;
  for (const std::string& value : values) {
    std::string item = trimmed(value);
    if (item.size() > 1 && (item.front() == '"' || item.front() == '\'')) {
      item = item.substr(1, item.size() - 2);
    }
    joined += (joined.empty() ? "" : ",") + item;
  }
  return fmt::format("write one value, in quotes where the commas are part of it ({} = \"{}\")",
                     line.key, joined);
}

// Whether `line` is part of a """ or ''' string (opens, closes or lies in one); `open` is the
// quote of the one still open after it, or 0.
bool in_multi_line_string(const std::string& line, char& open) {
  const bool was_open = open != 0;
  bool has_delimiter = false;
  for (const char* delimiter : {"\"\"\"", "'''"}) {
    for (size_t at = line.find(delimiter); at != std::string::npos;
         at = line.find(delimiter, at + 3)) {
      has_delimiter = true;
      if (open == 0 || open == delimiter[0]) open = open == 0 ? delimiter[0] : 0;
    }
  }
  return was_open || has_delimiter;
}

// Refuses `line`'s key when an earlier line set the same flag (a key is its flag: `dp` at the top
// and under [memory] set the same one), and its value when it is a list and `option` takes one
// value. `first_line`: each flag's key and the line that set it.
void check_flag_value(const KeyLine& line, const std::string& key, const CLI::Option* option,
                      const std::string& where, std::map<std::string, int>& first_line) {
  const std::string flag_key = option != nullptr
                                   ? fmt::format("{}", fmt::ptr(option))
                                   : fmt::format("{}.{}", fmt::join(line.parents, "."), line.key);
  if (const auto [first, inserted] = first_line.emplace(flag_key, line.number); !inserted) {
    throw CLI::ConfigError(
        fmt::format("{} line {}: '{}' is set again (first on line {}); TOML takes a key once: "
                    "drop one of the lines",
                    where, line.number, key, first->second));
  }
  const std::vector<std::string> values = values_of(without_digit_underscores(line.value));
  if (option == nullptr || values.size() < 2 || takes_several(*option)) return;
  throw CLI::ConfigError(
      fmt::format("{} line {}: {} = {} is a list of {} values, but --{} takes one: {}", where,
                  line.number, key, line.value, values.size(),
                  option->get_lnames().empty() ? line.key : option->get_lnames().front(),
                  one_value_hint(*option, line, values)));
}

}  // namespace

// What CLI11's lenient TOML reader would take but TOML does not allow, said with the file and
// line: a key with no value (`dp =`, read as an empty value), a string left open (read as the
// text with its quote), a line that is no `key = value` (read as a flag set to true), a key set
// twice and a list given to a flag that takes one value (both read as the last value: `lr =
// 0,001` trained with lr 1). Returns the text for CLI11's reader, the underscores of TOML's
// numbers taken out.
std::string CommandConfig::checked_toml(const std::string& text, const std::string& file) const {
  const std::string where = file.empty() ? std::string("--config") : "--config " + file;
  const std::vector<std::string> command_path = chosen_path(*root_);
  std::istringstream lines(text);
  std::string out;
  std::string line;
  std::vector<std::string> section;
  std::map<std::string, int> first_line;
  char multi_line_string = 0;  // the quote of a """ or ''' string still open
  for (int number = 1; std::getline(lines, line); ++number) {
    const bool in_string = in_multi_line_string(line, multi_line_string);
    const std::string content = trimmed(line);
    if (in_string || content.empty() || content.front() == '#' || content.front() == ';') {
      out += line + "\n";
      continue;  // a multi-line string is left to the reader
    }
    if (content.front() == '[') {
      std::string name = content.substr(1, content.find(']') - 1);
      if (!name.empty() && name.front() == '[') name = name.substr(1);
      section = dotted(name);
      out += line + "\n";
      continue;
    }
    const size_t equals = line.find('=');
    if (equals == std::string::npos) {
      throw CLI::ConfigError(fmt::format(
          "{} line {}: '{}' is not a `key = value` line (a flag that is on reads {} = true)", where,
          number, content, content));
    }
    KeyLine key_line;
    key_line.number = number;
    key_line.parents = section;
    std::vector<std::string> key_parts = dotted(trimmed(line.substr(0, equals)));
    key_line.key = key_parts.back();
    key_parts.pop_back();
    key_line.parents.insert(key_line.parents.end(), key_parts.begin(), key_parts.end());
    const std::string key = trimmed(line.substr(0, equals));
    if (const char quote = open_quote(line.substr(equals + 1)); quote != 0) {
      throw CLI::ConfigError(
          fmt::format("{} line {}: the string of '{}' is not closed (a {} is missing)", where,
                      number, key, quote == '"' ? "\"" : "'"));
    }
    key_line.value = value_text(line, equals);
    std::string given = line;
    if (key_line.value.starts_with("[") && !key_line.value.ends_with("]")) {
      // An array that goes on over the lines below: given to CLI11's reader on one line (it
      // takes `key = [` alone as the text "[").
      while (!key_line.value.ends_with("]") && std::getline(lines, line)) {
        ++number;
        key_line.value += trimmed(line.substr(0, line.find('#')));
      }
      given = key + " = " + key_line.value;
    }
    if (key_line.value.empty()) {
      throw CLI::ConfigError(
          fmt::format("{} line {}: '{}' has no value (write {} = VALUE, or drop the line)", where,
                      number, key, key));
    }
    check_flag_value(key_line, key, flag_of(*root_, command_path, key_line), where, first_line);
    out += without_digit_underscores(given) + "\n";
  }
  return out;
}

std::vector<CLI::ConfigItem> CommandConfig::from_config(std::istream& input) const {
  // CLI11 reads the --config files in the order given, each through this reader.
  std::string file;
  if (const CLI::Option* config = root_->get_option_no_throw("--config"); config != nullptr) {
    const CLI::results_t& given = config->results();
    if (files_read_ < given.size()) file = given[files_read_];
  }
  ++files_read_;
  // Bounded (`--config /dev/zero` was read until memory ran out); main says a FileError is
  // unreadable input, exit 3.
  StatusOr<std::string> read = read_input_text(input, "--config " + file);
  if (!read.is_ok()) throw CLI::FileError(read.status().message());
  const std::string& text = *read;
  std::istringstream checked(checked_toml(text, file));
  std::vector<CLI::ConfigItem> config_items = CLI::ConfigTOML::from_config(checked);
  const std::vector<std::string> path = chosen_path(*root_);
  for (auto& item : config_items) {
    if (item.parents.empty() && item.name != "++" && item.name != "--" &&
        root_->get_option_no_throw("--" + item.name) == nullptr) {
      item.parents = path;
    }
  }
  return config_items;
}

}  // namespace partrain::cli
