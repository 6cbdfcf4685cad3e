// Every op of the CUDA device against the CPU device on the same random inputs (label gpu):
// skipped, never passed, where no GPU is visible. fp32 GEMMs (TF32 off) agree to 1e-5, bf16
// GEMMs to 1e-2; backward ops start from non-zero gradients, so += is what is compared.
#include "runner/device/cuda_device.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runner/device/cpu_device.h"
#include "runner/device/cuda_kernels.h"
#include "runner/device/gemm_benchmark.h"
#include "tests/gpu/visible_gpus.h"
#include "tests/unit/runner/ops/bf16_values.h"
#include "tests/unit/runner/ops/gradient_check.h"

namespace partrain::runner {
namespace {

using ops::testing::random_values;
using ops::testing::rounded;
using ops::testing::unit_rows_qkv;

constexpr double kFp32Tolerance = 1e-5;
constexpr double kBf16Tolerance = 1e-2;

double max_abs(const std::vector<float>& values) {
  double largest = 0.0;
  for (const float value : values)
    largest = std::max(largest, std::abs(static_cast<double>(value)));
  return largest;
}

// Each element within tolerance * (|expected| + the largest |expected|): relative, with the
// tensor's own scale as the floor, since elements that are sums cancelling to near zero carry
// rounding noise of the size of their terms, not of their result. An indexing bug is off by
// the tensor's scale and fails either way.
void expect_close(const std::vector<float>& actual, const std::vector<float>& expected,
                  double tolerance, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  const double scale = max_abs(expected);
  int64_t wrong = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double error = std::abs(static_cast<double>(actual[i]) - expected[i]);
    const bool same_infinity = std::isinf(expected[i]) && actual[i] == expected[i];
    if (!same_infinity && !(error <= tolerance * (std::abs(expected[i]) + scale))) {
      if (++wrong <= 5) {
        ADD_FAILURE() << what << "[" << i << "]: gpu " << actual[i] << ", cpu " << expected[i]
                      << " (scale " << scale << ")";
      }
    }
  }
  EXPECT_EQ(wrong, 0) << what << ": " << wrong << " of " << actual.size() << " elements differ";
}

void expect_close(double actual, double expected, double tolerance, const std::string& what) {
  EXPECT_LE(std::abs(actual - expected), tolerance * std::abs(expected))
      << what << ": gpu " << actual << ", cpu " << expected;
}

// B, T, C, NH, V, OC; the last is odd everywhere (hs = 15, V and OC prime) to catch indexing bugs.
struct Shape {
  int64_t B, T, C, NH, V, OC;
  int64_t N() const { return B * T; }
  int64_t hs() const { return C / NH; }
};
const Shape kShapes[] = {{2, 8, 32, 4, 101, 48}, {2, 64, 96, 4, 101, 96}, {3, 13, 60, 4, 37, 41}};

std::vector<int32_t> random_tokens(int64_t n, int64_t V, uint32_t seed) {
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<int32_t>((i * 7919 + seed * 104729) % static_cast<size_t>(V));
  }
  return tokens;
}

class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = partrain::testing::no_gpu_reason();
    if (!reason.empty()) GTEST_SKIP() << reason;
    StatusOr<std::unique_ptr<Device>> device = create_cuda_device({.precision = precision()});
    ASSERT_TRUE(device.is_ok()) << device.status().message();
    gpu_ = std::move(*device);
  }
  void TearDown() override {
    if (gpu_ != nullptr) {
      EXPECT_TRUE(gpu_->status().is_ok()) << gpu_->status().message();
    }
  }
  virtual GemmPrecision precision() const { return GemmPrecision::kFp32; }

  // Device copies of host arrays, freed with the fixture.
  template <typename T>
  T* on_gpu(const std::vector<T>& host) {
    StatusOr<TrackedBuffer> buffer = gpu_->allocator().allocate(
        std::max<size_t>(host.size(), 1) * sizeof(T), memory::Category::kOther);
    EXPECT_TRUE(buffer.is_ok()) << buffer.status().message();
    if (!buffer.is_ok()) return nullptr;
    auto* data = static_cast<T*>(buffer->data());
    gpu_->upload(data, host.data(), host.size() * sizeof(T));
    buffers_.push_back(std::move(*buffer));
    return data;
  }
  std::vector<float> from_gpu(const float* data, size_t n) {
    std::vector<float> host(n, std::numeric_limits<float>::quiet_NaN());
    gpu_->download(host.data(), data, n * sizeof(float));
    return host;
  }

  // attention forward (output and probabilities) and backward against the CPU, within tolerance.
  void compare_attention(double tolerance, std::span<const Shape> shapes = kShapes,
                         Device* reference = nullptr) {
    Device& cpu = reference != nullptr ? *reference : cpu_;
    for (const Shape& s : shapes) {
      SCOPED_TRACE(::testing::Message()
                   << "B " << s.B << " T " << s.T << " NH " << s.NH << " hs " << s.hs());
      const int64_t B = s.B, T = s.T, NH = s.NH, hs = s.hs(), C = s.C;
      const auto qkv = random_values(B * T * 3 * C, 1), dout = random_values(B * T * C, 2);
      std::vector<float> out(B * T * C), att(B * NH * T * T);
      cpu.attention_forward(out.data(), att.data(), qkv.data(), B, T, NH, hs);
      float* gpu_qkv = on_gpu(qkv);
      float* gpu_out = on_gpu(std::vector<float>(out.size()));
      // Garbage above the diagonal must come back as zeros.
      float* gpu_att = on_gpu(std::vector<float>(att.size(), 3.0f));
      gpu_->attention_forward(gpu_out, gpu_att, gpu_qkv, B, T, NH, hs);
      expect_close(from_gpu(gpu_out, out.size()), out, tolerance, "out");
      expect_close(from_gpu(gpu_att, att.size()), att, tolerance, "att");

      auto dqkv = random_values(qkv.size(), 3);
      float* gpu_dqkv = on_gpu(dqkv);
      cpu.attention_backward(dqkv.data(), dout.data(), qkv.data(), att.data(), B, T, NH, hs);
      gpu_->attention_backward(gpu_dqkv, on_gpu(dout), gpu_qkv, gpu_att, B, T, NH, hs);
      expect_close(from_gpu(gpu_dqkv, dqkv.size()), dqkv, tolerance, "dqkv");
    }
  }

  // attention with qkv and the probabilities stored in bf16 (the bf16 recipes), against
  // `reference` (a CPU device of the same precision): the GPU writes att itself, reads both as
  // they lie (bf16 GEMMs) or widened (fp32), and the rows of every softmax variant are covered.
  void compare_bf16_attention(Device& reference, double tolerance) {
    std::vector<Shape> shapes(std::begin(kShapes), std::end(kShapes));
    for (int64_t T : {129, 513, 2049}) shapes.push_back({1, T, 8, 2, 5, 3});
    for (const Shape& s : shapes) {
      SCOPED_TRACE(::testing::Message()
                   << "B " << s.B << " T " << s.T << " NH " << s.NH << " hs " << s.hs());
      const int64_t B = s.B, T = s.T, NH = s.NH, hs = s.hs(), C = s.C;
      std::vector<uint16_t> qkv(B * T * 3 * C);
      reference.to_bf16(qkv.data(), random_values(qkv.size(), 1).data(), B * T * 3 * C);
      const auto dout = random_values(B * T * C, 2);
      std::vector<float> out(B * T * C);
      std::vector<uint16_t> att(B * NH * T * T);
      reference.attention_forward(out.data(), att.data(), qkv.data(), B, T, NH, hs);
      uint16_t* gpu_qkv = on_gpu(qkv);
      uint16_t* gpu_att = on_gpu(std::vector<uint16_t>(att.size(), 0x4040));  // 3.0: garbage
      float* gpu_out = on_gpu(std::vector<float>(out.size()));
      gpu_->attention_forward(gpu_out, gpu_att, gpu_qkv, B, T, NH, hs);
      expect_close(from_gpu(gpu_out, out.size()), out, tolerance, "out");
      std::vector<uint16_t> got_att(att.size());
      gpu_->download(got_att.data(), gpu_att, got_att.size() * sizeof(uint16_t));
      std::vector<float> got_values(att.size()), want_values(att.size());
      reference.from_bf16(got_values.data(), got_att.data(), static_cast<int64_t>(att.size()));
      reference.from_bf16(want_values.data(), att.data(), static_cast<int64_t>(att.size()));
      expect_close(got_values, want_values, tolerance, "att");

      auto dqkv = random_values(qkv.size(), 3);
      float* gpu_dqkv = on_gpu(dqkv);
      reference.attention_backward(dqkv.data(), dout.data(), qkv.data(), att.data(), B, T, NH, hs);
      gpu_->attention_backward(gpu_dqkv, on_gpu(dout), gpu_qkv, gpu_att, B, T, NH, hs);
      expect_close(from_gpu(gpu_dqkv, dqkv.size()), dqkv, tolerance, "dqkv");
    }
  }

  // matmul forward (with and without bias) and backward (every gradient, then dweight alone)
  // against `reference` (the fp32 CPU unless given): GEMM outputs within gemm_tolerance, the bias
  // gradient (a column sum, fp32 in both precisions) within kFp32Tolerance. Returns the forward's
  // largest error over its scale.
  double compare_matmul(const Shape& s, double gemm_tolerance, Device* reference = nullptr) {
    Device& cpu = reference != nullptr ? *reference : cpu_;
    SCOPED_TRACE(::testing::Message() << "N " << s.N() << " C " << s.C << " OC " << s.OC);
    const int64_t N = s.N(), C = s.C, OC = s.OC;
    const auto inp = random_values(N * C, 1), weight = random_values(OC * C, 2),
               bias = random_values(OC, 3), dout = random_values(N * OC, 4);
    float* gpu_inp = on_gpu(inp);
    float* gpu_weight = on_gpu(weight);
    float* gpu_dout = on_gpu(dout);
    double largest_error = 0.0;
    for (const bool with_bias : {true, false}) {
      std::vector<float> out(N * OC);
      cpu.matmul_forward(out.data(), inp.data(), weight.data(), with_bias ? bias.data() : nullptr,
                          N, C, OC);
      float* gpu_out = on_gpu(std::vector<float>(N * OC, 7.0f));  // overwritten, not added to
      gpu_->matmul_forward(gpu_out, gpu_inp, gpu_weight, with_bias ? on_gpu(bias) : nullptr, N, C,
                           OC);
      const std::vector<float> result = from_gpu(gpu_out, out.size());
      expect_close(result, out, gemm_tolerance, "out");
      for (size_t i = 0; i < out.size(); ++i) {
        largest_error = std::max(largest_error,
                                 std::abs(static_cast<double>(result[i]) - out[i]) / max_abs(out));
      }
    }
    // Gradients start non-zero: backward adds.
    auto dinp = random_values(N * C, 5), dweight = random_values(OC * C, 6),
         dbias = random_values(OC, 7);
    float* gpu_dinp = on_gpu(dinp);
    float* gpu_dweight = on_gpu(dweight);
    float* gpu_dbias = on_gpu(dbias);
    cpu.matmul_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(),
                         weight.data(), N, C, OC);
    gpu_->matmul_backward(gpu_dinp, gpu_dweight, gpu_dbias, gpu_dout, gpu_inp, gpu_weight, N, C,
                          OC);
    expect_close(from_gpu(gpu_dinp, dinp.size()), dinp, gemm_tolerance, "dinp");
    expect_close(from_gpu(gpu_dweight, dweight.size()), dweight, gemm_tolerance, "dweight");
    expect_close(from_gpu(gpu_dbias, dbias.size()), dbias, kFp32Tolerance, "dbias");
    // nullptr gradients are skipped; the others still accumulate.
    cpu.matmul_backward(nullptr, dweight.data(), nullptr, dout.data(), inp.data(), weight.data(),
                         N, C, OC);
    gpu_->matmul_backward(nullptr, gpu_dweight, nullptr, gpu_dout, gpu_inp, gpu_weight, N, C, OC);
    expect_close(from_gpu(gpu_dweight, dweight.size()), dweight, gemm_tolerance, "dweight alone");
    return largest_error;
  }

  // Weights and tables stored in bf16 (bf16 model states) against the CPU in the fixture's
  // precision: its bf16-weight ops are the fp32 ones on the widened values (CpuDeviceBf16Weights),
  // so the GPU's read of the stored bits (as they lie under bf16 GEMMs, widened in fp32 mode)
  // must agree with it as any GEMM does, and the embedding's gather exactly.
  void compare_bf16_weights() {
    CpuDevice cpu(CpuDeviceOptions{.precision = precision()});
    for (const Shape& s : kShapes) {
      SCOPED_TRACE(::testing::Message() << "N " << s.N() << " C " << s.C << " OC " << s.OC);
      const int64_t N = s.N(), C = s.C, OC = s.OC;
      const auto inp = random_values(N * C, 11), bias = random_values(OC, 13),
                 dout = random_values(N * OC, 14);
      std::vector<uint16_t> weight(OC * C);
      cpu.to_bf16(weight.data(), random_values(OC * C, 12).data(), OC * C);
      float* gpu_inp = on_gpu(inp);
      uint16_t* gpu_weight = on_gpu(weight);
      std::vector<float> out(N * OC);
      cpu.matmul_forward(out.data(), inp.data(), weight.data(), bias.data(), N, C, OC);
      float* gpu_out = on_gpu(std::vector<float>(N * OC, 7.0f));
      gpu_->matmul_forward(gpu_out, gpu_inp, gpu_weight, on_gpu(bias), N, C, OC);
      expect_close(from_gpu(gpu_out, out.size()), out, kFp32Tolerance, "out");
      auto dinp = random_values(N * C, 15), dweight = random_values(OC * C, 16);
      float* gpu_dinp = on_gpu(dinp);
      float* gpu_dweight = on_gpu(dweight);
      cpu.matmul_backward(dinp.data(), dweight.data(), nullptr, dout.data(), inp.data(),
                          weight.data(), N, C, OC);
      gpu_->matmul_backward(gpu_dinp, gpu_dweight, nullptr, on_gpu(dout), gpu_inp, gpu_weight, N,
                            C, OC);
      expect_close(from_gpu(gpu_dinp, dinp.size()), dinp, kFp32Tolerance, "dinp");
      expect_close(from_gpu(gpu_dweight, dweight.size()), dweight, kFp32Tolerance, "dweight");
      // The weight's gradient stored in bf16 (bf16-mixed): the product added with one rounding
      // (cuBLAS writing bf16 under bf16 GEMMs, an fp32 product and accumulate_bf16 otherwise).
      // The fp32 sums may differ in their last bits, so a value near a rounding boundary may
      // round the other way: within bf16's own step.
      std::vector<uint16_t> bf16_grad(OC * C);
      cpu.to_bf16(bf16_grad.data(), random_values(OC * C, 19).data(), OC * C);
      uint16_t* gpu_bf16_grad = on_gpu(bf16_grad);
      cpu.matmul_backward(nullptr, bf16_grad.data(), nullptr, dout.data(), inp.data(),
                          weight.data(), N, C, OC);
      gpu_->matmul_backward(nullptr, gpu_bf16_grad, nullptr, on_gpu(dout), gpu_inp, gpu_weight, N,
                            C, OC);
      std::vector<uint16_t> got(OC * C);
      gpu_->download(got.data(), gpu_bf16_grad, got.size() * sizeof(uint16_t));
      std::vector<float> got_values(got.size()), want_values(got.size());
      cpu.from_bf16(got_values.data(), got.data(), OC * C);
      cpu.from_bf16(want_values.data(), bf16_grad.data(), OC * C);
      expect_close(got_values, want_values, kBf16Tolerance, "bf16 dweight");
      // The input activation in bf16 as well: read as it lies (bf16 GEMMs) or widened (fp32).
      std::vector<uint16_t> inp_bf16(N * C);
      cpu.to_bf16(inp_bf16.data(), inp.data(), N * C);
      uint16_t* gpu_inp_bf16 = on_gpu(inp_bf16);
      cpu.matmul_forward(out.data(), inp_bf16.data(), weight.data(), bias.data(), N, C, OC);
      gpu_->matmul_forward(gpu_out, gpu_inp_bf16, gpu_weight, on_gpu(bias), N, C, OC);
      expect_close(from_gpu(gpu_out, out.size()), out, kFp32Tolerance, "out from bf16 inp");
      cpu.matmul_backward(nullptr, dweight.data(), nullptr, dout.data(), inp_bf16.data(),
                          weight.data(), N, C, OC);
      gpu_->matmul_backward(nullptr, gpu_dweight, nullptr, on_gpu(dout), gpu_inp_bf16, gpu_weight,
                            N, C, OC);
      expect_close(from_gpu(gpu_dweight, dweight.size()), dweight, kFp32Tolerance,
                   "dweight from bf16 inp");
      cpu.matmul_backward(nullptr, bf16_grad.data(), nullptr, dout.data(), inp_bf16.data(),
                          weight.data(), N, C, OC);
      gpu_->matmul_backward(nullptr, gpu_bf16_grad, nullptr, on_gpu(dout), gpu_inp_bf16, gpu_weight,
                            N, C, OC);
      gpu_->download(got.data(), gpu_bf16_grad, got.size() * sizeof(uint16_t));
      cpu.from_bf16(got_values.data(), got.data(), OC * C);
      cpu.from_bf16(want_values.data(), bf16_grad.data(), OC * C);
      expect_close(got_values, want_values, kBf16Tolerance, "bf16 dweight from bf16 inp");
    }
    // The embedding: rows [2, 6) of a (8, 16) table, positions added, tokens outside give zero.
    constexpr int64_t B = 2, T = 4, E = 16;
    const std::vector<int32_t> tokens = {0, 2, 5, 7, 3, 3, 6, 1};
    std::vector<uint16_t> wte(8 * E), wpe(T * E);
    cpu.to_bf16(wte.data(), random_values(wte.size(), 17).data(), 8 * E);
    cpu.to_bf16(wpe.data(), random_values(wpe.size(), 18).data(), T * E);
    std::vector<float> rows(B * T * E);
    cpu.embedding_forward_vocab_range(rows.data(), tokens.data(), wte.data() + 2 * E, wpe.data(),
                                      B, T, E, 2, 6);
    float* gpu_rows = on_gpu(std::vector<float>(rows.size(), 7.0f));
    gpu_->embedding_forward_vocab_range(gpu_rows, on_gpu(tokens), on_gpu(wte) + 2 * E,
                                        on_gpu(wpe), B, T, E, 2, 6);
    EXPECT_EQ(from_gpu(gpu_rows, rows.size()), rows);
    EXPECT_TRUE(cpu.status().is_ok()) << cpu.status().message();
  }

  CpuDevice cpu_;
  std::unique_ptr<Device> gpu_;
  std::vector<TrackedBuffer> buffers_;  // after gpu_: freed before its allocator goes
};

TEST_F(CudaDeviceTest, NamesItselfAndItsMemory) {
  EXPECT_EQ(gpu_->name().rfind("cuda:0 (", 0), 0u) << gpu_->name();
  EXPECT_NE(gpu_->name().find("fp32 GEMMs"), std::string::npos) << gpu_->name();
  EXPECT_EQ(gpu_->allocator().memory_name(), "cuda:0");
  EXPECT_NE(gpu_->compute_stream(), nullptr);
  StatusOr<Device::MemoryInfo> memory = gpu_->memory_info();
  ASSERT_TRUE(memory.is_ok()) << memory.status().message();
  EXPECT_GT(memory->total_bytes, 0u);
  EXPECT_LE(memory->free_bytes, memory->total_bytes);
}

TEST_F(CudaDeviceTest, CopiesFillsAndScales) {
  const auto values = random_values(1001, 1);
  float* x = on_gpu(values);
  EXPECT_EQ(from_gpu(x, values.size()), values);  // upload, download: bit-exact

  std::vector<float> copied(values.size(), 0.0f);
  float* y = on_gpu(copied);
  gpu_->copy(y, x, static_cast<int64_t>(values.size()));
  EXPECT_EQ(from_gpu(y, values.size()), values);

  gpu_->fill(y, 1000, 2.5f);  // the last element keeps its value
  std::vector<float> expected(1000, 2.5f);
  expected.push_back(values.back());
  EXPECT_EQ(from_gpu(y, values.size()), expected);
  // Zero is a memset, -0.0 a kernel (its sign bit is set); neither touches the last element.
  gpu_->fill(y, 999, 0.0f);
  std::fill(expected.begin(), expected.begin() + 999, 0.0f);
  EXPECT_EQ(from_gpu(y, values.size()), expected);
  gpu_->fill(y, 500, -0.0f);
  const std::vector<float> filled = from_gpu(y, values.size());
  EXPECT_TRUE(std::signbit(filled[0]) && std::signbit(filled[499]) && !std::signbit(filled[500]));
  EXPECT_EQ(filled[999], 2.5f);
  EXPECT_EQ(filled[1000], values.back());

  std::vector<float> scaled = values;
  cpu_.scale(scaled.data(), static_cast<int64_t>(scaled.size()), -0.75f);
  gpu_->scale(x, static_cast<int64_t>(values.size()), -0.75f);
  expect_close(from_gpu(x, values.size()), scaled, kFp32Tolerance, "scale");
}

// fp32 -> bf16 bits, round to nearest even (no NaNs here), as __float2bfloat16_rn rounds.
uint16_t bf16_bits(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof(bits));
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// The GEMM operands' rounding, bit for bit, four at a time (both aligned, with a tail) and one at
// a time (the source off 16-byte or the destination off 8-byte alignment), never writing outside
// its n elements.
TEST_F(CudaDeviceTest, RoundsToBf16AlignedOrNot) {
  std::vector<float> values = random_values(1031, 7, 100.0f);
  values[5] = 1.00390625f;  // halfway between two bf16 values, the even one below
  values[6] = 1.01171875f;  // halfway, the even one above
  values[7] = -0.0f;
  float* source = on_gpu(values);
  auto* stream = static_cast<cudaStream_t>(gpu_->compute_stream());
  struct Offsets {
    int64_t source, destination;
  };
  for (const Offsets offset : {Offsets{0, 0}, Offsets{1, 0}, Offsets{4, 0}, Offsets{0, 1}}) {
    SCOPED_TRACE(::testing::Message()
                 << "offsets: source " << offset.source << ", destination " << offset.destination);
    const std::vector<uint16_t> untouched(values.size() + 8, 0xabcd);
    uint16_t* destination = on_gpu(untouched);
    const int64_t n = static_cast<int64_t>(values.size()) - offset.source - 2;
    ASSERT_EQ(cuda_kernels::round_to_bf16(stream, destination + offset.destination,
                                          source + offset.source, n),
              cudaSuccess);
    std::vector<uint16_t> rounded(untouched.size());
    gpu_->download(rounded.data(), destination, rounded.size() * sizeof(uint16_t));
    std::vector<uint16_t> expected = untouched;
    for (int64_t i = 0; i < n; ++i) {
      expected[offset.destination + i] = bf16_bits(values[offset.source + i]);
    }
    EXPECT_EQ(rounded, expected);
  }
  EXPECT_EQ(bf16_bits(1.00390625f), 0x3f80);
  EXPECT_EQ(bf16_bits(1.01171875f), 0x3f82);
}

// The bf16 parameter storage ops against the CPU device's bits, both ways.
TEST_F(CudaDeviceTest, Bf16StorageMatchesTheCpuBitForBit) {
  const std::vector<float> values = random_values(1027, 9, 100.0f);
  const auto n = static_cast<int64_t>(values.size());
  std::vector<uint16_t> want_bits(values.size());
  std::vector<float> want(values.size());
  cpu_.to_bf16(want_bits.data(), values.data(), n);
  cpu_.from_bf16(want.data(), want_bits.data(), n);
  uint16_t* stored = on_gpu(std::vector<uint16_t>(values.size(), 0xabcd));
  float* back = on_gpu(std::vector<float>(values.size(), 7.0f));
  gpu_->to_bf16(stored, on_gpu(values), n);
  gpu_->from_bf16(back, stored, n);
  std::vector<uint16_t> bits(values.size());
  gpu_->download(bits.data(), stored, bits.size() * sizeof(uint16_t));
  EXPECT_EQ(bits, want_bits);
  EXPECT_EQ(from_gpu(back, values.size()), want);
  // Accumulation: fp32 addition, one rounding, as the CPU's.
  const std::vector<float> addend = random_values(values.size(), 10, 3.0f);
  cpu_.accumulate_bf16(want_bits.data(), addend.data(), n);
  gpu_->accumulate_bf16(stored, on_gpu(addend), n);
  gpu_->download(bits.data(), stored, bits.size() * sizeof(uint16_t));
  EXPECT_EQ(bits, want_bits);
  uint16_t* copied = on_gpu(std::vector<uint16_t>(values.size(), 0xabcd));
  gpu_->copy_bf16(copied, stored, n);
  std::vector<uint16_t> copied_bits(values.size());
  gpu_->download(copied_bits.data(), copied, copied_bits.size() * sizeof(uint16_t));
  EXPECT_EQ(copied_bits, want_bits);
  // store_bf16: the bits and the rounded values in one pass, from an aligned start (four values
  // a thread, then the tail) and from an unaligned one (one a thread).
  for (const int64_t offset : {int64_t{0}, int64_t{1}}) {
    SCOPED_TRACE(::testing::Message() << "offset " << offset);
    std::vector<uint16_t> kept_bits(values.size() - offset);
    std::vector<float> kept_values(values.begin() + offset, values.end());
    cpu_.store_bf16(kept_bits.data(), kept_values.data(), n - offset);
    uint16_t* gpu_bits = on_gpu(std::vector<uint16_t>(values.size(), 0xabcd));
    float* gpu_values = on_gpu(values);
    gpu_->store_bf16(gpu_bits + offset, gpu_values + offset, n - offset);
    std::vector<uint16_t> got_bits(values.size());
    gpu_->download(got_bits.data(), gpu_bits, got_bits.size() * sizeof(uint16_t));
    EXPECT_EQ(std::vector<uint16_t>(got_bits.begin() + offset, got_bits.end()), kept_bits);
    if (offset > 0) {
      EXPECT_EQ(got_bits[0], 0xabcd);  // nothing before the start is written
    }
    const std::vector<float> got_values = from_gpu(gpu_values, values.size());
    EXPECT_EQ(std::vector<float>(got_values.begin() + offset, got_values.end()), kept_values);
  }
  gpu_->zero_bf16(stored, n - 1);  // the last element keeps its value
  gpu_->download(bits.data(), stored, bits.size() * sizeof(uint16_t));
  std::vector<uint16_t> zeroed(values.size(), 0);
  zeroed.back() = want_bits.back();
  EXPECT_EQ(bits, zeroed);
}

TEST_F(CudaDeviceTest, MatmulForwardAndBackwardAccumulate) {
  for (const Shape& s : kShapes) compare_matmul(s, kFp32Tolerance);
}

TEST_F(CudaDeviceTest, Bf16WeightsAreWidenedForFp32Gemms) { compare_bf16_weights(); }

TEST_F(CudaDeviceTest, GemmBenchmarkInFp32MatchesItsReference) {
  GemmBenchOptions options;
  options.shape = {2048, 1536, 4096};
  options.bias = true;
  StatusOr<GemmBenchResult> result = run_gemm_bench(*gpu_, options);
  ASSERT_TRUE(result.is_ok()) << result.status().message();
  EXPECT_EQ(result->checked, 16);
  EXPECT_EQ(result->wrong, 0) << "max error " << result->max_error << " x the tolerance";
  StatusOr<Device::PeakGemm> peak = gpu_->measure_peak_gemm();
  ASSERT_TRUE(peak.is_ok()) << peak.status().message();
  EXPECT_EQ(peak->source, "measured fp32 GEMM, 8192^3");
}

TEST_F(CudaDeviceTest, GemmTotalsCountEveryMatmul) {
  const int64_t N = 64, C = 96, OC = 80;
  const auto inp = random_values(N * C, 1), weight = random_values(OC * C, 2),
             dout = random_values(N * OC, 3);
  float* gpu_inp = on_gpu(inp);
  float* gpu_weight = on_gpu(weight);
  float* gpu_dout = on_gpu(dout);
  float* out = on_gpu(std::vector<float>(N * OC));
  float* dinp = on_gpu(std::vector<float>(N * C));
  float* dweight = on_gpu(std::vector<float>(OC * C));
  const Device::GemmTotals before = gpu_->gemm_totals();
  gpu_->matmul_forward(out, gpu_inp, gpu_weight, nullptr, N, C, OC);
  gpu_->matmul_backward(dinp, dweight, nullptr, gpu_dout, gpu_inp, gpu_weight, N, C, OC);
  gpu_->matmul_backward(nullptr, dweight, nullptr, gpu_dout, gpu_inp, gpu_weight, N, C, OC);
  const Device::GemmTotals after = gpu_->gemm_totals();
  EXPECT_DOUBLE_EQ(after.flops - before.flops, 4 * 2.0 * N * C * OC);
  EXPECT_GT(after.seconds, before.seconds);
  StatusOr<double> gflops = gpu_->measure_sgemm_gflops(256, 2);
  ASSERT_TRUE(gflops.is_ok()) << gflops.status().message();
  EXPECT_GT(*gflops, 0.0);
}

TEST_F(CudaDeviceTest, LayerNormForwardAndBackward) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(::testing::Message() << "N " << s.N() << " C " << s.C);
    const int64_t N = s.N(), C = s.C;
    const auto inp = random_values(N * C, 1, 2.0f), weight = random_values(C, 2),
               bias = random_values(C, 3), dout = random_values(N * C, 4);
    std::vector<float> out(N * C), mean(N), rstd(N);
    cpu_.layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(),
                           bias.data(), N, C);
    float* gpu_inp = on_gpu(inp);
    float* gpu_weight = on_gpu(weight);
    float* gpu_out = on_gpu(std::vector<float>(N * C));
    float* gpu_mean = on_gpu(std::vector<float>(N));
    float* gpu_rstd = on_gpu(std::vector<float>(N));
    gpu_->layernorm_forward(gpu_out, gpu_mean, gpu_rstd, gpu_inp, gpu_weight, on_gpu(bias), N, C);
    expect_close(from_gpu(gpu_out, out.size()), out, kFp32Tolerance, "out");
    expect_close(from_gpu(gpu_mean, mean.size()), mean, kFp32Tolerance, "mean");
    expect_close(from_gpu(gpu_rstd, rstd.size()), rstd, kFp32Tolerance, "rstd");

    auto dinp = random_values(N * C, 5), dweight = random_values(C, 6), dbias = random_values(C, 7);
    float* gpu_dinp = on_gpu(dinp);
    float* gpu_dweight = on_gpu(dweight);
    float* gpu_dbias = on_gpu(dbias);
    cpu_.layernorm_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(),
                            weight.data(), mean.data(), rstd.data(), N, C);
    gpu_->layernorm_backward(gpu_dinp, gpu_dweight, gpu_dbias, on_gpu(dout), gpu_inp, gpu_weight,
                             gpu_mean, gpu_rstd, N, C);
    expect_close(from_gpu(gpu_dinp, dinp.size()), dinp, kFp32Tolerance, "dinp");
    expect_close(from_gpu(gpu_dweight, dweight.size()), dweight, kFp32Tolerance, "dweight");
    expect_close(from_gpu(gpu_dbias, dbias.size()), dbias, kFp32Tolerance, "dbias");
  }
}

TEST_F(CudaDeviceTest, AttentionForwardAndBackward) { compare_attention(kFp32Tolerance); }

// The causal softmax keeps rows of up to 128, 512 and 2048 columns in registers and streams longer
// ones (runner/ops/attention_cuda.cu): each side of each bound, against the CPU.
TEST_F(CudaDeviceTest, AttentionAtEveryRowLengthTheSoftmaxHandles) {
  std::vector<Shape> shapes;
  for (int64_t T : {1, 31, 33, 128, 129, 512, 513, 2048, 2049}) {
    shapes.push_back({1, T, 8, 2, 5, 3});
  }
  compare_attention(kFp32Tolerance, shapes);
}

// In fp32 precision a bf16 att still holds the rounded probabilities P V multiplied; qkv and att
// are widened for the fp32 GEMMs. The GPU's softmax sums in another order than the CPU's, so a
// probability a ulp away may round to the other bf16 neighbour: one bf16 step of it (2^-8),
// 4e-3 of the scale, not fp32's 1e-5. A wrong layout or a missed widening is off by the scale.
TEST_F(CudaDeviceTest, Bf16AttentionIsWidenedForFp32Gemms) { compare_bf16_attention(cpu_, 4e-3); }

TEST_F(CudaDeviceTest, GeluAndResidual) {
  const int64_t n = 3 * 13 * 60 + 1;
  const auto x = random_values(n, 1, 2.0f), y = random_values(n, 2), dout = random_values(n, 3);
  std::vector<float> out(n);
  cpu_.gelu_forward(out.data(), x.data(), n);
  float* gpu_x = on_gpu(x);
  float* gpu_out = on_gpu(std::vector<float>(n));
  gpu_->gelu_forward(gpu_out, gpu_x, n);
  expect_close(from_gpu(gpu_out, n), out, kFp32Tolerance, "gelu out");
  auto dx = random_values(n, 4);
  float* gpu_dx = on_gpu(dx);
  cpu_.gelu_backward(dx.data(), x.data(), dout.data(), n);
  gpu_->gelu_backward(gpu_dx, gpu_x, on_gpu(dout), n);
  expect_close(from_gpu(gpu_dx, n), dx, kFp32Tolerance, "gelu dinp");

  // In place, as the blocks use it: x += branch.
  std::vector<float> sum = x;
  cpu_.residual_forward(sum.data(), sum.data(), y.data(), n);
  gpu_->residual_forward(gpu_x, gpu_x, on_gpu(y), n);
  expect_close(from_gpu(gpu_x, n), sum, kFp32Tolerance, "residual out");
  auto da = random_values(n, 5), db = random_values(n, 6);
  float* gpu_da = on_gpu(da);
  float* gpu_db = on_gpu(db);
  float* gpu_dout = on_gpu(dout);
  cpu_.residual_backward(da.data(), db.data(), dout.data(), n);
  gpu_->residual_backward(gpu_da, gpu_db, gpu_dout, n);
  cpu_.residual_backward(nullptr, db.data(), dout.data(), n);  // a branch without a gradient
  gpu_->residual_backward(nullptr, gpu_db, gpu_dout, n);
  expect_close(from_gpu(gpu_da, n), da, kFp32Tolerance, "residual da");
  expect_close(from_gpu(gpu_db, n), db, kFp32Tolerance, "residual db");
}

TEST_F(CudaDeviceTest, EmbeddingsWholeAndVocabRange) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(::testing::Message() << "B " << s.B << " T " << s.T << " C " << s.C);
    const int64_t B = s.B, T = s.T, C = s.C, V = s.V;
    const auto tokens = random_tokens(B * T, V, 1);
    const auto wte = random_values(V * C, 2), wpe = random_values(T * C, 3),
               dout = random_values(B * T * C, 4);
    int32_t* gpu_tokens = on_gpu(tokens);
    float* gpu_dout = on_gpu(dout);
    std::vector<float> out(B * T * C);
    float* gpu_out = on_gpu(out);
    cpu_.embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
    gpu_->embedding_forward(gpu_out, gpu_tokens, on_gpu(wte), on_gpu(wpe), B, T, C);
    expect_close(from_gpu(gpu_out, out.size()), out, kFp32Tolerance, "out");
    auto dwte = random_values(V * C, 5), dwpe = random_values(T * C, 6);
    float* gpu_dwte = on_gpu(dwte);
    float* gpu_dwpe = on_gpu(dwpe);
    cpu_.embedding_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T, C);
    gpu_->embedding_backward(gpu_dwte, gpu_dwpe, gpu_dout, gpu_tokens, B, T, C);
    expect_close(from_gpu(gpu_dwte, dwte.size()), dwte, kFp32Tolerance, "dwte");
    expect_close(from_gpu(gpu_dwpe, dwpe.size()), dwpe, kFp32Tolerance, "dwpe");

    // One shard of rows [start, end), with and without the position embedding.
    const int64_t start = V / 3, end = 2 * V / 3 + 1;
    const std::vector<float> shard(wte.begin() + start * C, wte.begin() + end * C);
    for (const bool with_positions : {true, false}) {
      SCOPED_TRACE(with_positions ? "with wpe" : "without wpe");
      cpu_.embedding_forward_vocab_range(out.data(), tokens.data(), shard.data(),
                                         with_positions ? wpe.data() : nullptr, B, T, C, start,
                                         end);
      gpu_->embedding_forward_vocab_range(gpu_out, gpu_tokens, on_gpu(shard),
                                          with_positions ? on_gpu(wpe) : nullptr, B, T, C, start,
                                          end);
      expect_close(from_gpu(gpu_out, out.size()), out, kFp32Tolerance, "shard out");
      auto dshard = random_values(shard.size(), 7);
      float* gpu_dshard = on_gpu(dshard);
      cpu_.embedding_backward_vocab_range(dshard.data(), with_positions ? dwpe.data() : nullptr,
                                          dout.data(), tokens.data(), B, T, C, start, end);
      gpu_->embedding_backward_vocab_range(gpu_dshard, with_positions ? gpu_dwpe : nullptr,
                                           gpu_dout, gpu_tokens, B, T, C, start, end);
      expect_close(from_gpu(gpu_dshard, dshard.size()), dshard, kFp32Tolerance, "dshard");
      expect_close(from_gpu(gpu_dwpe, dwpe.size()), dwpe, kFp32Tolerance, "shard dwpe");
    }
  }
}

TEST_F(CudaDeviceTest, CrossEntropyForwardAndBackward) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(::testing::Message() << "N " << s.N() << " V " << s.V);
    const int64_t N = s.N(), V = s.V;
    const auto logits = random_values(N * V, 1, 3.0f);
    const auto targets = random_tokens(N, V, 2);
    float* gpu_logits = on_gpu(logits);
    int32_t* gpu_targets = on_gpu(targets);
    std::vector<float> losses(N);
    float* gpu_losses = on_gpu(losses);
    const float mean =
        cpu_.cross_entropy_forward(losses.data(), logits.data(), targets.data(), N, V);
    expect_close(gpu_->cross_entropy_forward(gpu_losses, gpu_logits, gpu_targets, N, V), mean,
                 kFp32Tolerance, "mean loss");
    expect_close(from_gpu(gpu_losses, losses.size()), losses, kFp32Tolerance, "losses");
    expect_close(gpu_->cross_entropy_forward(nullptr, gpu_logits, gpu_targets, N, V), mean,
                 kFp32Tolerance, "mean loss without per-row losses");

    auto dlogits = random_values(N * V, 3, 0.01f);
    float* gpu_dlogits = on_gpu(dlogits);
    const float dloss_scale = 1.0f / static_cast<float>(2 * N);
    cpu_.cross_entropy_backward(dlogits.data(), logits.data(), targets.data(), N, V, dloss_scale);
    gpu_->cross_entropy_backward(gpu_dlogits, gpu_logits, gpu_targets, N, V, dloss_scale);
    expect_close(from_gpu(gpu_dlogits, dlogits.size()), dlogits, kFp32Tolerance, "dlogits");
  }
}

// Two shards of the vocabulary (and an empty one), each op on each shard; the all-reduces are
// done on the host from the CPU's results and fed to both devices.
TEST_F(CudaDeviceTest, VocabParallelCrossEntropy) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(::testing::Message() << "N " << s.N() << " V " << s.V);
    const int64_t N = s.N(), V = s.V;
    const auto logits = random_values(N * V, 1, 3.0f);
    const auto targets = random_tokens(N, V, 2);
    int32_t* gpu_targets = on_gpu(targets);
    struct Shard {
      int64_t start, size;
    };
    const Shard shards[] = {{0, V / 2}, {V / 2, V - V / 2}, {V, 0}};
    std::vector<std::vector<float>> local(3);
    for (int r = 0; r < 3; ++r) {
      for (int64_t n = 0; n < N; ++n) {
        local[r].insert(local[r].end(), logits.begin() + n * V + shards[r].start,
                        logits.begin() + n * V + shards[r].start + shards[r].size);
      }
    }
    std::vector<float> global_max(N, -std::numeric_limits<float>::infinity());
    std::vector<float> global_sum(N, 0.0f), global_target(N, 0.0f);
    std::vector<float*> gpu_local(3);
    for (int r = 0; r < 3; ++r) {
      gpu_local[r] = on_gpu(local[r]);
      std::vector<float> row_max(N);
      float* gpu_row_max = on_gpu(row_max);
      cpu_.vocab_parallel_local_max(row_max.data(), local[r].data(), N, shards[r].size);
      gpu_->vocab_parallel_local_max(gpu_row_max, gpu_local[r], N, shards[r].size);
      expect_close(from_gpu(gpu_row_max, N), row_max, kFp32Tolerance, "local max");
      for (int64_t n = 0; n < N; ++n) global_max[n] = std::max(global_max[n], row_max[n]);
    }
    float* gpu_global_max = on_gpu(global_max);
    for (int r = 0; r < 3; ++r) {
      std::vector<float> sum_exp(N), target(N);
      float* gpu_sum_exp = on_gpu(sum_exp);
      float* gpu_target = on_gpu(target);
      cpu_.vocab_parallel_local_sum_exp(sum_exp.data(), local[r].data(), global_max.data(), N,
                                        shards[r].size);
      gpu_->vocab_parallel_local_sum_exp(gpu_sum_exp, gpu_local[r], gpu_global_max, N,
                                         shards[r].size);
      expect_close(from_gpu(gpu_sum_exp, N), sum_exp, kFp32Tolerance, "local sum exp");
      cpu_.vocab_parallel_local_target_logit(target.data(), local[r].data(), targets.data(), N,
                                             shards[r].size, shards[r].start);
      gpu_->vocab_parallel_local_target_logit(gpu_target, gpu_local[r], gpu_targets, N,
                                              shards[r].size, shards[r].start);
      expect_close(from_gpu(gpu_target, N), target, kFp32Tolerance, "local target logit");
      for (int64_t n = 0; n < N; ++n) {
        global_sum[n] += sum_exp[n];
        global_target[n] += target[n];
      }
    }
    float* gpu_global_sum = on_gpu(global_sum);
    std::vector<float> losses(N);
    float* gpu_losses = on_gpu(losses);
    const float mean = cpu_.vocab_parallel_loss(losses.data(), global_max.data(), global_sum.data(),
                                                global_target.data(), N);
    expect_close(gpu_->vocab_parallel_loss(gpu_losses, gpu_global_max, gpu_global_sum,
                                           on_gpu(global_target), N),
                 mean, kFp32Tolerance, "mean loss");
    expect_close(from_gpu(gpu_losses, N), losses, kFp32Tolerance, "losses");
    expect_close(gpu_->vocab_parallel_loss(nullptr, gpu_global_max, gpu_global_sum,
                                           on_gpu(global_target), N),
                 mean, kFp32Tolerance, "mean loss without per-row losses");

    for (int r = 0; r < 2; ++r) {
      auto dlogits = random_values(local[r].size(), 3 + r, 0.01f);
      float* gpu_dlogits = on_gpu(dlogits);
      cpu_.vocab_parallel_backward(dlogits.data(), local[r].data(), targets.data(),
                                   global_max.data(), global_sum.data(), N, shards[r].size,
                                   shards[r].start, 0.5f);
      gpu_->vocab_parallel_backward(gpu_dlogits, gpu_local[r], gpu_targets, gpu_global_max,
                                    gpu_global_sum, N, shards[r].size, shards[r].start, 0.5f);
      expect_close(from_gpu(gpu_dlogits, dlogits.size()), dlogits, kFp32Tolerance, "dlogits");
    }
  }
}

TEST_F(CudaDeviceTest, MeanSquareLossAdamWAndGlobalNorm) {
  const int64_t n = 4099;
  const auto y = random_values(n, 1);
  float* gpu_y = on_gpu(y);
  expect_close(gpu_->mean_square_loss_forward(gpu_y, n), cpu_.mean_square_loss_forward(y.data(), n),
               kFp32Tolerance, "mean square loss");
  auto dy = random_values(n, 2);
  float* gpu_dy = on_gpu(dy);
  cpu_.mean_square_loss_backward(dy.data(), y.data(), n, 0.25f);
  gpu_->mean_square_loss_backward(gpu_dy, gpu_y, n, 0.25f);
  expect_close(from_gpu(gpu_dy, n), dy, kFp32Tolerance, "dy");

  // Summed in double on both: agreement far below fp32's rounding.
  expect_close(gpu_->sum_of_squares(gpu_dy, n), cpu_.sum_of_squares(dy.data(), n), 1e-12,
               "sum of squares");
  expect_close(gpu_->sum_of_squares(gpu_dy, 0), 0.0, 0.0, "empty sum of squares");

  auto params = random_values(n, 3), m = random_values(n, 4, 0.1f);
  auto v = random_values(n, 5, 0.1f);
  for (float& value : v) value = value * value;  // a second moment is non-negative
  float* gpu_params = on_gpu(params);
  float* gpu_m = on_gpu(m);
  float* gpu_v = on_gpu(v);
  ops::AdamWConfig config{.learning_rate = 1e-2f, .weight_decay = 0.1f};
  for (int64_t step = 1; step <= 3; ++step) {
    config.grad_scale = step == 2 ? 0.3f : 1.0f;  // step 2 clipped, inside the update
    const auto grads = random_values(n, 10 + static_cast<uint32_t>(step));
    cpu_.adamw_update(params.data(), grads.data(), m.data(), v.data(), n, config, step, nullptr);
    gpu_->adamw_update(gpu_params, on_gpu(grads), gpu_m, gpu_v, n, config, step, nullptr);
  }
  expect_close(from_gpu(gpu_params, n), params, kFp32Tolerance, "params");
  expect_close(from_gpu(gpu_m, n), m, kFp32Tolerance, "m");
  expect_close(from_gpu(gpu_v, n), v, kFp32Tolerance, "v");

  // bf16 gradients (bf16-mixed), read widened by both: the same update and norm.
  std::vector<uint16_t> bf16_grads(static_cast<size_t>(n));
  const auto grads = random_values(n, 20);
  cpu_.to_bf16(bf16_grads.data(), grads.data(), n);
  uint16_t* gpu_bf16_grads = on_gpu(bf16_grads);
  expect_close(gpu_->sum_of_squares(gpu_bf16_grads, n), cpu_.sum_of_squares(bf16_grads.data(), n),
               1e-12, "sum of squares of bf16 values");
  // With the bf16 parameters written in the same pass (bf16-mixed's AdamW).
  std::vector<uint16_t> params_bf16(static_cast<size_t>(n));
  uint16_t* gpu_params_bf16 = on_gpu(std::vector<uint16_t>(static_cast<size_t>(n), 0x4040));
  cpu_.adamw_update(params.data(), bf16_grads.data(), m.data(), v.data(), n, config, 4,
                    params_bf16.data());
  gpu_->adamw_update(gpu_params, gpu_bf16_grads, gpu_m, gpu_v, n, config, 4, gpu_params_bf16);
  const std::vector<float> gpu_params_after = from_gpu(gpu_params, n);
  expect_close(gpu_params_after, params, kFp32Tolerance, "params from bf16 gradients");
  expect_close(from_gpu(gpu_m, n), m, kFp32Tolerance, "m from bf16 gradients");
  expect_close(from_gpu(gpu_v, n), v, kFp32Tolerance, "v from bf16 gradients");
  // The bf16 parameters are the GPU's own fp32 ones rounded, every bit.
  std::vector<uint16_t> got_bf16(static_cast<size_t>(n)), want_bf16(static_cast<size_t>(n));
  gpu_->download(got_bf16.data(), gpu_params_bf16, got_bf16.size() * sizeof(uint16_t));
  cpu_.to_bf16(want_bf16.data(), gpu_params_after.data(), n);
  EXPECT_EQ(got_bf16, want_bf16);
}

// GeLU over bf16 storage (the bf16 recipes' MLP): a bf16 input read widened, a bf16 output written
// rounded, in each combination of types, against the CPU's. tanhf and std::tanh may differ by an
// fp32 ulp, which can move a rounded value to its bf16 neighbour: one bf16 step (2^-8), 4e-3 of
// the scale, where a missed widening or rounding is off by far more.
TEST_F(CudaDeviceTest, GeluReadsAndWritesBf16AsStored) {
  const int64_t n = 3 * 13 * 60 + 1;
  const auto values = random_values(n, 1, 4.0f);
  std::vector<uint16_t> x(static_cast<size_t>(n));
  cpu_.to_bf16(x.data(), values.data(), n);
  std::vector<float> x_widened(static_cast<size_t>(n));
  cpu_.from_bf16(x_widened.data(), x.data(), n);
  uint16_t* gpu_x = on_gpu(x);
  float* gpu_x_widened = on_gpu(x_widened);
  auto widened_from_gpu = [&](const uint16_t* data) {
    std::vector<uint16_t> bits(static_cast<size_t>(n));
    gpu_->download(bits.data(), data, bits.size() * sizeof(uint16_t));
    std::vector<float> widened(static_cast<size_t>(n));
    cpu_.from_bf16(widened.data(), bits.data(), n);
    return widened;
  };
  auto widened_of = [&](const std::vector<uint16_t>& bits) {
    std::vector<float> widened(static_cast<size_t>(n));
    cpu_.from_bf16(widened.data(), bits.data(), n);
    return widened;
  };

  std::vector<uint16_t> want(static_cast<size_t>(n));
  cpu_.gelu_forward(want.data(), x.data(), n);
  uint16_t* gpu_out = on_gpu(std::vector<uint16_t>(static_cast<size_t>(n), 0x4040));
  gpu_->gelu_forward(gpu_out, gpu_x, n);
  expect_close(widened_from_gpu(gpu_out), widened_of(want), 4e-3, "bf16 in, bf16 out");
  uint16_t* gpu_out_from_f32 = on_gpu(std::vector<uint16_t>(static_cast<size_t>(n), 0x4040));
  gpu_->gelu_forward(gpu_out_from_f32, gpu_x_widened, n);
  expect_close(widened_from_gpu(gpu_out_from_f32), widened_of(want), 4e-3, "fp32 in, bf16 out");
  std::vector<float> want_f32(static_cast<size_t>(n));
  cpu_.gelu_forward(want_f32.data(), x_widened.data(), n);
  float* gpu_out_f32 = on_gpu(std::vector<float>(static_cast<size_t>(n), 3.0f));
  gpu_->gelu_forward(gpu_out_f32, gpu_x, n);
  expect_close(from_gpu(gpu_out_f32, n), want_f32, kFp32Tolerance, "bf16 in, fp32 out");

  const auto dout = random_values(n, 3);
  auto dx = random_values(n, 4);
  float* gpu_dx = on_gpu(dx);
  cpu_.gelu_backward(dx.data(), x.data(), dout.data(), n);
  gpu_->gelu_backward(gpu_dx, gpu_x, on_gpu(dout), n);
  expect_close(from_gpu(gpu_dx, n), dx, kFp32Tolerance, "dinp from a bf16 input");
  EXPECT_TRUE(gpu_->status().is_ok()) << gpu_->status().message();
}

// The first failure is kept, later ops are skipped and host values are NaN.
TEST_F(CudaDeviceTest, KeepsTheFirstErrorAndStops) {
  StatusOr<std::unique_ptr<Device>> created = create_cuda_device({});
  ASSERT_TRUE(created.is_ok()) << created.status().message();
  Device& device = **created;
  StatusOr<TrackedBuffer> buffer = device.allocator().allocate(64, memory::Category::kOther);
  ASSERT_TRUE(buffer.is_ok()) << buffer.status().message();
  auto* x = static_cast<float*>(buffer->data());
  device.fill(x, 16, 1.0f);
  // C does not fit cuBLAS's int: refused before anything is read.
  device.matmul_forward(x, x, x, nullptr, 1, int64_t{1} << 33, 1);
  ASSERT_FALSE(device.status().is_ok());
  EXPECT_NE(device.status().message().find("does not fit"), std::string::npos)
      << device.status().message();
  EXPECT_TRUE(std::isnan(device.sum_of_squares(x, 16)));
  const std::string first = device.status().message();
  device.fill(x, 16, 2.0f);
  EXPECT_EQ(device.status().message(), first);
}

class CudaDeviceBf16Test : public CudaDeviceTest {
 protected:
  GemmPrecision precision() const override { return GemmPrecision::kBf16; }
};

TEST_F(CudaDeviceBf16Test, MatmulWithinBf16Rounding) {
  EXPECT_NE(gpu_->name().find("bf16 GEMMs"), std::string::npos) << gpu_->name();
  for (const Shape& s : kShapes) {
    // And the operands really were rounded: fp32 agreement would mean bf16 was not used.
    EXPECT_GT(compare_matmul(s, kBf16Tolerance), 10 * kFp32Tolerance);
  }
}

// Against the CPU's bf16 reference, which multiplies the same bf16-rounded operands with sgemm:
// the products are exact in fp32 on both, so only the order of the fp32 sums differs.
TEST_F(CudaDeviceBf16Test, MatmulMatchesTheCpusBf16Reference) {
  CpuDevice cpu_bf16(CpuDeviceOptions{.precision = GemmPrecision::kBf16});
  for (const Shape& s : kShapes) compare_matmul(s, kFp32Tolerance, &cpu_bf16);
  EXPECT_TRUE(cpu_bf16.status().is_ok()) << cpu_bf16.status().message();
}

TEST_F(CudaDeviceBf16Test, Bf16WeightsGoToTheTensorCoresAsStored) { compare_bf16_weights(); }

// `partrain bench gemm`'s GEMM (runner/device/gemm_benchmark.h) at issue 7's 8192^3: bf16 operands
// and out as stored, its sampled entries within bf16's tolerance of the double reference, a
// positive rate; and the same check, in fp32, catches the bf16 rounding of fp32 operands.
TEST_F(CudaDeviceBf16Test, GemmBenchmarkAt8192CubedMatchesItsReference) {
  for (const bool bias : {false, true}) {
    GemmBenchOptions options;
    options.shape = {8192, 8192, 8192};
    options.bf16 = true;
    options.bias = bias;
    options.iters = 5;
    StatusOr<GemmBenchResult> result = run_gemm_bench(*gpu_, options);
    ASSERT_TRUE(result.is_ok()) << result.status().message();
    EXPECT_EQ(result->checked, 16);
    EXPECT_EQ(result->wrong, 0) << "max error " << result->max_error << " x the tolerance";
    EXPECT_GT(result->tflops, 0.0);
    std::printf("bench gemm 8192^3 bf16%s: %.1f us, %.1f TFLOP/s, max error %.3f x tolerance\n",
                bias ? " with bias" : "", result->mean_us, result->tflops, result->max_error);
  }
  // A small k: the fp32 bound grows as k^2 (k roundings of a sum of k magnitudes), the error of
  // bf16 operands as sqrt(k) 2^-9 of a term. At k = 1024 the H200 had 1 of 16 entries past it (run
  // 6), as the CPU device has; at k = 96 the CPU has 14 (GemmBenchmarkTest, the same shape).
  GemmBenchOptions fp32;
  fp32.shape = {512, 384, 96};
  fp32.bf16 = false;
  StatusOr<GemmBenchResult> rounded = run_gemm_bench(*gpu_, fp32);
  ASSERT_TRUE(rounded.is_ok()) << rounded.status().message();
  EXPECT_GT(rounded->wrong, 8) << "fp32 operands rounded to bf16 passed an fp32 check";
  // The peak a run's MFU is measured against is this GEMM, and leaves no memory held.
  const uint64_t before = gpu_->allocator().stats().total_current;
  StatusOr<Device::PeakGemm> peak = gpu_->measure_peak_gemm();
  ASSERT_TRUE(peak.is_ok()) << peak.status().message();
  EXPECT_EQ(peak->source, "measured bf16 GEMM, 8192^3");
  EXPECT_GT(peak->gflops, 0.0);
  EXPECT_LE(gpu_->allocator().stats().total_current, before)
      << "the probe's buffers and scratch are given back";
}

// A bf16 output (qkv, fc under the bf16 recipes): the fp32 output of the same product, bias
// added, rounded once: every bit, on the four-a-thread path (OC a multiple of 4) and the other;
// with and without a bias.
TEST_F(CudaDeviceBf16Test, MatmulWritesABf16OutputAsTheFp32OneRounded) {
  for (const int64_t OC : {int64_t{96}, int64_t{37}}) {
    SCOPED_TRACE(::testing::Message() << "OC " << OC);
    const int64_t N = 67, C = 48;
    const auto x = random_values(N * C, 51), w = random_values(OC * C, 52, 0.3f);
    const auto bias = random_values(OC, 53);
    float* gpu_x = on_gpu(x);
    float* gpu_w = on_gpu(w);
    for (const float* gpu_bias :
         {static_cast<const float*>(on_gpu(bias)), static_cast<const float*>(nullptr)}) {
      float* gpu_f32 = on_gpu(std::vector<float>(N * OC));
      uint16_t* gpu_bf16 = on_gpu(std::vector<uint16_t>(N * OC, 0x4040));
      gpu_->matmul_forward(gpu_f32, gpu_x, gpu_w, gpu_bias, N, C, OC);
      gpu_->matmul_forward(gpu_bf16, gpu_x, gpu_w, gpu_bias, N, C, OC);
      std::vector<uint16_t> got(N * OC), want(N * OC);
      gpu_->download(got.data(), gpu_bf16, got.size() * sizeof(uint16_t));
      cpu_.to_bf16(want.data(), from_gpu(gpu_f32, N * OC).data(), N * OC);
      EXPECT_EQ(got, want) << (gpu_bias != nullptr ? "with a bias" : "without a bias");
    }
  }
  EXPECT_TRUE(gpu_->status().is_ok()) << gpu_->status().message();
}

// Attention's four products go through the tensor cores in bf16 too: within bf16's tolerance of
// the fp32 CPU, and close to the CPU's bf16 reference, which rounds the same operands at the same
// places (Q, K, V, dout; the probabilities and dL/d(scores) where they are computed). Only the
// fp32 sums' order differs, so a probability or score gradient next to a rounding boundary may
// round to the other bf16 neighbour on one side: one bf16 step, 4e-3 of the tensor's scale. That
// checks the wiring (operands, types, layouts); where the rounding happens is checked exactly by
// the next test.
TEST_F(CudaDeviceBf16Test, AttentionWithinBf16Tolerance) { compare_attention(kBf16Tolerance); }

TEST_F(CudaDeviceBf16Test, AttentionMatchesTheCpusBf16Reference) {
  CpuDevice cpu_bf16(CpuDeviceOptions{.precision = GemmPrecision::kBf16});
  compare_attention(4e-3, kShapes, &cpu_bf16);
  compare_bf16_attention(cpu_bf16, 4e-3);
  EXPECT_TRUE(cpu_bf16.status().is_ok()) << cpu_bf16.status().message();
}

// With V the identity (one head, hs = T) the output is the probabilities P V multiplied, and with
// K the identity dQ is the dL/d(scores) dQ multiplied, each element one product with 1.0: exact
// on the tensor cores. Under bf16 GEMMs both are bf16 values, and the output is att itself.
TEST_F(CudaDeviceBf16Test, AttentionMultipliesTheRoundedProbabilitiesAndScoreGradients) {
  constexpr int64_t T = 64;
  float* gpu_out = on_gpu(std::vector<float>(T * T));
  float* gpu_att = on_gpu(std::vector<float>(T * T));
  gpu_->attention_forward(gpu_out, gpu_att, on_gpu(unit_rows_qkv(T, 2, 41)), 1, T, 1, T);
  const std::vector<float> out = from_gpu(gpu_out, T * T), att = from_gpu(gpu_att, T * T);
  EXPECT_EQ(out, att);
  EXPECT_EQ(att, rounded(att)) << "probabilities that are not bf16 values";
  const auto qkv = unit_rows_qkv(T, 1, 42);
  float* gpu_qkv = on_gpu(qkv);
  gpu_->attention_forward(gpu_out, gpu_att, gpu_qkv, 1, T, 1, T);
  float* gpu_dqkv = on_gpu(std::vector<float>(qkv.size(), 0.0f));
  gpu_->attention_backward(gpu_dqkv, on_gpu(random_values(T * T, 43)), gpu_qkv, gpu_att, 1, T, 1,
                           T);
  const std::vector<float> dqkv = from_gpu(gpu_dqkv, qkv.size());
  std::vector<float> dq;
  for (int64_t t = 0; t < T; ++t) {
    dq.insert(dq.end(), dqkv.begin() + t * 3 * T, dqkv.begin() + t * 3 * T + T);
  }
  EXPECT_EQ(dq, rounded(dq)) << "dL/d(scores) that are not bf16 values";
  EXPECT_GT(max_abs(dq), 0.0);
}

}  // namespace
}  // namespace partrain::runner
