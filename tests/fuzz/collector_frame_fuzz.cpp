// libFuzzer target: the collector's frame decoder (what a rank's recorder sends over the Unix
// socket) on arbitrary bytes; valid batches are walked record by record.
#include <cstddef>
#include <cstdint>
#include <span>

#include "profiler/collector_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace partrain::profiler;
  const std::span<const uint8_t> bytes(data, size);
  CollectorLimits limits;
  (void)decode_collector_header(bytes, limits);
  auto frame = decode_collector_frame(bytes, "token", limits);
  if (frame.is_ok()) {
    size_t total = 0;
    for_each_record(frame->records, [&](std::span<const uint8_t> record) { total += record.size(); });
    (void)total;
  }
  return 0;
}
