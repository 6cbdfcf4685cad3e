#include "runner/workload/pipeline_executor.h"

#include <utility>

#include "profiler/trace_scope.h"
#include "runner/device/tensor.h"
#include "runner/workload/bf16_states.h"

namespace partrain::runner {

StatusOr<double> PipelineExecutor::run_step(const PipelineStepHooks& hooks) {
  using Key = std::pair<int, int>;  // (micro-batch, chunk) as the schedule names messages
  std::map<Key, Tensor> activation_in, activation_out, gradient_in, gradient_out;
  std::map<int, MicroBatch> batches;
  std::map<int, int> backwards_done;  // per chunk
  // Posted sends and the buffers they read; a buffer is freed once its send has completed.
  std::vector<std::pair<comm::WorkPtr, Tensor>> sends;
  double loss = 0;
  TrackedAllocator& memory = device_.allocator();

  auto batch_of = [&](int mb) -> StatusOr<const MicroBatch*> {
    auto found = batches.find(mb);
    if (found == batches.end()) {
      found = batches.emplace(mb, MicroBatch()).first;
      RETURN_IF_ERROR(hooks.fill_batch(mb, found->second));
    }
    return &found->second;
  };
  // Boundary tensors are p2p staging: the comm category.
  auto boundary = [&](int chunk) {
    const ModelChunk& c = *chunks_.at(chunk);
    return Tensor::create(memory, {c.boundary_numel()}, memory::Category::kComm,
                          c.boundary_type());
  };
  // A message into chunk c is the size of chunk c's input: chunk c - 1's output.
  auto message_numel = [&](const PipelineAction& a) -> int64_t {
    auto found = chunks_.find(a.kind == PipelineActionKind::kRecvActivation ||
                                      a.kind == PipelineActionKind::kSendGradient
                                  ? a.chunk
                                  : a.chunk - 1);
    return found->second->boundary_numel();
  };

  Status failure;
  auto release_completed_sends = [&] {
    for (auto it = sends.begin(); it != sends.end();) {
      if (!it->first->is_completed()) {
        ++it;
        continue;
      }
      Status status = it->first->wait();
      if (failure.is_ok()) failure = status;
      it = sends.erase(it);
    }
  };
  for (const PipelineAction& a : actions_) {
    release_completed_sends();
    RETURN_IF_ERROR(failure);
    const Key key{a.micro_batch, a.chunk};
    switch (a.kind) {
      case PipelineActionKind::kRecvActivation: {
        ASSIGN_OR_RETURN(Tensor buffer, boundary(a.chunk));
        RETURN_IF_ERROR(activations_.recv(buffer.at(0), static_cast<size_t>(message_numel(a)),
                                          wire_dtype(buffer), a.peer));
        activation_in[key] = std::move(buffer);
        break;
      }
      case PipelineActionKind::kSendActivation: {
        // Activation (mb, c) is the output of chunk c - 1 on this rank.
        Tensor buffer = std::move(activation_out.at(key));
        activation_out.erase(key);
        comm::WorkPtr work = activations_.send_async(
            buffer.at(0), static_cast<size_t>(message_numel(a)), wire_dtype(buffer), a.peer);
        sends.emplace_back(std::move(work), std::move(buffer));
        break;
      }
      case PipelineActionKind::kRecvGradient: {
        ASSIGN_OR_RETURN(Tensor buffer, boundary(a.chunk - 1));
        RETURN_IF_ERROR(gradients_.recv(buffer.at(0), static_cast<size_t>(message_numel(a)),
                                        wire_dtype(buffer), a.peer));
        gradient_in[key] = std::move(buffer);
        break;
      }
      case PipelineActionKind::kSendGradient: {
        Tensor buffer = std::move(gradient_out.at(key));
        gradient_out.erase(key);
        comm::WorkPtr work = gradients_.send_async(
            buffer.at(0), static_cast<size_t>(message_numel(a)), wire_dtype(buffer), a.peer);
        sends.emplace_back(std::move(work), std::move(buffer));
        break;
      }
      case PipelineActionKind::kForward: {
        ModelChunk& chunk = *chunks_.at(a.chunk);
        ASSIGN_OR_RETURN(const MicroBatch* batch, batch_of(a.micro_batch));
        auto in = activation_in.find(key);
        const Tensor* input = in == activation_in.end() ? nullptr : &in->second;
        Tensor* output = nullptr;
        if (a.chunk + 1 < total_chunks_) {
          // The output is the next chunk's input: kept under that message's key until sent.
          ASSIGN_OR_RETURN(Tensor out, boundary(a.chunk));
          output = &(activation_out[Key{a.micro_batch, a.chunk + 1}] = std::move(out));
        }
        float mb_loss = 0;
        profiler::TraceScope phase(tracer_, "forward", profiler::SliceCategory::kPhase, -1,
                                   a.micro_batch);
        RETURN_IF_ERROR(chunk.forward(a.micro_batch, *batch, input, output, &mb_loss));
        loss += mb_loss;
        if (in != activation_in.end()) activation_in.erase(in);  // the chunk kept its own copy
        break;
      }
      case PipelineActionKind::kBackward: {
        ModelChunk& chunk = *chunks_.at(a.chunk);
        ASSIGN_OR_RETURN(const MicroBatch* batch, batch_of(a.micro_batch));
        auto in = gradient_in.find(Key{a.micro_batch, a.chunk + 1});
        const Tensor* grad_output = in == gradient_in.end() ? nullptr : &in->second;
        Tensor grad_input;
        if (a.chunk > 0) {
          ASSIGN_OR_RETURN(grad_input, boundary(a.chunk));
        }
        const bool last_backward = ++backwards_done[a.chunk] == micro_batches_;
        profiler::TraceScope phase(tracer_, "backward", profiler::SliceCategory::kPhase, -1,
                                   a.micro_batch);
        RETURN_IF_ERROR(chunk.backward(a.micro_batch, *batch, grad_output, &grad_input,
                                       last_backward ? hooks.unit_ready
                                                     : std::function<void(const std::string&)>()));
        if (in != gradient_in.end()) gradient_in.erase(in);
        if (a.chunk > 0) gradient_out[key] = std::move(grad_input);
        break;
      }
    }
  }
  for (auto& [work, buffer] : sends) {
    Status status = work->wait();
    if (failure.is_ok()) failure = status;
  }
  RETURN_IF_ERROR(failure);
  return loss;
}

}  // namespace partrain::runner
