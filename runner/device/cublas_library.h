// cuBLAS opened with dlopen where the CUDA device needs it, never linked: a linked cuBLAS put
// libcublas.so.N in the partrain executable's NEEDED, so on a login node without the CUDA
// libraries even `partrain --version` failed to start, and its initialisers cost ~80 ms at every
// process start. The CUDA device calls cuBLAS through this table only. Include from *_cuda.cpp.
#pragma once

#include <cublas_v2.h>

#include <string>

#include "core/status.h"

namespace partrain::runner {

// The entry points partrain calls, under cuBLAS's names without the _v2 suffix.
struct CublasLibrary {
  decltype(&cublasCreate) create = nullptr;
  decltype(&cublasDestroy) destroy = nullptr;
  decltype(&cublasSetStream) set_stream = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSetWorkspace) set_workspace = nullptr;
  decltype(&cublasGetVersion) get_version = nullptr;
  decltype(&cublasGetProperty) get_property = nullptr;
  decltype(&cublasGetStatusString) get_status_string = nullptr;
  decltype(&cublasGetStatusName) get_status_name = nullptr;
  // cublas_api.h overloads these two for C++ (a cudaDataType compute type): spelled out.
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                            int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                            cublasGemmAlgo_t) = nullptr;
  cublasStatus_t (*gemm_strided_batched_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t,
                                            int, int, int, const void*, const void*, cudaDataType,
                                            int, long long, const void*, cudaDataType, int,
                                            long long, const void*, void*, cudaDataType, int,
                                            long long, int, cublasComputeType_t,
                                            cublasGemmAlgo_t) = nullptr;
};

// libcublas.so.<the major version built against>, from the loader's search path or else the
// toolkit's library directory of the build, opened once and kept for the process. kFailed names
// the library and dlerror's reason when it is not there or lacks an entry point.
StatusOr<const CublasLibrary*> cublas_library();

// "13.1.0 (loaded on demand)", or why cuBLAS could not be loaded (`partrain --version`).
std::string cublas_version_text();

}  // namespace partrain::runner
