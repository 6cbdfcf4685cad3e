#include "cli/command_tree.h"

#include <functional>

#include "cli/help_text.h"

namespace partrain::cli {
namespace {

size_t count_commands(const CLI::App& app) {
  size_t count = 1;
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (!sub->get_group().empty()) count += count_commands(*sub);
  }
  return count;
}

std::vector<std::string> choices_of(const std::string& type_name) {
  const size_t open = type_name.find('{');
  const size_t close = type_name.find('}', open);
  if (open == std::string::npos || close == std::string::npos) return {};
  std::vector<std::string> choices;
  std::string item;
  for (char c : type_name.substr(open + 1, close - open - 1)) {
    if (c == ',') {
      choices.push_back(item);
      item.clear();
    } else {
      item += c;
    }
  }
  choices.push_back(item);
  return choices;
}

void add_flags(const CLI::App& app, std::vector<FlagDoc>& flags, std::vector<std::string>& positionals,
               bool own) {
  for (const CLI::Option* option : app.get_options()) {
    if (option->get_lnames().empty() && option->get_snames().empty()) {
      if (own) positionals.push_back(option->get_name());
      continue;
    }
    if (option->get_group().empty()) continue;  // hidden: torchrun's flags launch refuses
    FlagDoc flag;
    for (const std::string& name : option->get_snames()) flag.names.push_back("-" + name);
    for (const std::string& name : option->get_lnames()) flag.names.push_back("--" + name);
    if (option->get_type_size() != 0 && !option->get_type_name().empty()) {
      flag.value = type_in_words(option->get_type_name());
      flag.choices = choices_of(option->get_type_name());
    }
    flag.description = option->get_description();
    // -h and --help-all are every command's own and its parents' too: listed once.
    bool listed = false;
    for (const FlagDoc& other : flags) listed = listed || other.names == flag.names;
    if (!listed) flags.push_back(std::move(flag));
  }
}

}  // namespace

std::vector<CommandDoc> command_tree(const CLI::App& root) {
  std::vector<CommandDoc> docs;
  docs.reserve(count_commands(root));
  std::function<CommandDoc*(const CLI::App&, const std::string&)> visit =
      [&](const CLI::App& app, const std::string& path) {
        docs.emplace_back();
        const size_t index = docs.size() - 1;
        docs[index].path = path;
        docs[index].description = app.get_description();
        docs[index].footer = app.get_footer();
        for (const CLI::App* a = &app; a != nullptr; a = a->get_parent()) {
          add_flags(*a, docs[index].flags, docs[index].positionals, a == &app);
        }
        for (const CLI::App* sub : app.get_subcommands({})) {
          if (sub->get_group().empty()) continue;
          CommandDoc* child = visit(*sub, path + " " + sub->get_name());
          docs[index].subcommands.push_back(child);
        }
        return &docs[index];
      };
  visit(root, "partrain");
  return docs;
}

}  // namespace partrain::cli
