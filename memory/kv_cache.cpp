#include "memory/kv_cache.h"

namespace partrain::memory {

// Kwon 2023 sec. 3 (2 x 5120 x 40 x 2 B = 800 KB per token for OPT-13B); grouped-query
// attention (Ainslie 2023) keeps n_kv heads of K and V instead of n_h.
double kv_cache_bytes(const ModelConfig& model, double batch, double tokens, double layers, int tp,
                      double element_bytes) {
  if (model.architecture != Architecture::kTransformer || model.is_bare()) return 0;
  return 2 * element_bytes * batch * tokens * layers * static_cast<double>(model.kv_dim()) / tp;
}

double kv_cache_bytes_per_token(const ModelConfig& model, double element_bytes) {
  return kv_cache_bytes(model, 1, 1, static_cast<double>(model.layers), 1, element_bytes);
}

}  // namespace partrain::memory
