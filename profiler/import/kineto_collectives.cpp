#include "profiler/import/kineto_collectives.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <set>
#include <tuple>

#include "profiler/import/group_inference.h"
#include "profiler/import/torch_collectives.h"
#include "profiler/torch_collective.h"

namespace partrain::profiler {
namespace {

using Json = nlohmann::json;

const Json* arg(const KinetoEvent& event, const char* key) {
  if (!event.args.is_object()) return nullptr;
  auto it = event.args.find(key);
  return it == event.args.end() ? nullptr : &*it;
}

std::optional<int64_t> int_arg(const KinetoEvent& event, const char* key) {
  const Json* v = arg(event, key);
  if (v == nullptr) return std::nullopt;
  if (v->is_number_integer()) return v->get<int64_t>();
  if (v->is_string()) {
    try {
      size_t used = 0;
      const std::string& s = v->get_ref<const std::string&>();
      const int64_t n = std::stoll(s, &used);
      if (used == s.size()) return n;
    } catch (const std::exception&) {
    }
  }
  return std::nullopt;
}

std::string string_arg(const KinetoEvent& event, const char* key) {
  const Json* v = arg(event, key);
  if (v == nullptr) return {};
  return v->is_string() ? v->get<std::string>() : v->dump();
}

int64_t end_of(const KinetoEvent& event) { return *event.ts_ns + event.dur_ns.value_or(0); }

// Which argument of a c10d op holds this rank's buffer (nccl-tests' count): the input of a
// gather, the output of a scatter, the tensors of the rest.
size_t buffer_argument(std::string_view c10d_name) {
  static constexpr std::string_view kInputSecond[] = {"c10d::allgather_",
                                                      "c10d::_allgather_base_",
                                                      "c10d::allgather_coalesced_",
                                                      "c10d::allgather_into_tensor_coalesced_",
                                                      "c10d::gather_",
                                                      "c10d::alltoall_",
                                                      "c10d::alltoall_base_"};
  for (std::string_view name : kInputSecond) {
    if (name == c10d_name) return 1;
  }
  return 0;
}

// Whether a c10d op's schema takes its output tensors first (`_allgather_base_(output, input,
// ...)`, `scatter_(output_tensors, input_tensors, ...)`); the rest take one list of tensors
// (`allreduce_(tensors, ...)`, `send(tensors, ...)`), their input.
bool outputs_first(std::string_view c10d_name) {
  static constexpr std::string_view kOutputsFirst[] = {
      "c10d::reduce_scatter_", "c10d::_reduce_scatter_base_",
      "c10d::reduce_scatter_tensor_coalesced_", "c10d::scatter_"};
  return buffer_argument(c10d_name) == 1 ||
         std::find(std::begin(kOutputsFirst), std::end(kOutputsFirst), c10d_name) !=
             std::end(kOutputsFirst);
}

// The op's argument at `index` of Concrete Inputs as an integer (c10d passes roots and peers as
// group ranks there).
std::optional<int> concrete_int(const KinetoEvent& event, size_t index) {
  const Json* inputs = arg(event, "Concrete Inputs");
  if (inputs == nullptr || !inputs->is_array() || index >= inputs->size()) return std::nullopt;
  const Json& v = (*inputs)[index];
  if (!v.is_string()) return std::nullopt;
  try {
    size_t used = 0;
    const std::string& s = v.get_ref<const std::string&>();
    const int n = std::stoi(s, &used);
    if (used == s.size()) return n;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

// Elements of an argument's Input Dims: one shape ([256]) or a list of them ([[256], [8]]).
uint64_t elements_of_argument(const Json& dims) {
  if (!dims.is_array() || dims.empty()) return 0;
  if (dims.front().is_array()) {
    uint64_t total = 0;
    for (const Json& shape : dims) total += elements_of_shape(shape).value_or(0);
    return total;
  }
  return elements_of_shape(dims).value_or(0);
}

std::string describe_group(const ProcessGroupConfig& group) {
  return group.description.empty() || group.description == "undefined"
             ? fmt::format("'{}'", group.name)
             : fmt::format("'{}' ({})", group.name, group.description);
}

// The group's id as partrain's PyTorch hooks write it for a live run ("default_pg:0",
// profiler::torch_comm_id), so imported and traced runs name groups alike; "pg:<name>" when the
// trace gives the group no description.
std::string comm_id_of(const std::string& group_name,
                       const std::vector<ProcessGroupConfig>& groups) {
  for (const ProcessGroupConfig& g : groups) {
    if (g.name == group_name && !g.description.empty() && g.description != "undefined") {
      return torch_comm_id(g.name, g.description);
    }
  }
  return "pg:" + group_name;
}

int index_in(const std::vector<int>& ranks, int rank) {
  auto it = std::find(ranks.begin(), ranks.end(), rank);
  return it == ranks.end() ? -1 : static_cast<int>(it - ranks.begin());
}

// Numbers each rank's p2p ops per (communicator, direction, peer) in issue order, as a live
// run's hooks do (share/python/partrain_torch/_process_groups.py, after PyTorch's flight
// recorder): a rank's k-th send to a peer is then the peer's k-th recv from it, however the two
// directions interleave (1F1B, batch_isend_irecv's [isend, irecv] on both ends).
class P2pNumbering {
 public:
  uint64_t next(int rank, const std::string& comm_id, std::string_view op, int peer) {
    return counts_[{rank, comm_id, std::string(op), peer}]++;
  }

 private:
  std::map<std::tuple<int, std::string, std::string, int>, uint64_t> counts_;
};

class Assembler {
 public:
  Assembler(const std::vector<ProcessGroupConfig>& groups) : groups_(groups) {}

  ImportedCollectives run(std::map<int, RankCollectiveEvidence> evidence) {
    std::map<int, std::vector<IssuedCollective>> issued;
    std::map<int, std::vector<PairedCall>> gloo_calls;
    for (auto& [rank, e] : evidence) {
      if (e.gpu_rank) gpu_ranks_.insert(rank);
      if (!e.comms_records.empty()) {
        from_comms_records(rank, e);
      } else if (!e.c10d_calls.empty()) {
        c10d_kernels_.emplace(rank, KernelIndex(e.nccl_kernels));
        gloo_calls[rank] = pair_with_transfers(e);
        const std::map<int64_t, int> group_of_thread = worker_thread_groups(e);
        for (const PairedCall& call : gloo_calls[rank]) {
          if (is_p2p(call.call.op)) continue;
          IssuedCollective issued_call = issued_of(call);
          if (call.transfer != nullptr) {
            auto it = group_of_thread.find(call.transfer->thread);
            if (it != group_of_thread.end()) issued_call.hinted_group = it->second;
          }
          issued[rank].push_back(issued_call);
        }
      }
    }
    if (!gloo_calls.empty()) from_gloo_calls(gloo_calls, infer_groups(issued));
    // The kernel indexes point into `evidence`, which dies here.
    c10d_kernels_.clear();
    type_from_members();
    for (auto& [rank, records] : out_.by_rank) {
      std::sort(records.begin(), records.end(),
                [](const auto& a, const auto& b) { return a.event.start_ns < b.event.start_ns; });
    }
    return std::move(out_);
  }

 private:
  struct PairedCall {
    C10dCall call;
    const GlooTransfer* transfer = nullptr;
  };

  const ProcessGroupConfig* group_named(const std::string& name) const {
    for (const ProcessGroupConfig& g : groups_) {
      if (g.name == name) return &g;
    }
    return nullptr;
  }

  // When an op's NCCL kernels ran (a coalesced op launches several: their union).
  struct DeviceSpan {
    int64_t start_ns = 0;
    int64_t end_ns = 0;
  };

  // The NCCL kernels of one rank, found by the group and sequence number they carry, else by
  // their launches inside the op on its thread, else by the External id of the op that launched
  // them (older Kineto gives a kernel its correlation id as External id: no op's).
  class KernelIndex {
   public:
    explicit KernelIndex(const std::vector<NcclKernelSpan>& kernels) {
      for (const NcclKernelSpan& k : kernels) {
        if (k.seq) by_seq_.emplace(std::pair(k.group_name, *k.seq), &k);
        if (k.external_id >= 0 && k.external_id != k.correlation) {
          by_external_id_.emplace(k.external_id, &k);
        }
        if (!k.launch_thread.empty()) by_launch_[k.launch_thread].emplace_back(k.launch_ns, &k);
      }
      for (auto& [thread, launches] : by_launch_) std::sort(launches.begin(), launches.end());
    }
    std::optional<DeviceSpan> of(const CommsRecord& r) const {
      if (r.seq) {
        auto it = by_seq_.find({r.group_name, *r.seq});
        if (it != by_seq_.end()) return DeviceSpan{it->second->start_ns, it->second->end_ns};
      }
      if (auto span = launched_within(r.thread, r.start_ns, r.end_ns)) return span;
      auto it = by_external_id_.find(r.external_id);
      if (r.external_id < 0 || it == by_external_id_.end()) return std::nullopt;
      return DeviceSpan{it->second->start_ns, it->second->end_ns};
    }
    std::optional<DeviceSpan> of(const C10dCall& call) const {
      return launched_within(call.thread, call.start_ns, call.end_ns);
    }

   private:
    std::optional<DeviceSpan> launched_within(const std::string& thread, int64_t start_ns,
                                              int64_t end_ns) const {
      auto it = by_launch_.find(thread);
      if (it == by_launch_.end()) return std::nullopt;
      const auto& launches = it->second;
      std::optional<DeviceSpan> span;
      for (auto l = std::lower_bound(launches.begin(), launches.end(),
                                     std::pair<int64_t, const NcclKernelSpan*>(start_ns, nullptr));
           l != launches.end() && l->first <= end_ns; ++l) {
        const NcclKernelSpan& k = *l->second;
        span = span ? DeviceSpan{std::min(span->start_ns, k.start_ns),
                                 std::max(span->end_ns, k.end_ns)}
                    : DeviceSpan{k.start_ns, k.end_ns};
      }
      return span;
    }

    std::map<std::pair<std::string, uint64_t>, const NcclKernelSpan*> by_seq_;
    std::map<int64_t, const NcclKernelSpan*> by_external_id_;
    std::map<std::string, std::vector<std::pair<int64_t, const NcclKernelSpan*>>> by_launch_;
  };

  // A collective's device span where its kernels are in the trace. On a GPU rank without them
  // its host span is only the enqueue (c10d returns once the kernel is queued): recorded as
  // enqueued, so no time or bandwidth is read from it, and counted. An op of 0 bytes launches no
  // kernel (NCCL returns at once) and moves nothing to measure.
  void set_device_span(CollectiveRecord& record, int rank, std::optional<DeviceSpan> span,
                       bool transferred) {
    if (span) {
      record.gpu_start_ns = span->start_ns;
      record.gpu_end_ns = span->end_ns;
    } else if (!transferred && record.event.bytes > 0 && gpu_ranks_.contains(rank)) {
      record.event.state = CollectiveState::kEnqueued;
      ++out_.without_kernel[rank];
    }
  }

  // `issued_before`: the rank's collectives on this group so far (the sequence number when c10d
  // gave none).
  CollectiveRecord record_of(int rank, const CommsRecord& r, uint64_t issued_before) {
    CollectiveRecord record;
    record.world_rank = rank;
    CollectiveEvent& c = record.event;
    c.comm_id = comm_id_of(r.group_name, groups_);
    c.op = r.op;
    c.dtype = r.dtype;
    if (auto ranks = kineto_rank_list(Json(r.group_ranks))) {
      c.group_ranks = std::move(*ranks);
    } else if (const ProcessGroupConfig* group = group_named(r.group_name)) {
      c.group_ranks = group->ranks;  // the list was cut short ("[0, ..., 7]")
    }
    c.group_size = r.group_size > 0 ? r.group_size : static_cast<int>(c.group_ranks.size());
    c.rank = r.group_rank >= 0 ? r.group_rank : std::max(0, index_in(c.group_ranks, rank));
    const CollectiveSize size =
        torch_collective_size(c.op, r.in_elements, r.out_elements, r.dtype_bytes, c.group_size);
    c.count = size.count;
    c.bytes = size.bytes;
    if (is_p2p(c.op)) {
      c.peer = r.peer;
      c.seq = p2p_.next(rank, c.comm_id, c.op, r.peer);
    } else {
      c.seq = r.seq.value_or(issued_before);
    }
    c.enqueue_ns = c.start_ns = r.start_ns;
    c.end_ns = r.end_ns;
    c.state = CollectiveState::kCompleted;
    return record;
  }

  void from_comms_records(int rank, RankCollectiveEvidence& e) {
    std::sort(e.comms_records.begin(), e.comms_records.end(),
              [](const CommsRecord& a, const CommsRecord& b) { return a.start_ns < b.start_ns; });
    const KernelIndex kernels(e.nccl_kernels);
    std::map<std::string, uint64_t> issued_on;  // collectives per group so far
    for (const CommsRecord& r : e.comms_records) {
      CollectiveRecord record = record_of(rank, r, issued_on[r.group_name]++);
      const std::optional<DeviceSpan> span = kernels.of(r);
      set_device_span(record, rank, span, /*transferred=*/false);
      if (span && ends_together(record.event.op)) {
        out_.ends.push_back({record.event.comm_id, record.event.seq, rank, span->end_ns});
      }
      out_.by_rank[rank].push_back(std::move(record));
    }
  }

  // Each c10d op with the first unclaimed transfer of the same op and size that starts after it
  // (a group's work queue runs its ops in issue order), or of the same op without tensors (a
  // barrier's, a scatter's off its root). A reduce-scatter's transfer may be an all-reduce of its
  // whole input (ProcessGroupGloo's `_reduce_scatter_base`, torch 2.x). Of the kinds that fit, the
  // one that starts first.
  static std::vector<PairedCall> pair_with_transfers(RankCollectiveEvidence& e) {
    auto by_start = [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; };
    std::sort(e.c10d_calls.begin(), e.c10d_calls.end(), by_start);
    std::sort(e.gloo_transfers.begin(), e.gloo_transfers.end(), by_start);
    using Key = std::pair<std::string_view, std::optional<uint64_t>>;  // nullopt: no tensors
    std::map<Key, std::deque<const GlooTransfer*>> waiting;
    for (const GlooTransfer& t : e.gloo_transfers) {
      waiting[Key(t.op, t.has_tensors ? std::optional(t.count) : std::nullopt)].push_back(&t);
    }
    // The first transfer under `k` that starts after `start_ns` (earlier ones are no one's).
    auto next_after = [&](const Key& k, int64_t start_ns) -> std::deque<const GlooTransfer*>* {
      auto it = waiting.find(k);
      if (it == waiting.end()) return nullptr;
      std::deque<const GlooTransfer*>& queue = it->second;
      while (!queue.empty() && queue.front()->start_ns < start_ns) queue.pop_front();
      return queue.empty() ? nullptr : &queue;
    };
    std::vector<PairedCall> calls;
    for (const C10dCall& call : e.c10d_calls) {
      std::vector<Key> kinds = {Key(call.op, call.count), Key(call.op, std::nullopt)};
      if (call.op == "reduce_scatter" && call.input_elements > 0) {
        kinds.emplace_back("all_reduce", call.input_elements);
      }
      std::deque<const GlooTransfer*>* queue = nullptr;
      for (const Key& kind : kinds) {
        std::deque<const GlooTransfer*>* q = next_after(kind, call.start_ns);
        if (q != nullptr && (queue == nullptr || q->front()->start_ns < queue->front()->start_ns)) {
          queue = q;
        }
      }
      PairedCall paired{call, nullptr};
      if (queue != nullptr) {
        paired.transfer = queue->front();
        queue->pop_front();
        if (paired.call.dtype.empty()) paired.call.dtype = paired.transfer->dtype;
      }
      calls.push_back(paired);
    }
    return calls;
  }

  static IssuedCollective issued_of(const PairedCall& paired) {
    return IssuedCollective{paired.call.op,
                            paired.call.count,
                            paired.call.dtype,
                            paired.call.group_peer,
                            -1,
                            group_size_of_buffers(paired.call)};
  }

  CollectiveRecord record_of(int rank, const PairedCall& paired) const {
    CollectiveRecord record;
    record.world_rank = rank;
    CollectiveEvent& c = record.event;
    c.op = paired.call.op;
    // call.dtype is partrain's name already (or empty: not known).
    c.dtype = paired.call.dtype.empty() ? collective_dtype_names()[0] : paired.call.dtype;
    c.enqueue_ns = c.start_ns = paired.call.start_ns;
    c.end_ns = paired.transfer != nullptr ? std::max(paired.transfer->end_ns, paired.call.end_ns)
                                          : paired.call.end_ns;
    c.state = CollectiveState::kCompleted;
    return record;
  }

  // `group_peer`: a rooted op's root as a rank of the group (-1: none).
  void set_group(CollectiveRecord& record, int rank, const ProcessGroupConfig& group,
                 int group_peer = -1) const {
    CollectiveEvent& c = record.event;
    c.comm_id = comm_id_of(group.name, groups_);
    if (is_rooted_op(c.op) && group_peer >= 0 &&
        group_peer < static_cast<int>(group.ranks.size())) {
      c.peer = group.ranks[group_peer];
    }
    c.group_ranks = group.ranks;
    c.group_size = static_cast<int>(group.ranks.size());
    c.rank = std::max(0, index_in(group.ranks, rank));
  }

  // Which group each of a rank's gloo worker threads serves. ProcessGroupGloo starts the same
  // number of worker threads (2 by default) in each group's constructor, and the rank's
  // pg_config lists its groups in the order they were made, so with thread ids growing with
  // creation, the sorted threads fall into consecutive runs, one per group. Only when the
  // threads seen divide evenly among the groups (a group whose threads ran nothing in the
  // window hides them, and then nothing is hinted).
  std::map<int64_t, int> worker_thread_groups(const RankCollectiveEvidence& e) const {
    std::set<int64_t> threads;
    for (const GlooTransfer& t : e.gloo_transfers) {
      if (t.thread >= 0) threads.insert(t.thread);
    }
    std::vector<int> own;
    for (const std::string& name : e.own_groups) {
      for (size_t g = 0; g < groups_.size(); ++g) {
        if (groups_[g].name == name) own.push_back(static_cast<int>(g));
      }
    }
    std::map<int64_t, int> hints;
    if (own.empty() || threads.empty() || threads.size() % own.size() != 0) return hints;
    const size_t per_group = threads.size() / own.size();
    size_t i = 0;
    for (int64_t thread : threads) hints[thread] = own[i++ / per_group];
    return hints;
  }

  // With the threads' hints, unless they leave more collectives unmatched than the ops alone
  // (hints that do not fit the ops are wrong hints).
  std::map<int, std::vector<GroupAssignment>> infer_groups(
      std::map<int, std::vector<IssuedCollective>> issued) const {
    auto unmatched = [](const std::map<int, std::vector<GroupAssignment>>& assignments) {
      int64_t n = 0;
      for (const auto& [rank, list] : assignments) {
        for (const GroupAssignment& a : list) n += a.group < 0 ? 1 : 0;
      }
      return n;
    };
    auto hinted = infer_process_groups(groups_, issued);
    const int64_t with_hints = unmatched(hinted);
    if (with_hints == 0) return hinted;
    for (auto& [rank, list] : issued) {
      for (IssuedCollective& c : list) c.hinted_group = -1;
    }
    auto plain = infer_process_groups(groups_, issued);
    return unmatched(plain) < with_hints ? plain : hinted;
  }

  void from_gloo_calls(const std::map<int, std::vector<PairedCall>>& calls,
                       const std::map<int, std::vector<GroupAssignment>>& assignments) {
    const std::vector<GroupAssignment> none;
    for (const auto& [rank, rank_calls] : calls) {
      // A rank that issued only send/recv (a pipeline stage) has no collective to assign.
      auto it = assignments.find(rank);
      const std::vector<GroupAssignment>& assigned = it == assignments.end() ? none : it->second;
      size_t next_collective = 0;
      std::map<std::string, int64_t> unmatched_by_reason;
      uint64_t unmatched_seq = 0;
      std::map<std::string, uint64_t> alike_seq;  // per communicator of alike groups
      const KernelIndex& kernels = c10d_kernels_.at(rank);
      for (const PairedCall& paired : rank_calls) {
        CollectiveRecord record = record_of(rank, paired);
        // NCCL's (older Kineto: no record_param_comms args): its kernels launched inside the op.
        const std::optional<DeviceSpan> span = kernels.of(paired.call);
        std::string unmatched;
        if (is_p2p(paired.call.op)) {
          unmatched = place_p2p(record, rank, paired.call.group_peer);
        } else {
          const GroupAssignment& a = assigned[next_collective++];
          if (a.group >= 0) {
            set_group(record, rank, groups_[a.group], paired.call.group_peer);
            record.event.seq = a.seq;
            if ((span || paired.transfer != nullptr) && ends_together(record.event.op)) {
              out_.ends.push_back({record.event.comm_id, a.seq, rank,
                                   span ? span->end_ns : paired.transfer->end_ns});
            }
          } else if (only_this_rank(a.candidates, rank)) {
            // Groups of this rank alone (a world of 1): which of them ran it changes nothing,
            // as no other rank takes part. Numbered on a communicator naming them all.
            const ProcessGroupConfig& group = groups_[a.candidates.front()];
            set_group(record, rank, group, paired.call.group_peer);
            std::vector<std::string> names;
            for (int g : a.candidates) names.push_back(groups_[g].name);
            record.event.comm_id = fmt::format("pg:{}", fmt::join(names, "|"));
            record.event.seq = alike_seq[record.event.comm_id]++;
          } else {
            unmatched = why_unmatched(a, rank, group_size_of_buffers(paired.call));
            record.event.group_size = common_size(a.candidates);
            if (record.event.group_size == 0) {
              record.event.group_size = group_size_of_buffers(paired.call);
            }
          }
        }
        set_size(record.event, paired.call);
        set_device_span(record, rank, span, paired.transfer != nullptr);
        if (dtype_bytes(record.event.dtype) == 0) {
          untyped_.push_back({rank, out_.by_rank[rank].size(), paired.call});
        }
        if (!unmatched.empty()) {
          // A communicator of its own per rank, so nothing pairs it with another rank's op.
          record.event.comm_id = fmt::format("unmatched:rank{}", rank);
          record.event.seq = unmatched_seq++;
          ++unmatched_by_reason[unmatched];
        }
        out_.by_rank[rank].push_back(std::move(record));
      }
      for (const auto& [why, count] : unmatched_by_reason) {
        out_.unmatched.push_back({rank, count, why});
      }
    }
  }

  // A send or recv: its group is known when only one listed group holds this rank (the peer is
  // given as a rank of the group).
  std::string place_p2p(CollectiveRecord& record, int rank, int group_peer) {
    std::vector<int> candidates;
    for (size_t g = 0; g < groups_.size(); ++g) {
      if (index_in(groups_[g].ranks, rank) >= 0) candidates.push_back(static_cast<int>(g));
    }
    if (candidates.size() != 1) {
      return candidates.empty()
                 ? fmt::format("no process group listed in distributedInfo holds rank {}", rank)
                 : fmt::format("send/recv of a rank in {} process groups: which one is unknown",
                               candidates.size());
    }
    const ProcessGroupConfig& group = groups_[candidates.front()];
    if (group_peer < 0 || group_peer >= static_cast<int>(group.ranks.size())) {
      return "send/recv whose peer the trace does not give";
    }
    set_group(record, rank, group);
    record.event.peer = group.ranks[group_peer];
    record.event.seq = p2p_.next(rank, record.event.comm_id, record.event.op, record.event.peer);
    return {};
  }

  // The op's count and bytes as a live run's hooks would record them, on the group size set.
  static void set_size(CollectiveEvent& c, const C10dCall& call) {
    const CollectiveSize size = torch_collective_size(
        c.op, call.input_elements, call.output_elements, dtype_bytes(c.dtype), c.group_size);
    c.count = size.count;
    c.bytes = size.bytes;
  }

  // An all_gather's or reduce_scatter's group size from its two buffers (the whole one is the
  // group size times this rank's), for when the group is not known; 0 when they do not say.
  static int group_size_of_buffers(const C10dCall& call) {
    const uint64_t whole = call.op == "all_gather" ? call.output_elements : call.input_elements;
    const uint64_t part = call.op == "all_gather" ? call.input_elements : call.output_elements;
    if ((call.op != "all_gather" && call.op != "reduce_scatter") || part == 0 ||
        whole % part != 0) {
      return 0;
    }
    return static_cast<int>(whole / part);
  }

  // A member that knows nothing of its tensors' dtype (a scatter off its root: c10d's op holds a
  // list of tensors, gloo's annotation none) moves the dtype its matched members do.
  void type_from_members() {
    std::map<std::pair<std::string_view, uint64_t>, std::string_view> dtype_of;
    for (const auto& [rank, records] : out_.by_rank) {
      for (const CollectiveRecord& r : records) {
        if (!is_p2p(r.event.op) && dtype_bytes(r.event.dtype) > 0) {
          dtype_of.emplace(std::pair(std::string_view(r.event.comm_id), r.event.seq),
                           r.event.dtype);
        }
      }
    }
    for (const Untyped& u : untyped_) {
      CollectiveEvent& c = out_.by_rank[u.rank][u.index].event;
      if (is_p2p(c.op)) continue;
      auto it = dtype_of.find({c.comm_id, c.seq});
      if (it == dtype_of.end()) continue;
      c.dtype = it->second;
      set_size(c, u.call);
    }
  }

  bool only_this_rank(const std::vector<int>& candidates, int rank) const {
    return !candidates.empty() && std::all_of(candidates.begin(), candidates.end(), [&](int g) {
      return groups_[g].ranks == std::vector<int>{rank};
    });
  }

  int common_size(const std::vector<int>& candidates) const {
    std::set<size_t> sizes;
    for (int g : candidates) sizes.insert(groups_[g].ranks.size());
    return sizes.size() == 1 ? static_cast<int>(*sizes.begin()) : 0;
  }

  // `buffers_group_size`: the group size the op's buffers give (0: they do not).
  std::string why_unmatched(const GroupAssignment& a, int rank, int buffers_group_size) const {
    std::vector<std::string> names;
    for (int g : a.candidates) names.push_back(describe_group(groups_[g]));
    const std::string groups = fmt::format("{}", fmt::join(names, " or "));
    switch (a.reason) {
      case UnmatchedReason::kNoGroup:
        return fmt::format("no process group listed in distributedInfo holds rank {}", rank);
      case UnmatchedReason::kNoGroupOfItsSize:
        return fmt::format(
            "its buffers say a group of {} ranks, and no process group of rank {} listed in "
            "distributedInfo (the world's alone when it lists none, as before torch 2.2) has "
            "that many",
            buffers_group_size, rank);
      case UnmatchedReason::kSameMembers:
        return fmt::format(
            "process groups {} hold the same ranks and each had this collective "
            "due: which of them ran it is not in the trace",
            groups);
      case UnmatchedReason::kAmbiguous:
        return fmt::format(
            "process groups {} share ranks and each had this collective due: "
            "which of them ran it is not in the trace",
            groups);
      case UnmatchedReason::kOutOfStep:
        return "the ranks' collectives stop lining up here (or follow an ambiguous one): no "
               "group's members all issued it";
      case UnmatchedReason::kMatched:
        break;
    }
    return {};
  }

  // A record stored without a known dtype, with what sizes it.
  struct Untyped {
    int rank = 0;
    size_t index = 0;  // in out_.by_rank[rank], before they are sorted
    C10dCall call;
  };

  const std::vector<ProcessGroupConfig>& groups_;
  std::set<int> gpu_ranks_;
  std::map<int, KernelIndex> c10d_kernels_;  // while the c10d ops are assembled
  P2pNumbering p2p_;
  std::vector<Untyped> untyped_;
  ImportedCollectives out_;
};

}  // namespace

std::optional<C10dCall> c10d_call_of(const KinetoEvent& event) {
  auto op = op_of_c10d_op(event.name);
  if (!op || !event.ts_ns) return std::nullopt;
  C10dCall call;
  call.op = *op;
  call.thread = kineto_thread_key(event.pid, event.tid);
  call.start_ns = *event.ts_ns;
  call.end_ns = end_of(event);
  const size_t buffer = buffer_argument(event.name);
  if (const Json* dims = arg(event, "Input Dims");
      dims != nullptr && dims->is_array() && buffer < dims->size()) {
    call.count = elements_of_argument((*dims)[buffer]);
    const size_t input = outputs_first(event.name) ? 1 : 0;
    if (input < dims->size()) call.input_elements = elements_of_argument((*dims)[input]);
    if (input == 1) call.output_elements = elements_of_argument((*dims)[0]);
  }
  if (const Json* types = arg(event, "Input type"); types != nullptr && types->is_array() &&
                                                    buffer < types->size() &&
                                                    (*types)[buffer].is_string()) {
    const TorchDtype dtype = dtype_of_torch_name((*types)[buffer].get<std::string>());
    if (dtype.bytes > 0) call.dtype = dtype.name;
  }
  // c10d's schemas: broadcast_(tensors, pg, root_rank, ...), reduce_/gather_/scatter_(..., pg,
  // [reduce_op,] root_rank, ...), send/recv_(tensors, pg, dst/src, tag).
  if (call.op == "broadcast" || call.op == "send" || call.op == "recv") {
    call.group_peer = concrete_int(event, 2).value_or(-1);
  } else if (call.op == "reduce" || call.op == "gather" || call.op == "scatter") {
    call.group_peer = concrete_int(event, 3).value_or(-1);
  }
  return call;
}

std::optional<GlooTransfer> gloo_transfer_of(const KinetoEvent& event) {
  auto op = op_of_gloo_annotation(event.name);
  if (!op || !event.ts_ns) return std::nullopt;
  GlooTransfer t;
  t.op = *op;
  t.thread = event.tid.is_text ? -1 : event.tid.number;
  t.start_ns = *event.ts_ns;
  t.end_ns = end_of(event);
  // The annotation's inputs are the tensors the rank sends, each a shape ([] for a 0-d tensor:
  // one element, a loss all-reduced) or a list of shapes. An all_reduce_coalesced lists each of
  // its tensors, as c10d's op lists them in one TensorList: the transfer is all of them. A
  // scatter's root lists one chunk per rank: the transfer is one rank's chunk.
  if (const Json* dims = arg(event, "Input Dims");
      dims != nullptr && dims->is_array() && !dims->empty()) {
    const size_t inputs = t.op == "scatter" ? 1 : dims->size();
    for (size_t i = 0; i < inputs; ++i) {
      const Json& input = (*dims)[i];
      t.count += elements_of_shape(input).value_or(elements_of_argument(input));
    }
    t.has_tensors = true;
  }
  if (const Json* types = arg(event, "Input type");
      types != nullptr && types->is_array() && !types->empty() && (*types)[0].is_string()) {
    const TorchDtype dtype = dtype_of_torch_name((*types)[0].get<std::string>());
    if (dtype.bytes > 0) t.dtype = dtype.name;
  }
  return t;
}

std::optional<CommsRecord> comms_record_of(const KinetoEvent& event) {
  if (event.name != "record_param_comms" || !event.ts_ns) return std::nullopt;
  auto op = op_of_collective_name(string_arg(event, "Collective name"));
  if (!op) return std::nullopt;
  CommsRecord r;
  r.op = *op;
  const TorchDtype dtype = dtype_of_torch_name(string_arg(event, "dtype"));
  r.dtype = dtype.name;
  r.dtype_bytes = dtype.bytes;
  r.in_elements =
      static_cast<uint64_t>(std::max<int64_t>(0, int_arg(event, "In msg nelems").value_or(0)));
  r.out_elements =
      static_cast<uint64_t>(std::max<int64_t>(0, int_arg(event, "Out msg nelems").value_or(0)));
  r.group_size = static_cast<int>(int_arg(event, "Group size").value_or(0));
  r.group_name = string_arg(event, "Process Group Name");
  r.group_ranks = string_arg(event, "Process Group Ranks");
  r.group_rank = static_cast<int>(int_arg(event, "Rank").value_or(-1));
  r.peer = static_cast<int>(int_arg(event, r.op == "send" ? "Dst Rank" : "Src Rank").value_or(-1));
  if (auto seq = int_arg(event, "Seq"); seq && *seq >= 0) r.seq = static_cast<uint64_t>(*seq);
  r.external_id = int_arg(event, "External id").value_or(-1);
  r.thread = kineto_thread_key(event.pid, event.tid);
  r.start_ns = *event.ts_ns;
  r.end_ns = end_of(event);
  return r;
}

std::optional<NcclKernelSpan> nccl_kernel_of(const KinetoEvent& event) {
  if (!event.ts_ns ||
      !(event.name.starts_with("nccl") || arg(event, "Collective name") != nullptr)) {
    return std::nullopt;
  }
  NcclKernelSpan k;
  k.group_name = string_arg(event, "Process Group Name");
  if (auto seq = int_arg(event, "Seq"); seq && *seq >= 0) k.seq = static_cast<uint64_t>(*seq);
  k.external_id = int_arg(event, "External id").value_or(-1);
  k.correlation = int_arg(event, "correlation").value_or(-1);
  k.start_ns = *event.ts_ns;
  k.end_ns = end_of(event);
  return k;
}

std::optional<KernelLaunch> kernel_launch_of(const KinetoEvent& event) {
  auto correlation = int_arg(event, "correlation");
  if (!correlation || *correlation < 0 || !event.ts_ns) return std::nullopt;
  return KernelLaunch{*correlation, kineto_thread_key(event.pid, event.tid), *event.ts_ns};
}

void place_launches(std::vector<NcclKernelSpan>& kernels,
                    const std::vector<KernelLaunch>& launches) {
  std::map<int64_t, NcclKernelSpan*> by_correlation;
  for (NcclKernelSpan& k : kernels) {
    if (k.correlation >= 0) by_correlation.emplace(k.correlation, &k);
  }
  if (by_correlation.empty()) return;
  for (const KernelLaunch& launch : launches) {
    auto it = by_correlation.find(launch.correlation);
    if (it == by_correlation.end()) continue;
    it->second->launch_thread = launch.thread;
    it->second->launch_ns = launch.ts_ns;
  }
}

ImportedCollectives assemble_collectives(const std::vector<ProcessGroupConfig>& groups,
                                         std::map<int, RankCollectiveEvidence> evidence) {
  return Assembler(groups).run(std::move(evidence));
}

}  // namespace partrain::profiler
