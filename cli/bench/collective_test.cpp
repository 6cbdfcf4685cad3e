#include "cli/bench/collective_test.h"

#include <algorithm>

namespace partrain::bench {
namespace {

using comm::Comm;
using comm::DType;
using comm::ReduceOp;
using comm::WorkPtr;

double reduce_values(const std::vector<double>& values, ReduceOp op) {
  double result = values.front();
  for (size_t i = 1; i < values.size(); ++i) {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: result += values[i]; break;
      case ReduceOp::kMax: result = std::max(result, values[i]); break;
      case ReduceOp::kMin: result = std::min(result, values[i]); break;
    }
  }
  if (op == ReduceOp::kAvg) result /= static_cast<double>(values.size());
  return result;
}

// The reduction over all ranks of element `index` of their send buffers.
double reduced_value(uint64_t index, int nranks, ReduceOp op) {
  std::vector<double> values(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) values[static_cast<size_t>(r)] = bench_value(r, index);
  return reduce_values(values, op);
}

void fill_own(std::vector<double>& send, int rank, int, const CollectiveLayout& layout) {
  send.resize(layout.send_count);
  for (uint64_t i = 0; i < layout.send_count; ++i) send[i] = bench_value(rank, i);
}

// --- all_reduce: S = count x size; busbw factor 2(n-1)/n.
CollectiveLayout all_reduce_layout(uint64_t bytes, size_t element_size, int) {
  uint64_t count = bytes / element_size;
  return {count, count, count, count * element_size, count};
}
WorkPtr all_reduce_run(Comm& comm, const void* send, void* recv, const CollectiveLayout& layout,
                       DType dtype, ReduceOp op, int) {
  return comm.all_reduce_async(send, recv, layout.count, dtype, op);
}
void all_reduce_expected(std::vector<double>& recv, int, int nranks,
                         const CollectiveLayout& layout, ReduceOp op, int) {
  recv.resize(layout.recv_count);
  for (uint64_t i = 0; i < layout.recv_count; ++i) recv[i] = reduced_value(i, nranks, op);
}

// --- all_gather: S = the whole gathered buffer; each rank sends count / n.
CollectiveLayout gather_layout(uint64_t bytes, size_t element_size, int nranks) {
  uint64_t per_rank = bytes / element_size / static_cast<uint64_t>(nranks);
  uint64_t count = per_rank * static_cast<uint64_t>(nranks);
  return {count, per_rank, count, count * element_size, per_rank};
}
WorkPtr all_gather_run(Comm& comm, const void* send, void* recv, const CollectiveLayout& layout,
                       DType dtype, ReduceOp, int) {
  return comm.all_gather_async(send, recv, layout.send_count, dtype);
}
void all_gather_expected(std::vector<double>& recv, int, int nranks,
                         const CollectiveLayout& layout, ReduceOp, int) {
  recv.resize(layout.recv_count);
  for (int r = 0; r < nranks; ++r) {
    for (uint64_t i = 0; i < layout.send_count; ++i) {
      recv[static_cast<uint64_t>(r) * layout.send_count + i] = bench_value(r, i);
    }
  }
}

// --- reduce_scatter: S = the whole input buffer; each rank keeps count / n reduced elements.
CollectiveLayout scatter_layout(uint64_t bytes, size_t element_size, int nranks) {
  uint64_t per_rank = bytes / element_size / static_cast<uint64_t>(nranks);
  uint64_t count = per_rank * static_cast<uint64_t>(nranks);
  return {count, count, per_rank, count * element_size, per_rank};
}
WorkPtr reduce_scatter_run(Comm& comm, const void* send, void* recv,
                           const CollectiveLayout& layout, DType dtype, ReduceOp op, int) {
  return comm.reduce_scatter_async(send, recv, layout.recv_count, dtype, op);
}
void reduce_scatter_expected(std::vector<double>& recv, int rank, int nranks,
                             const CollectiveLayout& layout, ReduceOp op, int) {
  recv.resize(layout.recv_count);
  uint64_t offset = static_cast<uint64_t>(rank) * layout.recv_count;
  for (uint64_t i = 0; i < layout.recv_count; ++i) {
    recv[i] = reduced_value(offset + i, nranks, op);
  }
}

// --- broadcast: S = count x size; busbw factor 1.
WorkPtr broadcast_run(Comm& comm, const void* send, void* recv, const CollectiveLayout& layout,
                      DType dtype, ReduceOp, int root) {
  return comm.broadcast_async(send, recv, layout.count, dtype, root);
}
void broadcast_expected(std::vector<double>& recv, int, int, const CollectiveLayout& layout,
                        ReduceOp, int root) {
  recv.resize(layout.recv_count);
  for (uint64_t i = 0; i < layout.recv_count; ++i) recv[i] = bench_value(root, i);
}

// --- all_to_all: S = the whole buffer; block j of rank r goes to rank j.
WorkPtr all_to_all_run(Comm& comm, const void* send, void* recv, const CollectiveLayout& layout,
                       DType dtype, ReduceOp, int) {
  return comm.all_to_all_async(send, recv, layout.count / static_cast<uint64_t>(comm.size()),
                               dtype);
}
void all_to_all_expected(std::vector<double>& recv, int rank, int nranks,
                         const CollectiveLayout& layout, ReduceOp, int) {
  recv.resize(layout.recv_count);
  uint64_t block = layout.count / static_cast<uint64_t>(nranks);
  for (int r = 0; r < nranks; ++r) {
    for (uint64_t i = 0; i < block; ++i) {
      recv[static_cast<uint64_t>(r) * block + i] =
          bench_value(r, static_cast<uint64_t>(rank) * block + i);
    }
  }
}
CollectiveLayout all_to_all_layout(uint64_t bytes, size_t element_size, int nranks) {
  CollectiveLayout layout = gather_layout(bytes, element_size, nranks);
  layout.send_count = layout.count;
  return layout;
}

// --- send_recv: a ring shift, rank r sends to r+1 and receives from r-1; busbw factor 1.
WorkPtr send_recv_run(Comm& comm, const void* send, void* recv, const CollectiveLayout& layout,
                      DType dtype, ReduceOp, int) {
  int n = comm.size();
  int next = (comm.rank() + 1) % n;
  int prev = (comm.rank() + n - 1) % n;
  return comm.send_recv_async(send, next, recv, prev, layout.count, dtype);
}
void send_recv_expected(std::vector<double>& recv, int rank, int nranks,
                        const CollectiveLayout& layout, ReduceOp, int) {
  recv.resize(layout.recv_count);
  int prev = (rank + nranks - 1) % nranks;
  for (uint64_t i = 0; i < layout.recv_count; ++i) recv[i] = bench_value(prev, i);
}

}  // namespace

double bench_value(int rank, uint64_t index) {
  return static_cast<double>(static_cast<int64_t>((static_cast<uint64_t>(rank) * 7 + index * 3) %
                                                  13) -
                             6);
}

const std::vector<CollectiveTest>& collective_tests() {
  static const std::vector<CollectiveTest> tests = {
      {"all_reduce", true, false, InPlace::kSameBuffer, all_reduce_layout, all_reduce_run,
       fill_own, all_reduce_expected},
      {"all_gather", false, false, InPlace::kSendIsRecvBlock, gather_layout, all_gather_run,
       fill_own, all_gather_expected},
      {"reduce_scatter", true, false, InPlace::kRecvIsSendBlock, scatter_layout,
       reduce_scatter_run, fill_own, reduce_scatter_expected},
      {"broadcast", false, true, InPlace::kSameBuffer, all_reduce_layout, broadcast_run, fill_own,
       broadcast_expected},
      {"all_to_all", false, false, InPlace::kUnsupported, all_to_all_layout, all_to_all_run,
       fill_own, all_to_all_expected},
      {"send_recv", false, false, InPlace::kUnsupported, all_reduce_layout, send_recv_run,
       fill_own, send_recv_expected},
  };
  return tests;
}

const CollectiveTest* find_collective_test(std::string_view name) {
  for (const auto& test : collective_tests()) {
    if (test.name == name) return &test;
  }
  return nullptr;
}

}  // namespace partrain::bench
