// The node's collector and the ranks' client for it. The Collector listens on a Unix socket in
// a private (0700) directory, accepts every rank of the node, validates their frames and hands
// the records to one consumer (the SQLite writer) from one thread. CollectorClient is the
// recorder's sink in a rank: it sends batches and, when the collector is gone, drops and counts.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/status.h"
#include "profiler/collector_protocol.h"
#include "profiler/recorder.h"

namespace partrain::profiler {

// A run id names directories (the collector's, the log directory's, the default trace's): 1 to
// 200 characters without '/' or control characters, not starting with '.' (nor "." or "..").
// kInvalidArgument "'<id>' cannot name a run's directories: ..." otherwise, for the caller to
// say which flag or variable gave it.
Status check_run_id(std::string_view run_id);

// Creates (mode 0700) and returns the directory for a run's collector socket:
// $XDG_RUNTIME_DIR/partrain/<run_id> when that variable is an absolute path naming a directory,
// else /tmp/partrain-<uid>/<run_id>. A parent that is not this user's private directory (another
// user's, one open to others, a symbolic link: the socket could be swapped) is not used: the
// run gets a fresh private directory, $TMPDIR/partrain-collector-XXXXXX, with a warning saying
// why. So does a run whose directory's path leaves no room for a socket name of
// kMaxCollectorSocketNameBytes within a Unix socket's 107 bytes (a long run id or
// XDG_RUNTIME_DIR), at debug level. An existing run directory must be private too.
StatusOr<std::string> make_collector_dir(std::string_view run_id);
// The longest socket name the collector's directory must leave room for: collector-<pid>.sock.
inline constexpr size_t kMaxCollectorSocketNameBytes = 32;
// The name of those fresh directories, for the clean-up of a launcher killed before removing its
// own (runner/launch/stale_launcher_dirs.h).
inline constexpr std::string_view kFallbackCollectorDirPrefix = "partrain-collector-";
// The parent of every run's collector directory: $XDG_RUNTIME_DIR/partrain or /tmp/partrain-<uid>
// (it may not exist yet).
std::string collector_base_dir();

// What the collector does with what it receives; called on the collector's thread only.
struct CollectorConsumer {
  // count records laid out as [u32 LE length][bytes]...; iterate with for_each_record.
  std::function<void(int rank, std::span<const uint8_t> records, uint32_t count)> records;
  std::function<void(int rank, uint64_t count)> dropped;  // records the rank lost
  std::function<void(int rank, bool clean)> closed;        // optional; clean = after GOODBYE
  // Optional; called at least every CollectorOptions::tick_interval while the collector runs,
  // busy or idle, so an owner can do timed work (the writer's commit_if_due) on this thread.
  std::function<void()> tick = {};
  // Optional: a client said HELLO as `rank`; `pid` is the peer process the kernel reports for
  // the socket (SO_PEERCRED; 0 when it cannot say, as for a peer in another pid namespace).
  std::function<void(int rank, pid_t pid)> hello = {};
  // Optional: a client said HELLO as `rank` from process `pid` while process `other` is still
  // connected as the same rank, and neither process started the other (a wrapper and the
  // program it runs, which takes the rank over, are one rank): two processes record one rank.
  std::function<void(int rank, pid_t pid, pid_t other)> rank_shared = {};
};

struct CollectorOptions {
  std::string socket_path;  // e.g. make_collector_dir(run_id) + "/collector.sock"
  std::string token;        // the run's PARTRAIN_TOKEN; every frame must carry it
  CollectorLimits limits;
  std::chrono::milliseconds tick_interval{50};  // how often consumer.tick runs (when set)
};

struct CollectorStats {
  uint64_t connections = 0;  // accepted
  uint64_t rejected = 0;     // disconnected for a bad frame (magic, version, token, size, order)
  // Of them, clients cut off before a valid HELLO: no rank's events came through them.
  uint64_t rejected_unidentified = 0;
  uint64_t batches = 0;
  uint64_t records = 0;
  uint64_t dropped_reported = 0;
  uint64_t unclean_closes = 0;  // connections that ended without GOODBYE (or were cut by drain)
};

// What drain() found.
struct CollectorDrainResult {
  size_t drained = 0;  // connections read to their end
  size_t cut = 0;      // connections still open at the deadline, closed unread
};

class Collector {
 public:
  // Binds the socket (replacing a stale one at the path) and starts serving.
  static StatusOr<std::unique_ptr<Collector>> start(CollectorOptions options,
                                                    CollectorConsumer consumer);
  // Returns promptly even with clients connected: they see the socket close. Bytes they sent
  // that were not read yet are lost; call drain() first to keep them.
  ~Collector();
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;

  const std::string& socket_path() const { return options_.socket_path; }
  CollectorStats stats() const;

  // For the end of a run, when the clients have exited or are about to: stops accepting (the
  // connections already queued are still taken and the socket file is removed), reads every
  // connection to its end, and returns once all have closed or the timeout has passed (the rest
  // are closed unread, reported as unclean). The collector's thread has ended when it returns,
  // so the consumer is no longer called. Call at most once; later calls return {}.
  CollectorDrainResult drain(std::chrono::milliseconds timeout);

 private:
  struct Connection;
  Collector(CollectorOptions options, CollectorConsumer consumer, int listen_fd, int wake_read,
            int wake_write);
  void serve();
  void accept_pending(std::vector<std::unique_ptr<Connection>>& connections);
  void close_connection(Connection& connection, bool cut);
  void tick_if_due(int64_t now_ns);
  bool read_from(Connection& connection);  // false: close it
  bool handle_frame(Connection& connection, const CollectorFrame& frame);
  void reject(const Connection& connection, const Status& why);
  void check_rank_shared(const Connection& connection);

  CollectorOptions options_;
  CollectorConsumer consumer_;
  int listen_fd_ = -1;
  int wake_read_ = -1;  // a pipe written by the destructor or drain() to change the poll loop
  int wake_write_ = -1;
  // 0 serve, 1 stop now (destructor), 2 drain until drain_deadline_ns_; set before waking.
  std::atomic<int> mode_{0};
  std::atomic<int64_t> drain_deadline_ns_{0};
  CollectorDrainResult drain_result_;  // written by the thread, read after joining it
  bool socket_removed_ = false;        // likewise: drain already unlinked the socket file
  int64_t next_tick_ns_ = 0;
  std::multimap<int32_t, pid_t> live_ranks_;  // rank -> peer pid of each connection said HELLO
  std::atomic<uint64_t> connections_{0};
  std::atomic<uint64_t> rejected_{0};
  std::atomic<uint64_t> rejected_unidentified_{0};
  std::atomic<uint64_t> batches_{0};
  std::atomic<uint64_t> records_{0};
  std::atomic<uint64_t> dropped_reported_{0};
  std::atomic<uint64_t> unclean_closes_{0};
  std::thread thread_;
};

struct CollectorClientOptions {
  std::string socket_path;
  std::string token;
  int32_t rank = 0;
  // How long the first connection is retried (the collector may still be starting).
  std::chrono::milliseconds connect_timeout{2000};
  // A frame not sent by then closes the connection and its records count as lost.
  std::chrono::milliseconds send_timeout{1000};
  // How often a lost connection is retried; records in between are lost and counted.
  std::chrono::milliseconds reconnect_interval{1000};
};

struct CollectorClientStats {
  uint64_t batches_sent = 0;
  uint64_t records_sent = 0;
  uint64_t records_lost = 0;  // batches that could not be sent (collector gone or too slow)
  uint64_t connects = 0;
};

class CollectorClient : public RecordSink {
 public:
  // Connects now, retrying for up to connect_timeout; never throws. Without a collector it
  // keeps running and counts what it loses.
  explicit CollectorClient(CollectorClientOptions options);
  // Sends GOODBYE so the collector can tell a clean end from a crash.
  ~CollectorClient() override;
  CollectorClient(const CollectorClient&) = delete;
  CollectorClient& operator=(const CollectorClient&) = delete;

  void write_batch(std::span<const uint8_t> records, uint32_t record_count) override;
  void dropped(uint64_t count) override;

  bool connected() const { return fd_ >= 0; }
  CollectorClientStats stats() const;

 private:
  bool ensure_connected();
  bool connect_once();
  bool send_frame(std::span<const uint8_t> head, std::span<const uint8_t> tail);
  void disconnect(std::string_view why);

  CollectorClientOptions options_;
  int fd_ = -1;
  int64_t next_connect_ns_ = 0;
  uint64_t unreported_lost_ = 0;  // lost records and drops not yet told to a collector
  bool warned_ = false;
  std::atomic<uint64_t> batches_sent_{0};
  std::atomic<uint64_t> records_sent_{0};
  std::atomic<uint64_t> records_lost_{0};
  std::atomic<uint64_t> connects_{0};
};

}  // namespace partrain::profiler
