#include "profiler/node_trace_name.h"

#include <fmt/format.h>

#include <limits>
#include <string>

namespace partrain::profiler {

namespace fs = std::filesystem;

fs::path node_trace_path(const fs::path& trace, int node_rank) {
  if (node_rank == 0) return trace;
  fs::path node = trace;
  node.replace_filename(fmt::format("{}.node{}{}", trace.stem().string(), node_rank,
                                    trace.extension().string()));
  return node;
}

fs::path node0_trace_path(const fs::path& node_file, int node_rank) {
  if (node_rank == 0) return node_file;
  const std::string suffix = fmt::format(".node{}", node_rank);
  const std::string stem = node_file.stem().string();
  fs::path base = node_file;
  if (stem.ends_with(suffix)) {  // run.node2.db
    base.replace_filename(stem.substr(0, stem.size() - suffix.size()) +
                          node_file.extension().string());
  } else if (node_file.extension() == suffix) {  // a name without an extension: run.node2
    base.replace_filename(stem);
  }
  return base;
}

std::string other_node_files_text(const fs::path& node0, int64_t nodes, int64_t node) {
  std::string text;
  int named = 0;
  for (int64_t n = 0; n < nodes && named < kNamedNodeFiles; ++n) {
    if (n == node) continue;
    text += (text.empty() ? "" : ", ") + node_trace_path(node0, static_cast<int>(n)).string();
    ++named;
  }
  const int64_t others = node >= 0 && node < nodes ? nodes - 1 : nodes;
  if (others > named) text += fmt::format(", ... and {} more", others - named);
  return text;
}

std::string node_files_merge_arguments(const fs::path& node0, int64_t nodes) {
  if (nodes > kNamedNodeFiles) {
    fs::path others = node0;
    others.replace_filename(
        fmt::format("{}.node*{}", node0.stem().string(), node0.extension().string()));
    return node0.string() + " " + others.string();
  }
  std::string text;
  for (int n = 0; n < nodes; ++n) {
    text += (text.empty() ? "" : " ") + node_trace_path(node0, n).string();
  }
  return text;
}

bool other_node_files_present(const fs::path& node0, int64_t nodes, int64_t node) {
  for (int64_t n = 0; n < nodes && n <= std::numeric_limits<int>::max(); ++n) {
    std::error_code error;
    if (n != node && !fs::exists(node_trace_path(node0, static_cast<int>(n)), error)) return false;
  }
  return true;
}

}  // namespace partrain::profiler
