#include "runner/workload/pipeline_executor.h"

#include <utility>

#include "profiler/trace_scope.h"
#include "runner/device/tensor.h"
#include "runner/workload/bf16_states.h"

namespace partrain::runner {

// One step's state: the boundary tensors waiting to be consumed or sent, the micro-batches read
// so far, and the sends in flight. Each action is one method.
class PipelineExecutor::Step {
 public:
  Step(PipelineExecutor& executor, const PipelineStepHooks& hooks)
      : executor_(executor), hooks_(hooks), memory_(executor.device_.allocator()) {}

  Status run(const PipelineAction& a) {
    release_completed_sends();
    RETURN_IF_ERROR(failure_);
    switch (a.kind) {
      case PipelineActionKind::kRecvActivation:
        return receive(a, channel(a), a.chunk, activation_in_);
      case PipelineActionKind::kSendActivation:
        return send(a, channel(a), activation_out_);
      case PipelineActionKind::kRecvGradient:
        return receive(a, channel(a), a.chunk - 1, gradient_in_);
      case PipelineActionKind::kSendGradient:
        return send(a, channel(a), gradient_out_);
      case PipelineActionKind::kForward:
        return forward(a);
      case PipelineActionKind::kBackward:
        return backward(a);
      case PipelineActionKind::kWeight:
        return weight(a);
    }
    return Status::ok();
  }

  // Waits for every send still in flight; the first failure of any send is the step's.
  StatusOr<double> finish() {
    for (auto& [work, buffer] : sends_) {
      Status status = work->wait();
      if (failure_.is_ok()) failure_ = status;
    }
    RETURN_IF_ERROR(failure_);
    return loss_;
  }

 private:
  using Key = std::pair<int, int>;  // (micro-batch, chunk) as the schedule names messages
  using Messages = std::map<Key, Tensor>;

  comm::Comm& channel(const PipelineAction& a) const {
    return *executor_.channels_.at(static_cast<size_t>(pipeline_channel(executor_.shape_, a)));
  }

  // Boundary tensors are p2p staging: the comm category.
  StatusOr<Tensor> boundary(int chunk) {
    const ModelChunk& c = *executor_.chunks_.at(chunk);
    return Tensor::create(memory_, {c.boundary_numel()}, memory::Category::kComm,
                          c.boundary_type());
  }

  // A message into chunk c is the size of chunk c's input: chunk c - 1's output.
  size_t message_numel(const PipelineAction& a) const {
    auto found = executor_.chunks_.find(a.kind == PipelineActionKind::kRecvActivation ||
                                         a.kind == PipelineActionKind::kSendGradient
                                     ? a.chunk
                                     : a.chunk - 1);
    return static_cast<size_t>(found->second->boundary_numel());
  }

  // An activation into chunk c (a buffer of its input's shape) or a gradient of chunk c - 1's
  // output (c - 1's boundary), received before the action that needs it.
  Status receive(const PipelineAction& a, comm::Comm& channel, int shaped_by, Messages& into) {
    ASSIGN_OR_RETURN(Tensor buffer, boundary(shaped_by));
    RETURN_IF_ERROR(channel.recv(buffer.at(0), message_numel(a), wire_dtype(buffer), a.peer));
    into[Key{a.micro_batch, a.chunk}] = std::move(buffer);
    return Status::ok();
  }

  // Posts the send of a tensor a forward or backward left under the message's key; the buffer
  // lives until the send completes.
  Status send(const PipelineAction& a, comm::Comm& channel, Messages& from) {
    const Key key{a.micro_batch, a.chunk};
    Tensor buffer = std::move(from.at(key));
    from.erase(key);
    comm::WorkPtr work =
        channel.send_async(buffer.at(0), message_numel(a), wire_dtype(buffer), a.peer);
    sends_.emplace_back(std::move(work), std::move(buffer));
    return Status::ok();
  }

  void release_completed_sends() {
    for (auto it = sends_.begin(); it != sends_.end();) {
      if (!it->first->is_completed()) {
        ++it;
        continue;
      }
      Status status = it->first->wait();
      if (failure_.is_ok()) failure_ = status;
      it = sends_.erase(it);
    }
  }

  StatusOr<const MicroBatch*> batch_of(int mb) {
    auto found = batches_.find(mb);
    if (found == batches_.end()) {
      found = batches_.emplace(mb, MicroBatch()).first;
      RETURN_IF_ERROR(hooks_.fill_batch(mb, found->second));
    }
    return &found->second;
  }

  Status forward(const PipelineAction& a) {
    ModelChunk& chunk = *executor_.chunks_.at(a.chunk);
    ASSIGN_OR_RETURN(const MicroBatch* batch, batch_of(a.micro_batch));
    auto in = activation_in_.find(Key{a.micro_batch, a.chunk});
    const Tensor* input = in == activation_in_.end() ? nullptr : &in->second;
    Tensor* output = nullptr;
    if (a.chunk + 1 < executor_.total_chunks_) {
      // The output is the next chunk's input: kept under that message's key until sent, or
      // handed straight to the next chunk when this rank runs it too.
      ASSIGN_OR_RETURN(Tensor out, boundary(a.chunk));
      Messages& into = local(a.chunk + 1) ? activation_in_ : activation_out_;
      output = &(into[Key{a.micro_batch, a.chunk + 1}] = std::move(out));
    }
    float mb_loss = 0;
    profiler::TraceScope phase(executor_.tracer_, "forward", profiler::SliceCategory::kPhase, -1,
                               a.micro_batch);
    RETURN_IF_ERROR(chunk.forward(a.micro_batch, *batch, input, output, &mb_loss));
    loss_ += mb_loss;
    if (in != activation_in_.end()) activation_in_.erase(in);  // the chunk kept its own copy
    return Status::ok();
  }

  Status backward(const PipelineAction& a) {
    ModelChunk& chunk = *executor_.chunks_.at(a.chunk);
    ASSIGN_OR_RETURN(const MicroBatch* batch, batch_of(a.micro_batch));
    auto in = gradient_in_.find(Key{a.micro_batch, a.chunk + 1});
    const Tensor* grad_output = in == gradient_in_.end() ? nullptr : &in->second;
    Tensor grad_input;
    if (a.chunk > 0) {
      ASSIGN_OR_RETURN(grad_input, boundary(a.chunk));
    }
    const bool last_backward = ++backwards_done_[a.chunk] == executor_.micro_batches_;
    // Split, a chunk reports its units from its last weight pass instead (ModelChunk).
    profiler::TraceScope phase(executor_.tracer_, "backward", profiler::SliceCategory::kPhase, -1,
                               a.micro_batch);
    RETURN_IF_ERROR(chunk.backward(a.micro_batch, *batch, grad_output, &grad_input,
                                   last_backward ? hooks_.unit_ready
                                                 : std::function<void(const std::string&)>()));
    if (in != gradient_in_.end()) gradient_in_.erase(in);
    if (a.chunk > 0) {
      Messages& into = local(a.chunk - 1) ? gradient_in_ : gradient_out_;
      into[Key{a.micro_batch, a.chunk}] = std::move(grad_input);
    }
    return Status::ok();
  }

  Status weight(const PipelineAction& a) {
    ModelChunk& chunk = *executor_.chunks_.at(a.chunk);
    const bool last_weight = ++weights_done_[a.chunk] == executor_.micro_batches_;
    profiler::TraceScope phase(executor_.tracer_, "weight", profiler::SliceCategory::kPhase, -1,
                               a.micro_batch);
    return chunk.weight_backward(
        a.micro_batch, last_weight ? hooks_.unit_ready : std::function<void(const std::string&)>());
  }

  // Whether this rank runs chunk c too (no message crosses to it).
  bool local(int chunk) const { return executor_.chunks_.contains(chunk); }

  PipelineExecutor& executor_;
  const PipelineStepHooks& hooks_;
  TrackedAllocator& memory_;
  Messages activation_in_, activation_out_, gradient_in_, gradient_out_;
  std::map<int, MicroBatch> batches_;
  std::map<int, int> backwards_done_;  // per chunk
  std::map<int, int> weights_done_;    // per chunk
  // Posted sends and the buffers they read; a buffer is freed once its send has completed.
  std::vector<std::pair<comm::WorkPtr, Tensor>> sends_;
  Status failure_;  // the first failed send
  double loss_ = 0;
};

StatusOr<double> PipelineExecutor::run_step(const PipelineStepHooks& hooks) {
  Step step(*this, hooks);
  for (const PipelineAction& a : actions_) RETURN_IF_ERROR(step.run(a));
  return step.finish();
}

}  // namespace partrain::runner
