// GPT-2's input embedding: a token embedding wte (V, C) looked up per token plus a learned position
// embedding wpe (T_max, C). The vocab-range variant is one shard of Megatron's vocab-parallel
// embedding: a rank holds rows [vocab_start, vocab_end) of wte and the shards' outputs sum to the
// full lookup (Shoeybi et al. 2019, sec. 3).
#pragma once

#include <cstdint>

namespace partrain::runner::ops {

// out (B, T, C) = wte[tokens[b, t]] + wpe[t]. wpe may be nullptr (token embedding only).
void embedding_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe,
                       int64_t B, int64_t T, int64_t C);

// Accumulates (+=) dwte (V, C) at each token's row and dwpe (T, C); dwpe may be nullptr.
void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                        int64_t B, int64_t T, int64_t C);

// wte_shard (vocab_end - vocab_start, C) holds rows [vocab_start, vocab_end); a token outside the
// range contributes zero. Pass wpe on exactly one shard so the all-reduced sum adds it once.
void embedding_forward_vocab_range(float* out, const int32_t* tokens, const float* wte_shard,
                                   const float* wpe, int64_t B, int64_t T, int64_t C,
                                   int64_t vocab_start, int64_t vocab_end);
// The same from tables stored in bf16 (bf16 model states): each value widened exactly as read.
void embedding_forward_vocab_range(float* out, const int32_t* tokens, const uint16_t* wte_shard,
                                   const uint16_t* wpe, int64_t B, int64_t T, int64_t C,
                                   int64_t vocab_start, int64_t vocab_end);

// Accumulates (+=) only the in-range tokens' rows of dwte_shard; dwpe as in embedding_backward.
void embedding_backward_vocab_range(float* dwte_shard, float* dwpe, const float* dout,
                                    const int32_t* tokens, int64_t B, int64_t T, int64_t C,
                                    int64_t vocab_start, int64_t vocab_end);

}  // namespace partrain::runner::ops
