#include "profiler/import/gzip_text.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>

namespace partrain::profiler {
namespace {

gzFile as_gz(void* file) { return static_cast<gzFile>(file); }

}  // namespace

StatusOr<std::unique_ptr<GzipText>> GzipText::open(const std::filesystem::path& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    return make_status(StatusCode::kUnreadable, "{}: is a directory, not a trace file",
                       path.string());
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return make_status(StatusCode::kUnreadable, "{}: cannot open: {}", path.string(),
                       std::strerror(errno));
  }
  gzFile file = gzdopen(fd, "rb");
  if (file == nullptr) {
    ::close(fd);
    return make_status(StatusCode::kUnreadable, "{}: cannot open: out of memory", path.string());
  }
  gzbuffer(file, 1 << 17);
  return std::unique_ptr<GzipText>(new GzipText(path, file));
}

GzipText::GzipText(std::filesystem::path path, void* file)
    : path_(std::move(path)), file_(file), storage_(new char[kBufferBytes]) {
  buffer_ = storage_.get();
  pos_ = end_ = buffer_;
}

GzipText::~GzipText() {
  if (file_ != nullptr) gzclose_r(as_gz(file_));
}

uint64_t GzipText::file_bytes() const {
  const z_off_t offset = gzoffset(as_gz(file_));
  return offset < 0 ? 0 : static_cast<uint64_t>(offset);
}

bool GzipText::refill() {
  if (finished_) return false;
  text_before_buffer_ += static_cast<uint64_t>(end_ - buffer_);
  pos_ = end_ = buffer_;
  const int read = gzread(as_gz(file_), buffer_, static_cast<unsigned>(kBufferBytes));
  if (read > 0) {
    compressed_ = gzdirect(as_gz(file_)) == 0;
    end_ = buffer_ + read;
    return true;
  }
  finished_ = true;
  int code = Z_OK;
  const char* message = gzerror(as_gz(file_), &code);
  if (read == 0 && (code == Z_OK || code == Z_STREAM_END)) return false;
  if (code == Z_BUF_ERROR) {
    error_ = "the gzip stream ends before its end (a truncated file?)";
  } else if (code == Z_DATA_ERROR) {
    error_ = fmt::format("the gzip stream is damaged ({})", message);
  } else if (code == Z_ERRNO) {
    error_ = fmt::format("reading failed: {}", std::strerror(errno));
  } else {
    error_ = fmt::format("reading failed: {}", message);
  }
  return false;
}

}  // namespace partrain::profiler
