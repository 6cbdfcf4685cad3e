#include "cli/version.h"

#include <fmt/format.h>
#include <gloo/config.h>
#include <sqlite3.h>

#include <cblas.h>

#ifdef PARTRAIN_HAVE_CUDA
#include <cublas_api.h>
#include <dlfcn.h>
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <library_types.h>
#include <nccl.h>
#endif

namespace partrain::cli {
namespace {

#ifdef PARTRAIN_HAVE_CUDA
// cuBLAS is opened on demand rather than linked (its initialisers cost ~80 ms per process).
std::string cublas_version() {
  std::string name = fmt::format("libcublas.so.{}", CUBLAS_VER_MAJOR);
  void* library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    library = dlopen(fmt::format("{}/{}", PARTRAIN_CUDA_LIBRARY_DIR, name).c_str(),
                     RTLD_NOW | RTLD_LOCAL);
  }
  if (library == nullptr) return fmt::format("{} not found ({})", name, dlerror());
  using GetProperty = cublasStatus_t (*)(libraryPropertyType, int*);
  auto get_property = reinterpret_cast<GetProperty>(dlsym(library, "cublasGetProperty"));
  int major = 0, minor = 0, patch = 0;
  if (get_property != nullptr) {
    get_property(MAJOR_VERSION, &major);
    get_property(MINOR_VERSION, &minor);
    get_property(PATCH_LEVEL, &patch);
  }
  dlclose(library);
  return fmt::format("{}.{}.{} (loaded on demand)", major, minor, patch);
}

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
  text += fmt::format("  cuBLAS         {}\n", cublas_version());
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
  text += fmt::format("  OpenBLAS       {}\n", openblas_get_config());
  text += fmt::format("  SQLite         {}", sqlite3_libversion());
  return text;
}

}  // namespace partrain::cli
