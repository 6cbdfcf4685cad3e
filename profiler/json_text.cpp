#include "profiler/json_text.h"

#include <iterator>

namespace partrain::profiler {
namespace {

// Bytes of the well-formed UTF-8 sequence starting at text[i]; 0 when there is none
// (overlong forms, surrogates and code points past U+10FFFF included).
size_t utf8_sequence_length(std::string_view text, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (i + length > text.size() || byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (size_t k = 2; k < length; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return length;
}

void append_ascii(fmt::memory_buffer& out, unsigned char c) {
  switch (c) {
    case '"':
      append_json_raw(out, "\\\"");
      break;
    case '\\':
      append_json_raw(out, "\\\\");
      break;
    case '\n':
      append_json_raw(out, "\\n");
      break;
    case '\r':
      append_json_raw(out, "\\r");
      break;
    case '\t':
      append_json_raw(out, "\\t");
      break;
    default:
      if (c < 0x20 || c == 0x7f) {  // DEL too: Perfetto's JSON tokenizer refuses it raw
        fmt::format_to(std::back_inserter(out), "\\u{:04x}", static_cast<unsigned>(c));
      } else {
        out.push_back(static_cast<char>(c));
      }
  }
}

}  // namespace

void append_json_raw(fmt::memory_buffer& out, std::string_view text) {
  out.append(text.data(), text.data() + text.size());
}

void append_json_string(fmt::memory_buffer& out, std::string_view text) {
  out.push_back('"');
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      append_ascii(out, c);
      ++i;
      continue;
    }
    const size_t length = utf8_sequence_length(text, i);
    append_json_raw(out, length == 0 ? std::string_view("\xEF\xBF\xBD") : text.substr(i, length));
    i += length == 0 ? 1 : length;
  }
  out.push_back('"');
}

void append_json_us(fmt::memory_buffer& out, int64_t ns) {
  const uint64_t magnitude = ns < 0 ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  fmt::format_to(std::back_inserter(out), "{}{}.{:03}", ns < 0 ? "-" : "", magnitude / 1000,
                 magnitude % 1000);
}

fmt::memory_buffer& JsonStream::next_element() {
  append_json_raw(text_, elements_ == 0 ? "\n" : ",\n");
  ++elements_;
  return text_;
}

Status JsonStream::flush() {
  out_.write(text_.data(), static_cast<std::streamsize>(text_.size()));
  text_.clear();
  if (!out_) return failed("writing the JSON output failed (disk full, or the reader went away?)");
  return Status::ok();
}

}  // namespace partrain::profiler
