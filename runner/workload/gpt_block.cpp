#include "runner/workload/gpt_block.h"

namespace partrain::runner {

using memory::Category;

Status GptBlock::layernorm(const float* x, const float* weight, const float* bias, Tensor& out,
                           Tensor& mean, Tensor& rstd) {
  const int64_t n = tp_.local_tokens(shape_.B, shape_.T);
  ASSIGN_OR_RETURN(out, store_.create({n, shape_.C}));
  ASSIGN_OR_RETURN(mean, Tensor::create(device_.allocator(), {n}, Category::kActivations));
  ASSIGN_OR_RETURN(rstd, Tensor::create(device_.allocator(), {n}, Category::kActivations));
  ASSIGN_OR_RETURN(ActivationStore::Output values, store_.output(out));
  device_.layernorm_forward(values.data(), mean.data(), rstd.data(), x, weight, bias, n,
                            shape_.C);
  store_.keep(std::move(values), out);
  return Status::ok();
}

StatusOr<Matrix> GptBlock::region_operand(const Tensor& saved, Tensor& gathered) {
  if (!tp_.sequence_parallel()) return ActivationStore::operand(saved);
  ASSIGN_OR_RETURN(const float* full, tp_.region_input(saved, gathered, shape_.B, shape_.T,
                                                       shape_.C));
  return Matrix(full);
}

StatusOr<Tensor> GptBlock::scratch(std::vector<int64_t> shape) {
  ASSIGN_OR_RETURN(Tensor t, Tensor::create(device_.allocator(), std::move(shape),
                                            Category::kWorkspace));
  device_.fill(t.data(), t.numel(), 0.0f);
  return t;
}

Status GptBlock::project_and_add(Matrix in, int64_t k, Matrix weight, const float* bias,
                                 const float* residual, ActivationStore::Output& values) {
  const auto& [B, T, C, NH, F, V] = shape_;
  ASSIGN_OR_RETURN(Tensor partial, scratch({B * T, C}));
  // Row-parallel outputs are partial sums over tp: only rank 0 adds the (replicated) bias.
  device_.matmul_forward(partial.data(), in, weight, tp_.rank() == 0 ? bias : nullptr, B * T, k, C);
  RETURN_IF_ERROR(tp_.exit_forward(partial.data(), values.data(), B, T, C));
  device_.residual_forward(values.data(), values.data(), residual, tp_.local_tokens(B, T) * C);
  return Status::ok();
}

// Each op writes what the block keeps through store_.output() and store_.store() (rounded there
// under bf16); the next op reads the stored values from the same buffer. What only the ops that
// read stored values (the GEMMs, attention, GeLU) or the next block read again goes through
// store_.keep() (no fp32 write-back), or is written as stored by its op (qkv and fc by their
// matmuls, fc_gelu by GeLU).
Status GptBlock::run_forward(const BlockWeights& w, const Tensor& x, BlockActivations& a) {
  const auto& [B, T, C, NH, F, V] = shape_;
  const int64_t tp = tp_.size();
  const int64_t N = B * T;                       // tokens inside tensor-parallel regions
  const int64_t n = tp_.local_tokens(B, T);      // tokens this rank holds outside them
  const int64_t c_local = C / tp;
  const int64_t f_local = F / tp;
  const int64_t heads_local = NH / tp;
  using Output = ActivationStore::Output;
  ASSIGN_OR_RETURN(ActivationStore::Input x_in, store_.input(x));

  RETURN_IF_ERROR(
      layernorm(x_in.data(), w.vector(kLn1W), w.vector(kLn1B), a.ln1, a.ln1_mean, a.ln1_rstd));
  // Under SP the gathered input is not kept: backward gathers it again (Korthikanti 2022,
  // sec. 4.2.2), so the saved activations stay sequence-sharded.
  Tensor gathered;
  ASSIGN_OR_RETURN(const Matrix ln1_full, region_operand(a.ln1, gathered));
  // The projections that only a GEMM-reading op reads again are written as stored.
  ASSIGN_OR_RETURN(a.qkv, store_.create({N, 3 * c_local}));
  device_.matmul_forward(ActivationStore::target(a.qkv), ln1_full, w.matrix(kQkvW), w.vector(kQkvB),
                         N, C, 3 * c_local);
  ASSIGN_OR_RETURN(a.att, store_.create({B, heads_local, T, T}));
  ASSIGN_OR_RETURN(a.atty, store_.create({N, c_local}));
  ASSIGN_OR_RETURN(a.x2, store_.create({n, C}));
  ASSIGN_OR_RETURN(Output x2, store_.output(a.x2));
  {
    ASSIGN_OR_RETURN(Output atty, store_.output(a.atty));
    device_.attention_forward(atty.data(), ActivationStore::target(a.att),
                              ActivationStore::operand(a.qkv), B, T, heads_local, C / NH);
    store_.keep(std::move(atty), a.atty);
    RETURN_IF_ERROR(project_and_add(ActivationStore::operand(a.atty), c_local, w.matrix(kAttProjW),
                                    w.vector(kAttProjB), x_in.data(), x2));
    store_.store(x2, a.x2);
  }
  x_in = ActivationStore::Input();

  RETURN_IF_ERROR(
      layernorm(x2.data(), w.vector(kLn2W), w.vector(kLn2B), a.ln2, a.ln2_mean, a.ln2_rstd));
  ASSIGN_OR_RETURN(const Matrix ln2_full, region_operand(a.ln2, gathered));
  if (w.moe()) return moe_forward(*w.moe(), ln2_full, x2.data(), a);
  ASSIGN_OR_RETURN(a.fc, store_.create({N, f_local}));
  device_.matmul_forward(ActivationStore::target(a.fc), ln2_full, w.matrix(kFcW), w.vector(kFcB), N,
                         C, f_local);
  gathered = Tensor();
  // GeLU reads fc and writes fc_gelu as stored: under bf16, no fp32 copy of either.
  ASSIGN_OR_RETURN(a.fc_gelu, store_.create({N, f_local}));
  device_.gelu_forward(ActivationStore::target(a.fc_gelu), ActivationStore::operand(a.fc),
                       N * f_local);
  if (a.out.numel() == 0) {
    ASSIGN_OR_RETURN(a.out, store_.create({n, C}));
  }
  ASSIGN_OR_RETURN(Output out, store_.output(a.out));
  RETURN_IF_ERROR(project_and_add(ActivationStore::operand(a.fc_gelu), f_local, w.matrix(kFcProjW),
                                  w.vector(kFcProjB), x2.data(), out));
  store_.keep(std::move(out), a.out);
  return Status::ok();
}

Status GptBlock::moe_forward(const MoeWeights& moe, Matrix ln2_full, const float* x2,
                             BlockActivations& a) {
  const auto& [B, T, C, NH, F, V] = shape_;
  ASSIGN_OR_RETURN(Tensor partial, scratch({B * T, C}));
  RETURN_IF_ERROR(moe_->forward(moe, ln2_full, B * T, partial.data(), a.moe));
  if (a.out.numel() == 0) {
    ASSIGN_OR_RETURN(a.out, store_.create({tp_.local_tokens(B, T), C}));
  }
  ASSIGN_OR_RETURN(ActivationStore::Output out, store_.output(a.out));
  RETURN_IF_ERROR(tp_.exit_forward(partial.data(), out.data(), B, T, C));
  device_.residual_forward(out.data(), out.data(), x2, tp_.local_tokens(B, T) * C);
  store_.keep(std::move(out), a.out);
  return Status::ok();
}

StatusOr<Tensor> GptBlock::mlp_backward(const BlockWeights& w, BlockActivations& a, Tensor ln2,
                                        const float* d_full, WeightGradients& weight_grads) {
  const auto& [B, T, C, NH, F, V] = shape_;
  const int64_t N = B * T;
  const int64_t f_local = F / tp_.size();
  ASSIGN_OR_RETURN(Tensor d_fc_gelu, scratch({N, f_local}));
  // The GEMMs' saved inputs move into weight_grads, which keeps them until the weight gradients.
  RETURN_IF_ERROR(weight_grads.matmul_backward(d_fc_gelu.data(), w.matrix_grad(kFcProjW),
                                               w.grad(kFcProjB), d_full, std::move(a.fc_gelu),
                                               w.matrix(kFcProjW), N, f_local, C));
  // Buffers are released as soon as backward is done with them, as autograd frees them: the
  // block's peak is its largest live set, not the sum of its intermediates.
  a.fc_gelu = Tensor();
  ASSIGN_OR_RETURN(Tensor d_fc, scratch({N, f_local}));
  device_.gelu_backward(d_fc.data(), ActivationStore::operand(a.fc), d_fc_gelu.data(), N * f_local);
  d_fc_gelu = Tensor();
  a.fc = Tensor();
  ASSIGN_OR_RETURN(Tensor d_ln2_full, scratch({N, C}));
  RETURN_IF_ERROR(weight_grads.matmul_backward(d_ln2_full.data(), w.matrix_grad(kFcW),
                                               w.grad(kFcB), d_fc.data(), std::move(ln2),
                                               w.matrix(kFcW), N, C, f_local));
  return d_ln2_full;
}

Status GptBlock::forward(const BlockWeights& w, const Tensor& x, BlockActivations& a) {
  RETURN_IF_ERROR(run_forward(w, x, a));
  if (w.moe()) moe_->record(a.moe);  // a recompute's routing is not counted again
  if (recompute_ == Recompute::kSelective) a.att = Tensor();  // (B, NH, T, T): the 5as/h term
  if (recompute_ == Recompute::kFull) {
    Tensor out = std::move(a.out);
    a = BlockActivations();
    a.out = std::move(out);
  }
  return Status::ok();
}

Status GptBlock::backward(const BlockWeights& w, const Tensor& x, BlockActivations& a,
                          const float* dout, float* dx, WeightGradients& weight_grads) {
  const auto& [B, T, C, NH, F, V] = shape_;
  const int64_t tp = tp_.size();
  const int64_t N = B * T;
  const int64_t n = tp_.local_tokens(B, T);
  const int64_t c_local = C / tp;
  const int64_t heads_local = NH / tp;
  using Input = ActivationStore::Input;

  if (!a.complete()) RETURN_IF_ERROR(run_forward(w, x, a));  // full recompute
  if (a.att.numel() == 0) {  // selective recompute: rebuild the attention probabilities
    ASSIGN_OR_RETURN(a.att, store_.create({B, heads_local, T, T}));
    ASSIGN_OR_RETURN(Tensor atty, scratch({N, c_local}));
    device_.attention_forward(atty.data(), ActivationStore::target(a.att),
                              ActivationStore::operand(a.qkv), B, T, heads_local, C / NH);
  }
  // Under SP, the layernorm outputs are gathered again from their saved shards (into
  // ln*_gathered, which the weight gradients then read in place of ln*).
  Tensor ln1_gathered, ln2_gathered;
  ASSIGN_OR_RETURN(const Matrix ln2_full, region_operand(a.ln2, ln2_gathered));

  // MLP: out = x2 + g(fc_gelu @ fcproj^T), or the mixture of experts'.
  ASSIGN_OR_RETURN(Tensor d_full, scratch({N, C}));
  RETURN_IF_ERROR(tp_.exit_backward(dout, d_full.data(), B, T, C));
  Tensor d_ln2_full;
  if (w.moe()) {
    ASSIGN_OR_RETURN(d_ln2_full, scratch({N, C}));
    RETURN_IF_ERROR(moe_->backward(*w.moe(), ln2_full, N, d_full.data(), d_ln2_full.data(), a.moe));
  } else {
    ASSIGN_OR_RETURN(d_ln2_full,
                     mlp_backward(w, a,
                                  tp_.sequence_parallel() ? std::move(ln2_gathered)
                                                          : std::move(a.ln2),
                                  d_full.data(), weight_grads));
  }
  ln2_gathered = Tensor();
  ASSIGN_OR_RETURN(Tensor d_ln2, scratch({n, C}));
  RETURN_IF_ERROR(tp_.enter_backward(d_ln2_full.data(), d_ln2.data(), B, T, C));
  d_ln2_full = Tensor();
  ASSIGN_OR_RETURN(Tensor d_x2, scratch({n, C}));
  device_.copy(d_x2.data(), dout, n * C);  // the residual passes dout straight through
  {
    ASSIGN_OR_RETURN(Input x2, store_.input(a.x2));
    device_.layernorm_backward(d_x2.data(), w.grad(kLn2W), w.grad(kLn2B), d_ln2.data(),
                               x2.data(), w.vector(kLn2W), a.ln2_mean.data(),
                               a.ln2_rstd.data(), n, C);
  }
  d_ln2 = Tensor();
  a.ln2 = Tensor();

  // Attention: x2 = x + g(atty @ attproj^T).
  device_.fill(d_full.data(), N * C, 0.0f);
  RETURN_IF_ERROR(tp_.exit_backward(d_x2.data(), d_full.data(), B, T, C));
  ASSIGN_OR_RETURN(Tensor d_atty, scratch({N, c_local}));
  RETURN_IF_ERROR(weight_grads.matmul_backward(d_atty.data(), w.matrix_grad(kAttProjW),
                                               w.grad(kAttProjB), d_full.data(),
                                               std::move(a.atty), w.matrix(kAttProjW), N, c_local,
                                               C));
  d_full = Tensor();
  a.atty = Tensor();
  ASSIGN_OR_RETURN(Tensor d_qkv, scratch({N, 3 * c_local}));
  device_.attention_backward(d_qkv.data(), d_atty.data(), ActivationStore::operand(a.qkv),
                             ActivationStore::operand(a.att), B, T, heads_local, C / NH);
  d_atty = Tensor();
  a.att = Tensor();
  a.qkv = Tensor();
  RETURN_IF_ERROR(region_operand(a.ln1, ln1_gathered).status());
  ASSIGN_OR_RETURN(Tensor d_ln1_full, scratch({N, C}));
  RETURN_IF_ERROR(weight_grads.matmul_backward(
      d_ln1_full.data(), w.matrix_grad(kQkvW), w.grad(kQkvB), d_qkv.data(),
      tp_.sequence_parallel() ? std::move(ln1_gathered) : std::move(a.ln1), w.matrix(kQkvW), N, C,
      3 * c_local));
  d_qkv = Tensor();
  ln1_gathered = Tensor();
  ASSIGN_OR_RETURN(Tensor d_ln1, scratch({n, C}));
  RETURN_IF_ERROR(tp_.enter_backward(d_ln1_full.data(), d_ln1.data(), B, T, C));
  d_ln1_full = Tensor();
  device_.residual_forward(dx, dx, d_x2.data(), n * C);  // the residual path into x
  ASSIGN_OR_RETURN(Input x_in, store_.input(x));
  device_.layernorm_backward(dx, w.grad(kLn1W), w.grad(kLn1B), d_ln1.data(), x_in.data(),
                             w.vector(kLn1W), a.ln1_mean.data(), a.ln1_rstd.data(), n, C);
  a = BlockActivations();
  return Status::ok();
}

}  // namespace partrain::runner
