#include "runner/device/openblas_library.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <link.h>

#include <cstdlib>
#include <stdexcept>

namespace partrain::runner {
namespace {

constexpr const char* kLibrary = "libopenblas.so.0";

template <typename Function>
Status bind(void* library, const std::string& name, const char* symbol, Function& slot) {
  slot = reinterpret_cast<Function>(::dlsym(library, symbol));
  if (slot == nullptr) return failed("{} has no {}: {}", name, symbol, ::dlerror());
  return Status::ok();
}

// OpenBLAS reads its thread count from the environment once, in the constructor that starts its
// pool: set for that moment only, so the processes this one starts see the user's environment.
void* open_with_pool_of(int pool_threads, const char* path) {
  const bool chosen_by_user =
      std::getenv("OPENBLAS_NUM_THREADS") != nullptr || std::getenv("OMP_NUM_THREADS") != nullptr;
  if (!chosen_by_user) {
    ::setenv("OPENBLAS_NUM_THREADS", std::to_string(pool_threads).c_str(), 1);
  }
  void* library = ::dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!chosen_by_user) ::unsetenv("OPENBLAS_NUM_THREADS");
  return library;
}

}  // namespace

namespace detail {

StatusOr<OpenblasLibrary> open_openblas(const std::vector<std::string>& candidates,
                                        int pool_threads) {
  void* library = nullptr;
  std::string name, first_reason;
  for (const std::string& candidate : candidates) {
    library = open_with_pool_of(pool_threads, candidate.c_str());
    if (library != nullptr) {
      name = candidate;
      break;
    }
    const char* reason = ::dlerror();
    if (first_reason.empty()) first_reason = reason != nullptr ? reason : candidate;
  }
  if (library == nullptr) {
    return failed(
        "OpenBLAS could not be loaded ({}): install it (Debian: libopenblas0-pthread) or name "
        "its directory in LD_LIBRARY_PATH",
        first_reason);
  }
  OpenblasLibrary table;
  if (const link_map* map = nullptr; ::dlinfo(library, RTLD_DI_LINKMAP, &map) == 0) {
    table.path = map->l_name;
  }
  RETURN_IF_ERROR(bind(library, name, "cblas_sgemm", table.sgemm));
  RETURN_IF_ERROR(bind(library, name, "openblas_set_num_threads", table.set_num_threads));
  RETURN_IF_ERROR(bind(library, name, "openblas_get_corename", table.get_corename));
  RETURN_IF_ERROR(bind(library, name, "openblas_get_config", table.get_config));
  return table;
}

}  // namespace detail

StatusOr<const OpenblasLibrary*> openblas_library(int pool_threads) {
  // Loaded once and never changed: the process keeps the library open.
  static const StatusOr<OpenblasLibrary> loaded = detail::open_openblas(
      {kLibrary, fmt::format("{}/{}", PARTRAIN_OPENBLAS_LIBRARY_DIR, kLibrary)},
      pool_threads < 1 ? 1 : pool_threads);
  if (!loaded.is_ok()) return loaded.status();
  return &*loaded;
}

const OpenblasLibrary& loaded_openblas() {
  StatusOr<const OpenblasLibrary*> library = openblas_library();
  if (!library.is_ok()) throw std::runtime_error(library.status().message());
  return **library;
}

std::string openblas_version_text() {
  StatusOr<const OpenblasLibrary*> library = openblas_library();
  if (!library.is_ok()) return library.status().message();
  return fmt::format("{} (loaded on demand from {})", (*library)->get_config(), (*library)->path);
}

}  // namespace partrain::runner
