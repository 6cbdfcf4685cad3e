#include "cli/trace_flags.h"

#include "core/byte_size.h"
#include "runner/launch/trace_path.h"

namespace partrain::cli {

void add_trace_file_flags(CLI::App& command, TraceFlagsCommand of, TraceFileFlags& flags) {
  const bool launch = of == TraceFlagsCommand::kLaunch;
  command.add_option(launch ? "--trace" : "-o,--trace,--output", flags.file,
                     launch ? "Trace file of the run (default: ./partrain-runs/<run-id>.db); "
                              "must not exist; with several nodes node N writes FILE's name with "
                              "a .nodeN suffix before the extension"
                            : "Trace file to write (default: ./partrain-runs/<run-id>.db); "
                              "must not exist");
  command.add_option(launch ? "--trace-max-size" : "--trace-max-size,--max-size", flags.max_size,
                     launch ? "Stop tracing once a node's trace file would outgrow SIZE (512M, "
                              "2G); the run goes on, as it does when the disk fills up (default: "
                              "no limit)"
                            : "Stop tracing once the trace file would outgrow SIZE (512M, 2G); "
                              "the command goes on, as it does when the disk fills up (default: "
                              "no limit)");
  command.add_option("--nvml-interval", flags.nvml_interval,
                     "On a GPU with a driver: how often each rank samples its GPU's utilisation, "
                     "SM clock, power and throttle reasons into the trace through NVML (100ms, "
                     "1s; 0: off; default: 100ms)");
}

std::string_view trace_file_flag(TraceFlagsCommand of) {
  return of == TraceFlagsCommand::kLaunch ? "--trace" : "--trace/-o";
}

std::string_view trace_max_size_flag(TraceFlagsCommand of) {
  return of == TraceFlagsCommand::kLaunch ? "--trace-max-size" : "--trace-max-size/--max-size";
}

StatusOr<uint64_t> check_trace_file_flags(TraceFlagsCommand of, const TraceFileFlags& flags) {
  RETURN_IF_ERROR(launch::check_trace_file(flags.file, trace_file_flag(of)));
  return parse_trace_size_limit(trace_max_size_flag(of), flags.max_size);
}

StatusOr<uint64_t> parse_trace_size_limit(std::string_view flag,
                                          const std::optional<std::string>& text) {
  if (!text) return uint64_t{0};
  constexpr uint64_t kSmallest = 1 << 20;
  StatusOr<uint64_t> bytes = parse_byte_size(*text);
  if (!bytes.is_ok()) {
    return invalid_argument("{} {}: {}; give a size such as 512M or 2G", flag, *text,
                            bytes.status().message());
  }
  if (*bytes < kSmallest) {
    return invalid_argument("{} {}: a trace needs at least 1M (1048576 bytes); give a larger size",
                            flag, *text);
  }
  return *bytes;
}

}  // namespace partrain::cli
