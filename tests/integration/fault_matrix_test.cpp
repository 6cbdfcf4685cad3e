// A sample of the fault matrix (tests/integration/fault_matrix.h) for the default suite: one seed
// of a few cells where the layouts' communicators cross (the whole matrix is
// fault_matrix_long_test.cpp, label `long`).
#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/integration/fault_matrix.h"

namespace partrain::testing {
namespace {

const MatrixLayout* layout_named(const std::string& name) {
  for (const MatrixLayout& layout : matrix_layouts()) {
    if (layout.name == name) return &layout;
  }
  ADD_FAILURE() << "no layout " << name;
  return nullptr;
}

TEST(FaultMatrixSample, CulpritsAreNamedWhereCommunicatorsCross) {
  const std::filesystem::path trace =
      std::filesystem::path(::testing::TempDir()) / fmt::format("matrix_{}.db", ::getpid());
  std::vector<std::string> failures;
  const std::pair<const char*, const char*> cells[] = {
      {"dp x tp", "hang"}, {"dp x pp", "stop"},   {"tp x pp", "desync"},
      {"pp 1f1b", "crash"}, {"dp x tp", "oom"},   {"zero 3", "slow"},
  };
  for (const auto& [layout, kind] : cells) {
    for (std::string& failure : run_fault_matrix({layout_named(layout)}, {kind}, {1}, trace)) {
      failures.push_back(std::move(failure));
    }
  }
  for (const std::string& failure : failures) ADD_FAILURE() << failure;
}

}  // namespace
}  // namespace partrain::testing
