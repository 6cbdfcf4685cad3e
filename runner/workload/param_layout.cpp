#include "runner/workload/param_layout.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/parallel_for.h"
#include "runner/workload/param_init.h"

namespace partrain::runner {
namespace {

// Values per thread, at least, when initialising a parameter (parallel_for).
constexpr int64_t kInitRange = int64_t{1} << 20;

int64_t product(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

}  // namespace

std::vector<int64_t> local_shape(const ParamSpec& spec, TpShard tp) {
  std::vector<int64_t> shape = spec.shape;
  switch (spec.split) {
    case TpSplit::kReplicated: break;
    case TpSplit::kColumn:
    case TpSplit::kQkv: shape[0] /= tp.size; break;
    case TpSplit::kRow: shape[1] /= tp.size; break;
  }
  return shape;
}

int64_t global_index(const ParamSpec& spec, TpShard tp, int64_t local_index) {
  const std::vector<int64_t> local = local_shape(spec, tp);
  const int64_t cols = local.size() > 1 ? local[1] : 1;
  const int64_t row = local_index / cols;
  const int64_t col = local_index % cols;
  switch (spec.split) {
    case TpSplit::kReplicated: return local_index;
    case TpSplit::kColumn: return (tp.rank * local[0] + row) * cols + col;
    case TpSplit::kRow: return row * spec.shape[1] + tp.rank * local[1] + col;
    case TpSplit::kQkv: {
      // Local rows are [Q heads | K heads | V heads] of this rank; each block is C / tp rows of
      // the global block b (rows [b C, (b + 1) C)).
      const int64_t block_rows = local[0] / 3;
      const int64_t block = row / block_rows;
      const int64_t global_row = block * spec.shape[0] / 3 + tp.rank * block_rows + row % block_rows;
      return global_row * cols + col;
    }
  }
  return local_index;
}

void ParamLayout::add_unit(std::string name, int chunk, const std::vector<ParamSpec>& specs,
                           TpShard tp) {
  ParamUnit unit;
  unit.name = std::move(name);
  unit.chunk = chunk;
  unit.offset = numel_;
  for (const ParamSpec& spec : specs) {
    LocalParam param;
    param.spec = spec;
    param.local_shape = local_shape(spec, tp);
    param.numel = product(param.local_shape);
    param.offset = numel_;
    numel_ += param.numel;
    unit.params.push_back(std::move(param));
  }
  unit.numel = numel_ - unit.offset;
  units_.push_back(std::move(unit));
}

const LocalParam* ParamLayout::find(const std::string& name) const {
  for (const ParamUnit& unit : units_) {
    for (const LocalParam& param : unit.params) {
      if (param.spec.name == name) return &param;
    }
  }
  return nullptr;
}

size_t ParamLayout::unit_of(const std::string& name) const {
  for (size_t i = 0; i < units_.size(); ++i) {
    for (const LocalParam& param : units_[i].params) {
      if (param.spec.name == name) return i;
    }
  }
  return units_.size();
}

std::vector<float> ParamLayout::unit_initial_values(size_t index, uint64_t seed, int layers,
                                                    TpShard tp) const {
  // GPT-2's initialisation: N(0, 0.02), residual projections scaled by 1/sqrt(2 L) (Radford et
  // al. 2019, sec. 2.3), norms at 1, biases at 0.
  const float residual_std = 0.02f / std::sqrt(2.0f * static_cast<float>(layers));
  const ParamUnit& unit = units_[index];
  std::vector<float> values(static_cast<size_t>(unit.numel));
  for (const LocalParam& param : unit.params) {
    float* out = values.data() + (param.offset - unit.offset);
    switch (param.spec.init) {
      case InitKind::kOnes: std::fill_n(out, param.numel, 1.0f); break;
      case InitKind::kZeros: std::fill_n(out, param.numel, 0.0f); break;
      case InitKind::kNormal:
      case InitKind::kResidualNormal:
      case InitKind::kFanIn: {
        const float std = param.spec.init == InitKind::kNormal ? 0.02f
                          : param.spec.init == InitKind::kResidualNormal
                              ? residual_std
                              : std::sqrt(2.0f / static_cast<float>(param.spec.shape.back()));
        // Each value a function of its global index alone: the split cannot change it, and a
        // billion-parameter model is initialised on every core rather than one.
        parallel_for(param.numel, kInitRange, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            auto g = static_cast<uint64_t>(global_index(param.spec, tp, i));
            out[i] = std * init_normal(seed, param.spec.id, g);
          }
        });
        break;
      }
    }
  }
  return values;
}

}  // namespace partrain::runner
