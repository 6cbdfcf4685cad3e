// What the recommender's step-cost tests share: two-level machines with round numbers (8 GPUs a
// node, 100 GB/s and 2 us inside it, 10 GB/s and 10 us between nodes) and a model's memory
// estimate for a layout (bf16 with AdamW, no reserve), the input step_cost takes.
#pragma once

#include <gtest/gtest.h>

#include "analyzers/link_model.h"
#include "memory/memory_estimate.h"

namespace partrain::analyzers {

inline Machines test_machines() {
  Machines m;
  m.gpus = 16;
  m.gpus_per_node = 8;
  m.intra_node = {100e9, 2e-6};
  m.inter_node = {10e9, 10e-6};
  return m;
}

inline memory::PrecisionRecipe bf16_recipe() {
  return *memory::precision_recipe("bf16-mixed", memory::Optimizer::kAdamW);
}

inline memory::MemoryEstimate estimate_for(const memory::ModelConfig& model,
                                           const memory::TrainingLayout& layout) {
  memory::EstimateInput in;
  in.model = model;
  in.recipe = bf16_recipe();
  in.layout = layout;
  in.reserve_bytes = 0;
  auto e = memory::estimate_memory(in);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  return e.is_ok() ? *e : memory::MemoryEstimate{};
}

}  // namespace partrain::analyzers
