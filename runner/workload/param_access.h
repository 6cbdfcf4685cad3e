// How a model chunk reaches its parameters and gradients: around each use of a parameter unit
// (a layer, the embedding, the final norm) it acquires the unit for a forward or backward pass
// and releases it after. The data-parallel engine decides what that means: DDP and ZeRO-1 hand
// out views into their flat buffers; ZeRO-2 adds a transient gradient staging buffer that is
// reduce-scattered on release; FSDP also all-gathers the parameters on acquire and frees them.
#pragma once

#include <cstddef>

#include "core/status.h"

namespace partrain::runner {

enum class Pass { kForward, kBackward };

// How the data-parallel engine stores parameters. kFp32: fp32, updated in place by AdamW. kBf16
// (--precision bf16): bf16, with an fp32 master copy beside AdamW's moments in the optimizer
// category; AdamW updates the master and writes it back rounded, and the ops read a unit's
// parameters widened to fp32 while it is acquired. Gradients stay fp32: `partrain memory`'s
// bf16-fp32grad recipe (2 + 4 + 12 bytes a parameter).
enum class ParamStorage { kFp32, kBf16 };

// A unit's full (unsharded over dp) parameters and, in a backward pass, where its gradients
// accumulate; both laid out as the unit's slice of the flat ParamLayout (offset 0 = the unit's
// first parameter). grads is null in a forward pass under ZeRO-2 and FSDP.
struct UnitView {
  const float* params = nullptr;
  float* grads = nullptr;
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
