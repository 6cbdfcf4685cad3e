// How a model chunk reaches its parameters and gradients: around each use of a parameter unit
// (a layer, the embedding, the final norm) it acquires the unit for a forward or backward pass
// and releases it after. The data-parallel engine decides what that means: DDP and ZeRO-1 hand
// out views into their flat buffers; ZeRO-2 adds a transient gradient staging buffer that is
// reduce-scattered on release; FSDP also all-gathers the parameters on acquire and frees them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/status.h"

namespace partrain::runner {

enum class Pass { kForward, kBackward };

// How the data-parallel engine stores the model states (docs/ops.md "bf16 model states"). By
// default fp32, the parameters updated in place by AdamW. bf16_params: bf16, with an fp32 master
// beside AdamW's moments (optimizer category); AdamW updates the master and writes it back
// rounded. The ops read a unit's matrices in bf16 as they are stored and its vectors widened
// (UnitParams). bf16_grads (with bf16_params): bf16 gradients. Under DDP and ZeRO-1 a backward
// use adds into them directly (the matmuls with one rounding each, the other parameters through
// fp32 staging that UnitParams adds, rounded, before the release); ZeRO-2 and FSDP reduce-scatter
// fp32 staging and add the reduced block into their bf16 shard.
struct StateStorage {
  bool bf16_params = false;
  bool bf16_grads = false;
};

// A unit's full (unsharded over dp) parameters and, in a backward pass, where its gradients
// accumulate; both laid out as the unit's slice of the flat ParamLayout (offset 0 = the unit's
// first parameter). The parameters are fp32 (params) or, under StateStorage::bf16_params, bf16
// as stored (bf16_params); the other pointer is null. Likewise the gradients of a backward use:
// fp32 (grads) or, under bf16 gradients with DDP and ZeRO-1, the bf16 gradients themselves
// (bf16_grads). Both are null in a forward pass under ZeRO-2 and FSDP, and bf16_grads in every
// forward pass.
struct UnitView {
  const float* params = nullptr;
  const uint16_t* bf16_params = nullptr;
  float* grads = nullptr;
  uint16_t* bf16_grads = nullptr;
};

class ParamAccess {
 public:
  virtual ~ParamAccess() = default;
  // `unit` indexes ParamLayout::units(). Acquires nest: acquiring a unit already held returns
  // the same view, and only the matching last release ends the use.
  virtual StatusOr<UnitView> acquire(size_t unit, Pass pass) = 0;
  virtual Status release(size_t unit, Pass pass) = 0;
};

}  // namespace partrain::runner
