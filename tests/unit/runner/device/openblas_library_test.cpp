// OpenBLAS is opened on demand, not linked: a process that asks for no GEMM (the launcher,
// `analyze`, `--version`) carries neither the library nor its thread pool, and the first caller
// decides the pool's size.
#include "runner/device/openblas_library.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace partrain::runner {
namespace {

bool maps_name(const std::string& library) {
  std::ifstream maps("/proc/self/maps");
  const std::string text{std::istreambuf_iterator<char>(maps), std::istreambuf_iterator<char>()};
  return text.find(library) != std::string::npos;
}

int thread_count() {
  const std::filesystem::directory_iterator tasks("/proc/self/task");
  return static_cast<int>(std::distance(begin(tasks), end(tasks)));
}

// One test: the library opens once per process, so the order of these checks is the point.
TEST(OpenblasLibrary, OpensOnDemandWithThePoolTheFirstCallerAsks) {
  EXPECT_FALSE(maps_name("libopenblas")) << "loaded with the executable, before main";
  ::unsetenv("OPENBLAS_NUM_THREADS");
  ::unsetenv("OMP_NUM_THREADS");
  const int before = thread_count();

  StatusOr<const OpenblasLibrary*> blas = openblas_library(2);
  ASSERT_TRUE(blas.is_ok()) << blas.status().message();
  EXPECT_TRUE(maps_name("libopenblas"));
  // A pool of two is the caller and one thread (OpenBLAS takes no more than the CPUs it may use),
  // not one per core; the environment is the user's again.
  cpu_set_t allowed;
  ASSERT_EQ(::sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  EXPECT_EQ(thread_count() - before, std::min(2, CPU_COUNT(&allowed)) - 1);
  EXPECT_EQ(std::getenv("OPENBLAS_NUM_THREADS"), nullptr);

  // The table works: [1 2; 3 4] x [5 6; 7 8].
  const float a[] = {1, 2, 3, 4}, b[] = {5, 6, 7, 8};
  float c[4] = {};
  (*blas)->sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
  EXPECT_EQ(std::vector<float>(c, c + 4), (std::vector<float>{19, 22, 43, 50}));

  // Later callers get the library as first opened.
  StatusOr<const OpenblasLibrary*> again = openblas_library(8);
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(*again, *blas);
  EXPECT_EQ(&loaded_openblas(), *blas);
  EXPECT_EQ(thread_count() - before, std::min(2, CPU_COUNT(&allowed)) - 1);

  EXPECT_TRUE((*blas)->path.ends_with("libopenblas.so.0")) << (*blas)->path;
  const std::string version = openblas_version_text();
  EXPECT_TRUE(version.starts_with("OpenBLAS ")) << version;
  EXPECT_NE(version.find("(loaded on demand from " + (*blas)->path + ")"), std::string::npos)
      << version;
}

// Where OpenBLAS is not installed a CPU rank fails saying so, with the loader's reason, the
// first candidate's (the loader's search path is asked first), not only the fallback's.
TEST(OpenblasLibrary, AMissingLibraryIsNamedWithTheLoadersReason) {
  StatusOr<OpenblasLibrary> missing =
      detail::open_openblas({"libopenblas-absent.so.0", "/nonexistent/libopenblas.so.0"}, 1);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kFailed);
  EXPECT_NE(missing.status().message().find(
                "OpenBLAS could not be loaded (libopenblas-absent.so.0: cannot open shared object "
                "file"),
            std::string::npos)
      << missing.status().message();
  EXPECT_NE(missing.status().message().find("LD_LIBRARY_PATH"), std::string::npos);

  // A library that is there but is not OpenBLAS: the entry point it lacks.
  StatusOr<OpenblasLibrary> other = detail::open_openblas({"libz.so.1"}, 1);
  ASSERT_FALSE(other.is_ok());
  EXPECT_NE(other.status().message().find("libz.so.1 has no cblas_sgemm"), std::string::npos)
      << other.status().message();
}

}  // namespace
}  // namespace partrain::runner
