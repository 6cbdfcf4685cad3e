#include "runner/workload/gpt_block.h"

namespace partrain::runner {

using memory::Category;

StatusOr<Tensor> GptBlock::activation(std::vector<int64_t> shape) {
  return Tensor::create(device_.allocator(), std::move(shape), Category::kActivations);
}

StatusOr<Tensor> GptBlock::scratch(std::vector<int64_t> shape) {
  ASSIGN_OR_RETURN(Tensor t, Tensor::create(device_.allocator(), std::move(shape),
                                            Category::kWorkspace));
  device_.fill(t.data(), t.numel(), 0.0f);
  return t;
}

Status GptBlock::run_forward(const BlockWeights& w, const float* x, BlockActivations& a) {
  const auto& [B, T, C, NH, F, V] = shape_;
  const int64_t tp = tp_.size();
  const int64_t N = B * T;                       // tokens inside tensor-parallel regions
  const int64_t n = tp_.local_tokens(B, T);      // tokens this rank holds outside them
  const int64_t c_local = C / tp;
  const int64_t f_local = F / tp;
  const int64_t heads_local = NH / tp;
  // Row-parallel outputs are partial sums over tp: only rank 0 adds the (replicated) bias.
  const bool add_bias = tp_.rank() == 0;
  const auto& p = w.param;

  ASSIGN_OR_RETURN(a.ln1, activation({n, C}));
  ASSIGN_OR_RETURN(a.ln1_mean, activation({n}));
  ASSIGN_OR_RETURN(a.ln1_rstd, activation({n}));
  device_.layernorm_forward(a.ln1.data(), a.ln1_mean.data(), a.ln1_rstd.data(), x, p[kLn1W],
                            p[kLn1B], n, C);
  // Under SP the gathered input is not kept: backward gathers it again (Korthikanti 2022,
  // sec. 4.2.2), so the saved activations stay sequence-sharded.
  Tensor gathered;
  ASSIGN_OR_RETURN(const float* ln1_full, tp_.region_input(a.ln1.data(), gathered, B, T, C));
  ASSIGN_OR_RETURN(a.qkv, activation({N, 3 * c_local}));
  device_.matmul_forward(a.qkv.data(), ln1_full, p[kQkvW], p[kQkvB], N, C, 3 * c_local);
  ASSIGN_OR_RETURN(a.att, activation({B, heads_local, T, T}));
  ASSIGN_OR_RETURN(a.atty, activation({N, c_local}));
  device_.attention_forward(a.atty.data(), a.att.data(), a.qkv.data(), B, T, heads_local,
                            C / NH);
  ASSIGN_OR_RETURN(Tensor proj, scratch({N, C}));
  device_.matmul_forward(proj.data(), a.atty.data(), p[kAttProjW],
                         add_bias ? p[kAttProjB] : nullptr, N, c_local, C);
  ASSIGN_OR_RETURN(a.x2, activation({n, C}));
  RETURN_IF_ERROR(tp_.exit_forward(proj.data(), a.x2.data(), B, T, C));
  device_.residual_forward(a.x2.data(), a.x2.data(), x, n * C);

  ASSIGN_OR_RETURN(a.ln2, activation({n, C}));
  ASSIGN_OR_RETURN(a.ln2_mean, activation({n}));
  ASSIGN_OR_RETURN(a.ln2_rstd, activation({n}));
  device_.layernorm_forward(a.ln2.data(), a.ln2_mean.data(), a.ln2_rstd.data(), a.x2.data(),
                            p[kLn2W], p[kLn2B], n, C);
  ASSIGN_OR_RETURN(const float* ln2_full, tp_.region_input(a.ln2.data(), gathered, B, T, C));
  ASSIGN_OR_RETURN(a.fc, activation({N, f_local}));
  device_.matmul_forward(a.fc.data(), ln2_full, p[kFcW], p[kFcB], N, C, f_local);
  ASSIGN_OR_RETURN(a.fc_gelu, activation({N, f_local}));
  device_.gelu_forward(a.fc_gelu.data(), a.fc.data(), N * f_local);
  device_.fill(proj.data(), N * C, 0.0f);
  device_.matmul_forward(proj.data(), a.fc_gelu.data(), p[kFcProjW],
                         add_bias ? p[kFcProjB] : nullptr, N, f_local, C);
  if (a.out.numel() == 0) {
    ASSIGN_OR_RETURN(a.out, activation({n, C}));
  }
  RETURN_IF_ERROR(tp_.exit_forward(proj.data(), a.out.data(), B, T, C));
  device_.residual_forward(a.out.data(), a.out.data(), a.x2.data(), n * C);
  return Status::ok();
}

Status GptBlock::forward(const BlockWeights& w, const float* x, BlockActivations& a) {
  RETURN_IF_ERROR(run_forward(w, x, a));
  if (recompute_ == Recompute::kSelective) a.att = Tensor();  // (B, NH, T, T): the 5as/h term
  if (recompute_ == Recompute::kFull) {
    Tensor out = std::move(a.out);
    a = BlockActivations();
    a.out = std::move(out);
  }
  return Status::ok();
}

Status GptBlock::backward(const BlockWeights& w, const float* x, BlockActivations& a,
                          const float* dout, float* dx) {
  const auto& [B, T, C, NH, F, V] = shape_;
  const int64_t tp = tp_.size();
  const int64_t N = B * T;
  const int64_t n = tp_.local_tokens(B, T);
  const int64_t c_local = C / tp;
  const int64_t f_local = F / tp;
  const int64_t heads_local = NH / tp;
  const auto& p = w.param;
  const auto& g = w.grad;

  if (!a.complete()) RETURN_IF_ERROR(run_forward(w, x, a));  // full recompute
  if (a.att.numel() == 0) {  // selective recompute: rebuild the attention probabilities
    ASSIGN_OR_RETURN(a.att, activation({B, heads_local, T, T}));
    ASSIGN_OR_RETURN(Tensor atty, scratch({N, c_local}));
    device_.attention_forward(atty.data(), a.att.data(), a.qkv.data(), B, T, heads_local,
                              C / NH);
  }
  // Under SP, the layernorm outputs are gathered again from their saved shards.
  Tensor ln1_gathered, ln2_gathered;
  ASSIGN_OR_RETURN(const float* ln2_full,
                   tp_.region_input(a.ln2.data(), ln2_gathered, B, T, C));

  // MLP: out = x2 + g(fc_gelu @ fcproj^T).
  ASSIGN_OR_RETURN(Tensor d_full, scratch({N, C}));
  RETURN_IF_ERROR(tp_.exit_backward(dout, d_full.data(), B, T, C));
  ASSIGN_OR_RETURN(Tensor d_fc_gelu, scratch({N, f_local}));
  device_.matmul_backward(d_fc_gelu.data(), g[kFcProjW], g[kFcProjB], d_full.data(),
                          a.fc_gelu.data(), p[kFcProjW], N, f_local, C);
  // Buffers are released as soon as backward is done with them, as autograd frees them: the
  // block's peak is its largest live set, not the sum of its intermediates.
  a.fc_gelu = Tensor();
  ASSIGN_OR_RETURN(Tensor d_fc, scratch({N, f_local}));
  device_.gelu_backward(d_fc.data(), a.fc.data(), d_fc_gelu.data(), N * f_local);
  d_fc_gelu = Tensor();
  a.fc = Tensor();
  ASSIGN_OR_RETURN(Tensor d_ln2_full, scratch({N, C}));
  device_.matmul_backward(d_ln2_full.data(), g[kFcW], g[kFcB], d_fc.data(), ln2_full, p[kFcW], N,
                          C, f_local);
  d_fc = Tensor();
  ln2_gathered = Tensor();
  ASSIGN_OR_RETURN(Tensor d_ln2, scratch({n, C}));
  RETURN_IF_ERROR(tp_.enter_backward(d_ln2_full.data(), d_ln2.data(), B, T, C));
  d_ln2_full = Tensor();
  ASSIGN_OR_RETURN(Tensor d_x2, scratch({n, C}));
  device_.copy(d_x2.data(), dout, n * C);  // the residual passes dout straight through
  device_.layernorm_backward(d_x2.data(), g[kLn2W], g[kLn2B], d_ln2.data(), a.x2.data(), p[kLn2W],
                             a.ln2_mean.data(), a.ln2_rstd.data(), n, C);
  d_ln2 = Tensor();
  a.ln2 = Tensor();

  // Attention: x2 = x + g(atty @ attproj^T).
  device_.fill(d_full.data(), N * C, 0.0f);
  RETURN_IF_ERROR(tp_.exit_backward(d_x2.data(), d_full.data(), B, T, C));
  ASSIGN_OR_RETURN(Tensor d_atty, scratch({N, c_local}));
  device_.matmul_backward(d_atty.data(), g[kAttProjW], g[kAttProjB], d_full.data(),
                          a.atty.data(), p[kAttProjW], N, c_local, C);
  d_full = Tensor();
  a.atty = Tensor();
  ASSIGN_OR_RETURN(Tensor d_qkv, scratch({N, 3 * c_local}));
  device_.attention_backward(d_qkv.data(), d_atty.data(), a.qkv.data(), a.att.data(), B, T,
                             heads_local, C / NH);
  d_atty = Tensor();
  a.att = Tensor();
  ASSIGN_OR_RETURN(const float* ln1_full,
                   tp_.region_input(a.ln1.data(), ln1_gathered, B, T, C));
  ASSIGN_OR_RETURN(Tensor d_ln1_full, scratch({N, C}));
  device_.matmul_backward(d_ln1_full.data(), g[kQkvW], g[kQkvB], d_qkv.data(), ln1_full,
                          p[kQkvW], N, C, 3 * c_local);
  d_qkv = Tensor();
  a.qkv = Tensor();
  ln1_gathered = Tensor();
  ASSIGN_OR_RETURN(Tensor d_ln1, scratch({n, C}));
  RETURN_IF_ERROR(tp_.enter_backward(d_ln1_full.data(), d_ln1.data(), B, T, C));
  d_ln1_full = Tensor();
  device_.residual_forward(dx, dx, d_x2.data(), n * C);  // the residual path into x
  device_.layernorm_backward(dx, g[kLn1W], g[kLn1B], d_ln1.data(), x, p[kLn1W],
                             a.ln1_mean.data(), a.ln1_rstd.data(), n, C);
  a = BlockActivations();
  return Status::ok();
}

}  // namespace partrain::runner
