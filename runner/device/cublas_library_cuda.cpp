#include <dlfcn.h>
#include <fmt/format.h>
#include <library_types.h>

#include "runner/device/cublas_library.h"

namespace partrain::runner {
namespace {

// The symbol a cuBLAS name stands for after cublas_v2.h's macros (cublasCreate: cublasCreate_v2).
#define PARTRAIN_CUBLAS_SYMBOL_OF(name) #name
#define PARTRAIN_CUBLAS_SYMBOL(name) PARTRAIN_CUBLAS_SYMBOL_OF(name)

template <typename Function>
Status bind(void* library, const std::string& name, const char* symbol, Function& slot) {
  slot = reinterpret_cast<Function>(::dlsym(library, symbol));
  if (slot == nullptr) return failed("{} has no {}: {}", name, symbol, ::dlerror());
  return Status::ok();
}

StatusOr<CublasLibrary> open_cublas() {
  const std::string name = fmt::format("libcublas.so.{}", CUBLAS_VER_MAJOR);
  void* library = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const std::string first_reason = ::dlerror();
    library = ::dlopen(fmt::format("{}/{}", PARTRAIN_CUDA_LIBRARY_DIR, name).c_str(),
                       RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      return failed(
          "cuBLAS could not be loaded ({}): install the CUDA toolkit's libraries or "
          "name their directory in LD_LIBRARY_PATH",
          first_reason);
    }
  }
  CublasLibrary table;
#define PARTRAIN_BIND(member, function) \
  RETURN_IF_ERROR(bind(library, name, PARTRAIN_CUBLAS_SYMBOL(function), table.member))
  PARTRAIN_BIND(create, cublasCreate);
  PARTRAIN_BIND(destroy, cublasDestroy);
  PARTRAIN_BIND(set_stream, cublasSetStream);
  PARTRAIN_BIND(set_math_mode, cublasSetMathMode);
  PARTRAIN_BIND(set_workspace, cublasSetWorkspace);
  PARTRAIN_BIND(get_version, cublasGetVersion);
  PARTRAIN_BIND(get_property, cublasGetProperty);
  PARTRAIN_BIND(get_status_string, cublasGetStatusString);
  PARTRAIN_BIND(get_status_name, cublasGetStatusName);
  PARTRAIN_BIND(gemm_ex, cublasGemmEx);
  PARTRAIN_BIND(gemm_strided_batched_ex, cublasGemmStridedBatchedEx);
#undef PARTRAIN_BIND
  return table;
}

}  // namespace

StatusOr<const CublasLibrary*> cublas_library() {
  // Loaded once and never changed: the process keeps the library open.
  static const StatusOr<CublasLibrary> loaded = open_cublas();
  if (!loaded.is_ok()) return loaded.status();
  return &*loaded;
}

std::string cublas_version_text() {
  StatusOr<const CublasLibrary*> library = cublas_library();
  if (!library.is_ok()) return library.status().message();
  int major = 0, minor = 0, patch = 0;
  (*library)->get_property(MAJOR_VERSION, &major);
  (*library)->get_property(MINOR_VERSION, &minor);
  (*library)->get_property(PATCH_LEVEL, &patch);
  return fmt::format("{}.{}.{} (loaded on demand)", major, minor, patch);
}

}  // namespace partrain::runner
