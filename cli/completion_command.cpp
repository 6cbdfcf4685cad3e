// The generated documentation commands, hidden from help (the build runs them; CMake installs
// what they print): `partrain completion bash|zsh` and `partrain manpage`.
#include <cstdio>
#include <string>

#include "cli/command.h"
#include "cli/command_tree.h"
#include "cli/man_page.h"
#include "cli/shell_completion.h"
#include "core/share_dir.h"
#include "memory/presets.h"

namespace partrain::cli {

Subcommand add_completion_command(CLI::App& parent) {
  CLI::App* cmd = parent.add_subcommand(
      "completion", "Print the bash or zsh completion script (source it, or install it with "
                    "`make install`)");
  cmd->group("");
  auto shell = std::make_shared<std::string>();
  cmd->add_option("shell", *shell, "bash or zsh")->required()->check(CLI::IsMember({"bash", "zsh"}));
  const CLI::App* root = &parent;
  return {cmd, [root, shell] {
            std::vector<CommandDoc> tree = command_tree(*root);
            // The presets of the share directory this partrain reads (the source tree's when the
            // build generates the scripts: the ones it installs).
            if (StatusOr<std::filesystem::path> share = find_share_dir(); share.is_ok()) {
              add_preset_names(tree, memory::model_preset_names(*share),
                               memory::gpu_preset_names(*share));
            }
            const std::string script = *shell == "bash" ? bash_completion(tree) : zsh_completion(tree);
            std::fwrite(script.data(), 1, script.size(), stdout);
            return 0;
          }};
}

Subcommand add_manpage_command(CLI::App& parent) {
  CLI::App* cmd = parent.add_subcommand("manpage", "Print partrain(1), the man page, in roff");
  cmd->group("");
  const CLI::App* root = &parent;
  return {cmd, [root] {
            const std::string page = man_page(command_tree(*root), PARTRAIN_VERSION);
            std::fwrite(page.data(), 1, page.size(), stdout);
            return 0;
          }};
}

}  // namespace partrain::cli
