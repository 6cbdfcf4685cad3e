#include "profiler/node_trace_name.h"

#include <fmt/format.h>

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

}  // namespace partrain::profiler
