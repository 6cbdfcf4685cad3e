// JSON text written as it is produced, for exporters that stream millions of rows: string
// literals escaped (bytes that are not UTF-8 repaired), nanoseconds as exact decimal
// microseconds, and a stream that hands the text to a std::ostream in ~1 MiB pieces.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <ostream>
#include <string_view>

#include "core/status.h"

namespace partrain::profiler {

void append_json_raw(fmt::memory_buffer& out, std::string_view text);
// A JSON string literal, quotes included. Names can come from foreign processes, so a byte that
// is not part of well-formed UTF-8 becomes U+FFFD rather than making the document unreadable.
void append_json_string(fmt::memory_buffer& out, std::string_view text);
// Nanoseconds as microseconds with three decimals ("1234.567", "-0.005"): exact, no floating
// point, so ns precision survives in formats whose time unit is the microsecond.
void append_json_us(fmt::memory_buffer& out, int64_t ns);

// The text of one JSON document whose bulk is a long array: elements are separated and counted
// here, and the buffer goes to the stream whenever it passes ~1 MiB.
class JsonStream {
 public:
  explicit JsonStream(std::ostream& out) : out_(out) {}
  // For the text around the array (header, closing brackets).
  fmt::memory_buffer& raw() { return text_; }
  // Starts the next element of the array; the caller writes it into the returned buffer and
  // then calls end_element().
  fmt::memory_buffer& next_element();
  Status end_element() { return text_.size() < kFlushBytes ? Status::ok() : flush(); }
  // Hands everything buffered to the stream; kFailed when the stream has failed.
  Status flush();
  int64_t elements() const { return elements_; }

 private:
  static constexpr size_t kFlushBytes = size_t{1} << 20;
  std::ostream& out_;
  fmt::memory_buffer text_;
  int64_t elements_ = 0;
};

}  // namespace partrain::profiler
