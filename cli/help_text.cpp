#include "cli/help_text.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <regex>
#include <vector>

namespace partrain::cli {
namespace {

constexpr size_t kDefaultWidth = 80;
// Narrower than this, a description column would leave a word or two a line: such lines
// continue under the paragraph's indent instead.
constexpr size_t kNarrowestDescription = 24;

// Where a line's text continues when wrapped: CLI11 puts an option's or a command's description
// after a gap of two or more spaces (or alone on the next line, under the same column).
size_t continuation_indent(std::string_view line, size_t width) {
  const size_t indent = line.find_first_not_of(' ');
  if (indent == std::string_view::npos) return 0;
  size_t column = indent;
  const size_t gap = line.find("  ", indent);
  if (gap != std::string_view::npos) {
    const size_t text = line.find_first_not_of(' ', gap);
    if (text != std::string_view::npos) column = text;
  }
  // A flag whose name and type fill the line: its type continues under the name, 4 further in.
  if (column == indent && line[indent] == '-') column = indent + 4;
  if (column + kNarrowestDescription > width) column = indent;
  if (indent + kNarrowestDescription > width) column = 0;
  return column;
}

// An example command line in a help text: wrapped as a shell continues one, so it still runs
// when pasted.
bool is_example_command(std::string_view line) {
  const size_t indent = line.find_first_not_of(' ');
  return indent != std::string_view::npos && indent > 0 &&
         line.substr(indent).starts_with("partrain ");
}

void append_wrapped(std::string& out, std::string line, size_t width) {
  const bool command = is_example_command(line);
  const size_t hang = command ? line.find_first_not_of(' ') + 4 : continuation_indent(line, width);
  const size_t room = command ? width - 2 : width;  // " \" ends a command's broken line
  // The first break comes after the name an option's or a command's line starts with.
  size_t floor = command ? line.find(' ', hang - 4) : std::max(hang, line.find_first_not_of(' '));
  while (line.size() > width) {
    size_t cut = line.rfind(' ', room);
    if (cut == std::string::npos || cut <= floor) {
      cut = line.find(' ', std::max(room, floor + 1));  // a word longer than the line: whole
      if (cut == std::string::npos) break;
    }
    size_t end = cut;
    while (end > floor && line[end - 1] == ' ') --end;
    out.append(line, 0, end);
    out += command ? " \\\n" : "\n";
    const size_t next = line.find_first_not_of(' ', cut);
    if (next == std::string::npos) return;
    line = std::string(hang, ' ') + line.substr(next);
    floor = hang;
  }
  out += line;
  out += '\n';
}

std::string range_in_words(const std::string& low, const std::string& high) {
  long long a = 0;
  long long b = 0;
  const bool integers = std::from_chars(low.data(), low.data() + low.size(), a).ec == std::errc() &&
                        std::from_chars(high.data(), high.data() + high.size(), b).ec == std::errc();
  if (integers && b == a + 1) return low + " or " + high;
  return low + " to " + high;
}

}  // namespace

size_t help_width() {
  if (const char* columns = std::getenv("COLUMNS"); columns != nullptr && *columns != '\0') {
    size_t width = 0;
    const char* end = columns + std::char_traits<char>::length(columns);
    if (std::from_chars(columns, end, width).ec == std::errc() && width >= 20) return width;
  }
  winsize size{};
  if (::isatty(STDOUT_FILENO) && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 &&
      size.ws_col >= 20) {
    return size.ws_col;
  }
  return kDefaultWidth;
}

std::string wrap_help(std::string_view text, size_t width) {
  std::string out;
  out.reserve(text.size() + text.size() / 16);
  while (!text.empty()) {
    const size_t newline = text.find('\n');
    const std::string_view line = text.substr(0, newline);
    if (line.size() > width) {
      append_wrapped(out, std::string(line), width);
      if (newline == std::string_view::npos) out.pop_back();  // as `text` ended: no newline
    } else {
      out.append(line);
      if (newline != std::string_view::npos) out += '\n';
    }
    if (newline == std::string_view::npos) break;
    text.remove_prefix(newline + 1);
  }
  return out;
}

std::string type_in_words(std::string_view type_name) {
  // CLI11 joins the value's type and each check's description with ':'; the set of a choice
  // ({a,b}) and a path kind (FILE) say more than the type before them.
  static const std::regex kRange(R"(^(INT|UINT|FLOAT|NUMBER) in \[(\S+) - (\S+)\]$)");
  std::vector<std::string> parts;
  size_t begin = 0;
  int braces = 0;
  for (size_t i = 0; i <= type_name.size(); ++i) {
    if (i < type_name.size() && type_name[i] == '{') ++braces;
    if (i < type_name.size() && type_name[i] == '}') --braces;
    if (i == type_name.size() || (type_name[i] == ':' && braces == 0)) {
      parts.emplace_back(type_name.substr(begin, i - begin));
      begin = i + 1;
    }
  }
  std::string words = parts.front();
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string& check = parts[i];
    std::smatch range;
    if (check.empty()) continue;
    if (std::regex_match(check, range, kRange)) {
      words = (words.empty() ? range[1].str() : words) + " " +
              range_in_words(range[2].str(), range[3].str());
    } else if (check.front() == '{') {
      // "{a, b}": a long set wraps between its names.
      words = std::regex_replace(check, std::regex(","), ", ");
    } else if (words.empty() || words == "TEXT") {
      words = check;
    } else {
      words += " " + check;
    }
  }
  return words;
}

}  // namespace partrain::cli
