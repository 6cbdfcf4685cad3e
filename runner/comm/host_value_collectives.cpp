#include "runner/comm/host_value_collectives.h"

#include "runner/comm/dtype.h"

namespace partrain::comm {

StatusOr<unsigned char*> HostValueCollectives::staging(size_t bytes) {
  RETURN_IF_ERROR(device_.allocator().grow(staging_, bytes, memory::Category::kComm));
  return static_cast<unsigned char*>(staging_.data());
}

Status HostValueCollectives::all_reduce(void* values, size_t count, DType dtype, ReduceOp op) {
  if (device_.host_addressable()) return comm_.all_reduce(values, values, count, dtype, op);
  const size_t bytes = count * dtype_size(dtype);
  ASSIGN_OR_RETURN(unsigned char* buffer, staging(bytes));
  device_.upload(buffer, values, bytes);
  RETURN_IF_ERROR(comm_.all_reduce(buffer, buffer, count, dtype, op));
  device_.download(values, buffer, bytes);
  return device_.status();
}

Status HostValueCollectives::all_gather(const void* send, void* recv, size_t count, DType dtype) {
  if (device_.host_addressable()) return comm_.all_gather(send, recv, count, dtype);
  const size_t bytes = count * dtype_size(dtype);
  const size_t gathered_bytes = bytes * static_cast<size_t>(comm_.size());
  // One buffer: the gathered block first, the rank's own values after it (both stay aligned to
  // the element size).
  ASSIGN_OR_RETURN(unsigned char* buffer, staging(gathered_bytes + bytes));
  unsigned char* own = buffer + gathered_bytes;
  device_.upload(own, send, bytes);
  RETURN_IF_ERROR(comm_.all_gather(own, buffer, count, dtype));
  device_.download(recv, buffer, gathered_bytes);
  return device_.status();
}

}  // namespace partrain::comm
