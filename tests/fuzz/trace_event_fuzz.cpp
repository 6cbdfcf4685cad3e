// libFuzzer target: the binary trace-event decoder (records shipped by ranks to the writer) on
// arbitrary bytes; what decodes must encode again.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "profiler/trace_event.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace partrain::profiler;
  auto events = decode_events(std::span<const uint8_t>(data, size));
  if (events.is_ok()) {
    std::vector<uint8_t> again;
    for (const TraceEvent& event : *events) encode_event(event, again);
  }
  return 0;
}
