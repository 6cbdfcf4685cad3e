#include "tests/support/fake_nccl/fake_nccl_profiler.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "profiler/inject/nccl_profiler_abi.h"

#define FAKE_CHANNEL_NS 40000u
#define FAKE_MAX_TASKS 64

struct Plugin {
  int version; /* 0: none loaded */
  void* library;
  partrain_nccl_profiler_v6_t* v6;
  partrain_nccl_profiler_v5_t* v5;
  partrain_nccl_profiler_v4_t* v4;
  int mask;
};

struct Task {
  struct FakeProfiledComm* comm;
  int is_p2p;
  const char* func;
  size_t count;
  int peer;
  uint64_t gpu_start_ns;
  void* handle;
};

struct FakeProfiledComm {
  void* context;
  int rank;
  uint64_t seq[16]; /* per function, as NCCL's comm->seqNumber */
  struct Task later[FAKE_MAX_TASKS];
  int n_later;
};

/* One NCCL library per process, as the real one. */
static struct Plugin g_plugin;
static int g_group_depth;
static struct Task g_group[FAKE_MAX_TASKS];
static int g_group_tasks;

static uint64_t unix_ns(void) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static void note(const char* format, ...) {
  const char* path = getenv("FAKE_NCCL_PROFILER_LOG");
  if (path == NULL || path[0] == '\0') return;
  FILE* log = fopen(path, "a");
  if (log == NULL) return;
  va_list args;
  va_start(args, format);
  vfprintf(log, format, args);
  va_end(args);
  fputc('\n', log);
  fclose(log);
}

/* NCCL's loader: the versions this NCCL knows, newest first; the first table found wins. */
static void load_plugin(void) {
  const char* offered = getenv("FAKE_NCCL_PROFILER");
  const char* name = getenv("NCCL_PROFILER_PLUGIN");
  if (g_plugin.version != 0 || offered == NULL || strcmp(offered, "none") == 0 || name == NULL ||
      name[0] == '\0' || strcmp(name, "none") == 0) {
    return;
  }
  void* library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (library == NULL) {
    note("plugin %s cannot be opened", name);
    return;
  }
  for (const char* v = offered; *v != '\0'; ++v) {
    char symbol[32];
    if (*v < '4' || *v > '6') continue;
    snprintf(symbol, sizeof symbol, "ncclProfiler_v%c", *v);
    void* table = dlsym(library, symbol);
    if (table == NULL) continue;
    g_plugin.library = library;
    g_plugin.version = *v - '0';
    if (g_plugin.version == 6) g_plugin.v6 = (partrain_nccl_profiler_v6_t*)table;
    if (g_plugin.version == 5) g_plugin.v5 = (partrain_nccl_profiler_v5_t*)table;
    if (g_plugin.version == 4) g_plugin.v4 = (partrain_nccl_profiler_v4_t*)table;
    note("plugin loaded as %s", symbol);
    return;
  }
  note("plugin %s is unsupported", name);
  dlclose(library);
}

static void unload_plugin(void) {
  if (g_plugin.library != NULL) dlclose(g_plugin.library);
  memset(&g_plugin, 0, sizeof g_plugin);
}

struct FakeProfiledComm* fake_profiler_comm_init(uint64_t comm_hash, int nranks, int rank) {
  load_plugin();
  if (g_plugin.version == 0) return NULL;
  void* context = NULL;
  int mask = 0;
  ncclResult_t result = ncclSuccess;
  if (g_plugin.version == 6) {
    result = g_plugin.v6->init(&context, comm_hash, &mask, "", 1, nranks, rank, NULL);
  } else if (g_plugin.version == 5) {
    result = g_plugin.v5->init(&context, comm_hash, &mask, "", 1, nranks, rank, NULL);
  } else {
    result = g_plugin.v4->init(&context, &mask, "", comm_hash, 1, nranks, rank, NULL);
  }
  if (result != ncclSuccess) {
    /* NCCL: "Profiler init failed ... Continue without profiler." */
    note("plugin init failed with error %d: continuing without it", (int)result);
    unload_plugin();
    return NULL;
  }
  g_plugin.mask = mask;
  struct FakeProfiledComm* comm = calloc(1, sizeof(struct FakeProfiledComm));
  comm->context = context;
  comm->rank = rank;
  return comm;
}

/* A v6-shaped descriptor, handed to the plugin in the layout of the version it was loaded as
 * (NCCL's src/plugin/profiler/profiler_v4.cc translates alike). */
static void* start_event(void* context, const partrain_nccl_event_descr_v6_t* d) {
  void* handle = NULL;
  if ((g_plugin.mask & (int)d->type) == 0) return NULL;
  if (g_plugin.version == 6) {
    partrain_nccl_event_descr_v6_t copy = *d;
    g_plugin.v6->start_event(context, &handle, &copy);
  } else if (g_plugin.version == 5) {
    partrain_nccl_event_descr_v5_t v5;
    memset(&v5, 0, sizeof v5);
    v5.type = d->type;
    v5.parent_obj = d->parent_obj;
    v5.rank = d->rank;
    if (d->type == PARTRAIN_NCCL_PROFILE_COLL) v5.coll = d->coll;
    if (d->type == PARTRAIN_NCCL_PROFILE_P2P) v5.p2p = d->p2p;
    if (d->type == PARTRAIN_NCCL_PROFILE_PROXY_OP) v5.proxy_op = d->proxy_op;
    if (d->type == PARTRAIN_NCCL_PROFILE_KERNEL_CH) v5.kernel_ch = d->kernel_ch;
    g_plugin.v5->start_event(context, &handle, &v5);
  } else {
    partrain_nccl_event_descr_v4_t v4;
    memset(&v4, 0, sizeof v4);
    v4.type = (uint8_t)d->type;
    v4.parent_obj = d->parent_obj;
    v4.rank = d->rank;
    if (d->type == PARTRAIN_NCCL_PROFILE_COLL) {
      v4.coll.seq_number = d->coll.seq_number;
      v4.coll.func = d->coll.func;
      v4.coll.count = d->coll.count;
      v4.coll.root = d->coll.root;
      v4.coll.datatype = d->coll.datatype;
      v4.coll.n_channels = d->coll.n_channels;
      v4.coll.n_warps = d->coll.n_warps;
      v4.coll.algo = d->coll.algo;
      v4.coll.proto = d->coll.proto;
    }
    if (d->type == PARTRAIN_NCCL_PROFILE_P2P) {
      v4.p2p.func = d->p2p.func;
      v4.p2p.count = d->p2p.count;
      v4.p2p.datatype = d->p2p.datatype;
      v4.p2p.peer = d->p2p.peer;
      v4.p2p.n_channels = d->p2p.n_channels;
    }
    if (d->type == PARTRAIN_NCCL_PROFILE_PROXY_OP) v4.proxy_op = d->proxy_op;
    if (d->type == PARTRAIN_NCCL_PROFILE_KERNEL_CH) v4.kernel_ch = d->kernel_ch;
    g_plugin.v4->start_event(context, &handle, &v4);
  }
  return handle;
}

static void stop_event(void* handle) {
  if (handle == NULL) return;
  if (g_plugin.version == 6) g_plugin.v6->stop_event(handle);
  if (g_plugin.version == 5) g_plugin.v5->stop_event(handle);
  if (g_plugin.version == 4) g_plugin.v4->stop_event(handle);
}

static void kernel_channel_stop(void* handle, uint64_t gpu_ns) {
  partrain_nccl_event_state_args_t args;
  memset(&args, 0, sizeof args);
  args.kernel_ch.p_timer = gpu_ns;
  if (g_plugin.version == 6) {
    g_plugin.v6->record_event_state(handle, PARTRAIN_NCCL_STATE_KERNEL_CH_STOP, &args);
  }
  if (g_plugin.version == 5) {
    g_plugin.v5->record_event_state(handle, PARTRAIN_NCCL_STATE_KERNEL_CH_STOP, &args);
  }
  if (g_plugin.version == 4) {
    g_plugin.v4->record_event_state(handle, PARTRAIN_NCCL_STATE_KERNEL_CH_STOP, &args);
  }
}

static int channels_of(const struct Task* task) { return task->is_p2p ? 1 : 2; }

static int function_index(const char* func) {
  static const char* const kFunctions[] = {"Broadcast", "Reduce",  "AllGather", "ReduceScatter",
                                           "AllReduce", "Send",    "Recv",      "AlltoAll",
                                           "Gather",    "Scatter", NULL};
  for (int i = 0; kFunctions[i] != NULL; ++i) {
    if (strcmp(kFunctions[i], func) == 0) return i;
  }
  return 15;
}

/* The host side: the task's start, its proxy operations, its stop (NCCL's hostStreamPlanTask). */
static void start_task(struct Task* task) {
  struct FakeProfiledComm* comm = task->comm;
  partrain_nccl_event_descr_v6_t d;
  memset(&d, 0, sizeof d);
  d.rank = comm->rank;
  uint64_t seq = 0;
  if (task->is_p2p) {
    d.type = PARTRAIN_NCCL_PROFILE_P2P;
    d.p2p.func = task->func;
    d.p2p.count = task->count;
    d.p2p.datatype = "ncclFloat32";
    d.p2p.peer = task->peer;
    d.p2p.n_channels = (uint8_t)channels_of(task);
  } else {
    const char* algo = getenv("FAKE_NCCL_ALGO");
    seq = comm->seq[function_index(task->func)]++;
    d.type = PARTRAIN_NCCL_PROFILE_COLL;
    d.coll.seq_number = seq;
    d.coll.func = task->func;
    d.coll.count = task->count;
    d.coll.root = task->peer;
    d.coll.datatype = "ncclFloat32";
    d.coll.n_channels = (uint8_t)channels_of(task);
    d.coll.n_warps = 16;
    d.coll.algo = algo != NULL ? algo : "Ring";
    d.coll.proto = "Simple";
  }
  task->handle = start_event(comm->context, &d);
  for (int c = 0; c < channels_of(task); ++c) {
    partrain_nccl_event_descr_v6_t op;
    memset(&op, 0, sizeof op);
    op.type = PARTRAIN_NCCL_PROFILE_PROXY_OP;
    op.parent_obj = task->handle;
    op.rank = comm->rank;
    op.proxy_op.pid = getpid();
    op.proxy_op.channel_id = (uint8_t)c;
    op.proxy_op.peer = task->peer;
    op.proxy_op.n_steps = 4;
    op.proxy_op.chunk_size = 65536;
    op.proxy_op.is_send = strcmp(task->func, "Recv") != 0;
    stop_event(start_event(comm->context, &op));
  }
  stop_event(task->handle);
  task->gpu_start_ns = unix_ns() + 2000;
  note("task %s seq=%llu count=%zu channels=%d gpu_ns=%llu", task->func, (unsigned long long)seq,
       task->count, channels_of(task),
       (unsigned long long)(FAKE_CHANNEL_NS + 1000u * (uint64_t)(channels_of(task) - 1)));
}

/* The proxy thread's report once the kernel ran: each channel's start and end. */
static void report_kernel(struct Task* task) {
  for (int c = 0; c < channels_of(task); ++c) {
    partrain_nccl_event_descr_v6_t d;
    memset(&d, 0, sizeof d);
    d.type = PARTRAIN_NCCL_PROFILE_KERNEL_CH;
    d.parent_obj = task->handle;
    d.rank = task->comm->rank;
    d.kernel_ch.channel_id = (uint8_t)c;
    d.kernel_ch.p_timer = task->gpu_start_ns + 1000u * (uint64_t)c;
    void* channel = start_event(task->comm->context, &d);
    if (channel == NULL) continue;
    kernel_channel_stop(channel, d.kernel_ch.p_timer + FAKE_CHANNEL_NS);
    stop_event(channel);
  }
}

static void report_later_ones(struct FakeProfiledComm* comm) {
  for (int i = 0; i < comm->n_later; ++i) report_kernel(&comm->later[i]);
  comm->n_later = 0;
}

void fake_profiler_task(struct FakeProfiledComm* comm, const char* func, size_t count, int peer) {
  if (comm == NULL || g_plugin.version == 0) return;
  report_later_ones(comm);
  struct Task task = {
      comm, strcmp(func, "Send") == 0 || strcmp(func, "Recv") == 0, func, count, peer, 0, NULL};
  if (g_group_depth > 0) {
    if (g_group_tasks < FAKE_MAX_TASKS) g_group[g_group_tasks++] = task;
    return;
  }
  start_task(&task);
  if (comm->n_later < FAKE_MAX_TASKS) comm->later[comm->n_later++] = task;
}

void fake_profiler_group_start(void) { ++g_group_depth; }

static int larger_first(const void* a, const void* b) {
  const struct Task* x = a;
  const struct Task* y = b;
  return x->count < y->count ? 1 : x->count > y->count ? -1 : 0;
}

void fake_profiler_group_end(void) {
  if (g_group_depth == 0 || --g_group_depth > 0) return;
  /* NCCL schedules a group's tasks by size, largest first, not in call order. */
  qsort(g_group, (size_t)g_group_tasks, sizeof g_group[0], larger_first);
  for (int i = 0; i < g_group_tasks; ++i) start_task(&g_group[i]);
  for (int i = 0; i < g_group_tasks; ++i) report_kernel(&g_group[i]);
  g_group_tasks = 0;
}

void fake_profiler_comm_end(struct FakeProfiledComm* comm) {
  if (comm == NULL) return;
  if (g_plugin.version != 0) {
    report_later_ones(comm);
    if (g_plugin.version == 6) g_plugin.v6->finalize(comm->context);
    if (g_plugin.version == 5) g_plugin.v5->finalize(comm->context);
    if (g_plugin.version == 4) g_plugin.v4->finalize(comm->context);
  }
  free(comm);
}
