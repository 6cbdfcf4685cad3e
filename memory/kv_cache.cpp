#include "memory/kv_cache.h"

namespace partrain::memory {

// Kwon 2023 sec. 3 (2 x 5120 x 40 x 2 B = 800 KB per token for OPT-13B); grouped-query
// attention (Ainslie 2023) keeps n_kv heads of K and V instead of n_h.
double kv_cache_bytes(const ModelConfig& model, double batch, double tokens, double layers, int tp,
                      double element_bytes) {
  if (model.architecture != Architecture::kTransformer || model.is_bare()) return 0;
  if (model.attention == AttentionKind::kLatent) {
    // DeepSeek-V2 sec. 2.1.2: the compressed KV latent and the shared rotary key, every head's
    // K and V rebuilt from them; every tensor-parallel rank keeps the whole latent.
    const LatentAttention& a = model.latent;
    return element_bytes * batch * tokens * layers *
           static_cast<double>(a.kv_lora_rank + a.qk_rope_dim);
  }
  return 2 * element_bytes * batch * tokens * layers * static_cast<double>(model.kv_dim()) / tp;
}

double kv_cache_bytes_per_token(const ModelConfig& model, double element_bytes) {
  return kv_cache_bytes(model, 1, 1, static_cast<double>(model.layers), 1, element_bytes);
}

}  // namespace partrain::memory
