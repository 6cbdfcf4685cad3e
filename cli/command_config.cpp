#include "cli/command_config.h"

#include <string>

namespace partrain::cli {

std::vector<CLI::ConfigItem> CommandConfig::from_config(std::istream& input) const {
  std::vector<CLI::ConfigItem> config_items = CLI::ConfigTOML::from_config(input);
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
