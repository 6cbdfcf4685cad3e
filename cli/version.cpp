#include "cli/version.h"

#include <fmt/format.h>
#include <gloo/config.h>
#include <sqlite3.h>

#include "runner/device/openblas_library.h"

#ifdef PARTRAIN_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <library_types.h>
#include <nccl.h>

#include "runner/device/cublas_library.h"
#endif

namespace partrain::cli {
namespace {

#ifdef PARTRAIN_HAVE_CUDA
std::string cuda_versions() {
  // These calls read library versions only: they work without a GPU or driver.
  std::string text;
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  int driver = 0;
  std::string driver_text = cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0
                                ? fmt::format("{}.{}", driver / 1000, (driver % 1000) / 10)
                                : "none";
  text += fmt::format("  CUDA runtime   {}.{} (driver {}), architectures sm_{}\n", runtime / 1000,
                      (runtime % 1000) / 10, driver_text, PARTRAIN_CUDA_ARCHS);
  text += fmt::format("  cuBLAS         {}\n", runner::cublas_version_text());
  int nccl = 0;
  ncclGetVersion(&nccl);
  text += fmt::format("  NCCL           {}.{}.{}\n", nccl / 10000, (nccl % 10000) / 100, nccl % 100);
  uint32_t cupti = 0;
  cuptiGetVersion(&cupti);
  text += fmt::format("  CUPTI          API version {}\n", cupti);
  return text;
}
#endif

}  // namespace

std::string version_text() {
  std::string text = fmt::format("partrain {}\nbackends:\n", PARTRAIN_VERSION);
#ifdef PARTRAIN_HAVE_CUDA
  text += cuda_versions();
#else
  text += "  CUDA           not compiled in (built with PARTRAIN_CUDA=OFF or without a toolkit)\n";
#endif
  text += fmt::format("  Gloo           {}.{}.{} (tcp transport)\n", GLOO_VERSION_MAJOR,
                      GLOO_VERSION_MINOR, GLOO_VERSION_PATCH);
  text += fmt::format("  OpenBLAS       {}\n", runner::openblas_version_text());
  text += fmt::format("  SQLite         {}", sqlite3_libversion());
  return text;
}

}  // namespace partrain::cli
