#include "runner/ops/embedding.h"

#include <algorithm>
#include <limits>

namespace partrain::runner::ops {
namespace {

// The full lookup is the one shard that holds every token id.
constexpr int64_t kWholeVocabEnd = std::numeric_limits<int64_t>::max();

}  // namespace

void embedding_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe,
                       int64_t B, int64_t T, int64_t C) {
  embedding_forward_vocab_range(out, tokens, wte, wpe, B, T, C, 0, kWholeVocabEnd);
}

void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                        int64_t B, int64_t T, int64_t C) {
  embedding_backward_vocab_range(dwte, dwpe, dout, tokens, B, T, C, 0, kWholeVocabEnd);
}

void embedding_forward_vocab_range(float* out, const int32_t* tokens, const float* wte_shard,
                                   const float* wpe, int64_t B, int64_t T, int64_t C,
                                   int64_t vocab_start, int64_t vocab_end) {
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      float* y = out + (b * T + t) * C;
      const int64_t token = tokens[b * T + t];
      if (token >= vocab_start && token < vocab_end) {
        std::copy_n(wte_shard + (token - vocab_start) * C, C, y);
      } else {
        std::fill_n(y, C, 0.0f);
      }
      if (wpe != nullptr) {
        const float* position = wpe + t * C;
        for (int64_t i = 0; i < C; ++i) y[i] += position[i];
      }
    }
  }
}

void embedding_backward_vocab_range(float* dwte_shard, float* dwpe, const float* dout,
                                    const int32_t* tokens, int64_t B, int64_t T, int64_t C,
                                    int64_t vocab_start, int64_t vocab_end) {
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      const float* dy = dout + (b * T + t) * C;
      const int64_t token = tokens[b * T + t];
      if (token >= vocab_start && token < vocab_end) {
        float* row = dwte_shard + (token - vocab_start) * C;
        for (int64_t i = 0; i < C; ++i) row[i] += dy[i];
      }
      if (dwpe != nullptr) {
        float* position = dwpe + t * C;
        for (int64_t i = 0; i < C; ++i) position[i] += dy[i];
      }
    }
  }
}

}  // namespace partrain::runner::ops
