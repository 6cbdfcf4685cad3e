// libFuzzer target: the rendezvous store's frame decoders (requests as the server reads them,
// replies as a client reads them) on arbitrary bytes. They must reject, never crash or allocate
// beyond the limits.
#include <cstddef>
#include <cstdint>
#include <span>

#include "runner/rendezvous/protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace partrain::rendezvous;
  const std::span<const uint8_t> bytes(data, size);
  StoreLimits limits;
  limits.max_value_bytes = 1 << 20;  // keep the fuzzer's allocations small
  (void)decode_request_frame(bytes, "token", limits);
  for (Op op : {Op::kSet, Op::kGet, Op::kAdd, Op::kWait, Op::kCheck, Op::kPing}) {
    (void)decode_reply_frame(bytes, op, limits);
  }
  return 0;
}
