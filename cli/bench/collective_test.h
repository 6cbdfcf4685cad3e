// One collective as the benchmark drives it, in the manner of nccl-tests' per-collective files:
// how a message size maps to element counts and buffers, how to run it, and the values every
// rank must hold afterwards so results are checked, not just timed.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "runner/comm/comm.h"

namespace partrain::bench {

// Buffer layout of one run: element counts as nccl-tests prints them.
struct CollectiveLayout {
  uint64_t count = 0;        // elements of the op's size S
  uint64_t send_count = 0;   // elements in each rank's send buffer
  uint64_t recv_count = 0;   // elements in each rank's recv buffer
  uint64_t bytes = 0;        // S = count x element size: what algbw divides by
  // The "count" column: the count the NCCL call takes (nccl-tests' paramcount): count for
  // all_reduce, broadcast and send_recv; count / n, one rank's block, for all_gather,
  // reduce_scatter and all_to_all.
  uint64_t call_count = 0;
};

// Where the send and recv buffers sit when the op runs in place (nccl-tests' conventions).
enum class InPlace {
  kSameBuffer,         // all_reduce, broadcast: send == recv
  kSendIsRecvBlock,    // all_gather: send is this rank's block of recv
  kRecvIsSendBlock,    // reduce_scatter: recv is this rank's block of send
  kUnsupported,        // all_to_all, send_recv
};

struct CollectiveTest {
  std::string_view name;  // as --op takes it and the trace names it
  bool reduces;           // prints the redop column
  bool has_root;          // prints the root column
  InPlace in_place;
  CollectiveLayout (*layout)(uint64_t bytes, size_t element_size, int nranks);
  // Enqueues one run over buffers laid out as `layout` says.
  comm::WorkPtr (*run)(comm::Comm& comm, const void* send, void* recv, const CollectiveLayout&,
                       comm::DType dtype, comm::ReduceOp op, int root);
  // Element `index` of what this rank's recv buffer must hold afterwards (its send buffer's
  // element i is bench_value(rank, i)). One element at a time, so a check walks a buffer of any
  // size in pieces.
  double (*expected)(uint64_t index, int rank, int nranks, const CollectiveLayout&,
                     comm::ReduceOp op, int root);
};

const std::vector<CollectiveTest>& collective_tests();
const CollectiveTest* find_collective_test(std::string_view name);

// The deterministic value of element i of rank r's send buffer: small integers, exact in every
// dtype, with negatives so max and min are exercised.
double bench_value(int rank, uint64_t index);

}  // namespace partrain::bench
