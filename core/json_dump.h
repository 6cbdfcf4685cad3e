// JSON documents as text for stdout, files and the trace. Strings partrain did not write itself
// (a command line, a host name, a foreign program's kernel or NVTX names) may hold bytes that are
// not UTF-8; nlohmann's default dump throws on them. Here each such byte becomes U+FFFD, as the
// Chrome export's writer does (profiler/json_text.h), so one odd byte never costs the output.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace partrain {

inline std::string dump_json(const nlohmann::json& document, int indent = -1) {
  return document.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace partrain
