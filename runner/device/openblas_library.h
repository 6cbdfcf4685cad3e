// OpenBLAS opened with dlopen where a GEMM needs it, never linked: a linked OpenBLAS started its
// thread pool when the partrain executable loaded, before main, in every process (the launcher,
// `analyze`, `--version`, the rendezvous store): under `ulimit -v` the launcher hung in fork(),
// where the host refused a thread OpenBLAS exited the process before main, and the pool thread
// took the launcher's signals. Everything calls OpenBLAS through this table only, as the CUDA
// device calls cuBLAS (cublas_library.h).
#pragma once

#include <cblas.h>  // the entry points' types; their symbols are not linked

#include <string>
#include <vector>

#include "core/status.h"

namespace partrain::runner {

// The entry points partrain calls, under OpenBLAS's names without the cblas_/openblas_ prefix.
struct OpenblasLibrary {
  std::string path;  // the file the loader opened
  decltype(&cblas_sgemm) sgemm = nullptr;
  decltype(&openblas_set_num_threads) set_num_threads = nullptr;
  decltype(&openblas_get_corename) get_corename = nullptr;
  decltype(&openblas_get_config) get_config = nullptr;
};

// libopenblas.so.0 from the loader's search path (an executable's RUNPATH first: the GPU bundle's
// $ORIGIN/../lib) or else the directory of the OpenBLAS the build found, opened once and kept for
// the process. The first call decides the pool: unless the user set OPENBLAS_NUM_THREADS or
// OMP_NUM_THREADS, OpenBLAS starts `pool_threads` threads in all (the caller's included), not
// one per core; later calls get the library as first opened. kFailed names the library and
// dlerror's reason when it is not there or lacks an entry point.
StatusOr<const OpenblasLibrary*> openblas_library(int pool_threads = 1);

// The same for code that has no Status to return (runner/ops' GEMMs): throws std::runtime_error
// with that message when OpenBLAS cannot be loaded. The CPU device checks openblas_library()
// first and runs no op without it.
const OpenblasLibrary& loaded_openblas();

namespace detail {
// The first of `candidates` (dlopen names or paths) that opens, bound; kFailed with the first
// candidate's dlerror when none opens, or naming the entry point one lacks. openblas_library()'s
// work, apart for its tests.
StatusOr<OpenblasLibrary> open_openblas(const std::vector<std::string>& candidates,
                                        int pool_threads);
}  // namespace detail

// OpenBLAS's build configuration and the file it was loaded from ("OpenBLAS 0.3.21 DYNAMIC_ARCH
// NO_AFFINITY Haswell MAX_THREADS=64 (loaded on demand from /usr/lib/.../libopenblas.so.0)"), or
// why it could not be loaded (`partrain --version`).
std::string openblas_version_text();

}  // namespace partrain::runner
