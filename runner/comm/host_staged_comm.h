// Gloo over device memory: a communicator whose buffers live on a GPU, carried by a host
// communicator (Gloo) through host copies. Each operation copies its input to a host buffer when
// it is issued, runs the host operation on it, and copies the result back to the device when the
// Work is waited for. This is how several ranks share one GPU (`--comm gloo` with
// `--device cuda`), which NCCL refuses; it costs two PCIe copies per operation and runs on the
// host's network stack, so it is for correctness and small runs, not speed.
#pragma once

#include <memory>

#include "runner/comm/comm.h"
#include "runner/device/device.h"

namespace partrain::comm {

// `host` must be a host-memory communicator; `device` does the copies (Device::download and
// upload, which wait for the compute queued before them) and must outlive the result and every
// communicator split from it.
std::unique_ptr<Comm> stage_through_host(std::unique_ptr<Comm> host, runner::Device& device);

}  // namespace partrain::comm
