#include "runner/device/gemm_benchmark.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <limits>
#include <new>
#include <optional>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "runner/ops/bf16_round.h"

namespace partrain::runner {
namespace {

// Operands from a seed: splitmix64 (fast enough for 8192^2 values, and the same on every host).
class UniformValues {
 public:
  explicit UniformValues(uint64_t seed) : state_(seed) {}
  float next() {  // [-1, 1)
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return static_cast<float>(static_cast<double>(z >> 40) / static_cast<double>(1ULL << 23) - 1.0);
  }

 private:
  uint64_t state_;
};

// One operand: its values as stored (bf16 values widened), and the device buffer holding them.
struct Operand {
  std::vector<float> values;
  TrackedBuffer buffer;
};

StatusOr<Operand> make_operand(Device& device, int64_t count, bool bf16, UniformValues& random) {
  Operand operand;
  const size_t element_bytes = bf16 ? sizeof(uint16_t) : sizeof(float);
  ASSIGN_OR_RETURN(operand.buffer,
                   device.allocator().allocate(static_cast<size_t>(count) * element_bytes,
                                               memory::Category::kWorkspace));
  try {
    operand.values.resize(static_cast<size_t>(count));
  } catch (const std::bad_alloc&) {
    return failed(
        "the host copy of a {}-element operand ({:.1f} GiB) does not fit in "
        "host memory: benchmark a smaller shape",
        count, static_cast<double>(count) * sizeof(float) / (1ULL << 30));
  }
  for (float& value : operand.values) value = random.next();
  if (bf16) {
    std::vector<uint16_t> bits(operand.values.size());
    ops::to_bf16(bits.data(), operand.values.data(), count);
    ops::from_bf16(operand.values.data(), bits.data(), count);  // the values the device reads
    device.upload(operand.buffer.data(), bits.data(), bits.size() * sizeof(uint16_t));
  } else {
    device.upload(operand.buffer.data(), operand.values.data(),
                  operand.values.size() * sizeof(float));
  }
  return operand;
}

Matrix stored(const Operand& operand, bool bf16) {
  if (bf16) return Matrix(static_cast<const uint16_t*>(operand.buffer.data()));
  return Matrix(static_cast<const float*>(operand.buffer.data()));
}

// Parses a positive dimension; nullopt when `text` is not one.
std::optional<int64_t> parse_dimension(std::string_view text) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value <= 0) return std::nullopt;
  return value;
}

// Sizes and iterations that can run: positive, each dimension a 32-bit int (BLAS and cuBLAS take
// int), each operand within 2^40 elements (4 TiB of fp32, past any device), so byte counts
// cannot overflow.
Status check_options(const GemmBenchOptions& options) {
  const GemmShape& shape = options.shape;
  if (shape.m <= 0 || shape.n <= 0 || shape.k <= 0 || options.iters <= 0 ||
      options.warmup_iters < 0 || options.check_samples < 0) {
    return invalid_argument(
        "GEMM benchmark of {}x{}x{}, {} warm-up and {} timed iterations, {} "
        "checked entries: sizes and iterations must be positive",
        shape.m, shape.n, shape.k, options.warmup_iters, options.iters, options.check_samples);
  }
  constexpr double kMaxElements = 1099511627776.0;
  const double m = static_cast<double>(shape.m), n = static_cast<double>(shape.n),
               k = static_cast<double>(shape.k);
  if (std::max({shape.m, shape.n, shape.k}) > std::numeric_limits<int32_t>::max()) {
    return invalid_argument(
        "GEMM shape {}x{}x{}: BLAS and cuBLAS take each dimension as a 32-bit "
        "int (at most 2147483647)",
        shape.m, shape.n, shape.k);
  }
  if (m * k > kMaxElements || n * k > kMaxElements || m * n > kMaxElements) {
    return invalid_argument(
        "GEMM shape {}x{}x{} has an operand past 2^40 elements: benchmark a "
        "smaller shape",
        shape.m, shape.n, shape.k);
  }
  return Status::ok();
}

// The benchmark's buffers on the device: the operands with their host values, and the output.
struct GemmOperands {
  Operand inp;
  Operand weight;
  std::optional<Operand> bias;
  TrackedBuffer out;
  bool bf16 = false;

  const float* bias_data() const {
    return bias ? static_cast<const float*>(bias->buffer.data()) : nullptr;
  }
  MutableMatrix out_matrix() {
    return bf16 ? MutableMatrix(static_cast<uint16_t*>(out.data()))
                : MutableMatrix(static_cast<float*>(out.data()));
  }
  // Output entry `index` as the device stored it, widened to fp32.
  float output(Device& device, int64_t index) const {
    float value = 0;
    if (bf16) {
      uint16_t bits = 0;
      device.download(&bits, static_cast<const uint16_t*>(out.data()) + index, sizeof(bits));
      ops::from_bf16(&value, &bits, 1);
    } else {
      device.download(&value, static_cast<const float*>(out.data()) + index, sizeof(value));
    }
    return value;
  }
};

StatusOr<GemmOperands> make_operands(Device& device, const GemmBenchOptions& options,
                                     UniformValues& random) {
  const GemmShape& shape = options.shape;
  GemmOperands operands;
  operands.bf16 = options.bf16;
  ASSIGN_OR_RETURN(operands.inp, make_operand(device, shape.m * shape.k, options.bf16, random));
  ASSIGN_OR_RETURN(operands.weight, make_operand(device, shape.n * shape.k, options.bf16, random));
  if (options.bias) {
    ASSIGN_OR_RETURN(operands.bias, make_operand(device, shape.n, /*bf16=*/false, random));
  }
  const size_t out_element_bytes = options.bf16 ? sizeof(uint16_t) : sizeof(float);
  ASSIGN_OR_RETURN(
      operands.out,
      device.allocator().allocate(static_cast<size_t>(shape.m * shape.n) * out_element_bytes,
                                  memory::Category::kWorkspace));
  return operands;
}

// Wall time of `iters` back-to-back GEMMs after `warmup` (cuBLAS heuristics, clocks, caches),
// synchronized; at least 1 ns.
StatusOr<int64_t> time_gemms(Device& device, const std::function<void()>& gemm, int warmup,
                             int iters) {
  for (int i = 0; i < warmup; ++i) gemm();
  device.synchronize();
  RETURN_IF_ERROR(device.status());
  const int64_t start = monotonic_ns();
  for (int i = 0; i < iters; ++i) gemm();
  device.synchronize();
  const int64_t elapsed_ns = std::max<int64_t>(monotonic_ns() - start, 1);
  RETURN_IF_ERROR(device.status());
  return elapsed_ns;
}

// Compares `samples` output entries with the double-precision reference (run_gemm_bench's
// tolerance): the first and the last entry (edge tiles are where indexing goes wrong), then
// entries drawn from `random`. Fills the result's checked, wrong and max_error.
void check_samples(Device& device, const GemmShape& shape, const GemmOperands& operands,
                   int samples, UniformValues& random, GemmBenchResult& result) {
  auto draw = [&](int64_t bound) {
    return std::min(bound - 1, static_cast<int64_t>((random.next() + 1.0f) / 2.0f *
                                                      static_cast<float>(bound)));
  };
  const double output_rounding = operands.bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -22);
  const double accumulation = static_cast<double>(shape.k + 2) * std::ldexp(1.0, -23);
  for (int s = 0; s < samples; ++s) {
    int64_t row = 0;
    int64_t column = 0;
    if (s == 1) {
      row = shape.m - 1;
      column = shape.n - 1;
    } else if (s >= 2) {
      row = draw(shape.m);
      column = draw(shape.n);
    }
    double reference = operands.bias ? operands.bias->values[static_cast<size_t>(column)] : 0.0;
    double magnitude = std::fabs(reference);
    for (int64_t i = 0; i < shape.k; ++i) {
      const double term =
          static_cast<double>(operands.inp.values[static_cast<size_t>(row * shape.k + i)]) *
          operands.weight.values[static_cast<size_t>(column * shape.k + i)];
      reference += term;
      magnitude += std::fabs(term);
    }
    const float got = operands.output(device, row * shape.n + column);
    const double tolerance = output_rounding * std::fabs(reference) + accumulation * magnitude;
    const double error = std::fabs(static_cast<double>(got) - reference);
    // NaN compares false: counted wrong by the negation.
    if (!(error <= tolerance)) ++result.wrong;
    result.max_error =
        std::max(result.max_error, std::isfinite(error) ? error / std::max(tolerance, 1e-300)
                                                        : std::numeric_limits<double>::infinity());
    ++result.checked;
  }
}

}  // namespace

StatusOr<GemmShape> parse_gemm_shape(const std::string& text) {
  std::vector<int64_t> dims;
  size_t begin = 0;
  while (true) {
    const size_t end = text.find('x', begin);
    const std::optional<int64_t> dim =
        parse_dimension(std::string_view(text).substr(begin, end - begin));
    if (!dim) {
      return invalid_argument(
          "GEMM shape '{}' is not a positive size (8192, a cube) or MxNxK "
          "(4096x16384x4096: out M x N, inner dimension K)",
          text);
    }
    dims.push_back(*dim);
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  if (dims.size() == 1) return GemmShape{dims[0], dims[0], dims[0]};
  if (dims.size() == 3) return GemmShape{dims[0], dims[1], dims[2]};
  return invalid_argument(
      "GEMM shape '{}' has {} dimensions: give one (a cube, 8192) or three "
      "(MxNxK)",
      text, dims.size());
}

std::string format_gemm_shape(const GemmShape& shape) {
  if (shape.m == shape.n && shape.n == shape.k) return fmt::format("{}^3", shape.m);
  return fmt::format("{}x{}x{}", shape.m, shape.n, shape.k);
}

StatusOr<GemmBenchResult> run_gemm_bench(Device& device, const GemmBenchOptions& options) {
  RETURN_IF_ERROR(check_options(options));
  const GemmShape& shape = options.shape;
  UniformValues random(options.seed);
  ASSIGN_OR_RETURN(GemmOperands operands, make_operands(device, options, random));
  const MutableMatrix out = operands.out_matrix();
  const Matrix inp = stored(operands.inp, options.bf16);
  const Matrix weight = stored(operands.weight, options.bf16);
  const float* bias = operands.bias_data();
  auto gemm = [&] { device.matmul_forward(out, inp, weight, bias, shape.m, shape.k, shape.n); };
  ASSIGN_OR_RETURN(const int64_t elapsed_ns,
                   time_gemms(device, gemm, options.warmup_iters, options.iters));

  GemmBenchResult result;
  result.shape = shape;
  result.bf16 = options.bf16;
  result.bias = options.bias;
  result.iters = options.iters;
  result.mean_us = static_cast<double>(elapsed_ns) / 1e3 / options.iters;
  result.tflops = shape.flops() * options.iters / static_cast<double>(elapsed_ns) / 1e3;
  const int samples = static_cast<int>(std::min<int64_t>(options.check_samples, shape.m * shape.n));
  check_samples(device, shape, operands, samples, random, result);
  RETURN_IF_ERROR(device.status());
  return result;
}

}  // namespace partrain::runner
