// The equivalence rule of DESIGN.md "Reference workloads" as the tests check it: a run's losses
// and final parameter norm within 1e-4 relative of the reference's (fp32, same seed and global
// batch), from two `partrain launch --json` summaries.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

namespace partrain::testing {

// `tolerance` is relative; other than 1e-4 only where the two runs' arithmetic differs on purpose.
inline void expect_equivalent(const nlohmann::json& reference, const nlohmann::json& run,
                              const std::string& what, double tolerance = 1e-4) {
  ASSERT_FALSE(run.is_discarded()) << what;
  ASSERT_EQ(run["losses"].size(), reference["losses"].size()) << what;
  for (size_t i = 0; i < reference["losses"].size(); ++i) {
    const double want = reference["losses"][i].get<double>();
    EXPECT_NEAR(run["losses"][i].get<double>(), want, tolerance * std::abs(want))
        << what << ", step " << i;
  }
  const double want = reference["final_params_l2"].get<double>();
  EXPECT_NEAR(run["final_params_l2"].get<double>(), want, tolerance * want) << what;
}

}  // namespace partrain::testing
