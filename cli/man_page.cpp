#include "cli/man_page.h"

#include <fmt/format.h>

#include <sstream>

namespace partrain::cli {
namespace {

// Text as roff reads it: a backslash escaped, a line starting with a control character guarded,
// and hyphens that are options' as minus signs so they paste as typed.
std::string roff(const std::string& text) {
  std::string out;
  bool line_start = true;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
    line_start = c == '\n';
  }
  return out;
}

// A help paragraph: lines that start with spaces (examples, lists) kept as they are, the rest
// filled by man.
std::string paragraphs(const std::string& text) {
  std::string out;
  std::istringstream in(text);
  bool verbatim = false;
  for (std::string line; std::getline(in, line);) {
    const bool indented = line.starts_with(" ");
    if (indented && !verbatim) out += ".nf\n";
    if (!indented && verbatim) out += ".fi\n";
    verbatim = indented;
    out += line.empty() ? ".PP\n" : roff(line) + "\n";
  }
  if (verbatim) out += ".fi\n";
  return out;
}

std::string flag_entry(const FlagDoc& flag) {
  std::string names;
  for (const std::string& name : flag.names) {
    names += (names.empty() ? "" : ", ") + fmt::format("\\fB{}\\fR", roff(name));
  }
  const std::string value = flag.value.empty() ? "" : " \\fI" + roff(flag.value) + "\\fR";
  return fmt::format(".TP\n{}{}\n{}\n", names, value, roff(flag.description));
}

}  // namespace

std::string man_page(const std::vector<CommandDoc>& tree, const std::string& version) {
  const CommandDoc& root = tree.front();
  std::string out = fmt::format(
      ".TH PARTRAIN 1 \"\" \"partrain {}\" \"User Commands\"\n"
      ".SH NAME\npartrain \\- {}\n"
      ".SH SYNOPSIS\n\\fBpartrain\\fR [\\fIOPTIONS\\fR] \\fICOMMAND\\fR [\\fICOMMAND OPTIONS\\fR]\n",
      roff(version), roff(root.description.substr(root.description.find(": ") + 2)));
  out += ".SH OPTIONS\n";
  for (const FlagDoc& flag : root.flags) out += flag_entry(flag);
  out += ".SH COMMANDS\n";
  for (size_t i = 1; i < tree.size(); ++i) {
    const CommandDoc& command = tree[i];
    out += fmt::format(".SS \"{}\"\n", roff(command.path));
    out += paragraphs(command.description);
    for (const FlagDoc& flag : command.flags) {
      if (flag.names.back() == "--help" || flag.names.back() == "--help-all") continue;
      // The root's flags reach every command (fallthrough); they are listed once, above.
      bool from_root = false;
      for (const FlagDoc& root_flag : root.flags) from_root = from_root || root_flag.names == flag.names;
      if (!from_root) out += flag_entry(flag);
    }
    if (!command.footer.empty()) out += ".PP\n" + paragraphs(command.footer);
  }
  out += ".SH ENVIRONMENT, CONFIGURATION AND EXIT STATUS\n" + paragraphs(root.footer);
  out += ".SH SEE ALSO\n"
         "\\fBtorchrun\\fR(1), \\fBnsys\\fR(1); the documentation installed in "
         "share/doc/partrain (README.md, docs/).\n";
  return out;
}

}  // namespace partrain::cli
