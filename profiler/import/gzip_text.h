// The text of a trace file read in pieces, whether it is gzip-compressed or not (torch.profiler
// writes `.pt.trace.json` and, with use_gzip, `.pt.trace.json.gz`): zlib tells the two apart by
// the gzip magic. A stream that ends before its gzip trailer, or whose compressed bytes are
// damaged, is an error naming the file, never a silently shorter text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <iterator>
#include <memory>
#include <string>

#include "core/status.h"

namespace partrain::profiler {

class GzipText {
 public:
  // kUnreadable naming the file when it cannot be opened (missing, a directory, no permission).
  static StatusOr<std::unique_ptr<GzipText>> open(const std::filesystem::path& path);
  ~GzipText();
  GzipText(const GzipText&) = delete;
  GzipText& operator=(const GzipText&) = delete;

  // The next character, or -1 at the end of the text or after an error (then error() says which).
  int next() {
    if (pos_ == end_ && !refill()) return -1;
    return static_cast<unsigned char>(*pos_++);
  }
  // Empty while the text reads well; else what went wrong ("the gzip stream ends before its
  // end (truncated file?)").
  const std::string& error() const { return error_; }
  bool compressed() const { return compressed_; }
  // Text bytes handed out so far, and compressed bytes read from the file so far.
  uint64_t text_bytes() const {
    return text_before_buffer_ + static_cast<uint64_t>(pos_ - buffer_);
  }
  uint64_t file_bytes() const;
  const std::filesystem::path& path() const { return path_; }

  // An input iterator over the characters, for parsers that take iterators (nlohmann's SAX
  // parser): `begin()` to `end()` reads the text once.
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = char;
    using difference_type = std::ptrdiff_t;
    using pointer = const char*;
    using reference = const char&;

    Iterator() = default;
    explicit Iterator(GzipText* text) : text_(text) {}
    const char& operator*() const { return *text_->pos_; }
    Iterator& operator++() {
      ++text_->pos_;
      return *this;
    }
    // Only comparisons with end() are meaningful: true once the text is exhausted.
    bool operator==(const Iterator& other) const {
      const Iterator& reading = text_ != nullptr ? *this : other;
      if (reading.text_ == nullptr) return true;
      GzipText& text = *reading.text_;
      return text.pos_ == text.end_ && !text.refill();
    }

   private:
    GzipText* text_ = nullptr;
  };
  Iterator begin() { return Iterator(this); }
  static Iterator end() { return Iterator(); }

 private:
  GzipText(std::filesystem::path path, void* file);
  bool refill();

  static constexpr size_t kBufferBytes = size_t{1} << 18;
  std::filesystem::path path_;
  void* file_ = nullptr;  // zlib's gzFile
  std::unique_ptr<char[]> storage_;
  char* buffer_ = nullptr;
  const char* pos_ = nullptr;
  const char* end_ = nullptr;
  uint64_t text_before_buffer_ = 0;
  bool compressed_ = false;
  bool finished_ = false;
  std::string error_;
};

}  // namespace partrain::profiler
