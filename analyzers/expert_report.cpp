#include "analyzers/expert_report.h"

#include <fmt/format.h>

#include <algorithm>

#include "analyzers/report_numbers.h"
#include "core/number_format.h"

namespace partrain::analyzers {

using nlohmann::json;

std::string_view moe_note() {
  return "the router, expert and all_to_all terms are not validated against a measured "
         "mixture-of-experts run (the tie margin is the error shown on dense runs): rank with "
         "that much less certainty, and calibrate with a traced MoE run where you have one";
}

std::string_view level_words(LinkLevel level) {
  return level == LinkLevel::kIntraNode ? "inside a node" : "across nodes";
}
std::string_view level_key(LinkLevel level) {
  return level == LinkLevel::kIntraNode ? "intra_node" : "inter_node";
}

// A mixture of experts' terms (--explain, --check): what one MoE block costs per micro-batch, the
// all_to_all and where its group lies, and the two gradient groups.
std::string experts_text(const StepCost& c, const memory::TrainingLayout& l) {
  const ExpertStep& e = c.experts;
  if (!e.moe) return "";
  const ExpertForward& f = e.forward;
  const SecondsUnit unit = seconds_unit(f.total());
  std::string text = fmt::format(
      "  mixture of experts, each of the heaviest stage's {} MoE blocks per micro-batch, forward: "
      "router {}, routed experts {} ({} per GPU, {:.0f} tokens each), shared experts {}\n",
      e.moe_blocks, seconds_in(f.router_s, unit), seconds_in(f.routed_s, unit), f.local_experts,
      f.tokens_per_expert, seconds_in(f.shared_s, unit));
  const AllToAll& a = e.all_to_all;
  if (l.ep > 1) {
    text += fmt::format(
        "  all_to_all: {} per micro-batch ({} per MoE block: dispatch and combine, forward and "
        "backward{}), each {} per GPU over ep {} {} = {}: {} per step, {} of it, {}\n",
        e.all_to_alls, e.moe_blocks > 0 ? e.all_to_alls / e.moe_blocks : 0,
        l.recompute == memory::Recompute::kFull ? ", and full recompute's forward again" : "",
        gib(a.bytes), a.ranks, level_words(a.level), seconds_text(a.seconds),
        seconds_text(c.ep_comm_s), format_percent(pct(c.ep_comm_s, c.step_s) / 100),
        e.all_to_all_overlapped
            ? "what the paired micro-batch's compute does not cover (DualPipe's overlap)"
            : "not overlapped (Megatron-Core's and DeepSpeed's default; DualPipe(V) overlaps it)");
  } else {
    text += "  all_to_all: none (ep 1: every GPU holds every expert)\n";
  }
  if (e.tp_exchanges > 0) {
    text += fmt::format(
        "  tp exchange: with SP the MLP's all-gather and reduce-scatter over tp {} move the "
        "dispatched copies, not the tokens: +{} a pair, {} pairs per micro-batch (in tp_comm)\n",
        l.tp, seconds_text(e.tp_exchange_s), e.tp_exchanges);
  }
  const SecondsUnit grad_unit = seconds_unit(std::max(e.dense_grad_s, e.expert_grad_s));
  // "over dp x cp = 16 GPUs across nodes 16.8 ms", or that one GPU holds them alone.
  auto group = [&](const char* ranks_named, int ranks, LinkLevel level, double seconds) {
    if (ranks <= 1) return fmt::format("none ({} = 1: no other GPU holds them)", ranks_named);
    return fmt::format("over {} = {} GPUs {} {}", ranks_named, ranks, level_words(level),
                       seconds_in(seconds, grad_unit));
  };
  text += fmt::format(
      "  gradients (one reduction, before overlap): dense weights {}, routed experts {}\n",
      group("dp x cp", e.data_ranks, e.dense_grad_level, e.dense_grad_s),
      group("dp x cp / ep", e.expert_data_ranks, e.expert_grad_level, e.expert_grad_s));
  return text;
}

json experts_json(const StepCost& c) {
  const ExpertStep& e = c.experts;
  const ExpertForward& f = e.forward;
  return {
      {"moe_blocks", e.moe_blocks},
      {"local_experts", f.local_experts},
      {"tokens_per_expert", f.tokens_per_expert},
      {"block_forward_s",
       {{"router", f.router_s}, {"routed_experts", f.routed_s}, {"shared_experts", f.shared_s}}},
      {"all_to_all",
       {{"bytes_per_gpu", e.all_to_all.bytes},
        {"ranks", e.all_to_all.ranks},
        {"level", level_key(e.all_to_all.level)},
        {"seconds_each", e.all_to_all.seconds},
        {"per_micro_batch", e.all_to_alls},
        {"overlapped", e.all_to_all_overlapped}}},
      {"tp_exchange", {{"extra_s_each", e.tp_exchange_s}, {"per_micro_batch", e.tp_exchanges}}},
      {"gradients_s",
       {{"dense", e.dense_grad_s},
        {"dense_ranks", e.data_ranks},
        {"dense_level", level_key(e.dense_grad_level)},
        {"experts", e.expert_grad_s},
        {"expert_ranks", e.expert_data_ranks},
        {"expert_level", level_key(e.expert_grad_level)}}}};
}

}  // namespace partrain::analyzers
