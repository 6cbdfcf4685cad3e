// The part of PMIx's C API (pmix.h, pmix_common.h of the PMIx standard, v3 on) that partrain
// calls, mirrored so that partrain builds without PMIx's headers and loads libpmix.so.2 with
// dlopen where an MPI runtime installed it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace partrain::launch::pmix {

using Status = int;  // pmix_status_t
inline constexpr Status kSuccess = 0;  // PMIX_SUCCESS

inline constexpr size_t kMaxNspaceLength = 255;  // PMIX_MAX_NSLEN
using Rank = uint32_t;                           // pmix_rank_t

struct Proc {  // pmix_proc_t
  char nspace[kMaxNspaceLength + 1];
  Rank rank;
};

using DataType = uint16_t;                // pmix_data_type_t
inline constexpr DataType kString = 3;    // PMIX_STRING

// pmix_value_t as far as partrain reads it: PMIx allocates the values it returns, so only the
// leading type and the union's pointer member (at offset 8, the union holding 8-byte members)
// are laid out here.
struct Value {
  DataType type;
  union {
    char* string;
    uint64_t padding;
  } data;
};

struct Info;  // pmix_info_t: never passed (NULL, 0)

inline constexpr const char* kHostname = "pmix.hname";  // PMIX_HOSTNAME: (char*) a proc's host

extern "C" {
using InitFn = Status (*)(Proc* proc, Info* info, size_t ninfo);                  // PMIx_Init
using FinalizeFn = Status (*)(const Info* info, size_t ninfo);                    // PMIx_Finalize
using GetFn = Status (*)(const Proc* proc, const char* key, const Info* info, size_t ninfo,
                         Value** value);                                          // PMIx_Get
using ErrorStringFn = const char* (*)(Status status);                     // PMIx_Error_string
using ValueDestructFn = void (*)(Value* value);  // PMIx_Value_destruct (v4 on)
}

}  // namespace partrain::launch::pmix
