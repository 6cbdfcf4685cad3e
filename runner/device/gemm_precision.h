// What a device's GEMMs (matmul's and attention's) multiply their operands in (a workload maps
// its Precision, --precision, onto it). The ops return fp32 and accumulate in fp32; a GEMM reads
// its fp32 or bf16 operands as stored (docs/ops.md "bf16 model states", "bf16 activations"), and
// bf16 rounds each fp32 operand to bf16 first.
#pragma once

namespace partrain::runner {

enum class GemmPrecision {
  kFp32,  // fp32 operands (on CUDA, TF32 off): the CPU and CUDA devices agree to ~1e-5 relative
  kBf16,  // operands rounded to bf16 (nearest even), fp32 accumulate and output: the tensor cores
          // on CUDA, sgemm over the rounded values on the CPU (the same products: a product of
          // two bf16 values is exact in fp32), attention's products included.
};

}  // namespace partrain::runner
