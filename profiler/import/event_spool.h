// A temporary file of trace events (their wire encoding, trace_event.h) written once and read
// back once, so an importer can hold a whole input's events on disk, not in memory, while it
// learns what it needs before storing them (clock offsets, steps, matched collectives). The file
// has no name: it is unlinked when created, so nothing is left behind whatever happens.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include "core/status.h"
#include "profiler/trace_event.h"

namespace partrain::profiler {

class EventSpool {
 public:
  // In `directory` (where the import's output goes; kFailed when it cannot create a file there).
  static StatusOr<std::unique_ptr<EventSpool>> create(const std::filesystem::path& directory);
  ~EventSpool();
  EventSpool(const EventSpool&) = delete;
  EventSpool& operator=(const EventSpool&) = delete;

  Status append(const TraceEvent& event);
  // Everything appended so far, in order, in batches; stops at the first failure (of reading,
  // or of `consume`). The spool can be appended to and replayed again afterwards.
  Status replay(const std::function<Status(std::vector<TraceEvent>&)>& consume);
  uint64_t events() const { return events_; }
  uint64_t bytes() const { return written_ + pending_.size(); }

 private:
  explicit EventSpool(int fd) : fd_(fd) {}
  Status flush();

  static constexpr size_t kFlushBytes = size_t{1} << 20;
  int fd_ = -1;
  std::vector<uint8_t> pending_;
  uint64_t written_ = 0;
  uint64_t events_ = 0;
};

}  // namespace partrain::profiler
