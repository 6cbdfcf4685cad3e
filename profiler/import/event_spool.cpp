#include "profiler/import/event_spool.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace partrain::profiler {

StatusOr<std::unique_ptr<EventSpool>> EventSpool::create(const std::filesystem::path& directory) {
  const std::filesystem::path dir = directory.empty() ? std::filesystem::path(".") : directory;
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    // File systems without O_TMPFILE: a named file, unlinked at once.
    std::string name = (dir / ".partrain-import-spool-XXXXXX").string();
    fd = ::mkostemp(name.data(), O_CLOEXEC);
    if (fd >= 0) ::unlink(name.c_str());
  }
  if (fd < 0) {
    return failed("cannot create a temporary file in {}: {}", dir.string(), std::strerror(errno));
  }
  return std::unique_ptr<EventSpool>(new EventSpool(fd));
}

EventSpool::~EventSpool() {
  if (fd_ >= 0) ::close(fd_);
}

Status EventSpool::append(const TraceEvent& event) {
  encode_event(event, pending_);
  ++events_;
  return pending_.size() >= kFlushBytes ? flush() : Status::ok();
}

Status EventSpool::flush() {
  size_t done = 0;
  while (done < pending_.size()) {
    const ssize_t n = ::pwrite(fd_, pending_.data() + done, pending_.size() - done,
                               static_cast<off_t>(written_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return failed("writing the import's temporary file failed: {}",
                    n < 0 ? std::strerror(errno) : "no space written");
    }
    done += static_cast<size_t>(n);
  }
  written_ += pending_.size();
  pending_.clear();
  return Status::ok();
}

Status EventSpool::replay(const std::function<Status(std::vector<TraceEvent>&)>& consume) {
  RETURN_IF_ERROR(flush());
  std::vector<uint8_t> buffer;
  std::vector<TraceEvent> events;
  uint64_t offset = 0;
  size_t held = 0;  // bytes of buffer holding a record not yet decoded
  buffer.resize(kFlushBytes + kMaxEventRecordBytes + sizeof(uint32_t));
  while (offset < written_ || held > 0) {
    const size_t want = std::min<uint64_t>(buffer.size() - held, written_ - offset);
    size_t got = 0;
    while (got < want) {
      const ssize_t n =
          ::pread(fd_, buffer.data() + held + got, want - got, static_cast<off_t>(offset + got));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        return failed("reading the import's temporary file failed: {}",
                      n < 0 ? std::strerror(errno) : "it ended early");
      }
      got += static_cast<size_t>(n);
    }
    offset += got;
    const size_t available = held + got;
    // Whole records only: the last one may continue in the next read.
    size_t whole = 0;
    while (whole + sizeof(uint32_t) <= available) {
      uint32_t size = 0;
      std::memcpy(&size, buffer.data() + whole, sizeof size);  // little-endian hosts
      if (whole + sizeof(uint32_t) + size > available) break;
      whole += sizeof(uint32_t) + size;
    }
    if (whole == 0) return failed("the import's temporary file holds a damaged record");
    events.clear();
    RETURN_IF_ERROR(decode_events_into(std::span<const uint8_t>(buffer.data(), whole), events));
    RETURN_IF_ERROR(consume(events));
    held = available - whole;
    std::memmove(buffer.data(), buffer.data() + whole, held);
  }
  return Status::ok();
}

}  // namespace partrain::profiler
