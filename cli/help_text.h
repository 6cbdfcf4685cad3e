// How `--help` reads on a terminal: lines wrapped to its width under their own column (as argparse
// and git do), and CLI11's type annotations (`INT:INT in [1 - 1024]`) said in words.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace partrain::cli {

// The width help is wrapped to: $COLUMNS when set (as argparse and git read it), else the
// terminal's when stdout is one, else 80.
size_t help_width();

// `text` with every line longer than `width` broken at spaces; a continuation starts under the
// line's own text: an option's or command's description column, or the paragraph's indent.
std::string wrap_help(std::string_view text, size_t width);

// CLI11's type name of a flag with its checks (`INT:INT in [1 - 1048576]`, `TEXT:{gloo,nccl}`,
// `:FILE`) as help shows it: `INT 1 to 1048576`, `{gloo, nccl}`, `FILE`.
std::string type_in_words(std::string_view type_name);

}  // namespace partrain::cli
