// Training FLOPs per iteration and per token, and model FLOPs utilisation (MFU).
// Narayanan 2021 sec. 5.1 (eq. 3): 72 B s l h^2 (1 + s/(6h) + V/(12 l h)), 96 and V/(16 l h)
// when full recomputation re-runs each layer's forward; the general count is the same sum.
#pragma once

#include "memory/model_config.h"
#include "memory/training_layout.h"

namespace partrain::memory {

// FLOPs of one training iteration over `batch` sequences of `seq` tokens, counted as the paper
// counts them: matrix multiplies only (2 per multiply-accumulate), attention scores and the
// logits included; backward is twice forward; recompute adds the forward it repeats (full: each
// block's forward; selective: the attention core's QK^T and AV).
double training_flops(const ModelConfig& model, double batch, double seq, Recompute recompute);
double training_flops_per_token(const ModelConfig& model, double seq, Recompute recompute);

// Narayanan 2021 eq. 3, the closed form for GPT models (tests compare the general count to it).
double narayanan_flops(double batch, double seq, double layers, double hidden, double vocab,
                       bool full_recompute);

// Model FLOPs utilisation: the model's FLOPs per second over the GPUs' peak (PaLM, Chowdhery 2022
// app. B; Narayanan 2021 reports the same ratio as "% of theoretical peak").
double mfu(double flops_per_iteration, double seconds_per_iteration, double gpus,
           double peak_flops_per_gpu);

// Narayanan 2021 sec. 5.1: end-to-end training time ~ 8 T P / (n X) with recomputation
// (6 T P / (n X) without): tokens T, parameters P, n GPUs at X FLOP/s each.
double training_days(double tokens, double params, double gpus, double flops_per_gpu,
                     bool full_recompute);

}  // namespace partrain::memory
