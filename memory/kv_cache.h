// The inference KV cache: keys and values of every layer for every token kept
// (Kwon 2023 "PagedAttention" sec. 3: 2 x layers x hidden x bytes per token, for MHA).
#pragma once

#include "memory/model_config.h"

namespace partrain::memory {

// 2 (K and V) x bytes x batch x tokens x layers x h x n_kv/n_h, divided by t under TP.
double kv_cache_bytes(const ModelConfig& model, double batch, double tokens, double layers, int tp,
                      double element_bytes = 2);
double kv_cache_bytes_per_token(const ModelConfig& model, double element_bytes = 2);

}  // namespace partrain::memory
