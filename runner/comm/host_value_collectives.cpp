#include "runner/comm/host_value_collectives.h"

#include "runner/comm/dtype.h"

namespace partrain::comm {
namespace {

// The device buffer the values travel in: transient communication staging.
StatusOr<runner::TrackedBuffer> staging(runner::Device& device, size_t bytes) {
  return device.allocator().allocate(bytes, memory::Category::kComm);
}

}  // namespace

Status all_reduce_host_values(runner::Device& device, Comm& comm, void* values, size_t count,
                              DType dtype, ReduceOp op) {
  if (device.host_addressable()) return comm.all_reduce(values, values, count, dtype, op);
  const size_t bytes = count * dtype_size(dtype);
  ASSIGN_OR_RETURN(runner::TrackedBuffer buffer, staging(device, bytes));
  device.upload(buffer.data(), values, bytes);
  RETURN_IF_ERROR(comm.all_reduce(buffer.data(), buffer.data(), count, dtype, op));
  device.download(values, buffer.data(), bytes);
  return device.status();
}

Status all_gather_host_values(runner::Device& device, Comm& comm, const void* send, void* recv,
                              size_t count, DType dtype) {
  if (device.host_addressable()) return comm.all_gather(send, recv, count, dtype);
  const size_t bytes = count * dtype_size(dtype);
  const size_t gathered_bytes = bytes * static_cast<size_t>(comm.size());
  ASSIGN_OR_RETURN(runner::TrackedBuffer send_buffer, staging(device, bytes));
  ASSIGN_OR_RETURN(runner::TrackedBuffer recv_buffer, staging(device, gathered_bytes));
  device.upload(send_buffer.data(), send, bytes);
  RETURN_IF_ERROR(comm.all_gather(send_buffer.data(), recv_buffer.data(), count, dtype));
  device.download(recv, recv_buffer.data(), gathered_bytes);
  return device.status();
}

}  // namespace partrain::comm
