// The multi-node secret handed over through a file every node can read (a shared home or job
// directory): node 0 creates it with a fresh random token unless it is there already, the other
// nodes wait for it. Only its owner may read it, as ssh insists of its keys.
#pragma once

#include <functional>
#include <string>

#include "core/duration.h"
#include "core/status.h"

namespace partrain::launch {

// Node 0 (create): the file's token, made (mode 0600, written whole before it appears under
// its name) when the file does not exist. Other nodes: waits up to `wait` for the file
// (kTimeout naming it), giving up when `interrupted` says so. A file others can read, or one that
// holds no token, is kInvalidArgument naming the fix.
StatusOr<std::string> token_from_file(const std::string& path, bool create, Nanoseconds wait,
                                      const std::function<bool()>& interrupted);

}  // namespace partrain::launch
