// `partrain launch` as a library call: one node's launcher, from a LaunchConfig to the process exit
// code (0, the first failing rank's code or 128 + signal, 130/143 when stopped by SIGINT/SIGTERM).
// `partrain bench collectives -n 4` and the CLI both go through here.
#pragma once

#include "core/status.h"
#include "runner/launch/launch_config.h"

namespace partrain::launch {

// Runs the workers of this node to the end. A Status is returned only when the run could not
// start: invalid configuration (kInvalidArgument, exit 2), port in use (kUnavailable, exit 1),
// rendezvous timeout (kTimeout, exit 124), command not found (kNotFound, exit 127). Must be called
// from the main thread before other threads exist (it blocks SIGINT/SIGTERM for its signalfd).
StatusOr<int> launch(const LaunchConfig& config);

}  // namespace partrain::launch
