/* NCCL's profiler-plugin ABI, versions 4 to 6 (NCCL 2.27, 2.28, 2.29): the function tables NCCL
 * looks up in the library NCCL_PROFILER_PLUGIN names (symbol "ncclProfiler_v6", then "_v5",
 * then "_v4"; v1-v3 carry no GPU timers and are not offered) and the event descriptors it
 * passes. Declared from NVIDIA/nccl's src/include/plugin/profiler/profiler_v4.h .. v6.h and
 * nccl_profiler.h with the same layout under partrain's names. Plain C, so the tests' fake
 * libnccl (tests/support/fake_nccl) drives a plugin through the declarations the plugin reads. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "profiler/nccl_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Event types: the activation mask the plugin returns from init is an OR of these. */
enum {
  PARTRAIN_NCCL_PROFILE_GROUP = 1 << 0,
  PARTRAIN_NCCL_PROFILE_COLL = 1 << 1,
  PARTRAIN_NCCL_PROFILE_P2P = 1 << 2,
  PARTRAIN_NCCL_PROFILE_PROXY_OP = 1 << 3,
  PARTRAIN_NCCL_PROFILE_PROXY_STEP = 1 << 4,
  PARTRAIN_NCCL_PROFILE_PROXY_CTRL = 1 << 5,
  PARTRAIN_NCCL_PROFILE_KERNEL_CH = 1 << 6,
  PARTRAIN_NCCL_PROFILE_NET_PLUGIN = 1 << 7,
  PARTRAIN_NCCL_PROFILE_GROUP_API = 1 << 8, /* v5 on */
  PARTRAIN_NCCL_PROFILE_COLL_API = 1 << 9,
  PARTRAIN_NCCL_PROFILE_P2P_API = 1 << 10,
  PARTRAIN_NCCL_PROFILE_KERNEL_LAUNCH = 1 << 11,
  PARTRAIN_NCCL_PROFILE_CE_COLL = 1 << 12, /* v6 on */
  PARTRAIN_NCCL_PROFILE_CE_SYNC = 1 << 13,
  PARTRAIN_NCCL_PROFILE_CE_BATCH = 1 << 14,
};

/* The one state partrain reads (ncclProfilerEventState_t is an int-sized enum): a kernel
 * channel's end, with the channel's GPU timer in the state arguments. */
typedef int partrain_nccl_event_state_t;
#define PARTRAIN_NCCL_STATE_KERNEL_CH_STOP 22

/* ncclDebugLogger_t: the level is an int-sized enum. */
typedef void (*partrain_nccl_logger_t)(int level, unsigned long flags, const char* file, int line,
                                       const char* format, ...);

/* The members of the descriptor's union up to v5, in NCCL's order (v4 lacks the four *_api and
 * kernel_launch ones and the parent_group fields: it has its own struct below). */
typedef struct {
  bool graph_captured;
  int group_depth;
} partrain_nccl_group_api_t;

typedef struct {
  const char* func;
  size_t count;
  const char* datatype;
  int root;
  void* stream;
  bool graph_captured;
} partrain_nccl_coll_api_t;

typedef struct {
  const char* func;
  size_t count;
  const char* datatype;
  void* stream;
  bool graph_captured;
} partrain_nccl_p2p_api_t;

typedef struct {
  uint64_t seq_number; /* per communicator and NCCL function (comm->seqNumber[func]) */
  const char* func;    /* "AllReduce", "Broadcast", ... */
  const void* send_buff;
  void* recv_buff;
  size_t count;
  int root;
  const char* datatype;
  uint8_t n_channels;
  uint8_t n_warps;
  const char* algo;  /* "Ring", "Tree", "NVLS", ... */
  const char* proto; /* "LL", "LL128", "Simple" */
  void* parent_group;
} partrain_nccl_coll_t;

typedef struct {
  const char* func; /* "Send", "Recv" */
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
  uint8_t n_channels;
  void* parent_group;
} partrain_nccl_p2p_t;

typedef struct {
  pid_t pid;
  uint8_t channel_id;
  int peer;
  int n_steps;
  int chunk_size; /* bytes one step moves */
  int is_send;
} partrain_nccl_proxy_op_t;

typedef struct {
  uint8_t channel_id;
  uint64_t p_timer; /* the channel's start, GPU %globaltimer ns */
} partrain_nccl_kernel_ch_t;

typedef struct {
  int64_t id;
  void* data;
} partrain_nccl_net_plugin_t;

/* v6's copy-engine collectives (NCCL 2.29): declared for the descriptor's size only. */
typedef struct {
  uint64_t seq_number;
  const char* func;
  const void* send_buff;
  void* recv_buff;
  size_t count;
  int root;
  const char* datatype;
  const char* sync_strategy;
  bool intra_batch_sync;
  uint32_t batch_size;
  uint32_t num_batches;
  uint32_t ce_seq_num;
  void* stream;
} partrain_nccl_ce_coll_t;

/* The union's members up to v5, in NCCL's order. */
#define PARTRAIN_NCCL_DESCR_V5_MEMBERS \
  partrain_nccl_group_api_t group_api; \
  partrain_nccl_coll_api_t coll_api;   \
  partrain_nccl_p2p_api_t p2p_api;     \
  struct {                             \
    void* stream;                      \
  } kernel_launch;                     \
  partrain_nccl_coll_t coll;           \
  partrain_nccl_p2p_t p2p;             \
  partrain_nccl_proxy_op_t proxy_op;   \
  struct {                             \
    int step;                          \
  } proxy_step;                        \
  partrain_nccl_kernel_ch_t kernel_ch; \
  partrain_nccl_net_plugin_t net_plugin;

typedef struct {
  uint64_t type; /* one PARTRAIN_NCCL_PROFILE_* bit */
  void* parent_obj;
  int rank;
  union {
    PARTRAIN_NCCL_DESCR_V5_MEMBERS
  };
} partrain_nccl_event_descr_v5_t;

/* v6 adds the copy-engine collectives' members to the union. */
typedef struct {
  uint64_t type;
  void* parent_obj;
  int rank;
  union {
    PARTRAIN_NCCL_DESCR_V5_MEMBERS
    partrain_nccl_ce_coll_t ce_coll;
    struct {
      bool is_complete;
      int n_ranks;
    } ce_coll_sync;
    struct {
      int num_ops;
      size_t total_bytes;
      bool use_intra_sync;
    } ce_coll_batch;
  };
} partrain_nccl_event_descr_v6_t;

/* v4: the type is one byte and coll/p2p end before parent_group. */
typedef struct {
  uint8_t type;
  void* parent_obj;
  int rank;
  union {
    struct {
      uint64_t seq_number;
      const char* func;
      const void* send_buff;
      void* recv_buff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t n_channels;
      uint8_t n_warps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t n_channels;
    } p2p;
    partrain_nccl_proxy_op_t proxy_op;
    struct {
      int step;
    } proxy_step;
    partrain_nccl_kernel_ch_t kernel_ch;
    partrain_nccl_net_plugin_t net_plugin;
  };
} partrain_nccl_event_descr_v4_t;

/* The state arguments, alike in v4 to v6. */
typedef union {
  struct {
    size_t trans_size;
  } proxy_step;
  struct {
    int appended_proxy_ops;
  } proxy_ctrl;
  struct {
    void* data;
  } net_plugin;
  struct {
    uint64_t p_timer; /* the channel's end, GPU %globaltimer ns */
  } kernel_ch;
} partrain_nccl_event_state_args_t;

/* The tables. v5 and v6 differ only in the descriptor; v4's init takes its arguments in another
 * order (the name before the communicator's hash). */
typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t comm_hash, int* activation_mask,
                       const char* comm_name, int n_nodes, int nranks, int rank,
                       partrain_nccl_logger_t log);
  ncclResult_t (*start_event)(void* context, void** handle, partrain_nccl_event_descr_v6_t* descr);
  ncclResult_t (*stop_event)(void* handle);
  ncclResult_t (*record_event_state)(void* handle, partrain_nccl_event_state_t state,
                                     partrain_nccl_event_state_args_t* args);
  ncclResult_t (*finalize)(void* context);
} partrain_nccl_profiler_v6_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t comm_hash, int* activation_mask,
                       const char* comm_name, int n_nodes, int nranks, int rank,
                       partrain_nccl_logger_t log);
  ncclResult_t (*start_event)(void* context, void** handle, partrain_nccl_event_descr_v5_t* descr);
  ncclResult_t (*stop_event)(void* handle);
  ncclResult_t (*record_event_state)(void* handle, partrain_nccl_event_state_t state,
                                     partrain_nccl_event_state_args_t* args);
  ncclResult_t (*finalize)(void* context);
} partrain_nccl_profiler_v5_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, int* activation_mask, const char* comm_name,
                       uint64_t comm_hash, int n_nodes, int nranks, int rank,
                       partrain_nccl_logger_t log);
  ncclResult_t (*start_event)(void* context, void** handle, partrain_nccl_event_descr_v4_t* descr);
  ncclResult_t (*stop_event)(void* handle);
  ncclResult_t (*record_event_state)(void* handle, partrain_nccl_event_state_t state,
                                     partrain_nccl_event_state_args_t* args);
  ncclResult_t (*finalize)(void* context);
} partrain_nccl_profiler_v4_t;

#ifdef __cplusplus
} /* extern "C" */
#endif
