// Who a run is: its id (PARTRAIN_RUN_ID) and the token every store request must carry. One node
// gets a fresh random token; the nodes of a multi-node run are given one (--token, PARTRAIN_TOKEN
// or --token-file), never one derived from public values.
#pragma once

#include <string>

#include "core/status.h"

namespace partrain::launch {

// 16 bytes from /dev/urandom as 32 hex digits.
StatusOr<std::string> random_token();
// "20250131-142501-3fa9": sortable by start time, unique enough for one machine's runs.
StatusOr<std::string> new_run_id();

}  // namespace partrain::launch
