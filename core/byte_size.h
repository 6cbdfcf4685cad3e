// Byte sizes as users type them ("8", "64K", "128M", "1G", "2GiB": binary multiples, as
// nccl-tests reads -b/-e; "4GB", "25MB": decimal, as partrain labels GB) and as partrain prints
// them ("3.21 GiB", "512 B").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace partrain {

StatusOr<uint64_t> parse_byte_size(std::string_view text);
std::string format_bytes(uint64_t bytes);  // binary units, labelled KiB/MiB/GiB

}  // namespace partrain
