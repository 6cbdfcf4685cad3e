#include "memory/workload_json.h"

#include <nlohmann/json.hpp>

#include <string>

#include "memory/experts_json.h"

namespace partrain::memory {
namespace {

constexpr int64_t kAny = JsonFields::kAnyInteger;

// A layout field's JSON key: its config name ("layout.pp_split", "recompute") after any "layout.".
std::string layout_key(LayoutField field) {
  const std::string name = LayoutNames{.naming = LayoutNaming::kConfigFields}.name(field);
  return name.substr(name.rfind('.') + 1);
}

Status read_model(JsonFields& config, bool strict, WorkloadSetup& s) {
  ASSIGN_OR_RETURN(JsonFields m, config.object("model"));
  RETURN_IF_ERROR(m.integer("layers", s.model.layers, kAny));
  RETURN_IF_ERROR(m.integer("hidden", s.model.hidden, kAny));
  s.model.ffn = 4 * s.model.hidden;  // the GPT's, when a trace's config has none
  for (const auto& [field, value] : {std::pair{"heads", &s.model.heads}, {"seq", &s.model.seq},
                                     {"vocab", &s.model.vocab}, {"ffn", &s.model.ffn}}) {
    RETURN_IF_ERROR(m.integer(field, *value, kAny, strict));
  }
  RETURN_IF_ERROR(read_experts(m, s.model.moe));  // absent: a dense model, in either reading
  return strict ? m.no_unknown_fields() : Status::ok();
}

Status read_layout(JsonFields& config, bool strict, WorkloadSetup& s) {
  ASSIGN_OR_RETURN(JsonFields l, config.object("layout"));
  TrainingLayout& layout = s.layout;
  RETURN_IF_ERROR(l.integer("world", s.world.ranks, kAny));
  for (const LayoutDegree& d : kLayoutDegrees) {
    RETURN_IF_ERROR(l.integer(layout_key(d.field), layout.*d.member, kAny, strict));
  }
  s.world.dp_given = l.has(layout_key(LayoutField::kDp));  // older traces: what the world leaves
  RETURN_IF_ERROR(l.boolean(layout_key(LayoutField::kSp), layout.sp, strict));
  RETURN_IF_ERROR(l.integer(layout_key(LayoutField::kZero), layout.zero, kAny, strict));
  // A hybrid's shard; runs recorded before it was a field were never hybrids.
  const std::string shard = layout_key(LayoutField::kShard);
  if (l.has(shard)) RETURN_IF_ERROR(l.integer(shard, layout.shard, kAny));
  RETURN_IF_ERROR(l.choice(layout_key(LayoutField::kSchedule), layout.schedule, parse_schedule,
                           "gpipe, 1f1b, interleaved", strict));
  RETURN_IF_ERROR(l.integer(layout_key(LayoutField::kMicroBatch), layout.micro_batch, kAny, strict));
  const std::string global_batch = layout_key(LayoutField::kGlobalBatch);
  if (l.has(global_batch) || strict) {
    int64_t value = 0;
    RETURN_IF_ERROR(l.integer(global_batch, value, kAny));
    layout.global_batch = value;
  }
  RETURN_IF_ERROR(l.integers(layout_key(LayoutField::kPpSplit), layout.pp_split, kAny, strict));
  return strict ? l.no_unknown_fields() : Status::ok();
}

}  // namespace

void write_workload_setup(WorkloadKind kind, const WorkloadModel& m, const ResolvedLayout& r,
                          nlohmann::json& config) {
  const TrainingLayout& l = r.layout;
  config["workload"] = workload_kind_name(kind);
  config["model"] = {{"layers", m.layers}, {"hidden", m.hidden}, {"heads", m.heads},
                     {"seq", m.seq},       {"vocab", m.vocab},   {"ffn", m.ffn}};
  write_experts(m.moe, config["model"]);
  nlohmann::json layout = {{"world", layout_ranks(l)}};
  for (const LayoutDegree& d : kLayoutDegrees) layout[layout_key(d.field)] = l.*d.member;
  layout[layout_key(LayoutField::kSp)] = l.sp;
  layout[layout_key(LayoutField::kZero)] = l.zero;
  layout[layout_key(LayoutField::kShard)] = l.shard;
  layout[layout_key(LayoutField::kSchedule)] = schedule_name(l.schedule);
  layout[layout_key(LayoutField::kMicroBatch)] = l.micro_batch;
  layout[layout_key(LayoutField::kGlobalBatch)] = r.global_batch;
  layout[layout_key(LayoutField::kPpSplit)] = l.pp_split;
  config["layout"] = std::move(layout);
  config[layout_key(LayoutField::kRecompute)] = recompute_name(l.recompute);
}

StatusOr<WorkloadSetup> read_workload_setup(JsonFields& config, ConfigReading reading) {
  const bool strict = reading == ConfigReading::kStrict;
  WorkloadSetup s;
  RETURN_IF_ERROR(config.choice("workload", s.kind, parse_workload_kind, "gpt, mlp", true));
  RETURN_IF_ERROR(read_model(config, strict, s));
  RETURN_IF_ERROR(read_layout(config, strict, s));
  RETURN_IF_ERROR(config.choice(layout_key(LayoutField::kRecompute), s.layout.recompute,
                                parse_recompute,
                                "none, selective, full", strict));
  return s;
}

}  // namespace partrain::memory
