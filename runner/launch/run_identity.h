// Who a run is: its id (PARTRAIN_RUN_ID) and the token every store request must carry. One node
// gets a fresh random token; nodes of a multi-node run must agree on one without talking first.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace partrain::launch {

// 16 bytes from /dev/urandom as 32 hex digits.
StatusOr<std::string> random_token();
// The same on every node for one --rdzv-id, hence guessable by anyone who knows the id.
std::string token_from_rdzv_id(std::string_view rdzv_id);
// "20250131-142501-3fa9": sortable by start time, unique enough for one machine's runs.
StatusOr<std::string> new_run_id();

}  // namespace partrain::launch
