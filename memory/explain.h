// `partrain memory --explain`: every formula behind an estimate with the numbers substituted,
// its result and its published source, for the heaviest stage.
#pragma once

#include <string>
#include <vector>

#include "memory/memory_estimate.h"

namespace partrain::memory {

struct ExplainLine {
  std::string quantity;  // "activations per layer"
  std::string formula;   // "s b h (34 + 5 a s/h) = 2048 x 1 x 12288 x (...)"
  std::string result;    // "1.97 GiB"
  std::string source;    // "Korthikanti 2022, Table 2"
};

std::vector<ExplainLine> explain_estimate(const EstimateInput& input, const MemoryEstimate& estimate);

// "12.55 GiB (13.48 GB)": binary and decimal, labelled; under a GiB in MiB (MB), under a MiB in
// KiB (kB), so that a small model's figures do not read 0.00.
std::string format_gib_gb(double bytes);

}  // namespace partrain::memory
