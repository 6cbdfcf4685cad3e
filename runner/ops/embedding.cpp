#include "runner/ops/embedding.h"

#include <algorithm>
#include <limits>

#include "runner/comm/dtype.h"

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

namespace {

float widened(float value) { return value; }
float widened(uint16_t value) { return comm::bf16_to_float(value); }

template <typename Table>
void forward_vocab_range(float* out, const int32_t* tokens, const Table* wte_shard,
                         const Table* wpe, int64_t B, int64_t T, int64_t C, int64_t vocab_start,
                         int64_t vocab_end) {
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      float* y = out + (b * T + t) * C;
      const int64_t token = tokens[b * T + t];
      if (token >= vocab_start && token < vocab_end) {
        const Table* row = wte_shard + (token - vocab_start) * C;
        for (int64_t i = 0; i < C; ++i) y[i] = widened(row[i]);
      } else {
        std::fill_n(y, C, 0.0f);
      }
      if (wpe != nullptr) {
        const Table* position = wpe + t * C;
        for (int64_t i = 0; i < C; ++i) y[i] += widened(position[i]);
      }
    }
  }
}

}  // namespace

void embedding_forward_vocab_range(float* out, const int32_t* tokens, const float* wte_shard,
                                   const float* wpe, int64_t B, int64_t T, int64_t C,
                                   int64_t vocab_start, int64_t vocab_end) {
  forward_vocab_range(out, tokens, wte_shard, wpe, B, T, C, vocab_start, vocab_end);
}

void embedding_forward_vocab_range(float* out, const int32_t* tokens, const uint16_t* wte_shard,
                                   const uint16_t* wpe, int64_t B, int64_t T, int64_t C,
                                   int64_t vocab_start, int64_t vocab_end) {
  forward_vocab_range(out, tokens, wte_shard, wpe, B, T, C, vocab_start, vocab_end);
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
