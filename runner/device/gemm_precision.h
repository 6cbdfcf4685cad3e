// What a device's matmul multiplies its operands in (a workload maps its Precision, --precision,
// onto it). The ops return fp32 and accumulate in fp32; they take fp32 activations (bf16-stored
// ones reach them widened: docs/ops.md "bf16 activations") and fp32 or bf16 weights (as stored);
// bf16 rounds each fp32 GEMM operand to bf16 first.
#pragma once

namespace partrain::runner {

enum class GemmPrecision {
  kFp32,  // fp32 operands (on CUDA, TF32 off): the CPU and CUDA devices agree to ~1e-5 relative
  kBf16,  // operands rounded to bf16 (nearest even), fp32 accumulate and output: the tensor cores
          // on CUDA, sgemm over the rounded values on the CPU (the same products: a product of
          // two bf16 values is exact in fp32). CUDA's attention products take TF32.
};

}  // namespace partrain::runner
