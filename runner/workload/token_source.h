// Where training tokens come from: a deterministic, learnable synthetic stream (the default: the
// loss must visibly fall), or a file of uint16 tokens in llm.c's .bin layout (a 256 x int32
// header: magic 20240520, version, token count) or nanoGPT's headerless layout.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"

namespace partrain::runner {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  // Sample `index` of the run (global over steps and ranks): seq inputs and the seq targets that
  // follow them, so every rank layout sees the same samples for the same index.
  virtual void sample(uint64_t index, int seq, int32_t* inputs, int32_t* targets) const = 0;
  virtual std::string describe() const = 0;
};

// t[i+1] = (a t[i] + b) mod V with a, b drawn from the seed and t[0] from the sample index: a
// bigram a model learns in a few steps, so the loss falls from ln V towards 0.
std::unique_ptr<TokenSource> make_synthetic_tokens(uint64_t seed, int vocab);

// Opens a token file; a malformed header, a file too short for one sample, or a token >= vocab
// is StatusCode::kUnreadable naming the file and the problem.
StatusOr<std::unique_ptr<TokenSource>> open_token_file(const std::string& path, int vocab,
                                                       int seq);

}  // namespace partrain::runner
