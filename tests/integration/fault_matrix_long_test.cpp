// The whole fault matrix (tests/integration/fault_matrix.h): every layout x every --inject kind,
// three seeds per cell, the table and the times from fault to diagnosis printed. Label `long`
// (`ctest -L long -R fault_matrix`); about half an hour on a 2-core machine. To replay or narrow
// it: PARTRAIN_MATRIX_SEEDS="7 8", PARTRAIN_MATRIX_LAYOUTS="dp x tp,tp x pp",
// PARTRAIN_MATRIX_KINDS="hang,stop".
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>

#include "tests/integration/fault_matrix.h"

namespace partrain::testing {
namespace {

std::vector<std::string> split(const char* text, char separator) {
  std::vector<std::string> items;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, separator);) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

TEST(FaultMatrix, EveryLayoutAndKindNamesItsCulprit) {
  std::vector<uint64_t> seeds = {1, 2, 3};
  if (const char* text = std::getenv("PARTRAIN_MATRIX_SEEDS")) {
    seeds.clear();
    for (const std::string& seed : split(text, ' ')) seeds.push_back(std::stoull(seed));
  }
  std::vector<const MatrixLayout*> layouts;
  const char* wanted_layouts = std::getenv("PARTRAIN_MATRIX_LAYOUTS");
  const std::vector<std::string> names =
      wanted_layouts ? split(wanted_layouts, ',') : std::vector<std::string>();
  for (const MatrixLayout& layout : matrix_layouts()) {
    if (names.empty() || std::find(names.begin(), names.end(), layout.name) != names.end()) {
      layouts.push_back(&layout);
    }
  }
  const char* wanted_kinds = std::getenv("PARTRAIN_MATRIX_KINDS");
  const std::vector<std::string> kinds =
      wanted_kinds ? split(wanted_kinds, ',') : matrix_kinds();
  std::printf("[matrix] seeds:");
  for (uint64_t seed : seeds) std::printf(" %llu", static_cast<unsigned long long>(seed));
  std::printf("\n");
  const std::filesystem::path trace =
      std::filesystem::path(::testing::TempDir()) / fmt::format("matrix_long_{}.db", ::getpid());
  for (const std::string& failure : run_fault_matrix(layouts, kinds, seeds, trace)) {
    ADD_FAILURE() << failure;
  }
}

}  // namespace
}  // namespace partrain::testing
