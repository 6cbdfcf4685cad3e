#include "runner/launch/pmix_job.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

#include "runner/launch/pmix_abi.h"

namespace partrain::launch {
namespace {

struct PmixLibrary {
  pmix::InitFn init = nullptr;
  pmix::FinalizeFn finalize = nullptr;
  pmix::GetFn get = nullptr;
  pmix::ErrorStringFn error_string = nullptr;
  pmix::ValueDestructFn value_destruct = nullptr;  // absent before PMIx v4: the value leaks

  std::string describe(pmix::Status status) const {
    const char* text = error_string != nullptr ? error_string(status) : nullptr;
    return fmt::format("{} ({})", text != nullptr ? text : "unknown error", status);
  }
};

// Opened once per process and never closed: PMIx keeps state (and, while connected, a progress
// thread) inside the library.
StatusOr<PmixLibrary> open_library() {
  void* library = dlopen("libpmix.so.2", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    return unavailable("libpmix.so.2 could not be loaded ({}); it comes with the MPI runtime "
                       "(Debian: apt-get install libpmix2)",
                       dlerror());
  }
  PmixLibrary pmix;
  pmix.init = reinterpret_cast<pmix::InitFn>(dlsym(library, "PMIx_Init"));
  pmix.finalize = reinterpret_cast<pmix::FinalizeFn>(dlsym(library, "PMIx_Finalize"));
  pmix.get = reinterpret_cast<pmix::GetFn>(dlsym(library, "PMIx_Get"));
  pmix.error_string = reinterpret_cast<pmix::ErrorStringFn>(dlsym(library, "PMIx_Error_string"));
  pmix.value_destruct =
      reinterpret_cast<pmix::ValueDestructFn>(dlsym(library, "PMIx_Value_destruct"));
  if (pmix.init == nullptr || pmix.finalize == nullptr || pmix.get == nullptr) {
    return unavailable("libpmix.so.2 lacks PMIx_Init, PMIx_Get or PMIx_Finalize: not a PMIx "
                       "library partrain can use");
  }
  return pmix;
}

}  // namespace

StatusOr<std::string> pmix_host_of_rank(uint32_t rank) {
  // Without a server PMIx_Init would start this process as a singleton, which knows no hosts.
  if (const char* nspace = std::getenv("PMIX_NAMESPACE"); nspace == nullptr || *nspace == '\0') {
    return unavailable("no PMIx server started this process (PMIX_NAMESPACE is unset)");
  }
  ASSIGN_OR_RETURN(PmixLibrary pmix, open_library());
  pmix::Proc self{};
  if (pmix::Status status = pmix.init(&self, nullptr, 0); status != pmix::kSuccess) {
    return failed("PMIx_Init failed: {}", pmix.describe(status));
  }
  pmix::Proc target{};
  std::memcpy(target.nspace, self.nspace, sizeof target.nspace);
  target.rank = rank;
  pmix::Value* value = nullptr;
  pmix::Status status = pmix.get(&target, pmix::kHostname, nullptr, 0, &value);
  StatusOr<std::string> host = failed("PMIx_Get(rank {}, PMIX_HOSTNAME) failed: {}", rank,
                                      pmix.describe(status));
  if (status == pmix::kSuccess && value != nullptr) {
    if (value->type == pmix::kString && value->data.string != nullptr &&
        *value->data.string != '\0') {
      host = std::string(value->data.string);
    } else {
      host = failed("PMIx_Get(rank {}, PMIX_HOSTNAME) returned no host name (value type {})",
                    rank, value->type);
    }
  }
  if (value != nullptr && pmix.value_destruct != nullptr) {
    pmix.value_destruct(value);
    std::free(value);
  }
  pmix.finalize(nullptr, 0);
  return host;
}

}  // namespace partrain::launch
