#include "cli/bench/collective_test.h"

#include <algorithm>

namespace partrain::bench {
namespace {

using comm::Comm;
using comm::DType;
using comm::ReduceOp;
using comm::WorkPtr;

// The reduction over all ranks of element `index` of their send buffers.
double reduced_value(uint64_t index, int nranks, ReduceOp op) {
  double result = bench_value(0, index);
  for (int r = 1; r < nranks; ++r) {
    const double value = bench_value(r, index);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        result += value;
        break;
      case ReduceOp::kMax:
        result = std::max(result, value);
        break;
      case ReduceOp::kMin:
        result = std::min(result, value);
        break;
    }
  }
  return op == ReduceOp::kAvg ? result / static_cast<double>(nranks) : result;
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
double all_reduce_expected(uint64_t i, int, int nranks, const CollectiveLayout&, ReduceOp op, int) {
  return reduced_value(i, nranks, op);
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
double all_gather_expected(uint64_t i, int, int, const CollectiveLayout& layout, ReduceOp, int) {
  return bench_value(static_cast<int>(i / layout.send_count), i % layout.send_count);
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
double reduce_scatter_expected(uint64_t i, int rank, int nranks, const CollectiveLayout& layout,
                               ReduceOp op, int) {
  return reduced_value(static_cast<uint64_t>(rank) * layout.recv_count + i, nranks, op);
}

// --- broadcast: S = count x size; busbw factor 1.
WorkPtr broadcast_run(Comm& comm, const void* send, void* recv, const CollectiveLayout& layout,
                      DType dtype, ReduceOp, int root) {
  return comm.broadcast_async(send, recv, layout.count, dtype, root);
}
double broadcast_expected(uint64_t i, int, int, const CollectiveLayout&, ReduceOp, int root) {
  return bench_value(root, i);
}

// --- all_to_all: S = the whole buffer; block j of rank r goes to rank j.
WorkPtr all_to_all_run(Comm& comm, const void* send, void* recv, const CollectiveLayout& layout,
                       DType dtype, ReduceOp, int) {
  return comm.all_to_all_async(send, recv, layout.count / static_cast<uint64_t>(comm.size()),
                               dtype);
}
// Block r of this rank's result is block `rank` of rank r's input.
double all_to_all_expected(uint64_t i, int rank, int nranks, const CollectiveLayout& layout,
                           ReduceOp, int) {
  const uint64_t block = layout.count / static_cast<uint64_t>(nranks);
  return bench_value(static_cast<int>(i / block), static_cast<uint64_t>(rank) * block + i % block);
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
double send_recv_expected(uint64_t i, int rank, int nranks, const CollectiveLayout&, ReduceOp,
                          int) {
  return bench_value((rank + nranks - 1) % nranks, i);
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
       all_reduce_expected},
      {"all_gather", false, false, InPlace::kSendIsRecvBlock, gather_layout, all_gather_run,
       all_gather_expected},
      {"reduce_scatter", true, false, InPlace::kRecvIsSendBlock, scatter_layout, reduce_scatter_run,
       reduce_scatter_expected},
      {"broadcast", false, true, InPlace::kSameBuffer, all_reduce_layout, broadcast_run,
       broadcast_expected},
      {"all_to_all", false, false, InPlace::kUnsupported, all_to_all_layout, all_to_all_run,
       all_to_all_expected},
      {"send_recv", false, false, InPlace::kUnsupported, all_reduce_layout, send_recv_run,
       send_recv_expected},
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
