#include "runner/device/cpu_device.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "runner/ops/attention.h"
#include "runner/ops/bf16_round.h"
#include "runner/ops/cross_entropy.h"
#include "runner/ops/embedding.h"
#include "runner/ops/global_norm.h"
#include "runner/ops/layernorm.h"
#include "runner/ops/matmul.h"
#include "runner/ops/vocab_parallel_cross_entropy.h"
#include "tests/unit/runner/ops/bf16_values.h"
#include "tests/unit/runner/ops/gradient_check.h"

namespace partrain::runner {
namespace {

using ops::testing::bf16_bits;
using ops::testing::random_values;
using ops::testing::rounded;
using ops::testing::unit_rows_qkv;
using ops::testing::widened;

TEST(CpuDevice, NamesItsBlasThreads) {
  EXPECT_EQ(CpuDevice(CpuDeviceOptions{.blas_threads = 2}).name(), "cpu (OpenBLAS, 2 threads)");
  CpuDevice device;  // constructed last: the process is back to one BLAS thread
  EXPECT_EQ(device.name(), "cpu (OpenBLAS, 1 thread)");
  EXPECT_EQ(device.blas_threads(), 1);
  EXPECT_EQ(device.allocator().memory_name(), "host");
}

void expect_equal(const std::vector<float>& actual, const std::vector<float>& expected,
                  const char* what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], 1e-5 * (1.0 + std::abs(expected[i]))) << what << " " << i;
  }
}

// Through the virtual interface, each op computes what its runner/ops reference computes: the
// check a CUDA device will run against the same references.
class CpuDeviceDispatch : public ::testing::Test {
 protected:
  static constexpr int64_t B = 2, T = 3, NH = 2, hs = 2, C = NH * hs, V = 5, N = B * T;
  CpuDevice cpu;
  Device& device = cpu;
  std::vector<float> x = random_values(N * C, 1);
};

TEST_F(CpuDeviceDispatch, Matmul) {
  auto w = random_values(3 * C * C, 2), bias = random_values(3 * C, 3);
  std::vector<float> a(N * 3 * C), b(N * 3 * C);
  device.matmul_forward(a.data(), x.data(), w.data(), bias.data(), N, C, 3 * C);
  ops::matmul_forward(b.data(), x.data(), w.data(), bias.data(), N, C, 3 * C);
  expect_equal(a, b, "matmul_forward");
  auto dout = random_values(N * 3 * C, 4);
  std::vector<float> da(N * C, 0.0f), dw(w.size(), 0.0f), db(bias.size(), 0.0f);
  std::vector<float> ra(N * C, 0.0f), rw(w.size(), 0.0f), rb(bias.size(), 0.0f);
  device.matmul_backward(da.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), N, C,
                         3 * C);
  ops::matmul_backward(ra.data(), rw.data(), rb.data(), dout.data(), x.data(), w.data(), N, C,
                       3 * C);
  expect_equal(da, ra, "matmul dinp");
  expect_equal(dw, rw, "matmul dweight");
  expect_equal(db, rb, "matmul dbias");
}

TEST_F(CpuDeviceDispatch, Attention) {
  auto qkv = random_values(N * 3 * C, 5);
  std::vector<float> out(N * C), att(B * NH * T * T), rout(N * C), ratt(att.size());
  device.attention_forward(out.data(), att.data(), qkv.data(), B, T, NH, hs);
  ops::attention_forward(rout.data(), ratt.data(), qkv.data(), B, T, NH, hs);
  expect_equal(out, rout, "attention out");
  expect_equal(att, ratt, "attention probabilities");
  std::vector<float> dqkv(qkv.size(), 0.0f), rdqkv(qkv.size(), 0.0f);
  device.attention_backward(dqkv.data(), x.data(), qkv.data(), att.data(), B, T, NH, hs);
  ops::attention_backward(rdqkv.data(), x.data(), qkv.data(), att.data(), B, T, NH, hs);
  expect_equal(dqkv, rdqkv, "attention dqkv");
}

TEST_F(CpuDeviceDispatch, LayerNorm) {
  auto gamma = random_values(C, 6), beta = random_values(C, 7);
  std::vector<float> out(N * C), mean(N), rstd(N), rout(N * C), rmean(N), rrstd(N);
  device.layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), gamma.data(),
                           beta.data(), N, C);
  ops::layernorm_forward(rout.data(), rmean.data(), rrstd.data(), x.data(), gamma.data(),
                         beta.data(), N, C);
  expect_equal(out, rout, "layernorm");
  expect_equal(rstd, rrstd, "layernorm rstd");
}

TEST_F(CpuDeviceDispatch, EmbeddingAndCrossEntropy) {
  const std::vector<int32_t> tokens = {0, 4, 2, 2, 1, 3};
  auto wte = random_values(V * C, 8), wpe = random_values(T * C, 9);
  std::vector<float> out(N * C), rout(N * C);
  device.embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
  ops::embedding_forward(rout.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
  expect_equal(out, rout, "embedding");
  auto logits = random_values(N * V, 10);
  std::vector<float> losses(N), rlosses(N), dl(N * V, 0.0f), rdl(N * V, 0.0f);
  EXPECT_FLOAT_EQ(device.cross_entropy_forward(losses.data(), logits.data(), tokens.data(), N, V),
                  ops::cross_entropy_forward(rlosses.data(), logits.data(), tokens.data(), N, V));
  device.cross_entropy_backward(dl.data(), logits.data(), tokens.data(), N, V, 0.5f);
  ops::cross_entropy_backward(rdl.data(), logits.data(), tokens.data(), N, V, 0.5f);
  expect_equal(dl, rdl, "cross_entropy_backward");
}

TEST_F(CpuDeviceDispatch, Bf16StorageRoundsAndWidensExactly) {
  std::vector<uint16_t> stored(x.size());
  std::vector<float> back(x.size()), want(x.size());
  device.to_bf16(stored.data(), x.data(), static_cast<int64_t>(x.size()));
  device.from_bf16(back.data(), stored.data(), static_cast<int64_t>(x.size()));
  ops::round_to_bf16(want.data(), x.data(), static_cast<int64_t>(x.size()));
  EXPECT_EQ(back, want);  // the stored bits are the rounded value, read back exactly
  EXPECT_NE(back, x);
  // The norm of bf16 values is that of their widened values, summed in the same order.
  EXPECT_EQ(device.sum_of_squares(stored.data(), static_cast<int64_t>(x.size())),
            ops::sum_of_squares(back.data(), static_cast<int64_t>(x.size())));
  // Accumulating adds in fp32 and rounds once: 1 + 2^-8 is halfway between 1 and 1 + 2^-7, a tie
  // that goes to the even 1; 1 + 2^-8 + 2^-10 is past halfway and goes up.
  std::vector<uint16_t> sum(2);
  const std::vector<float> one = {1.0f, 1.0f};
  device.to_bf16(sum.data(), one.data(), 2);
  const std::vector<float> small = {0x1p-8f, 0x1p-8f + 0x1p-10f};
  device.accumulate_bf16(sum.data(), small.data(), 2);
  device.from_bf16(back.data(), sum.data(), 2);
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[1], 1.0f + 0x1p-7f);
  std::vector<uint16_t> copied(stored.size(), 0xabcd);
  device.copy_bf16(copied.data(), stored.data(), static_cast<int64_t>(stored.size()) - 1);
  EXPECT_TRUE(std::equal(stored.begin(), stored.end() - 1, copied.begin()));
  EXPECT_EQ(copied.back(), 0xabcd);  // n values, no more
  device.zero_bf16(sum.data(), 2);
  EXPECT_EQ(sum, std::vector<uint16_t>(2, 0));
  // store_bf16 is to_bf16 and from_bf16 in one pass: the bits, and the values rounded in place.
  std::vector<uint16_t> kept(x.size());
  std::vector<float> values = x;
  device.store_bf16(kept.data(), values.data(), static_cast<int64_t>(x.size()));
  EXPECT_EQ(kept, stored);
  EXPECT_EQ(values, want);
}

TEST_F(CpuDeviceDispatch, ElementwiseAndMemory) {
  auto y = random_values(8, 11);
  std::vector<float> dy(8, 0.0f), gelu(8), dgelu(8, 0.0f), sum(8), da(8, 0.0f);
  device.mean_square_loss_backward(dy.data(), y.data(), 8, 1.0f);
  EXPECT_FLOAT_EQ(dy[3], 2.0f / 8.0f * y[3]);
  EXPECT_GT(device.mean_square_loss_forward(y.data(), 8), 0.0f);
  device.gelu_forward(gelu.data(), y.data(), 8);
  device.gelu_backward(dgelu.data(), y.data(), dy.data(), 8);
  EXPECT_NEAR(gelu[0],
              0.5 * y[0] * (1 + std::tanh(0.7978845608 * (y[0] + 0.044715 * std::pow(y[0], 3)))),
              1e-6);
  device.residual_forward(sum.data(), y.data(), dy.data(), 8);
  EXPECT_FLOAT_EQ(sum[5], y[5] + dy[5]);
  device.residual_backward(da.data(), nullptr, dy.data(), 8);
  expect_equal(da, dy, "residual_backward");
  device.fill(da.data(), 8, 3.0f);
  EXPECT_DOUBLE_EQ(device.sum_of_squares(da.data(), 8), 72.0);
  device.scale(da.data(), 8, 0.5f);
  device.copy(dy.data(), da.data(), 8);
  EXPECT_THAT(dy, ::testing::Each(1.5f));
}

// Host memory is the CPU device's memory: uploads and downloads are copies, ops run at once
// (no stream), cannot fail, and there is no separate memory to report.
TEST_F(CpuDeviceDispatch, HostTransfersAndNoDeviceState) {
  const auto host = random_values(8, 12);
  std::vector<float> on_device(8, 0.0f), back(8, 0.0f);
  device.upload(on_device.data(), host.data(), host.size() * sizeof(float));
  EXPECT_EQ(on_device, host);
  device.download(back.data(), on_device.data(), back.size() * sizeof(float));
  EXPECT_EQ(back, host);
  device.upload(nullptr, nullptr, 0);  // nothing to copy: no pointer is touched
  EXPECT_EQ(device.compute_stream(), nullptr);
  EXPECT_TRUE(device.status().is_ok());
  StatusOr<Device::MemoryInfo> memory = device.memory_info();
  ASSERT_FALSE(memory.is_ok());
  EXPECT_THAT(memory.status().message(), ::testing::HasSubstr("no separate device memory"));
}

TEST_F(CpuDeviceDispatch, VocabParallelCrossEntropyAndEmbeddingShard) {
  const std::vector<int32_t> targets = {0, 4, 2, 2, 1, 3};
  auto logits = random_values(N * V, 14);  // one shard holding the whole vocabulary
  std::vector<float> max(N), sum(N), target(N), losses(N), dl(N * V, 0.0f), rdl(N * V, 0.0f);
  device.vocab_parallel_local_max(max.data(), logits.data(), N, V);
  device.vocab_parallel_local_sum_exp(sum.data(), logits.data(), max.data(), N, V);
  device.vocab_parallel_local_target_logit(target.data(), logits.data(), targets.data(), N, V, 0);
  EXPECT_NEAR(device.vocab_parallel_loss(losses.data(), max.data(), sum.data(), target.data(), N),
              ops::cross_entropy_forward(nullptr, logits.data(), targets.data(), N, V), 1e-6);
  device.vocab_parallel_backward(dl.data(), logits.data(), targets.data(), max.data(), sum.data(),
                                 N, V, 0, 1.0f / N);
  ops::cross_entropy_backward(rdl.data(), logits.data(), targets.data(), N, V, 1.0f / N);
  expect_equal(dl, rdl, "vocab_parallel_backward");

  auto wte = random_values(V * C, 15);
  std::vector<float> out(N * C), rout(N * C), dwte(V * C, 0.0f), rdwte(V * C, 0.0f);
  device.embedding_forward_vocab_range(out.data(), targets.data(), wte.data() + 2 * C, nullptr, B,
                                       T, C, 2, 4);
  ops::embedding_forward_vocab_range(rout.data(), targets.data(), wte.data() + 2 * C, nullptr, B, T,
                                     C, 2, 4);
  expect_equal(out, rout, "embedding_forward_vocab_range");
  device.embedding_backward_vocab_range(dwte.data(), nullptr, x.data(), targets.data(), B, T, C, 2,
                                        4);
  ops::embedding_backward_vocab_range(rdwte.data(), nullptr, x.data(), targets.data(), B, T, C, 2,
                                      4);
  expect_equal(dwte, rdwte, "embedding_backward_vocab_range");
  std::vector<float> dwpe(T * C, 0.0f), rdwpe(T * C, 0.0f);
  device.embedding_backward(dwte.data(), dwpe.data(), x.data(), targets.data(), B, T, C);
  ops::embedding_backward(rdwte.data(), rdwpe.data(), x.data(), targets.data(), B, T, C);
  expect_equal(dwpe, rdwpe, "embedding_backward");
}

// The smallest end-to-end use of the interface: the mlp workload's step (x @ W^T, GeLU,
// mean-square loss, AdamW) on tracked tensors lowers the loss.
TEST(CpuDevice, MlpStepsLowerTheLoss) {
  CpuDevice device;
  const int64_t N = 8, C = 16;
  auto x = random_values(N * C, 12);
  auto w = random_values(C * C, 13, 0.5f);
  std::vector<float> h(N * C), y(N * C), dy(N * C), dh(N * C), dw(C * C), m(C * C, 0.0f),
      v(C * C, 0.0f);
  const ops::AdamWConfig config{.learning_rate = 0.05f};
  float first = 0.0f, last = 0.0f;
  for (int64_t step = 1; step <= 10; ++step) {
    device.matmul_forward(h.data(), x.data(), w.data(), nullptr, N, C, C);
    device.gelu_forward(y.data(), h.data(), N * C);
    last = device.mean_square_loss_forward(y.data(), N * C);
    if (step == 1) first = last;
    device.fill(dy.data(), N * C, 0.0f);
    device.fill(dh.data(), N * C, 0.0f);
    device.fill(dw.data(), C * C, 0.0f);
    device.mean_square_loss_backward(dy.data(), y.data(), N * C, 1.0f);
    device.gelu_backward(dh.data(), h.data(), dy.data(), N * C);
    device.matmul_backward(nullptr, dw.data(), nullptr, dh.data(), x.data(), w.data(), N, C, C);
    device.adamw_update(w.data(), dw.data(), m.data(), v.data(), C * C, config, step, nullptr);
  }
  EXPECT_LT(last, 0.5f * first);
}

// A bf16 output is the fp32 one, bias added, rounded once; its fp32 workspace is tracked.
TEST(CpuDevice, MatmulWritesABf16OutputAsTheFp32OneRounded) {
  CpuDevice device(CpuDeviceOptions{.precision = GemmPrecision::kBf16});
  const int64_t N = 5, C = 8, OC = 6;
  const auto x = random_values(N * C, 31), w = random_values(OC * C, 32),
             bias = random_values(OC, 33);
  std::vector<float> fp32_out(N * OC);
  device.matmul_forward(fp32_out.data(), x.data(), w.data(), bias.data(), N, C, OC);
  std::vector<uint16_t> want(N * OC), got(N * OC, 0x4040);
  device.to_bf16(want.data(), fp32_out.data(), N * OC);
  device.matmul_forward(got.data(), x.data(), w.data(), bias.data(), N, C, OC);
  EXPECT_EQ(got, want);
  EXPECT_GE(device.allocator().peak_bytes(memory::Category::kWorkspace),
            static_cast<uint64_t>(N * OC) * sizeof(float));
  EXPECT_TRUE(device.status().is_ok()) << device.status().message();
}

// bf16-mixed's AdamW: the fp32 master updated as without, and the bf16 parameters written from
// it in the same call, to_bf16's bits.
TEST(CpuDevice, AdamWWritesTheBf16ParametersFromTheUpdatedMaster) {
  CpuDevice device;
  const int64_t n = 37;
  const auto grads = random_values(n, 21);
  auto params = random_values(n, 22), m = random_values(n, 23, 0.1f);
  std::vector<float> v(n, 0.01f);
  auto plain_params = params, plain_m = m, plain_v = v;
  const ops::AdamWConfig config{.learning_rate = 0.05f, .weight_decay = 0.1f};
  std::vector<uint16_t> params_bf16(n, 0x4040);
  device.adamw_update(params.data(), grads.data(), m.data(), v.data(), n, config, 3,
                      params_bf16.data());
  device.adamw_update(plain_params.data(), grads.data(), plain_m.data(), plain_v.data(), n, config,
                      3, nullptr);
  EXPECT_EQ(params, plain_params);
  EXPECT_EQ(m, plain_m);
  std::vector<uint16_t> want(n);
  device.to_bf16(want.data(), params.data(), n);
  EXPECT_EQ(params_bf16, want);
}

TEST(CpuDevice, MeasuresAnSgemmPeakInTrackedWorkspace) {
  CpuDevice device;
  auto gflops = device.measure_sgemm_gflops(256, 3);
  ASSERT_TRUE(gflops.is_ok()) << gflops.status().message();
  EXPECT_GT(*gflops, 0.5);    // any machine that runs the suite does better than this
  EXPECT_LT(*gflops, 1.0e5);  // and a single thread does not reach 100 TFLOP/s
  EXPECT_EQ(device.allocator().current_bytes(memory::Category::kWorkspace), 0u);
  EXPECT_EQ(device.allocator().peak_bytes(memory::Category::kWorkspace), 3u * 256 * 256 * 4);
  RecordProperty("sgemm_gflops_256", std::to_string(*gflops));
  EXPECT_FALSE(device.measure_sgemm_gflops(0, 1).is_ok());
  device.allocator().set_limit_bytes(1024);
  EXPECT_THAT(device.measure_sgemm_gflops(256, 1).status().message(),
              ::testing::HasSubstr("of workspace"));
}

// The GeLU's tanh rate a CPU core gives the recommender (special_function_rate): any core that
// runs the suite evaluates between 1 M and 10 G a second; an isolated device measures the same way.
TEST(CpuDevice, MeasuresItsGeluSpecialFunctionRate) {
  CpuDevice device;
  const std::optional<double> rate = device.measure_special_function_rate();
  ASSERT_TRUE(rate);
  EXPECT_GT(*rate, 1e6);
  EXPECT_LT(*rate, 1e10);
  RecordProperty("special_function_rate", std::to_string(*rate));
}

// Under GemmPrecision::kBf16 a matmul multiplies its operands rounded to bf16, as the CUDA
// device's tensor cores do: the same sgemm over pre-rounded operands gives the same bits, the
// bias and dbias stay fp32, and the rounded copies are tracked workspace, kept between calls.
class CpuDeviceBf16 : public ::testing::Test {
 protected:
  static constexpr int64_t N = 6, C = 40, OC = 24;
  CpuDevice cpu{CpuDeviceOptions{.precision = GemmPrecision::kBf16}};
  Device& device = cpu;
  std::vector<float> x = random_values(N * C, 21), w = random_values(OC * C, 22),
                     bias = random_values(OC, 23), dout = random_values(N * OC, 24);
};

TEST_F(CpuDeviceBf16, ForwardMultipliesTheRoundedOperands) {
  EXPECT_EQ(device.name(), "cpu (OpenBLAS, 1 thread, bf16 GEMMs)");
  std::vector<float> out(N * OC), want(N * OC), fp32(N * OC);
  device.matmul_forward(out.data(), x.data(), w.data(), bias.data(), N, C, OC);
  ops::matmul_forward(want.data(), rounded(x).data(), rounded(w).data(), bias.data(), N, C, OC);
  EXPECT_EQ(out, want);
  ops::matmul_forward(fp32.data(), x.data(), w.data(), bias.data(), N, C, OC);
  double largest = 0;  // and the rounding is not lost in the noise: bf16 keeps 8 bits
  for (size_t i = 0; i < out.size(); ++i) {
    largest = std::max(largest, std::abs(double{out[i]} - fp32[i]) / (1.0 + std::abs(fp32[i])));
  }
  EXPECT_GT(largest, 1e-4);
  EXPECT_LT(largest, 5e-2);
  EXPECT_TRUE(device.status().is_ok());
}

TEST_F(CpuDeviceBf16, BackwardRoundsDoutOnceAndSumsTheBiasInFp32) {
  // Gradients accumulate (+=) onto what is there, in fp32.
  std::vector<float> dx(N * C, 0.5f), dw(OC * C, -0.25f), db(OC, 1.0f);
  std::vector<float> want_dx = dx, want_dw = dw, want_db = db;
  device.matmul_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), N, C,
                         OC);
  const std::vector<float> g = rounded(dout);
  ops::matmul_backward(want_dx.data(), nullptr, nullptr, g.data(), x.data(), rounded(w).data(), N,
                       C, OC);
  ops::matmul_backward(nullptr, want_dw.data(), nullptr, g.data(), rounded(x).data(), w.data(), N,
                       C, OC);
  ops::matmul_backward(nullptr, nullptr, want_db.data(), dout.data(), x.data(), w.data(), N, C,
                       OC);
  EXPECT_EQ(dx, want_dx);
  EXPECT_EQ(dw, want_dw);
  EXPECT_EQ(db, want_db);
  EXPECT_TRUE(device.status().is_ok());
}

// Attention's four products take bf16 operands too: Q, K, V and dout rounded as matmul's inputs,
// the probabilities and dL/d(scores) rounded where they are computed (ops::attention_*'s
// bf16_products).
TEST_F(CpuDeviceBf16, AttentionMultipliesRoundedOperands) {
  constexpr int64_t B = 2, T = 5, NH = 2, hs = 4, E = NH * hs;
  const auto qkv = random_values(B * T * 3 * E, 25), dy = random_values(B * T * E, 26);
  std::vector<float> out(B * T * E), att(B * NH * T * T), want_out(out.size()),
      want_att(att.size());
  device.attention_forward(out.data(), att.data(), qkv.data(), B, T, NH, hs);
  ops::attention_forward(want_out.data(), want_att.data(), rounded(qkv).data(), B, T, NH, hs, true);
  EXPECT_EQ(out, want_out);
  EXPECT_EQ(att, want_att);
  EXPECT_EQ(att, rounded(att));
  std::vector<float> dqkv(qkv.size(), 0.5f), want_dqkv = dqkv;
  device.attention_backward(dqkv.data(), dy.data(), qkv.data(), att.data(), B, T, NH, hs);
  ops::attention_backward(want_dqkv.data(), rounded(dy).data(), rounded(qkv).data(), att.data(), B,
                          T, NH, hs, true);
  EXPECT_EQ(dqkv, want_dqkv);
  EXPECT_TRUE(device.status().is_ok());
}

// The GPU test of the same name, on the CPU's bf16 reference: with V the identity (one head,
// hs = T) the output is the probabilities P V multiplied, with K the identity dQ is dL/d(scores).
TEST_F(CpuDeviceBf16, AttentionMultipliesTheRoundedProbabilitiesAndScoreGradients) {
  constexpr int64_t T = 16;
  std::vector<float> out(T * T), att(T * T);
  device.attention_forward(out.data(), att.data(), unit_rows_qkv(T, 2, 41).data(), 1, T, 1, T);
  EXPECT_EQ(out, att);
  EXPECT_EQ(att, rounded(att));
  const auto qkv = unit_rows_qkv(T, 1, 42);
  device.attention_forward(out.data(), att.data(), qkv.data(), 1, T, 1, T);
  std::vector<float> dqkv(qkv.size(), 0.0f), dq;
  device.attention_backward(dqkv.data(), random_values(T * T, 43).data(), qkv.data(), att.data(), 1,
                            T, 1, T);
  for (int64_t t = 0; t < T; ++t) {
    dq.insert(dq.end(), dqkv.begin() + t * 3 * T, dqkv.begin() + t * 3 * T + T);
  }
  EXPECT_EQ(dq, rounded(dq));
  EXPECT_NE(dq, std::vector<float>(dq.size(), 0.0f));
}

TEST_F(CpuDeviceBf16, RoundedOperandsAreTrackedWorkspace) {
  std::vector<float> out(N * OC), dx(N * C, 0.0f), dw(OC * C, 0.0f);
  device.matmul_forward(out.data(), x.data(), w.data(), nullptr, N, C, OC);
  device.matmul_backward(dx.data(), dw.data(), nullptr, dout.data(), x.data(), w.data(), N, C,
                         OC);
  // Two slots, each grown to the largest operand it held: A held w (OC x C), then x (N x C); B
  // held x, then dout (N x OC).
  const uint64_t want = sizeof(float) * (std::max(OC * C, N * C) + std::max(N * C, N * OC));
  EXPECT_EQ(device.allocator().current_bytes(memory::Category::kWorkspace), want);
  CpuDevice fp32;  // fp32 multiplies the operands as they are: no copies
  fp32.matmul_forward(out.data(), x.data(), w.data(), nullptr, N, C, OC);
  EXPECT_EQ(fp32.allocator().peak_bytes(memory::Category::kWorkspace), 0u);
}

TEST_F(CpuDeviceBf16, AMatmulWithoutWorkspaceFailsAndWritesNothing) {
  device.allocator().set_limit_bytes(64, "the test's cap");
  std::vector<float> out(N * OC, 7.0f);
  device.matmul_forward(out.data(), x.data(), w.data(), bias.data(), N, C, OC);
  EXPECT_EQ(out, std::vector<float>(N * OC, 7.0f));
  ASSERT_FALSE(device.status().is_ok());
  EXPECT_THAT(device.status().message(), ::testing::HasSubstr("the test's cap"));
  // The failure is sticky, as a CUDA device's: later ops do nothing either.
  device.allocator().set_limit_bytes(std::nullopt);
  std::vector<float> dx(N * C, 0.0f);
  device.matmul_backward(dx.data(), nullptr, nullptr, dout.data(), x.data(), w.data(), N, C, OC);
  EXPECT_EQ(dx, std::vector<float>(N * C, 0.0f));
  EXPECT_FALSE(device.status().is_ok());
}

// Matrix parameters stored in bf16 (bf16 model states) are read by the matmul and embedding
// ops as they lie: the results are those of the fp32 ops on the widened values, bit for bit, in
// both GEMM precisions (a bf16 GEMM's rounding leaves a bf16 value as it is).
class CpuDeviceBf16Weights : public ::testing::TestWithParam<GemmPrecision> {
 protected:
  static constexpr int64_t N = 6, C = 40, OC = 24;
  CpuDevice cpu{CpuDeviceOptions{.precision = GetParam()}};
  Device& device = cpu;
  std::vector<float> x = random_values(N * C, 31), bias = random_values(OC, 33),
                     dout = random_values(N * OC, 34);
  std::vector<uint16_t> w = bf16_bits(random_values(OC * C, 32));

  // matmul_forward, then matmul_backward into fp32 gradients that start non-zero, with operands
  // (inp, weight) and with (want_inp, want_weight): the same bits each. Returns the forward's out.
  std::vector<float> expect_same_matmul(Matrix inp, Matrix weight, Matrix want_inp,
                                        Matrix want_weight) {
    std::vector<float> out(N * OC), want(N * OC);
    device.matmul_forward(out.data(), inp, weight, bias.data(), N, C, OC);
    device.matmul_forward(want.data(), want_inp, want_weight, bias.data(), N, C, OC);
    EXPECT_EQ(out, want);
    std::vector<float> dx(N * C, 0.5f), dw(OC * C, -0.25f), db(OC, 1.0f);
    std::vector<float> want_dx = dx, want_dw = dw, want_db = db;
    device.matmul_backward(dx.data(), dw.data(), db.data(), dout.data(), inp, weight, N, C, OC);
    device.matmul_backward(want_dx.data(), want_dw.data(), want_db.data(), dout.data(), want_inp,
                           want_weight, N, C, OC);
    EXPECT_EQ(dx, want_dx);
    EXPECT_EQ(dw, want_dw);
    EXPECT_EQ(db, want_db);
    return want;
  }
};

TEST_P(CpuDeviceBf16Weights, MatmulReadsTheStoredWeightAsItsWidenedValues) {
  const std::vector<float> w_fp32 = widened(w);
  const std::vector<float> want = expect_same_matmul(x.data(), w.data(), x.data(), w_fp32.data());
  std::vector<float> out(N * OC);
  // And the products are of the stored values: a different weight gives a different output.
  std::vector<uint16_t> other = w;
  other[0] ^= 0x4000;
  device.matmul_forward(out.data(), x.data(), other.data(), bias.data(), N, C, OC);
  EXPECT_NE(out, want);
  EXPECT_TRUE(device.status().is_ok());
  // The widened weight is workspace the device keeps (its A operand), as the rounded ones are.
  EXPECT_GE(device.allocator().current_bytes(memory::Category::kWorkspace),
            sizeof(float) * OC * C);
}

// A bf16 weight gradient takes the fp32 product added with one rounding: accumulate_bf16 of
// what the fp32 gradient would have received, bit for bit.
TEST_P(CpuDeviceBf16Weights, WeightGradientIntoBf16IsTheFp32ProductRoundedOnce) {
  const std::vector<float> w_fp32 = widened(w);
  std::vector<uint16_t> dw = bf16_bits(random_values(OC * C, 37));
  std::vector<uint16_t> want_dw = dw;
  std::vector<float> dx(N * C, 0.5f), db(OC, 1.0f), product(OC * C, 0.0f);
  std::vector<float> want_dx = dx, want_db = db;
  device.matmul_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), N, C,
                         OC);
  device.matmul_backward(want_dx.data(), product.data(), want_db.data(), dout.data(), x.data(),
                         w_fp32.data(), N, C, OC);
  ops::accumulate_bf16(want_dw.data(), product.data(), OC * C);
  EXPECT_EQ(dw, want_dw);
  EXPECT_EQ(dx, want_dx);
  EXPECT_EQ(db, want_db);
  EXPECT_NE(dw, bf16_bits(random_values(OC * C, 37)));  // something was added
  EXPECT_TRUE(device.status().is_ok());
}

// An input activation stored in bf16 as well (the bf16 recipes): every matmul reads it as its
// widened values, bit for bit, whichever type the weight's gradient is.
TEST_P(CpuDeviceBf16Weights, Bf16InputsAreReadAsTheirWidenedValues) {
  const std::vector<uint16_t> x_bf16 = bf16_bits(x);
  const std::vector<float> x_fp32 = widened(x_bf16);
  expect_same_matmul(x_bf16.data(), w.data(), x_fp32.data(), w.data());
  std::vector<uint16_t> dw_bf16 = bf16_bits(random_values(OC * C, 38)), want_dw_bf16 = dw_bf16;
  device.matmul_backward(nullptr, dw_bf16.data(), nullptr, dout.data(), x_bf16.data(), w.data(), N,
                         C, OC);
  device.matmul_backward(nullptr, want_dw_bf16.data(), nullptr, dout.data(), x_fp32.data(),
                         w.data(), N, C, OC);
  EXPECT_EQ(dw_bf16, want_dw_bf16);
  EXPECT_TRUE(device.status().is_ok());
}

// Attention reads qkv and its probabilities as stored and writes a bf16 att itself: P rounded
// where the softmax computes it (what att keeps is what P V multiplies, in both precisions), and
// backward reads both as their widened values, bit for bit.
TEST_P(CpuDeviceBf16Weights, AttentionReadsAndWritesStoredBf16) {
  constexpr int64_t B = 2, T = 5, NH = 2, hs = 4, E = NH * hs;
  const std::vector<uint16_t> qkv = bf16_bits(random_values(B * T * 3 * E, 39));
  const auto dy = random_values(B * T * E, 40);
  std::vector<float> out(B * T * E), want_out(out.size()), want_att(B * NH * T * T);
  std::vector<uint16_t> att(want_att.size());
  device.attention_forward(out.data(), att.data(), qkv.data(), B, T, NH, hs);
  ops::attention_forward(want_out.data(), want_att.data(), widened(qkv).data(), B, T, NH, hs, true);
  EXPECT_EQ(out, want_out);
  EXPECT_EQ(att, bf16_bits(want_att));
  std::vector<float> dqkv(3 * out.size(), 0.5f), want_dqkv = dqkv;
  device.attention_backward(dqkv.data(), dy.data(), qkv.data(), att.data(), B, T, NH, hs);
  device.attention_backward(want_dqkv.data(), dy.data(), widened(qkv).data(), widened(att).data(),
                            B, T, NH, hs);
  EXPECT_EQ(dqkv, want_dqkv);
  EXPECT_TRUE(device.status().is_ok());
}

TEST_P(CpuDeviceBf16Weights, EmbeddingReadsStoredTablesAsTheirWidenedValues) {
  constexpr int64_t B = 2, T = 3, V = 5, E = 4;
  const std::vector<int32_t> tokens = {0, 4, 2, 1, 4, 3};
  const std::vector<uint16_t> wte = bf16_bits(random_values(V * E, 35)),
                              wpe = bf16_bits(random_values(T * E, 36));
  // Rows [1, 4) of wte: tokens 0 and 4 fall outside the shard and contribute zero.
  std::vector<float> out(B * T * E), want(B * T * E);
  device.embedding_forward_vocab_range(out.data(), tokens.data(), wte.data() + E, wpe.data(), B,
                                       T, E, 1, 4);
  ops::embedding_forward_vocab_range(want.data(), tokens.data(), widened(wte).data() + E,
                                     widened(wpe).data(), B, T, E, 1, 4);
  EXPECT_EQ(out, want);
  device.embedding_forward_vocab_range(out.data(), tokens.data(), wte.data(), nullptr, B, T, E, 0,
                                       V);
  ops::embedding_forward(want.data(), tokens.data(), widened(wte).data(), nullptr, B, T, E);
  EXPECT_EQ(out, want);
  // Tables of two types are refused, not read with the position table left out.
  EXPECT_TRUE(device.status().is_ok());
  const std::vector<float> out_before = out;
  device.embedding_forward_vocab_range(out.data(), tokens.data(), wte.data(), widened(wpe).data(),
                                       B, T, E, 0, V);
  EXPECT_EQ(out, out_before);
  EXPECT_THAT(
      device.status().message(),
      ::testing::HasSubstr("wte is stored in bf16 and wpe in fp32; store both in one type"));
}

std::string precision_name(const ::testing::TestParamInfo<GemmPrecision>& precision) {
  return precision.param == GemmPrecision::kBf16 ? "Bf16Gemms" : "Fp32Gemms";
}

INSTANTIATE_TEST_SUITE_P(Precisions, CpuDeviceBf16Weights,
                         ::testing::Values(GemmPrecision::kFp32, GemmPrecision::kBf16),
                         precision_name);

}  // namespace
}  // namespace partrain::runner
