// `partrain bench gemm` end to end on the CPU device: the table and --json carry the same shapes
// and columns, the sampled entries are checked, the defaults follow the device, and bad flags are
// usage errors before anything runs. No rate is asserted (the machine decides that); on a GPU the
// same command is a row of scripts/gpu-validate.sh.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/integration/command_runner.h"

namespace partrain::testing {
namespace {

// stderr less the warning an OpenBLAS that does not know this machine's CPU gets (below).
std::string without_blas_warning(const std::string& err) {
  std::string out;
  size_t start = 0;
  while (start < err.size()) {
    size_t end = err.find('\n', start);
    end = end == std::string::npos ? err.size() : end + 1;
    const std::string line = err.substr(start, end - start);
    if (line.find("OpenBLAS runs its '") == std::string::npos) out += line;
    start = end;
  }
  return out;
}

// OpenBLAS's generic kernels on a CPU with AVX2 run GEMMs at a fraction of its rate (Debian 12's
// OpenBLAS chose "Prescott" on a 2023 Xeon: 0.026 against 0.092 TFLOP/s at 1024^3): bench gemm
// says so and names OPENBLAS_CORETYPE. Forced here with that variable, so it holds on any CPU
// with AVX2 and FMA.
TEST(BenchGemm, GenericOpenBlasKernelsOnAModernCpuAreWarnedAbout) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    GTEST_SKIP() << "no AVX2: the generic kernels are this CPU's";
  }
  CommandResult r =
      run_partrain("bench gemm --device cpu -s 64 --iters 1", "OPENBLAS_CORETYPE=Prescott");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("warning: OpenBLAS runs its 'Prescott' kernels on this CPU"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("set OPENBLAS_CORETYPE="), std::string::npos) << r.err;
  CommandResult told =
      run_partrain("bench gemm --device cpu -s 64 --iters 1", "OPENBLAS_CORETYPE=Haswell");
  ASSERT_EQ(told.exit_code, 0) << told.err;
  EXPECT_EQ(told.err.find("OpenBLAS runs its"), std::string::npos) << told.err;
}

TEST(BenchGemm, TableHasEveryShapeWithUnitsAndTheCheck) {
  CommandResult r =
      run_partrain("bench gemm --device cpu --precision fp32 -s 64,48x40x96 --bias --iters 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* column : {"shape", "dtype", "bias", "time", "rate", "checked", "#wrong",
                             "max error", "(MxNxK)", "(us)", "(TFLOP/s)", "(x tol.)"}) {
    EXPECT_NE(r.out.find(column), std::string::npos) << column << "\n" << r.out;
  }
  EXPECT_NE(r.out.find("matmul_forward on cpu (OpenBLAS, 1 thread)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("warmup iters: 3, iters: 2"), std::string::npos) << r.out;
  for (const char* row : {"64^3   fp32   yes", "48x40x96   fp32   yes"}) {
    EXPECT_NE(r.out.find(row), std::string::npos) << row << "\n" << r.out;
  }
  EXPECT_NE(r.out.find("# Out of bounds values : 0 OK"), std::string::npos) << r.out;
  EXPECT_EQ(without_blas_warning(r.err), "") << "--device cpu: no notice";
}

TEST(BenchGemm, JsonCarriesTheSameFacts) {
  CommandResult r = run_partrain("bench gemm --device cpu -s 32x16x8,24 --json -w 0 --iters 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json doc = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << r.out;
  EXPECT_EQ(doc["device"], "cpu (OpenBLAS, 1 thread, bf16 GEMMs)");
  EXPECT_EQ(doc["warmup_iters"], 0);
  EXPECT_EQ(doc["iters"], 3);
  EXPECT_EQ(doc["wrong"], 0);
  ASSERT_EQ(doc["results"].size(), 2u);
  const auto& first = doc["results"][0];
  EXPECT_EQ(first["m"], 32);
  EXPECT_EQ(first["n"], 16);
  EXPECT_EQ(first["k"], 8);
  EXPECT_EQ(doc["results"][1]["k"], 24);
  for (const auto& row : doc["results"]) {
    EXPECT_EQ(row["dtype"], "bf16");
    EXPECT_EQ(row["bias"], false);
    EXPECT_EQ(row["checked"], 16);
    EXPECT_EQ(row["wrong"], 0);
    EXPECT_LE(row["max_error_over_tolerance"].get<double>(), 1.0);
    const double flops =
        2.0 * row["m"].get<double>() * row["n"].get<double>() * row["k"].get<double>();
    EXPECT_DOUBLE_EQ(row["flops_per_call"].get<double>(), flops);
    EXPECT_NEAR(row["tflops"].get<double>(), flops / (row["time_us"].get<double>() * 1e6),
                1e-9 * row["tflops"].get<double>() + 1e-15)
        << row.dump();
  }
}

// PARTRAIN_PRECISION set for a launch (a recipe's name) means the same GEMM here.
TEST(BenchGemm, TakesTheRecipesPrecisionNames) {
  for (const auto& [precision, dtype] :
       {std::pair{"bf16-mixed", "bf16"}, std::pair{"fp32-adam", "fp32"}}) {
    CommandResult r = run_partrain("bench gemm --device cpu -s 8 --iters 1 --json",
                                   std::string("PARTRAIN_PRECISION=") + precision);
    ASSERT_EQ(r.exit_code, 0) << precision << ": " << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["results"][0]["dtype"], dtype) << precision;
  }
}

TEST(BenchGemm, NoCheckShowsNotApplicable) {
  CommandResult r = run_partrain("bench gemm --device cpu -s 16 -c 0 --iters 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("       0    N/A       N/A"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# Out of bounds values : N/A (not checked: -c 0)"), std::string::npos)
      << r.out;
  CommandResult j = run_partrain("bench gemm --device cpu -s 16 -c 0 --iters 1 --json");
  ASSERT_EQ(j.exit_code, 0) << j.err;
  nlohmann::json doc = nlohmann::json::parse(j.out);
  EXPECT_TRUE(doc["results"][0]["wrong"].is_null());
  EXPECT_TRUE(doc["results"][0]["max_error_over_tolerance"].is_null());
}

TEST(BenchGemm, DefaultShapeOnTheCpuIs1024Cubed) {
  CommandResult r = run_partrain("bench gemm --device cpu --json -w 0 --iters 1 -c 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["results"].size(), 1u);
  EXPECT_EQ(doc["results"][0]["m"], 1024);
  EXPECT_EQ(doc["results"][0]["k"], 1024);
}

TEST(BenchGemm, BadInputIsAUsageErrorWithNothingOnStdout) {
  struct Case {
    const char* args;
    const char* message;
  };
  for (const Case& c : {
           Case{"-s 0", "GEMM shape '0' is not a positive size"},
           Case{"-s 64x", "GEMM shape '64x' is not a positive size"},
           Case{"-s 1x2", "GEMM shape '1x2' has 2 dimensions"},
           Case{"-s 2097152", "has an operand past 2^40 elements"},
           Case{"-s 2147483648x1x1", "each dimension as a 32-bit int"},
           Case{"--precision fp16", "--precision: fp16 not in {bf16,fp32,bf16-mixed,"},
           Case{"--device gpu", "--device: gpu not in {auto,cuda,cpu}"},
           Case{"--iters 0", "--iters: Value 0 not in range"},
           Case{"-c 2", "--check: Value 2 not in range"},
       }) {
    const std::string args = c.args;
    CommandResult r = run_partrain(
        "bench gemm " + args + (args.find("--device") == std::string::npos ? " --device cpu" : ""));
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(r.out, "") << c.args;
  }
}

}  // namespace
}  // namespace partrain::testing
