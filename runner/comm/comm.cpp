#include "runner/comm/comm.h"

#include <utility>

namespace partrain::comm {
namespace {

// Both halves of an exchange as one Work: done when both are, failing with the first error.
class PairedWork final : public Work {
 public:
  PairedWork(WorkPtr first, WorkPtr second)
      : first_(std::move(first)), second_(std::move(second)) {}
  Status wait() override {
    Status first = first_->wait();
    Status second = second_->wait();
    return first.is_ok() ? second : first;
  }
  bool is_completed() override { return first_->is_completed() && second_->is_completed(); }

 private:
  WorkPtr first_;
  WorkPtr second_;
};

}  // namespace

WorkPtr Comm::send_recv_async(const void* send, int send_peer, void* recv, int recv_peer,
                              size_t count, DType dtype) {
  // Posted before either is waited on, so a ring of exchanges makes progress.
  WorkPtr sent = send_async(send, count, dtype, send_peer);
  WorkPtr received = recv_async(recv, count, dtype, recv_peer);
  return std::make_unique<PairedWork>(std::move(sent), std::move(received));
}

}  // namespace partrain::comm
