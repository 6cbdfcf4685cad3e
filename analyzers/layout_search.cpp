#include "analyzers/layout_search.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace partrain::analyzers {

std::vector<int> divisors(int64_t n, int64_t at_most) {
  std::vector<int> result;
  for (int64_t d = 1; d <= std::min(n, at_most); ++d) {
    if (n % d == 0) result.push_back(static_cast<int>(d));
  }
  return result;
}

namespace {

constexpr memory::Recompute kRecomputeModes[] = {
    memory::Recompute::kNone, memory::Recompute::kSelective, memory::Recompute::kFull};

template <typename T>
bool allowed(const std::vector<T>& list, T value) {
  return list.empty() || std::find(list.begin(), list.end(), value) != list.end();
}

bool passes(const std::optional<int>& fixed, int value) { return !fixed || *fixed == value; }

// The pipeline schedules tried for v virtual stages: 1F1B (or, when asked for, GPipe, ZB-H1,
// DualPipeV, DualPipe) without interleaving, interleaved 1F1B with it.
std::vector<memory::PipelineSchedule> schedules_for(int pp, int vpp, const SearchSpace& space) {
  using memory::PipelineSchedule;
  if (pp == 1) return {PipelineSchedule::kOneFOneB};
  if (vpp > 1) {
    if (!allowed(space.schedules, PipelineSchedule::kInterleaved)) return {};
    return {PipelineSchedule::kInterleaved};
  }
  std::vector<PipelineSchedule> out;
  for (PipelineSchedule s :
       {PipelineSchedule::kOneFOneB, PipelineSchedule::kGpipe, PipelineSchedule::kZbH1,
        PipelineSchedule::kDualPipeV, PipelineSchedule::kDualPipe}) {
    // The others only when asked for: GPipe's bubble equals 1F1B's and its memory is larger; the
    // zero-bubble schedules need a framework that splits the backward (not Megatron-LM's or
    // DeepSpeed's default), so a default search ranks what users can run.
    if (space.schedules.empty() ? s == PipelineSchedule::kOneFOneB : allowed(space.schedules, s)) {
      out.push_back(s);
    }
  }
  return out;
}

Candidate make_candidate(const CostModel& cm, const memory::MemoryEstimate& estimate) {
  Candidate c;
  c.layout = estimate.layout.layout;
  c.micro_batches = estimate.layout.micro_batches;
  c.heaviest = estimate.heaviest_stage();
  c.capacity_bytes = estimate.capacity_bytes;
  c.fits = estimate.fits();
  c.discouraged = c.layout.pp > 1 && c.layout.zero >= 2;
  c.cost = step_cost(cm, estimate);
  return c;
}

class Search {
 public:
  Search(const CostModel& cm, const memory::EstimateInput& base, const SearchSpace& space)
      : cm_(cm), input_(base), space_(space) {}

  void split(int tp, int pp, int cp, int dp, const LayoutFilter& filter) {
    const auto& model = cm_.model;
    const int64_t global = input_.layout.global_batch.value_or(dp);
    const int64_t seq = input_.layout.seq.value_or(model.seq);
    const bool divides_heads =
        model.heads <= 0 || (model.heads % tp == 0 && model.kv_heads % tp == 0);
    if (!divides_heads) return reject_split(kRejectTpHeads);
    if (model.layers % pp != 0) return reject_split(kRejectPpLayers);
    if (cp > 1 && seq % (2 * cp) != 0) return reject_split(kRejectCpSeq);  // Megatron's balance
    if (global % dp != 0) return reject_split(kRejectBatch);
    const std::vector<int> eps = expert_degrees(model, dp * cp, space_, filter);
    if (eps.empty()) return reject_split(kRejectEpDataRanks);
    ++result_.splits;
    for (int ep : eps) {
      input_.layout.ep = ep;
      layouts(tp, pp, cp, dp, filter);
    }
  }

  // Every variant of one split and ep degree.
  void layouts(int tp, int pp, int cp, int dp, const LayoutFilter& filter) {
    const auto& model = cm_.model;
    const int64_t global = input_.layout.global_batch.value_or(dp);
    for (int micro : divisors(global / dp, space_.max_micro_batch)) {
      if (space_.fixed_micro_batch && *space_.fixed_micro_batch != micro) continue;
      const int64_t m = global / dp / micro;
      for (int vpp = 1; vpp <= (pp > 1 ? space_.max_vpp : 1); ++vpp) {
        if (!passes(space_.fixed_vpp, vpp)) continue;
        const std::vector<memory::PipelineSchedule> schedules = schedules_for(pp, vpp, space_);
        const bool vpp_divides = vpp == 1 || (model.layers % (pp * vpp) == 0 && m % pp == 0);
        for (int zero = 0; zero <= 3; ++zero) {
          if (filter.zero && *filter.zero != zero) continue;
          if (!passes(space_.fixed.zero, zero) || !allowed(space_.zero_stages, zero)) continue;
          for (memory::Recompute recompute : kRecomputeModes) {
            if (!allowed(space_.recompute_modes, recompute)) continue;
            for (bool sp : {false, true}) {
              if (sp && tp == 1) continue;
              // --sp on still ranks tp 1 (there is nothing to split); off and on choose otherwise.
              if (space_.sp && tp > 1 && *space_.sp != sp) continue;
              for (memory::PipelineSchedule schedule : schedules) {
                // Each layout left out is counted once under its first reason, so that the
                // reasons and the ranked add up to the layouts searched.
                const char* reason = nullptr;
                if (!vpp_divides) {
                  reason = kRejectVpp;
                } else if (dp * cp == 1 && zero > 0) {  // ZeRO shards over dp x cp
                  reason = kRejectZeroWithoutDp;
                } else if (pp > 1 && zero >= 2 && !space_.include_discouraged) {
                  reason = kRejectDiscouraged;
                } else if (recompute == memory::Recompute::kSelective &&
                           model.architecture == memory::Architecture::kMlp) {
                  reason = kRejectNoAttention;
                } else if (model.is_moe() && tp > 1 && !sp) {
                  reason = kRejectMoeTpWithoutSp;
                }
                if (reason != nullptr) {
                  reject(reason);
                  continue;
                }
                memory::TrainingLayout& l = input_.layout;
                l.dp = dp, l.tp = tp, l.pp = pp, l.cp = cp, l.vpp = vpp, l.zero = zero;
                l.sp = sp;
                l.micro_batch = micro;
                l.recompute = recompute;
                l.schedule = schedule;
                for (int shard : shard_groups(tp, dp * cp, zero, filter)) {
                  l.shard = shard;
                  consider();
                }
              }
            }
          }
        }
      }
    }
  }

  // The shard groups tried for ZeRO over `data_ranks` ranks, tp apart: all of them (written 0)
  // and, when the data ranks span nodes, a node's worth (a hybrid, as HSDP is run); --fix
  // shard=N and a filter's shard (0: all) keep only their own. ZeRO-0 shards nothing: left out
  // when a shard is asked for.
  std::vector<int> shard_groups(int tp, int data_ranks, int zero,
                                const LayoutFilter& filter) const {
    const bool asked = space_.fixed_shard || filter.shard;
    if (zero == 0) return asked ? std::vector<int>{} : std::vector<int>{0};
    std::vector<int> tried = {0};
    const int per_node = cm_.comm.machines().gpus_per_node;
    if (per_node % tp == 0 && input_.layout.ep == 1) {  // no hybrid with ep (resolve_layout)
      const int node = std::gcd(data_ranks, per_node / tp);
      if (node > 1 && node < data_ranks) tried.push_back(node);
    }
    // Asked for: N, or 0 for N equal to every data rank; other sizes only when asked.
    auto as_asked = [&](int n) { return n == data_ranks ? 0 : n; };
    if (space_.fixed_shard) {
      const int n = *space_.fixed_shard;
      if (n < 0 || (n > 0 && data_ranks % n != 0)) return {};
      tried = {as_asked(n)};
    }
    if (filter.shard) {
      std::erase_if(tried, [&](int n) { return n != as_asked(*filter.shard); });
    }
    return tried;
  }

  SearchResult finish() && {
    std::sort(result_.ranked.begin(), result_.ranked.end(),
              [](const Candidate& a, const Candidate& b) {
                if (a.cost.tokens_per_s != b.cost.tokens_per_s)
                  return a.cost.tokens_per_s > b.cost.tokens_per_s;
                return a.heaviest.total() < b.heaviest.total();
              });
    return std::move(result_);
  }

 private:
  void consider() {
    StatusOr<memory::MemoryEstimate> estimate = memory::estimate_memory(input_);
    if (!estimate.is_ok()) {
      if (result_.first_invalid.empty()) result_.first_invalid = estimate.status().message();
      return reject(kRejectInvalid);
    }
    ++result_.costed;
    const memory::StageMemory& heaviest = estimate->heaviest_stage();
    const bool least =
        !result_.least_memory || heaviest.total() < result_.least_memory->heaviest.total();
    if (!estimate->fits() && !least) return reject(kRejectFit);
    Candidate candidate = make_candidate(cm_, *estimate);
    if (least) result_.least_memory = candidate;
    if (!candidate.fits) return reject(kRejectFit);
    result_.ranked.push_back(std::move(candidate));
  }

  void reject(const char* reason) { result_.rejected[reason] += 1; }
  void reject_split(const char* reason) {
    ++result_.splits;
    result_.rejected[reason] += 1;
  }

  const CostModel& cm_;
  memory::EstimateInput input_;
  const SearchSpace& space_;
  SearchResult result_;
};

}  // namespace

bool is_split_reason(std::string_view reason) {
  return reason == kRejectTpHeads || reason == kRejectPpLayers || reason == kRejectCpSeq ||
         reason == kRejectBatch || reason == kRejectEpDataRanks;
}

std::vector<int> expert_degrees(const memory::ModelConfig& model, int data_ranks,
                                const SearchSpace& space, const LayoutFilter& filter) {
  if (!model.is_moe()) return {1};
  std::vector<int> out;
  for (int ep : divisors(data_ranks, model.moe.experts)) {
    if (model.moe.experts % ep != 0 || !allowed(space.ep_degrees, ep)) continue;
    if (!passes(space.fixed.ep, ep) || !passes(filter.ep, ep)) continue;
    out.push_back(ep);
  }
  return out;
}

std::string_view rejection_words(std::string_view reason) {
  if (reason == kRejectTpHeads) return "tp does not divide heads (attention or KV)";
  if (reason == kRejectPpLayers) return "pp does not divide the layers";
  if (reason == kRejectCpSeq) return "cp too large for the sequence (2 x cp must divide it)";
  if (reason == kRejectBatch) return "dp does not divide the global batch";
  if (reason == kRejectEpDataRanks) {
    return "no allowed ep divides dp x cp (expert-parallel ranks are drawn from them)";
  }
  if (reason == kRejectVpp) return "virtual stages do not divide the layers or micro-batches";
  if (reason == kRejectDiscouraged) {
    return "ZeRO-2/3 with pipeline parallelism (discouraged; --include-discouraged ranks them)";
  }
  if (reason == kRejectZeroWithoutDp)
    return "ZeRO without data or context parallelism (changes nothing)";
  if (reason == kRejectNoAttention) return "selective recompute of a model without attention";
  if (reason == kRejectMoeTpWithoutSp) {
    return "a mixture of experts with tp > 1 but no SP (Megatron-Core requires it)";
  }
  if (reason == kRejectInvalid) return "refused by the memory model's layout rules";
  if (reason == kRejectFit) return "do not fit in GPU memory";
  return reason;
}

int64_t SearchResult::layouts() const {
  int64_t total = static_cast<int64_t>(ranked.size());
  for (const auto& [reason, count] : rejected) {
    if (!is_split_reason(reason)) total += count;
  }
  return total;
}

SearchResult search_layouts(const CostModel& cm, const memory::EstimateInput& base,
                            const SearchSpace& space, const LayoutFilter& filter) {
  Search search(cm, base, space);
  const LayoutFilter& fixed = space.fixed;
  for (int tp : divisors(space.gpus, space.max_tp > 0 ? space.max_tp : space.gpus)) {
    if (!passes(filter.tp, tp) || !passes(fixed.tp, tp)) continue;
    for (int pp : divisors(space.gpus / tp, space.gpus)) {
      if (!passes(filter.pp, pp) || !passes(fixed.pp, pp)) continue;
      for (int cp : divisors(space.gpus / (tp * pp), fixed.cp ? *fixed.cp : space.max_cp)) {
        if (!passes(filter.cp, cp) || !passes(fixed.cp, cp)) continue;
        const int dp = space.gpus / (tp * pp * cp);
        if (!passes(space.fixed_dp, dp)) continue;
        search.split(tp, pp, cp, dp, filter);
      }
    }
  }
  return std::move(search).finish();
}

StatusOr<Candidate> evaluate_layout(const CostModel& cm, const memory::EstimateInput& input) {
  ASSIGN_OR_RETURN(memory::MemoryEstimate estimate, memory::estimate_memory(input));
  return make_candidate(cm, estimate);
}

std::string layout_label(const memory::TrainingLayout& l) {
  std::string label = fmt::format("dp{} tp{} pp{}", l.dp, l.tp, l.pp);
  if (l.vpp > 1) label += fmt::format(" vpp{}", l.vpp);
  if (l.cp > 1) label += fmt::format(" cp{}", l.cp);
  if (l.ep > 1) label += fmt::format(" ep{}", l.ep);
  if (l.pp > 1 && l.schedule != memory::PipelineSchedule::kOneFOneB &&
      l.schedule != memory::PipelineSchedule::kInterleaved) {
    label += fmt::format(" {}", memory::schedule_name(l.schedule));
  }
  label += fmt::format(" mb{} z{}", l.micro_batch, l.zero);
  if (memory::zero_replicas(l) > 1) label += fmt::format(" shard{}", memory::zero_shard_ranks(l));
  if (l.recompute != memory::Recompute::kNone) {
    label += fmt::format(" rc={}", memory::recompute_name(l.recompute));
  }
  if (l.sp) label += " sp";
  return label;
}

}  // namespace partrain::analyzers
