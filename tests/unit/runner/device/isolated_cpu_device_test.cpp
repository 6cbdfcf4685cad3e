#include "runner/device/isolated_cpu_device.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "runner/device/cpu_device.h"
#include "tests/unit/runner/ops/gradient_check.h"

namespace partrain::runner {
namespace {

using memory::Category;
using ops::testing::random_values;
using ::testing::HasSubstr;

class IsolatedCpuDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto created = IsolatedCpuDevice::create();
    ASSERT_TRUE(created.is_ok()) << created.status().message();
    device = std::move(*created);
  }
  // A device buffer holding `values`.
  TrackedBuffer upload(const std::vector<float>& values) {
    auto buffer = device->allocator().allocate(values.size() * sizeof(float), Category::kOther);
    EXPECT_TRUE(buffer.is_ok());
    device->upload(buffer->data(), values.data(), values.size() * sizeof(float));
    return std::move(*buffer);
  }
  std::vector<float> download(const TrackedBuffer& buffer) {
    std::vector<float> values(buffer.bytes() / sizeof(float));
    device->download(values.data(), buffer.data(), buffer.bytes());
    return values;
  }
  static float* f(const TrackedBuffer& buffer) { return static_cast<float*>(buffer.data()); }

  std::unique_ptr<IsolatedCpuDevice> device;
};

TEST_F(IsolatedCpuDeviceTest, NamesItselfAndItsMemory) {
  EXPECT_EQ(device->name(), "cpu-isolated (OpenBLAS, 1 thread)");
  EXPECT_EQ(device->allocator().memory_name(), "cpu-isolated");
  EXPECT_FALSE(device->host_addressable());
  EXPECT_TRUE(CpuDevice().host_addressable());
}

// The same arithmetic as the CPU device, bit for bit: a layer's forward and backward through
// device buffers gives exactly the host buffers' results.
TEST_F(IsolatedCpuDeviceTest, ComputesExactlyWhatTheCpuDeviceComputes) {
  constexpr int64_t N = 6, C = 8, OC = 12;
  const auto x = random_values(N * C, 1), w = random_values(OC * C, 2), b = random_values(OC, 3);
  const auto dout = random_values(N * OC, 4);
  CpuDevice cpu;
  std::vector<float> out(N * OC), dx(N * C, 0.0f), dw(OC * C, 0.0f), db(OC, 0.0f);
  std::vector<float> ln(N * OC), mean(N), rstd(N), g(OC, 1.0f), beta(OC, 0.0f);
  cpu.matmul_forward(out.data(), x.data(), w.data(), b.data(), N, C, OC);
  cpu.layernorm_forward(ln.data(), mean.data(), rstd.data(), out.data(), g.data(), beta.data(), N,
                        OC);
  cpu.matmul_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), N, C, OC);
  const double squares = cpu.sum_of_squares(ln.data(), N * OC);

  TrackedBuffer dx_d = upload(std::vector<float>(N * C, 0.0f));
  TrackedBuffer dw_d = upload(std::vector<float>(OC * C, 0.0f));
  TrackedBuffer db_d = upload(std::vector<float>(OC, 0.0f));
  TrackedBuffer x_d = upload(x), w_d = upload(w), b_d = upload(b), dout_d = upload(dout);
  TrackedBuffer out_d = upload(std::vector<float>(N * OC));
  TrackedBuffer ln_d = upload(std::vector<float>(N * OC));
  TrackedBuffer mean_d = upload(std::vector<float>(N)), rstd_d = upload(std::vector<float>(N));
  TrackedBuffer g_d = upload(g), beta_d = upload(beta);
  device->matmul_forward(f(out_d), f(x_d), f(w_d), f(b_d), N, C, OC);
  device->layernorm_forward(f(ln_d), f(mean_d), f(rstd_d), f(out_d), f(g_d), f(beta_d), N, OC);
  device->matmul_backward(f(dx_d), f(dw_d), f(db_d), f(dout_d), f(x_d), f(w_d), N, C, OC);
  EXPECT_EQ(device->sum_of_squares(f(ln_d), N * OC), squares);
  ASSERT_TRUE(device->status().is_ok()) << device->status().message();
  EXPECT_EQ(download(out_d), out);
  EXPECT_EQ(download(ln_d), ln);
  EXPECT_EQ(download(dx_d), dx);
  EXPECT_EQ(download(dw_d), dw);
  EXPECT_EQ(download(db_d), db);
  EXPECT_GT(device->gemm_totals().flops, 0.0);
}

// A host pointer where device memory belongs fails the device, naming the op and the argument,
// and nothing runs from then on: host values are NaN, as on a failed CUDA device.
TEST_F(IsolatedCpuDeviceTest, AHostPointerFailsTheOpAndEveryOpAfterIt) {
  TrackedBuffer x = upload({1, 2, 3, 4});
  std::vector<float> host = {5, 6, 7, 8};
  device->residual_forward(f(x), f(x), host.data(), 4);
  ASSERT_FALSE(device->status().is_ok());
  EXPECT_THAT(device->status().message(),
              HasSubstr("residual_forward: its argument b (0x"));
  EXPECT_THAT(device->status().message(), HasSubstr("a host pointer"));
  EXPECT_TRUE(std::isnan(device->sum_of_squares(f(x), 4)));
  device->fill(f(x), 4, 0.0f);  // skipped
  const std::string first = device->status().message();
  EXPECT_THAT(first, HasSubstr("residual_forward"));  // the first failure is the one kept
}

TEST_F(IsolatedCpuDeviceTest, ARangePastItsBufferFails) {
  TrackedBuffer x = upload(std::vector<float>(64, 1.0f));  // 256 bytes: exactly one unit
  device->scale(f(x), 64, 2.0f);
  ASSERT_TRUE(device->status().is_ok());
  device->scale(f(x) + 1, 64, 2.0f);
  ASSERT_FALSE(device->status().is_ok());
  EXPECT_THAT(device->status().message(),
              HasSubstr("scale: its argument x"));
  EXPECT_THAT(device->status().message(), HasSubstr("past a buffer's end"));
}

// bf16 storage: two bytes an element, checked as such.
TEST_F(IsolatedCpuDeviceTest, Bf16StorageIsCheckedInTwoByteElements) {
  const std::vector<float> values = random_values(128, 3);
  TrackedBuffer x = upload(values);
  TrackedBuffer half = upload(std::vector<float>(64, 0.0f));  // 256 bytes: 128 bf16 values
  auto* stored = static_cast<uint16_t*>(half.data());
  device->to_bf16(stored, f(x), 128);
  TrackedBuffer back = upload(std::vector<float>(256, 0.0f));
  device->from_bf16(f(back), stored, 128);
  ASSERT_TRUE(device->status().is_ok()) << device->status().message();
  CpuDevice cpu;
  std::vector<uint16_t> want_bits(128);
  std::vector<float> want(128);
  cpu.to_bf16(want_bits.data(), values.data(), 128);
  cpu.from_bf16(want.data(), want_bits.data(), 128);
  std::vector<float> widened = download(back);
  widened.resize(128);
  EXPECT_EQ(widened, want);
  // store_bf16: the bits and the rounded values in one op, as the CPU's.
  TrackedBuffer kept = upload(std::vector<float>(64, 0.0f));
  device->store_bf16(static_cast<uint16_t*>(kept.data()), f(x), 128);
  ASSERT_TRUE(device->status().is_ok()) << device->status().message();
  EXPECT_EQ(download(x), want);
  EXPECT_EQ(download(kept), download(half));
  TrackedBuffer copy = upload(std::vector<float>(32, 0.0f));  // room for 64 bf16 values
  auto* copied = static_cast<uint16_t*>(copy.data());
  device->copy_bf16(copied, stored, 64);
  ASSERT_TRUE(device->status().is_ok()) << device->status().message();
  std::vector<float> copied_words = download(copy);
  EXPECT_EQ(std::memcmp(copied_words.data(), want_bits.data(), 64 * sizeof(uint16_t)), 0);
  // Past the destination's block (blocks are 256-byte aligned: 128 bf16 values), checked first.
  device->copy_bf16(copied, stored, 129);
  ASSERT_FALSE(device->status().is_ok());
  EXPECT_THAT(device->status().message(), HasSubstr("copy_bf16: its argument destination"));
}

// The optimizer and the norm read bf16 gradients in 2-byte elements: bit-identical to the CPU
// device, and a range past the gradients' block is named.
TEST_F(IsolatedCpuDeviceTest, Bf16GradientsAreReadInTwoByteElements) {
  const std::vector<float> grads = random_values(128, 4);
  CpuDevice cpu;
  std::vector<uint16_t> bits(128);
  cpu.to_bf16(bits.data(), grads.data(), 128);
  TrackedBuffer stored = upload(std::vector<float>(64, 0.0f));  // 128 bf16 values
  auto* g = static_cast<uint16_t*>(stored.data());
  device->upload(g, bits.data(), bits.size() * sizeof(uint16_t));
  std::vector<float> params = random_values(128, 5), m(128, 0.0f), v(128, 0.0f);
  TrackedBuffer p = upload(params), m_d = upload(m), v_d = upload(v);
  const ops::AdamWConfig config{.learning_rate = 1e-2f};
  device->adamw_update(f(p), g, f(m_d), f(v_d), 128, config, 1, nullptr);
  cpu.adamw_update(params.data(), bits.data(), m.data(), v.data(), 128, config, 1, nullptr);
  EXPECT_EQ(device->sum_of_squares(g, 128), cpu.sum_of_squares(bits.data(), 128));
  ASSERT_TRUE(device->status().is_ok()) << device->status().message();
  EXPECT_EQ(download(p), params);
  EXPECT_EQ(download(m_d), m);
  EXPECT_EQ(download(v_d), v);
  EXPECT_TRUE(std::isnan(device->sum_of_squares(g, 129)));
  EXPECT_THAT(device->status().message(), HasSubstr("sum_of_squares: its argument x"));
}

// The matmul and embedding ops read bf16 weights and tables in 2-byte elements: bit-identical to
// the CPU device, and a weight one element short of its (OC, C) is named.
TEST_F(IsolatedCpuDeviceTest, Bf16WeightsAreReadInTwoByteElements) {
  constexpr int64_t N = 3, C = 64, OC = 4;  // the weight's 512 bytes: a whole number of blocks
  CpuDevice cpu;
  const std::vector<float> x = random_values(N * C, 6), dout = random_values(N * OC, 7);
  std::vector<uint16_t> bits(OC * C);
  cpu.to_bf16(bits.data(), random_values(OC * C, 8).data(), OC * C);
  TrackedBuffer stored = upload(std::vector<float>(OC * C / 2, 0.0f));  // OC x C bf16 values
  auto* w = static_cast<uint16_t*>(stored.data());
  device->upload(w, bits.data(), bits.size() * sizeof(uint16_t));
  TrackedBuffer x_d = upload(x), dout_d = upload(dout);
  TrackedBuffer out = upload(std::vector<float>(N * OC, 0.0f));
  TrackedBuffer dx = upload(std::vector<float>(N * C, 0.0f));
  std::vector<float> want_out(N * OC), want_dx(N * C, 0.0f);
  device->matmul_forward(f(out), f(x_d), w, nullptr, N, C, OC);
  cpu.matmul_forward(want_out.data(), x.data(), bits.data(), nullptr, N, C, OC);
  device->matmul_backward(f(dx), nullptr, nullptr, f(dout_d), f(x_d), w, N, C, OC);
  cpu.matmul_backward(want_dx.data(), nullptr, nullptr, dout.data(), x.data(), bits.data(), N, C,
                      OC);
  // Its gradient in bf16 too: added into in place, as the CPU device does.
  TrackedBuffer dw_d = upload(std::vector<float>(OC * C / 2, 0.0f));
  auto* dw = static_cast<uint16_t*>(dw_d.data());
  std::vector<uint16_t> want_dw(OC * C, 0);
  device->matmul_backward(nullptr, dw, nullptr, f(dout_d), f(x_d), w, N, C, OC);
  cpu.matmul_backward(nullptr, want_dw.data(), nullptr, dout.data(), x.data(), bits.data(), N, C,
                      OC);
  const std::vector<int32_t> tokens = {1, 0, 3};
  TrackedBuffer tokens_d = upload(std::vector<float>(3, 0.0f));
  device->upload(tokens_d.data(), tokens.data(), tokens.size() * sizeof(int32_t));
  TrackedBuffer rows = upload(std::vector<float>(3 * C, 0.0f));
  std::vector<float> want_rows(3 * C);
  device->embedding_forward_vocab_range(f(rows), static_cast<int32_t*>(tokens_d.data()), w,
                                        nullptr, 1, 3, C, 0, OC);
  cpu.embedding_forward_vocab_range(want_rows.data(), tokens.data(), bits.data(), nullptr, 1, 3,
                                    C, 0, OC);
  ASSERT_TRUE(device->status().is_ok()) << device->status().message();
  EXPECT_EQ(download(out), want_out);
  EXPECT_EQ(download(dx), want_dx);
  EXPECT_EQ(download(rows), want_rows);
  std::vector<uint16_t> got_dw(OC * C);
  device->download(got_dw.data(), dw, got_dw.size() * sizeof(uint16_t));
  EXPECT_EQ(got_dw, want_dw);
  // A bf16 input: read in 2-byte elements as well (the first N x C values of the weight's block).
  device->matmul_forward(f(out), w, w, nullptr, N, C, OC);
  cpu.matmul_forward(want_out.data(), bits.data(), bits.data(), nullptr, N, C, OC);
  ASSERT_TRUE(device->status().is_ok()) << device->status().message();
  EXPECT_EQ(download(out), want_out);
  device->matmul_forward(f(out), f(x_d), w, nullptr, 2, C + 1, OC);  // OC x (C + 1) > stored
  EXPECT_THAT(device->status().message(), HasSubstr("matmul_forward: its argument weight"));
}

TEST_F(IsolatedCpuDeviceTest, Bf16AttentionIsReadAndWrittenInTwoByteElements) {
  // qkv (16 x 96) and att (2 x 16 x 16) in bf16: 3072 and 1024 bytes, whole blocks.
  constexpr int64_t B = 1, T = 16, NH = 2, hs = 16, C = NH * hs;
  CpuDevice cpu;
  std::vector<uint16_t> qkv(B * T * 3 * C);
  cpu.to_bf16(qkv.data(), random_values(qkv.size(), 9).data(), static_cast<int64_t>(qkv.size()));
  const std::vector<float> dout = random_values(B * T * C, 10);
  TrackedBuffer qkv_d = upload(std::vector<float>(qkv.size() / 2, 0.0f));
  device->upload(qkv_d.data(), qkv.data(), qkv.size() * sizeof(uint16_t));
  TrackedBuffer att_d = upload(std::vector<float>(B * NH * T * T / 2, 0.0f));
  TrackedBuffer out = upload(std::vector<float>(B * T * C, 0.0f)), dout_d = upload(dout);
  TrackedBuffer dqkv = upload(std::vector<float>(qkv.size(), 0.0f));
  auto* q = static_cast<uint16_t*>(qkv_d.data());
  auto* att = static_cast<uint16_t*>(att_d.data());
  device->attention_forward(f(out), att, q, B, T, NH, hs);
  device->attention_backward(f(dqkv), f(dout_d), q, att, B, T, NH, hs);
  std::vector<float> want_out(B * T * C), want_dqkv(qkv.size(), 0.0f);
  std::vector<uint16_t> want_att(B * NH * T * T);
  cpu.attention_forward(want_out.data(), want_att.data(), qkv.data(), B, T, NH, hs);
  cpu.attention_backward(want_dqkv.data(), dout.data(), qkv.data(), want_att.data(), B, T, NH, hs);
  ASSERT_TRUE(device->status().is_ok()) << device->status().message();
  EXPECT_EQ(download(out), want_out);
  EXPECT_EQ(download(dqkv), want_dqkv);
  std::vector<uint16_t> got_att(want_att.size());
  device->download(got_att.data(), att, got_att.size() * sizeof(uint16_t));
  EXPECT_EQ(got_att, want_att);
  // Probabilities for twice the heads do not fit the buffer.
  device->attention_forward(f(out), att, q, B, T, 2 * NH, hs / 2);
  EXPECT_THAT(device->status().message(), HasSubstr("attention_forward: its argument att"));
}

TEST_F(IsolatedCpuDeviceTest, Bf16SourceOverrunIsNamed) {
  TrackedBuffer half = upload(std::vector<float>(64, 0.0f));  // 128 bf16 values
  TrackedBuffer back = upload(std::vector<float>(256, 0.0f));
  device->from_bf16(f(back), static_cast<uint16_t*>(half.data()), 129);
  ASSERT_FALSE(device->status().is_ok());
  EXPECT_THAT(device->status().message(), HasSubstr("from_bf16: its argument source"));
}

TEST_F(IsolatedCpuDeviceTest, AFreedBufferFails) {
  TrackedBuffer x = upload({1, 2});
  float* stale = f(x);
  x.reset();
  device->fill(stale, 2, 0.0f);
  ASSERT_FALSE(device->status().is_ok());
  EXPECT_THAT(device->status().message(), HasSubstr("a freed buffer"));
}

TEST_F(IsolatedCpuDeviceTest, CopiesCheckWhichSideIsTheHost) {
  TrackedBuffer x = upload({1, 2});
  TrackedBuffer y = upload({3, 4});
  EXPECT_EQ(download(y), (std::vector<float>{3, 4}));
  device->copy(f(y), f(x), 2);
  EXPECT_EQ(download(y), (std::vector<float>{1, 2}));
  ASSERT_TRUE(device->status().is_ok());
  device->upload(x.data(), y.data(), 8);  // device to device is copy()'s job
  ASSERT_FALSE(device->status().is_ok());
  EXPECT_THAT(device->status().message(),
              HasSubstr("upload: its host source 0x"));
}

TEST_F(IsolatedCpuDeviceTest, ReportsItsMemoryAndKeepsTheCategoriesExact) {
  auto before = device->memory_info();
  ASSERT_TRUE(before.is_ok());
  auto buffer = device->allocator().allocate(1000, Category::kActivations);
  ASSERT_TRUE(buffer.is_ok());
  auto after = device->memory_info();
  ASSERT_TRUE(after.is_ok());
  EXPECT_EQ(after->total_bytes, before->total_bytes);
  EXPECT_EQ(before->free_bytes - after->free_bytes, 1024u);  // 256-byte units, as cudaMalloc
  EXPECT_EQ(device->allocator().current_bytes(Category::kActivations), 1000u);
}

TEST_F(IsolatedCpuDeviceTest, PeakGemmIsTheCpuSgemmOnItsOwnMemory) {
  auto peak = device->measure_peak_gemm();
  ASSERT_TRUE(peak.is_ok()) << peak.status().message();
  EXPECT_GT(peak->gflops, 0.0);
  EXPECT_EQ(peak->source, "measured sgemm, 512^3");
  EXPECT_EQ(device->allocator().stats().total_peak, 0u);
}

}  // namespace
}  // namespace partrain::runner
