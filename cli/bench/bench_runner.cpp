#include "cli/bench/bench_runner.h"

#include <algorithm>

#include "analyzers/bandwidth.h"
#include "core/clock.h"

namespace partrain::bench {
namespace {

// One size of one op: send and recv buffers as the layout and the in-place convention say.
struct Buffers {
  void* send = nullptr;
  void* recv = nullptr;
  size_t send_bytes = 0;
  size_t recv_bytes = 0;
};

Buffers place_buffers(void* a, void* b, const CollectiveTest& test,
                      const CollectiveLayout& layout, size_t width, int rank, bool in_place) {
  Buffers buffers{a, b, layout.send_count * width, layout.recv_count * width};
  if (!in_place) return buffers;
  auto* base = static_cast<std::byte*>(a);
  switch (test.in_place) {
    case InPlace::kSameBuffer: buffers.recv = a; break;
    case InPlace::kSendIsRecvBlock:
      buffers.recv = a;
      buffers.send = base + static_cast<size_t>(rank) * layout.send_count * width;
      break;
    case InPlace::kRecvIsSendBlock:
      buffers.send = a;
      buffers.recv = base + static_cast<size_t>(rank) * layout.recv_count * width;
      break;
    case InPlace::kUnsupported: break;
  }
  return buffers;
}

// Reduces one integer over the ranks through the communicator itself (device buffers on NCCL).
StatusOr<int64_t> reduce_over_ranks(comm::Comm& comm, BufferSpace& space, int64_t value,
                                    comm::ReduceOp op) {
  ASSIGN_OR_RETURN(void* raw, space.allocate(sizeof(int64_t)));
  ScopedBuffer buffer(space, raw);
  RETURN_IF_ERROR(space.upload(buffer.get(), &value, sizeof value));
  RETURN_IF_ERROR(comm.all_reduce(buffer.get(), buffer.get(), 1, comm::DType::kI64, op));
  RETURN_IF_ERROR(space.download(&value, buffer.get(), sizeof value));
  return value;
}

StatusOr<int64_t> combine_time(comm::Comm& comm, BufferSpace& space, int64_t ns,
                               TimeAverage average) {
  switch (average) {
    case TimeAverage::kRank0: {
      int64_t mine = comm.rank() == 0 ? ns : 0;
      return reduce_over_ranks(comm, space, mine, comm::ReduceOp::kSum);
    }
    case TimeAverage::kMean: {
      ASSIGN_OR_RETURN(int64_t total, reduce_over_ranks(comm, space, ns, comm::ReduceOp::kSum));
      return total / comm.size();
    }
    case TimeAverage::kMin: return reduce_over_ranks(comm, space, ns, comm::ReduceOp::kMin);
    case TimeAverage::kMax: return reduce_over_ranks(comm, space, ns, comm::ReduceOp::kMax);
  }
  return ns;
}

// Buffers are filled and checked this many elements at a time: the host copies a check needs
// stay a few MB beside the benchmark's two buffers, whatever the message size (nccl-tests keeps
// one expected buffer; a whole-buffer check here had taken ~7x the message in host memory).
constexpr uint64_t kPieceElements = uint64_t{1} << 20;

Status fill_send(BufferSpace& space, const Buffers& buffers, uint64_t send_count, comm::DType dtype,
                 int rank) {
  const size_t width = comm::dtype_size(dtype);
  std::vector<double> values;
  for (uint64_t first = 0; first < send_count; first += kPieceElements) {
    values.resize(std::min(kPieceElements, send_count - first));
    for (size_t i = 0; i < values.size(); ++i) values[i] = bench_value(rank, first + i);
    const std::vector<std::byte> bytes = encode_values(values, dtype);
    RETURN_IF_ERROR(space.upload(static_cast<std::byte*>(buffers.send) + first * width,
                                 bytes.data(), bytes.size()));
  }
  return Status::ok();
}

// Elements of this rank's recv buffer off what the test expects.
StatusOr<int64_t> count_wrong_received(BufferSpace& space, const Buffers& buffers,
                                       const CollectiveTest& test, const CollectiveLayout& layout,
                                       const BenchOptions& options, int rank, int nranks) {
  const size_t width = comm::dtype_size(options.dtype);
  std::vector<std::byte> got;
  std::vector<double> expected;
  int64_t wrong = 0;
  for (uint64_t first = 0; first < layout.recv_count; first += kPieceElements) {
    const uint64_t n = std::min(kPieceElements, layout.recv_count - first);
    got.resize(n * width);
    RETURN_IF_ERROR(space.download(
        got.data(), static_cast<const std::byte*>(buffers.recv) + first * width, got.size()));
    expected.resize(n);
    for (uint64_t i = 0; i < n; ++i) {
      expected[i] = test.expected(first + i, rank, nranks, layout, options.reduce_op, options.root);
    }
    wrong += count_wrong(decode_values(got, options.dtype), expected, options.dtype);
  }
  return wrong;
}

StatusOr<Measurement> measure(comm::Comm& comm, BufferSpace& space, const CollectiveTest& test,
                              const CollectiveLayout& layout, const BenchOptions& options,
                              bool in_place) {
  const size_t width = comm::dtype_size(options.dtype);
  const int rank = comm.rank();
  const int nranks = comm.size();
  size_t bytes_a = std::max(layout.send_count, layout.recv_count) * width;
  ASSIGN_OR_RETURN(void* raw_a, space.allocate(bytes_a));
  ScopedBuffer a(space, raw_a);
  ASSIGN_OR_RETURN(void* raw_b, space.allocate(layout.recv_count * width));
  ScopedBuffer b(space, raw_b);
  Buffers buffers = place_buffers(a.get(), b.get(), test, layout, width, rank, in_place);
  RETURN_IF_ERROR(fill_send(space, buffers, layout.send_count, options.dtype, rank));

  auto run_once = [&] {
    return test.run(comm, buffers.send, buffers.recv, layout, options.dtype, options.reduce_op,
                    options.root);
  };
  for (int i = 0; i < options.warmup_iters; ++i) RETURN_IF_ERROR(run_once()->wait());
  RETURN_IF_ERROR(comm.barrier());
  // Enqueue every iteration before waiting, as nccl-tests launches them back to back.
  int64_t start = monotonic_ns();
  std::vector<comm::WorkPtr> pending;
  pending.reserve(static_cast<size_t>(options.iters));
  for (int i = 0; i < options.iters; ++i) pending.push_back(run_once());
  for (auto& work : pending) RETURN_IF_ERROR(work->wait());
  int64_t elapsed = (monotonic_ns() - start) / std::max(1, options.iters);
  ASSIGN_OR_RETURN(int64_t time_ns, combine_time(comm, space, elapsed, options.average));

  Measurement result;
  result.time_us = static_cast<double>(time_ns) / 1e3;
  auto bandwidth = analyzers::collective_bandwidth(test.name, static_cast<double>(layout.bytes),
                                                   static_cast<double>(time_ns) / 1e9, nranks);
  result.algbw_gbps = bandwidth.algbw_gbps;
  result.busbw_gbps = bandwidth.busbw_gbps;
  result.wrong = -1;
  if (options.check) {
    // The timed runs may have reduced in place over and over: start again from fresh inputs.
    RETURN_IF_ERROR(fill_send(space, buffers, layout.send_count, options.dtype, rank));
    RETURN_IF_ERROR(run_once()->wait());
    ASSIGN_OR_RETURN(int64_t wrong,
                     count_wrong_received(space, buffers, test, layout, options, rank, nranks));
    ASSIGN_OR_RETURN(result.wrong, reduce_over_ranks(comm, space, wrong, comm::ReduceOp::kSum));
  }
  return result;
}

// What every rank must agree on: the runs each makes (ops, sizes, iterations, check) and their
// element type, reduction and root, folded into one number (FNV-1a).
int64_t options_fingerprint(const BenchOptions& options) {
  uint64_t hash = 1469598103934665603ull;
  auto mix = [&](uint64_t value) {
    for (int i = 0; i < 8; ++i) {
      hash ^= (value >> (8 * i)) & 0xff;
      hash *= 1099511628211ull;
    }
  };
  for (uint64_t size : bench_sizes(options)) mix(size);
  for (const std::string& op : options.ops) {
    for (char c : op) mix(static_cast<unsigned char>(c));
    mix(0);
  }
  mix(static_cast<uint64_t>(options.warmup_iters));
  mix(static_cast<uint64_t>(options.iters));
  mix(options.check ? 1 : 0);
  mix(static_cast<uint64_t>(options.dtype));
  mix(static_cast<uint64_t>(options.reduce_op));
  mix(static_cast<uint64_t>(options.root));
  mix(static_cast<uint64_t>(options.average));
  return static_cast<int64_t>(hash >> 1);  // non-negative: reduced as a signed integer
}

// Ranks given different options would call different collectives, or the same with other
// sizes, and the transport aborts the process (Gloo's enforce): found before the first run.
Status check_ranks_agree(comm::Comm& comm, BufferSpace& space, const BenchOptions& options) {
  const int64_t mine = options_fingerprint(options);
  ASSIGN_OR_RETURN(const int64_t low, reduce_over_ranks(comm, space, mine, comm::ReduceOp::kMin));
  ASSIGN_OR_RETURN(const int64_t high, reduce_over_ranks(comm, space, mine, comm::ReduceOp::kMax));
  if (low != high) {
    return invalid_argument(
        "the ranks were given different benchmark options (sizes, ops, iterations, check, "
        "datatype, reduction, root or time averaging; flags or PARTRAIN_* variables differ "
        "between ranks or nodes): give every rank the same ones");
  }
  return Status::ok();
}

}  // namespace

std::vector<uint64_t> bench_sizes(const BenchOptions& options) {
  std::vector<uint64_t> sizes;
  for (uint64_t size = options.min_bytes; size <= options.max_bytes;) {
    sizes.push_back(size);
    uint64_t next = options.step_factor > 1 ? size * options.step_factor
                                            : size + options.step_bytes;
    if (next <= size) break;  // size 0 with a factor, or overflow
    size = next;
  }
  return sizes;
}

StatusOr<std::vector<BenchRow>> run_collective_bench(
    comm::Comm& comm, BufferSpace& space, const BenchOptions& options,
    const std::function<void(const BenchRow&)>& on_row) {
  RETURN_IF_ERROR(check_ranks_agree(comm, space, options));
  std::vector<BenchRow> rows;
  const size_t width = comm::dtype_size(options.dtype);
  for (const std::string& op : options.ops) {
    const CollectiveTest* test = find_collective_test(op);
    if (test == nullptr) return invalid_argument("unknown collective '{}'", op);
    for (uint64_t size : bench_sizes(options)) {
      CollectiveLayout layout = test->layout(size, width, comm.size());
      BenchRow row;
      row.op = op;
      row.bytes = layout.bytes;
      row.count = layout.call_count;
      row.type = std::string(comm::dtype_name(options.dtype));
      if (test->reduces) row.redop = std::string(comm::reduce_op_name(options.reduce_op));
      row.root = test->has_root ? options.root : -1;
      row.nranks = comm.size();
      ASSIGN_OR_RETURN(row.out_of_place, measure(comm, space, *test, layout, options, false));
      if (test->in_place != InPlace::kUnsupported) {
        ASSIGN_OR_RETURN(row.in_place, measure(comm, space, *test, layout, options, true));
      }
      rows.push_back(std::move(row));
      if (on_row) on_row(rows.back());
    }
  }
  return rows;
}

}  // namespace partrain::bench
