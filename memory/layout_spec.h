// A layout written as text, "dp=8,tp=4,pp=2,zero=1,mb=2,recompute=selective,sp=1": the form
// `partrain recommend --check` takes and scripts write. The keys are the layout's spec keys
// (training_layout.h); this file reads the text, resolve_layout judges the layout.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "memory/training_layout.h"

namespace partrain::memory {

struct LayoutSpec {
  TrainingLayout layout;  // the base layout with the spec's keys applied
  bool dp_given = false;  // without dp, resolve_layout fills it from the world
  // Keys whose value the base may hold already (a search restricts by them, a pp_split it has
  // no use for): given or not.
  bool sp_given = false;
  bool recompute_given = false;
  bool schedule_given = false;
  bool pp_split_given = false;
};

// The keys, for messages and help: "dp tp pp cp vpp ep zero shard mb recompute sp schedule
// pp_split".
std::string layout_spec_keys();

// Applies `text` to `base`. kInvalidArgument, prefixed with `source` (the flag the text came
// with), for an item that is not KEY=VALUE, an unknown or repeated key, or a value of the wrong
// kind; a value of the right kind that breaks a rule (tp=0) is left to resolve_layout. A vpp
// above 1 without a schedule means the interleaved one.
StatusOr<LayoutSpec> parse_layout_spec(std::string_view text, const TrainingLayout& base,
                                       std::string_view source);

}  // namespace partrain::memory
