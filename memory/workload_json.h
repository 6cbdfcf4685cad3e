// What a built-in workload's config says about its training, beside the runner's own fields:
// {"workload": "gpt", "model": {...}, "layout": {"world", "dp", "tp", ...}, "recompute": "none"}.
// The launcher writes it into PARTRAIN_WORKLOAD_CONFIG and the trace's runs.config; one codec
// reads it back, strictly for a worker (every field there with its type: a config that is not
// exactly the launcher's is an error naming the field) and leniently for the runs.config of
// traces, older ones included (an absent field is its default; other fields are let be).
// Values are read as typed; their ranges are resolve_layout's and check_workload_model's rules.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "core/json_fields.h"
#include "core/status.h"
#include "memory/training_layout.h"
#include "memory/workload_model.h"

namespace partrain::memory {

struct WorkloadSetup {
  WorkloadKind kind = WorkloadKind::kGpt;
  WorkloadModel model;
  TrainingLayout layout;
  LayoutWorld world;  // the layout's world; dp_given: the config had a dp (old traces may not)
};

enum class ConfigReading { kStrict, kLenient };

// Adds the setup's fields to `config`: the layout as resolved (dp and the global batch filled in).
void write_workload_setup(WorkloadKind kind, const WorkloadModel& model,
                          const ResolvedLayout& layout, nlohmann::json& config);

// Reads the setup's fields through `config` (which the caller then reads its own fields from and,
// strictly, refuses the fields nobody read). A field of the wrong type is an error in either
// reading; an absent one only in the strict one (and in the lenient one for the workload, the
// model's layers and hidden size and the layout's world, without which nothing is known).
StatusOr<WorkloadSetup> read_workload_setup(JsonFields& config, ConfigReading reading);

}  // namespace partrain::memory
