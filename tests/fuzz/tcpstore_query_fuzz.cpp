// libFuzzer target: the TCPStore query decoder on arbitrary bytes, as the rendezvous store reads
// them from a peer: it must decode, ask for more or refuse, never crash, read past the bytes,
// or allocate beyond the limits; and a decoded query must re-encode to the bytes it took.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <variant>

#include "runner/rendezvous/tcpstore_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace partrain::rendezvous::tcpstore;
  Limits limits;
  limits.max_value_bytes = 1 << 16;  // keep the fuzzer's allocations small
  limits.max_key_bytes = 1 << 10;
  limits.max_keys = 1 << 10;
  limits.max_query_bytes = 1 << 20;
  std::span<const uint8_t> bytes(data, size);
  // Queries back to back, as a connection's buffer holds them.
  while (!bytes.empty()) {
    DecodeResult result = decode_query(bytes, limits);
    auto* decoded = std::get_if<Decoded>(&result);
    if (decoded == nullptr) {
      if (auto* incomplete = std::get_if<Incomplete>(&result)) {
        if (incomplete->needed <= bytes.size()) std::abort();  // it must want more than it has
      }
      break;
    }
    if (decoded->consumed == 0 || decoded->consumed > bytes.size()) std::abort();
    const std::vector<uint8_t> again = encode_query(decoded->query);
    if (again.size() != decoded->consumed ||
        !std::equal(again.begin(), again.end(), bytes.begin())) {
      std::abort();
    }
    bytes = bytes.subspan(decoded->consumed);
  }
  return 0;
}
