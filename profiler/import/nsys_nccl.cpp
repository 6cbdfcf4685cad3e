#include "profiler/import/nsys_nccl.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "profiler/import/torch_collectives.h"

namespace partrain::profiler {
namespace {

bool creates_communicator(std::string_view function) {
  return function == "ncclCommInitRank" || function == "ncclCommInitRankConfig" ||
         function == "ncclCommInitRankScalable" || function == "ncclCommSplit" ||
         function == "ncclCommInitAll" || function == "ncclCommShrink" ||
         function == "ncclCommGrow";
}

struct Membership {
  int nranks = 0;
  std::map<int, int> world_rank_of;  // communicator rank -> world rank
};

std::string_view reduce_op_of(const std::optional<std::string>& name) {
  if (!name) return {};
  static constexpr std::pair<std::string_view, std::string_view> kOps[] = {
      {"Sum", "sum"}, {"Product", "prod"}, {"Prod", "prod"},
      {"Max", "max"}, {"Min", "min"},      {"Avg", "avg"}};
  for (const auto& [nccl, partrain] : kOps) {
    if (nccl == *name) {
      for (std::string_view known : reduce_op_names()) {
        if (known == partrain) return known;
      }
    }
  }
  return reduce_op_names().back();  // "other"
}

// One rank's buffer, back from the op's size S (nccl-tests' convention).
uint64_t buffer_bytes(const CollectiveEvent& c) {
  const uint64_t whole = nccl_tests_size_bytes(c.op, 1, c.group_size);
  return whole > 1 ? c.bytes / whole : c.bytes;
}

std::string comm_id_of(uint64_t comm) { return fmt::format("nccl:{:016x}", comm); }

// Launches of one thread, ascending launch time.
using ThreadLaunches = std::map<int64_t, std::vector<const NcclKernelLaunch*>>;

// The kernels launched on `thread` within [start, end].
std::pair<int64_t, int64_t> kernel_span(const ThreadLaunches& launches, int64_t thread,
                                        int64_t start, int64_t end, bool& found) {
  found = false;
  auto it = launches.find(thread);
  if (it == launches.end()) return {0, 0};
  const auto& list = it->second;
  auto first =
      std::lower_bound(list.begin(), list.end(), start,
                       [](const NcclKernelLaunch* l, int64_t t) { return l->launch_ns < t; });
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (auto k = first; k != list.end() && (*k)->launch_ns <= end; ++k) {
    lo = std::min(lo, (*k)->start_ns);
    hi = std::max(hi, (*k)->end_ns);
    found = true;
  }
  return {lo, hi};
}

std::string_view first_kernel_dtype(const ThreadLaunches& launches, int64_t thread, int64_t start,
                                    int64_t end) {
  auto it = launches.find(thread);
  if (it == launches.end()) return {};
  for (const NcclKernelLaunch* l : it->second) {
    if (l->launch_ns >= start && l->launch_ns <= end) {
      if (auto d = dtype_of_nccl_kernel(l->name); !d.empty()) return d;
    }
  }
  return {};
}

}  // namespace

std::string_view dtype_of_nccl_kernel(std::string_view name) {
  name = name.substr(0, name.find('('));
  static constexpr std::pair<std::string_view, std::string_view> kTypes[] = {
      {"f32", "float"},       {"float", "float"},       {"f16", "half"},   {"half", "half"},
      {"bf16", "bfloat16"},   {"bfloat16", "bfloat16"}, {"f64", "double"}, {"double", "double"},
      {"i8", "int8"},         {"int8_t", "int8"},       {"u8", "uint8"},   {"uint8_t", "uint8"},
      {"i32", "int32"},       {"int32_t", "int32"},     {"u32", "uint32"}, {"uint32_t", "uint32"},
      {"i64", "int64"},       {"int64_t", "int64"},     {"u64", "uint64"}, {"uint64_t", "uint64"},
      {"f8e4m3", "fp8_e4m3"}, {"f8e5m2", "fp8_e5m2"}};
  size_t pos = 0;
  while (pos <= name.size()) {
    const size_t next = std::min(name.find('_', pos), name.size());
    const std::string_view token = name.substr(pos, next - pos);
    for (const auto& [nccl, partrain] : kTypes) {
      if (token == nccl) {
        for (std::string_view known : collective_dtype_names()) {
          if (known == partrain) return known;
        }
      }
    }
    pos = next + 1;
  }
  return {};
}

NcclRankMap nccl_ranks(const std::map<NsysProcess, NcclProcessTrace>& processes) {
  NcclRankMap out;
  for (const auto& [process, trace] : processes) {
    // The largest communicator it created (the first of equals): the world's.
    const NcclCall* world = nullptr;
    for (const NcclCall& call : trace.calls) {
      const NcclPayload& p = call.payload;
      if (!creates_communicator(call.function) || !p.comm || !p.nranks || !p.rank) continue;
      if (*p.nranks < 1 || *p.rank < 0 || *p.rank >= *p.nranks) continue;  // damaged: no world
      if (world == nullptr || *p.nranks > *world->payload.nranks) world = &call;
    }
    if (world == nullptr) continue;
    out.rank_of[process] = *world->payload.rank;
    out.world_size = std::max(out.world_size, *world->payload.nranks);
  }
  if (!out.rank_of.empty()) {
    out.from_communicators = true;
    return out;
  }
  int next = 0;
  for (const auto& [process, trace] : processes) out.rank_of[process] = next++;
  out.world_size = next;
  return out;
}

namespace {

using Memberships = std::map<uint64_t, Membership>;

// Who is in each communicator: the creation payloads of every rank's process.
Memberships memberships(const std::map<NsysProcess, NcclProcessTrace>& processes,
                        const NcclRankMap& ranks) {
  Memberships members;
  for (const auto& [process, trace] : processes) {
    auto rank = ranks.rank_of.find(process);
    if (rank == ranks.rank_of.end()) continue;
    for (const NcclCall& call : trace.calls) {
      const NcclPayload& p = call.payload;
      if (!creates_communicator(call.function) || !p.comm || !p.nranks || !p.rank) continue;
      Membership& m = members[*p.comm];
      m.nranks = *p.nranks;
      m.world_rank_of[*p.rank] = rank->second;
    }
  }
  return members;
}

// One rank's NCCL calls, in issue order, into collective records.
class RankCollectives {
 public:
  RankCollectives(int rank, const NcclProcessTrace& trace, const Memberships& members,
                  std::vector<CollectiveRecord>& records)
      : rank_(rank), members_(members), records_(records) {
    for (const NcclKernelLaunch& l : trace.launches) launches_[l.thread].push_back(&l);
  }

  void add(const NcclCall& call) {
    if (call.function == "ncclGroupEnd") {
      on_group_end(call);
    } else if (auto op = op_of_nccl_call(call.function)) {
      on_collective(call, *op);
    }
  }
  int64_t unknown_communicators() const { return unknown_; }

 private:
  // Calls grouped between ncclGroupStart and ncclGroupEnd launch their kernels in the end.
  void on_group_end(const NcclCall& call) {
    auto& waiting = waiting_for_group_end_[call.thread];
    bool found_kernel = false;
    auto [lo, hi] = kernel_span(launches_, call.thread, call.start_ns, call.end_ns, found_kernel);
    const std::string_view dtype =
        first_kernel_dtype(launches_, call.thread, call.start_ns, call.end_ns);
    for (size_t i : waiting) {
      if (found_kernel) {
        records_[i].gpu_start_ns = lo;
        records_[i].gpu_end_ns = hi;
      }
      CollectiveEvent& c = records_[i].event;
      if (c.dtype == collective_dtype_names()[0] && !dtype.empty()) {
        c.dtype = dtype;
        // The size was known, its type was not: the count follows now.
        const uint32_t element = dtype_bytes(dtype);
        if (element > 0 && c.count == 0) c.count = buffer_bytes(c) / element;
      }
    }
    waiting.clear();
  }

  void on_collective(const NcclCall& call, std::string_view op) {
    const NcclPayload& p = call.payload;
    CollectiveRecord record;
    record.world_rank = rank_;
    CollectiveEvent& c = record.event;
    c.op = op;
    c.enqueue_ns = c.start_ns = call.start_ns;
    c.end_ns = call.end_ns;
    c.state = CollectiveState::kCompleted;
    c.reduce_op = reduce_op_of(p.reduce_op);
    bool found_kernel = false;
    auto [lo, hi] = kernel_span(launches_, call.thread, call.start_ns, call.end_ns, found_kernel);
    const std::string_view dtype =
        first_kernel_dtype(launches_, call.thread, call.start_ns, call.end_ns);
    c.dtype = dtype.empty() ? collective_dtype_names()[0] : dtype;
    if (found_kernel) {
      record.gpu_start_ns = lo;
      record.gpu_end_ns = hi;
    }
    place(c, p);
    const uint64_t buffer = p.bytes.value_or(0);
    const uint32_t element = dtype_bytes(c.dtype);
    c.count = element > 0 ? buffer / element : 0;
    c.bytes = nccl_tests_size_bytes(c.op, buffer, c.group_size);
    records_.push_back(std::move(record));
    if (!found_kernel) waiting_for_group_end_[call.thread].push_back(records_.size() - 1);
  }

  // Its communicator, members, root or peer and sequence number; unmatched without a payload.
  void place(CollectiveEvent& c, const NcclPayload& p) {
    if (!p.comm) {
      c.comm_id = fmt::format("unmatched:rank{}", rank_);
      c.seq = static_cast<uint64_t>(unknown_++);
      return;
    }
    c.comm_id = comm_id_of(*p.comm);
    auto m = members_.find(*p.comm);
    if (m != members_.end()) {
      c.group_size = m->second.nranks;
      if (static_cast<int>(m->second.world_rank_of.size()) == m->second.nranks) {
        for (const auto& [comm_rank, world_rank] : m->second.world_rank_of) {
          c.group_ranks.push_back(world_rank);
          if (world_rank == rank_) c.rank = comm_rank;
        }
      }
    }
    auto world_of = [&](int comm_rank) {
      if (m == members_.end()) return -1;
      auto w = m->second.world_rank_of.find(comm_rank);
      return w == m->second.world_rank_of.end() ? -1 : w->second;
    };
    if (is_p2p(c.op) && p.peer) {
      c.peer = world_of(*p.peer);
      c.seq = p2p_seq_[{c.comm_id, *p.peer}]++;
    } else {
      if (is_rooted_op(c.op) && p.root) c.peer = world_of(*p.root);
      c.seq = seq_[c.comm_id]++;
    }
  }

  int rank_;
  const Memberships& members_;
  std::vector<CollectiveRecord>& records_;
  ThreadLaunches launches_;
  std::map<std::string, uint64_t> seq_;
  std::map<std::pair<std::string, int>, uint64_t> p2p_seq_;
  std::map<int64_t, std::vector<size_t>> waiting_for_group_end_;  // thread -> record indices
  int64_t unknown_ = 0;
};

}  // namespace

NcclCollectives nccl_collectives(const std::map<NsysProcess, NcclProcessTrace>& processes,
                                 const NcclRankMap& ranks) {
  NcclCollectives out;
  const Memberships members = memberships(processes, ranks);
  for (const auto& [process, trace] : processes) {
    auto found = ranks.rank_of.find(process);
    if (found == ranks.rank_of.end()) continue;
    const int rank = found->second;
    std::vector<CollectiveRecord>& records = out.by_rank[rank];
    RankCollectives collectives(rank, trace, members, records);
    for (const NcclCall& call : trace.calls) collectives.add(call);
    if (collectives.unknown_communicators() > 0) {
      out.unmatched.push_back(
          {rank, collectives.unknown_communicators(),
           "NCCL calls without a payload (export with `nsys export --include-blobs=true`, "
           "NCCL 2.19 or newer): their communicator is unknown"});
    }
    for (const CollectiveRecord& r : records) {
      if (r.gpu_end_ns >= 0 && !r.event.comm_id.starts_with("unmatched") &&
          ends_together(r.event.op)) {
        out.ends.push_back({r.event.comm_id, r.event.seq, rank, r.gpu_end_ns});
      }
    }
  }
  return out;
}

}  // namespace partrain::profiler
