#include "runner/ops/gelu.h"

#include <cmath>

#include "runner/comm/dtype.h"

namespace partrain::runner::ops {
namespace {

constexpr float kSqrtTwoOverPi = static_cast<float>(0.7978845608028654);  // sqrt(2 / pi)
constexpr float kCubicCoefficient = 0.044715f;

float value_of(float x) { return x; }
float value_of(uint16_t x) { return comm::bf16_to_float(x); }
void assign(float& out, float x) { out = x; }
void assign(uint16_t& out, float x) { out = comm::float_to_bf16(x); }

template <typename Out, typename In>
void forward(Out* out, const In* inp, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = value_of(inp[i]);
    const float inner = kSqrtTwoOverPi * (x + kCubicCoefficient * x * x * x);
    assign(out[i], 0.5f * x * (1.0f + std::tanh(inner)));
  }
}

template <typename In>
void backward(float* dinp, const In* inp, const float* dout, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = value_of(inp[i]);
    const float inner = kSqrtTwoOverPi * (x + kCubicCoefficient * x * x * x);
    const float tanh_inner = std::tanh(inner);
    const float sech_squared = 1.0f - tanh_inner * tanh_inner;
    // d/dx of 0.5 x (1 + tanh(u(x))) = 0.5 (1 + tanh u) + 0.5 x sech^2(u) u'(x)  (llm.c)
    const float local_grad =
        0.5f * (1.0f + tanh_inner) +
        0.5f * x * sech_squared * kSqrtTwoOverPi * (1.0f + 3.0f * kCubicCoefficient * x * x);
    dinp[i] += local_grad * dout[i];
  }
}

}  // namespace

void gelu_forward(float* out, const float* inp, int64_t n) { forward(out, inp, n); }
void gelu_forward(uint16_t* out, const uint16_t* inp, int64_t n) { forward(out, inp, n); }
void gelu_forward(uint16_t* out, const float* inp, int64_t n) { forward(out, inp, n); }
void gelu_forward(float* out, const uint16_t* inp, int64_t n) { forward(out, inp, n); }

void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n) {
  backward(dinp, inp, dout, n);
}
void gelu_backward(float* dinp, const uint16_t* inp, const float* dout, int64_t n) {
  backward(dinp, inp, dout, n);
}

}  // namespace partrain::runner::ops
