// The per-rank recorder: any thread hands it an encoded event, which lands in that thread's own
// RecordBuffer without locks or waiting; a background flusher drains every buffer at least every
// flush interval and ships batches to a RecordSink (the collector client, or a test's sink).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "profiler/record_buffer.h"

namespace partrain::profiler {

// Where batches go. Called from the recorder's flusher thread only (never concurrently), so an
// implementation needs no locking of its own. It may block for a bounded time (the collector
// client's send timeout); training threads never wait on it.
class RecordSink {
 public:
  virtual ~RecordSink() = default;
  // record_count records laid out as [u32 LE length][bytes]... (collector_protocol.h).
  virtual void write_batch(std::span<const uint8_t> records, uint32_t record_count) = 0;
  // Records this rank lost since the last report (full buffers); goes into the store's stat.
  virtual void dropped(uint64_t count) = 0;
};

struct RecorderOptions {
  size_t buffer_bytes_per_thread = 1 << 20;
  size_t max_record_bytes = 64 * 1024;
  size_t max_batch_bytes = 256 * 1024;  // keep below CollectorLimits::max_batch_payload_bytes
  std::chrono::milliseconds flush_interval{50};
};

struct RecorderStats {
  uint64_t recorded = 0;     // accepted into a buffer
  uint64_t dropped = 0;      // refused: buffer full, record too long, or no buffer for the thread
  uint64_t shipped = 0;      // handed to the sink
  uint64_t batches = 0;
  uint64_t sink_errors = 0;  // sink calls that threw; the batch is lost and counted here
};

class Recorder {
 public:
  // The sink must outlive the recorder. Starts the flusher; if it cannot start, records are
  // still buffered and flush() drains them on the caller's thread.
  explicit Recorder(RecordSink& sink, RecorderOptions options = {});
  // Stops the flusher after a final drain of every buffer (threads must have stopped recording).
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // From any thread. Copies the bytes into the calling thread's buffer; false if dropped. The
  // first call on a thread allocates that thread's buffer; every later call neither allocates,
  // locks nor waits.
  bool record(std::span<const uint8_t> encoded_event) noexcept;
  // Drains every buffer to the sink now; true once done, false if that took longer than timeout.
  bool flush(std::chrono::milliseconds timeout = std::chrono::seconds(5)) noexcept;

  // On a thread that is not the program's own and records bursts: CUPTI's buffer thread, which
  // translates thousands of GPU records at once (a PyTorch step's kernels, half a second of
  // them, with names of 400 bytes on average: more than a thread's buffer holds). While one of
  // these lives on the thread, a record that finds the thread's buffer full asks for a drain and
  // waits for the room, `most` in all over the scope, before it is dropped. Training threads
  // never make one: they are never made to wait.
  class WaitForRoom {
   public:
    explicit WaitForRoom(std::chrono::milliseconds most);
    ~WaitForRoom();
    WaitForRoom(const WaitForRoom&) = delete;
    WaitForRoom& operator=(const WaitForRoom&) = delete;
  };

  RecorderStats stats() const;

 private:
  RecordBuffer* register_thread() noexcept;
  // Drains until `buffer` has room for `size` bytes or the thread's WaitForRoom time is spent.
  void wait_for_room(RecordBuffer& buffer, size_t size) noexcept;
  void flusher_loop();
  void drain_all();  // flusher (or flush() without a flusher) only
  void ship(uint32_t record_count);

  RecordSink& sink_;
  const RecorderOptions options_;
  const uint64_t id_;  // keys this recorder in each thread's registration (see recorder.cpp)

  mutable std::mutex buffers_mutex_;  // registration vs the flusher's snapshot; never held while draining
  std::vector<std::shared_ptr<RecordBuffer>> buffers_;
  // Counts of retired buffers the flusher has released, so stats stay exact after they go.
  std::atomic<uint64_t> forgotten_dropped_{0};
  std::atomic<uint64_t> forgotten_appended_{0};
  std::atomic<uint64_t> unregistered_dropped_{0};  // no buffer could be made for the thread

  std::mutex drain_mutex_;  // one drain at a time: the flusher, or flush() without one
  std::vector<uint8_t> batch_;
  uint64_t reported_dropped_ = 0;
  std::atomic<uint64_t> shipped_{0};
  std::atomic<uint64_t> batches_{0};
  std::atomic<uint64_t> sink_errors_{0};

  std::mutex mutex_;  // the flusher's wake-up state below
  std::condition_variable wake_;
  std::condition_variable flushed_;
  bool stop_ = false;
  uint64_t flush_requested_ = 0;
  uint64_t flush_done_ = 0;
  std::thread flusher_;
};

}  // namespace partrain::profiler
