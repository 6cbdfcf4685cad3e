// A point-to-point op's seq with its tag in it. PyTorch's recorder numbers sends and receives per
// (group, direction, peer, tag), so a program that posts tagged receives in another order than
// the sends still pairs each send with its receive; the tag rides in the seq's upper half,
// T * 2^32 + n (share/python/partrain_torch/_process_groups.py). Tag 0, every other source's
// transfers, keep plain numbers.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace partrain::profiler {

inline constexpr int kP2pTagShift = 32;

// A point-to-point op: its seq counts per direction, peer and tag, not per group.
inline bool is_p2p(std::string_view op) { return op == "send" || op == "recv"; }

// The tag a transfer's seq carries (0: none).
constexpr uint32_t p2p_tag(uint64_t seq) { return static_cast<uint32_t>(seq >> kP2pTagShift); }
// The transfer's number among those of its direction, peer and tag.
constexpr uint64_t p2p_number(uint64_t seq) { return seq & ((uint64_t{1} << kP2pTagShift) - 1); }

// "seq 3", or "seq 3 (tag 5)" for a tagged transfer's.
inline std::string p2p_seq_text(uint64_t seq) {
  const uint32_t tag = p2p_tag(seq);
  return tag == 0 ? fmt::format("seq {}", seq)
                  : fmt::format("seq {} (tag {})", p2p_number(seq), tag);
}

// An op's seq as messages print it: a transfer's with its tag, a collective's as it is.
inline std::string seq_text(std::string_view op, uint64_t seq) {
  return is_p2p(op) ? p2p_seq_text(seq) : fmt::format("seq {}", seq);
}

}  // namespace partrain::profiler
