// Published model dimensions the memory tests recompute numbers from (each with its source).
#pragma once

#include "memory/model_config.h"

namespace partrain::memory::testing {

// LLaMA-style: SwiGLU, RMSNorm, rotary positions, untied head, no biases (Touvron 2023).
inline ModelConfig llama(int64_t layers, int64_t hidden, int64_t heads, int64_t kv_heads,
                         int64_t ffn, int64_t vocab, int64_t seq) {
  ModelConfig m = gpt_model(layers, hidden, heads, vocab, seq);
  m.name = "llama";
  m.kv_heads = kv_heads;
  m.ffn = ffn;
  m.mlp = MlpKind::kSwiglu;
  m.norm = NormKind::kRmsNorm;
  m.position = PositionKind::kRotary;
  m.tied_embeddings = false;
  m.bias = false;
  return m;
}

inline ModelConfig gpt3_175b() { return gpt_model(96, 12288, 96, 51200, 2048); }  // Narayanan 2021 T1
inline ModelConfig mt_nlg_530b() { return gpt_model(105, 20480, 128, 51200, 2048); }  // Korthikanti T3
inline ModelConfig llama2_7b() { return llama(32, 4096, 32, 32, 11008, 32000, 4096); }
inline ModelConfig llama2_70b() { return llama(80, 8192, 64, 8, 28672, 32000, 4096); }
inline ModelConfig llama3_8b() { return llama(32, 4096, 32, 8, 14336, 128256, 8192); }

}  // namespace partrain::memory::testing
