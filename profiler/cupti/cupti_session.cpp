#include "profiler/cupti/cupti_session.h"

#include <cupti.h>
#include <dlfcn.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/env.h"
#include "core/log.h"
#include "core/status.h"
#include "core/thread_start.h"
#include "profiler/cupti/cupti_activity_parser.h"
#include "profiler/gpu_trace_level.h"
#include "profiler/recorder.h"

namespace partrain::profiler::cupti {
namespace {

// CUPTI's entry points, found in whichever libcupti could be loaded: partrain never links it,
// so processes that never touch CUDA never load it.
struct CuptiApi {
  decltype(&cuptiActivityEnable) activity_enable = nullptr;
  decltype(&cuptiActivityDisable) activity_disable = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiGetTimestamp) get_timestamp = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) dropped_records = nullptr;
  decltype(&cuptiActivityPushExternalCorrelationId) push_external = nullptr;
  decltype(&cuptiActivityPopExternalCorrelationId) pop_external = nullptr;
  decltype(&cuptiSubscribe) subscribe = nullptr;
  decltype(&cuptiSubscribe_v2) subscribe_v2 = nullptr;  // CUPTI 13.0 on: names who holds CUPTI
  decltype(&cuptiUnsubscribe) unsubscribe = nullptr;
  decltype(&cuptiEnableCallback) enable_callback = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;

  bool complete() const {
    return activity_enable && activity_disable && register_callbacks && get_timestamp &&
           flush_all && next_record && dropped_records && push_external && pop_external &&
           subscribe && unsubscribe && enable_callback && result_string;
  }
};

template <typename Fn>
void find(void* library, const char* name, Fn& out) {
  out = reinterpret_cast<Fn>(dlsym(library, name));
}

// libcupti already in the process (the framework's own, e.g. PyTorch's wheel), else the loader's
// search path, else the toolkit's.
void* load_cupti() {
  const char* names[] = {"libcupti.so", "libcupti.so.13", "libcupti.so.12", "libcupti.so.11.8"};
  for (const char* name : names) {
    if (void* library = dlopen(name, RTLD_NOW | RTLD_NOLOAD)) return library;
  }
  for (const char* name : names) {
    if (void* library = dlopen(name, RTLD_NOW)) return library;
  }
  for (const char* path : {"/usr/local/cuda/lib64/libcupti.so",
                           "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so"}) {
    if (void* library = dlopen(path, RTLD_NOW)) return library;
  }
  return nullptr;
}

void notice(const std::string& text) {
  std::fprintf(stderr, "partrain: %s\n", text.c_str());
}

constexpr size_t kBufferBytes = 8 << 20;  // DESIGN.md: 4-8 MB buffers
constexpr size_t kMaxBuffers = 32;        // 256 MiB at most in CUPTI's hands or ours
constexpr CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET,            CUPTI_ACTIVITY_KIND_MEMORY2,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION};

// The launch calls whose callbacks link a kernel to the NCCL call around it: NCCL launches its
// kernels through the driver (cuLaunchKernelEx) or the runtime, depending on its version.
constexpr std::pair<CUpti_CallbackDomain, CUpti_CallbackId> kLaunchCallbacks[] = {
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000},
};

// The NCCL call this thread is inside (its external correlation id), 0 outside any.
thread_local uint64_t t_nccl_call = 0;

// Parts of the session PARTRAIN_CUPTI_OFF switches off, to measure what each costs
// (docs/tracing.md, "What tracing costs"): a comma-separated list of step-flush (no flush at
// a step's end; the flusher's periodic one stays), launch-callbacks (NCCL's kernels are not
// linked to their calls) and callback-scoping (the launch callbacks stay on for every launch
// from the first linked NCCL call on, as before 2026-11-30, instead of only while a thread is
// inside one).
struct SwitchedOff {
  bool step_flush = false;
  bool launch_callbacks = false;
  bool callback_scoping = false;
};
SwitchedOff switched_off_from_env() {
  SwitchedOff off;
  const std::string list = "," + env::get("PARTRAIN_CUPTI_OFF").value_or("") + ",";
  off.step_flush = list.find(",step-flush,") != std::string::npos;
  off.launch_callbacks = list.find(",launch-callbacks,") != std::string::npos;
  off.callback_scoping = list.find(",callback-scoping,") != std::string::npos;
  return off;
}

// A step's end asks for a flush only this long after the last one. Each cuptiActivityFlushAll
// cost the launching thread about 1 ms on an H200 (docs/gpu-validation.md, run 7b: 1.485x ->
// 1.328x on a 7 ms step without the flush at each step); the flusher's own flush every second
// keeps a live trace as current for steps shorter than this.
constexpr auto kStepFlushGap = std::chrono::milliseconds(500);
// How long one delivered buffer's records may wait, in all, for room in the recorder.
constexpr auto kBufferRoomWait = std::chrono::seconds(2);

class CuptiSession;
// CUPTI's buffer callbacks carry no user data; the launch callback checks it too, since a
// session stopped at exit stays subscribed.
std::atomic<CuptiSession*> g_session{nullptr};

class CuptiSession final : public GpuTracing {
 public:
  CuptiSession(CuptiApi api, GpuTraceSink& sink) : api_(api), sink_(sink), translator_(sink) {}

  // Subscribes, installs the clock and the buffer callbacks, enables the activity kinds; on
  // failure the subscription is given back so another tool can have CUPTI.
  Status start() {
    Status started = enable();
    if (!started.is_ok()) {
      for (CUpti_ActivityKind kind : enabled_) api_.activity_disable(kind);
      if (subscriber_ != nullptr) api_.unsubscribe(subscriber_);
      subscriber_ = nullptr;
      stopped_ = true;  // nothing runs: the destructor leaves CUPTI alone
    }
    return started;
  }

  void push_correlation(uint64_t id) override {
    threads_in_calls(+1);
    api_.push_external(kNcclCorrelationKind, id);
    t_nccl_call = id;
  }
  void pop_correlation() override {
    uint64_t last = 0;
    api_.pop_external(kNcclCorrelationKind, &last);
    t_nccl_call = 0;
    threads_in_calls(-1);
  }
  void add_nccl_call(const NcclCallRecord& call) override {
    std::lock_guard lock(mutex_);
    translator_.add_nccl_call(call);
  }
  void flush() override {
    if (switched_off_.step_flush) return;  // the flusher's own second still comes
    {
      std::lock_guard lock(flusher_mutex_);
      if (std::chrono::steady_clock::now() - last_flush_ < kStepFlushGap) return;
      flush_now_ = true;
    }
    // On the program's thread, its CUDA alive: CUPTI's clock is read here and at the start,
    // never on the flusher, which can still tick after a program's libraries tore CUDA down at
    // exit (where CUPTI calls that reach the driver crash).
    sync_clock();
    flusher_wake_.notify_all();
  }
  // Everything still in CUPTI's hands recorded, then the activity kinds disabled, the callbacks
  // unsubscribed and the buffer callbacks pointed at no session: CUDA work after it (a rank's
  // device freeing its memory at teardown) reaches nothing of this session. Once.
  void stop() override { end(/*release_cupti=*/true); }
  // At exit: recorded the same way, the buffer callbacks pointed at no session, CUPTI left
  // enabled. A traced PyTorch program's libraries tear CUDA down before partrain's atexit
  // handler runs, and cuptiActivityDisable then crashed the program (SIGSEGV inside libcupti
  // 13.0, on an H200, 2026-11-26).
  void stop_at_exit() override { end(/*release_cupti=*/false); }
  ~CuptiSession() override { stop(); }

  static void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records);
  static void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer,
                                        size_t size, size_t valid);
  // A kernel launch's callback, on the launching thread: inside an NCCL call, the launch's
  // correlation id is linked to the call. CUPTI writes EXTERNAL_CORRELATION records only for API
  // activity records (RUNTIME, DRIVER), which cost far more than these few callbacks
  // (PARTRAIN_CUPTI_API=1 turns those on; both links then agree).
  static void CUPTIAPI on_launch(void* session, CUpti_CallbackDomain domain,
                                 CUpti_CallbackId callback, const void* data);

 private:
  uint8_t* take_buffer();
  void give_back(uint8_t* buffer);
  void translate(uint8_t* buffer, size_t valid);
  void periodic_flush();
  void sync_clock();
  // cuptiSubscribe, or cuptiSubscribe_v2 where CUPTI has it; `holder`: the name CUPTI gives of
  // the tool that holds it when it refuses (empty: none given).
  CUptiResult subscribe(std::string& holder);
  // A thread entered (+1) or left (-1) a linked NCCL call. The launch callbacks are on only
  // while some thread is inside one: on, they cost every kernel launch of the process, the
  // program's own too (about 6 us each on an H200, docs/gpu-validation.md run 7c).
  void threads_in_calls(int change);
  void set_launch_callbacks(bool on);
  Status enable();
  void end(bool release_cupti);

  const CuptiApi api_;
  const SwitchedOff switched_off_ = switched_off_from_env();
  CUpti_SubscriberHandle subscriber_ = nullptr;
  GpuTraceSink& sink_;
  std::mutex mutex_;  // the translator and the pool; never held while calling into CUPTI
  std::mutex callbacks_mutex_;  // the two below, and the callbacks' switch itself
  int threads_in_calls_ = 0;
  bool launch_callbacks_on_ = false;
  GpuActivityTranslator translator_;
  std::vector<uint8_t*> free_buffers_;
  size_t buffers_made_ = 0;
  uint64_t buffers_refused_ = 0;
  std::thread flusher_;
  std::mutex flusher_mutex_;
  std::condition_variable flusher_wake_;
  bool stopping_ = false;
  bool stopped_ = false;
  std::vector<CUpti_ActivityKind> enabled_;  // to disable at stop()
  bool flush_now_ = false;  // a step ended: flush before the second is up
  std::chrono::steady_clock::time_point last_flush_{};  // under flusher_mutex_
  // The monotonic clock minus CUPTI's (cuptiGetTimestamp), measured at the start, at a step's
  // end flush and at stop(): records are placed on the rank's timeline with the latest offset.
  std::atomic<int64_t> clock_offset_ns_{0};
};

std::string result_text(const CuptiApi& api, CUptiResult result) {
  const char* text = nullptr;
  if (api.result_string != nullptr) api.result_string(result, &text);
  return text != nullptr ? text : "CUPTI error " + std::to_string(static_cast<int>(result));
}

CUptiResult CuptiSession::subscribe(std::string& holder) {
  if (api_.subscribe_v2 == nullptr) {
    return api_.subscribe(&subscriber_, &CuptiSession::on_launch, this);
  }
  std::array<char, CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN> old_name{};
  CUpti_SubscriberParams params{};
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.subscriberName = "partrain";
  params.oldSubscriberName = old_name.data();
  params.oldSubscriberSize = old_name.size();
  const CUptiResult result =
      api_.subscribe_v2(&subscriber_, &CuptiSession::on_launch, this, &params);
  if (result == CUPTI_SUCCESS || result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    holder.assign(old_name.data(), strnlen(old_name.data(), old_name.size()));
    return result;
  }
  // A CUPTI whose cuptiSubscribe_v2 refuses what it was given: the first way, which every
  // CUPTI partrain has run on takes.
  subscriber_ = nullptr;
  return api_.subscribe(&subscriber_, &CuptiSession::on_launch, this);
}

Status CuptiSession::enable() {
  // CUPTI has one subscriber per process: when nsys, the PyTorch profiler or another tool holds
  // it, partrain stays out of its way. cuptiSubscribe_v2 (CUPTI 13.0 on) names the holder, and
  // names partrain to a tool that comes second ("CUPTI for partrain"). Its multi-subscriber mode
  // (allowMultipleSubscribers, CUPTI 13.2; activity per subscriber from 13.5) is not asked for:
  // before 13.5 the activity buffers are shared, so a second tool's
  // cuptiActivityRegisterCallbacks would take partrain's records.
  std::string holder;
  CUptiResult result = subscribe(holder);
  if (result != CUPTI_SUCCESS) subscriber_ = nullptr;
  if (result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    if (!holder.empty()) {
      return unavailable(
          "CUPTI is already in use in this process by \"{}\": GPU kernels are not "
          "recorded; NCCL calls still are",
          holder);
    }
    return unavailable("CUPTI is already in use by another profiler in this process (nsys, the "
                       "PyTorch profiler, ...): GPU kernels are not recorded; NCCL calls still are");
  }
  if (result != CUPTI_SUCCESS) {
    return unavailable("CUPTI cannot start ({}): GPU kernels are not recorded; NCCL calls "
                       "still are", result_text(api_, result));
  }
  // CUPTI's own clock, converted when records are read: a timestamp callback
  // (cuptiActivityRegisterTimestampCallback) cost about 1 ms of a 7 ms step on an H200
  // (docs/gpu-validation.md, run 7c: 1.549x -> 1.388x).
  sync_clock();
  result = api_.register_callbacks(&CuptiSession::buffer_requested,
                                   &CuptiSession::buffer_completed);
  if (result != CUPTI_SUCCESS) {
    return unavailable("CUPTI buffers cannot be registered ({}): GPU kernels are not recorded; "
                       "NCCL calls still are", result_text(api_, result));
  }
  std::vector<CUpti_ActivityKind> kinds(std::begin(kKinds), std::end(kKinds));
  if (gpu_trace_level_from_env() == GpuTraceLevel::kKernels) {  // no copies, memory or syncs
    kinds = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};
  }
  if (env::get("PARTRAIN_CUPTI_API").value_or("") == "1") {
    kinds.push_back(CUPTI_ACTIVITY_KIND_RUNTIME);
    kinds.push_back(CUPTI_ACTIVITY_KIND_DRIVER);
  }
  for (CUpti_ActivityKind kind : kinds) {
    result = api_.activity_enable(kind);
    if (result != CUPTI_SUCCESS) {
      return unavailable("CUPTI activity kind {} cannot be enabled ({}): GPU kernels are not "
                         "recorded; NCCL calls still are", static_cast<int>(kind),
                         result_text(api_, result));
    }
    enabled_.push_back(kind);
  }
  // Without its thread the kernels are flushed on each step and at exit only.
  if (Status started = start_thread(flusher_, [this] { periodic_flush(); }); !started.is_ok()) {
    log::warn("CUPTI: {}: GPU activity is flushed only at step ends and at exit",
              started.message());
  }
  return Status::ok();
}

void CUPTIAPI CuptiSession::on_launch(void* session, CUpti_CallbackDomain /*domain*/,
                                      CUpti_CallbackId /*callback*/, const void* data) {
  const uint64_t call = t_nccl_call;
  if (call == 0 || session == nullptr || data == nullptr) return;
  const auto* launch = static_cast<const CUpti_CallbackData*>(data);
  if (launch->callbackSite != CUPTI_API_ENTER) return;
  auto* self = static_cast<CuptiSession*>(session);
  if (g_session.load() != self) return;  // stopped: its sink may be gone
  std::lock_guard lock(self->mutex_);
  self->translator_.add(GpuExternalCorrelation{call, launch->correlationId});
}

void CuptiSession::threads_in_calls(int change) {
  if (switched_off_.launch_callbacks) return;
  std::lock_guard lock(callbacks_mutex_);
  threads_in_calls_ += change;
  const bool wanted =
      threads_in_calls_ > 0 || (switched_off_.callback_scoping && launch_callbacks_on_);
  if (wanted != launch_callbacks_on_) set_launch_callbacks(wanted);
}

void CuptiSession::set_launch_callbacks(bool on) {
  for (const auto& [domain, callback] : kLaunchCallbacks) {
    // One this CUDA does not know (an older driver's) links nothing: its launches aren't made.
    (void)api_.enable_callback(on ? 1 : 0, subscriber_, domain, callback);
  }
  launch_callbacks_on_ = on;
}

void CuptiSession::sync_clock() {
  // The tightest of three readings between two monotonic ones: its midpoint is the offset.
  int64_t best_gap = std::numeric_limits<int64_t>::max();
  for (int i = 0; i < 3; ++i) {
    const int64_t before = monotonic_ns();
    uint64_t cupti = 0;
    if (api_.get_timestamp(&cupti) != CUPTI_SUCCESS || cupti == 0) return;
    const int64_t after = monotonic_ns();
    if (after - before < best_gap) {
      best_gap = after - before;
      clock_offset_ns_.store(before + (after - before) / 2 - static_cast<int64_t>(cupti),
                             std::memory_order_relaxed);
    }
  }
}

// Buffers are delivered when full or flushed: a flush every second, and one when a step ends
// half a second or more after the last, keep a live dashboard and a killed process's trace at
// most a second behind.
void CuptiSession::periodic_flush() {
  std::unique_lock lock(flusher_mutex_);
  while (true) {
    flusher_wake_.wait_for(lock, std::chrono::seconds(1),
                           [this] { return stopping_ || flush_now_; });
    if (stopping_) return;
    flush_now_ = false;
    last_flush_ = std::chrono::steady_clock::now();
    lock.unlock();
    api_.flush_all(0);
    lock.lock();
  }
}

uint8_t* CuptiSession::take_buffer() {
  std::lock_guard lock(mutex_);
  if (!free_buffers_.empty()) {
    uint8_t* buffer = free_buffers_.back();
    free_buffers_.pop_back();
    return buffer;
  }
  if (buffers_made_ == kMaxBuffers) {
    ++buffers_refused_;  // CUPTI drops what it cannot store: counted through its dropped count
    return nullptr;
  }
  ++buffers_made_;
  return static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
}

void CuptiSession::give_back(uint8_t* buffer) {
  std::lock_guard lock(mutex_);
  free_buffers_.push_back(buffer);
}

void CUPTIAPI CuptiSession::buffer_requested(uint8_t** buffer, size_t* size,
                                             size_t* max_records) {
  *max_records = 0;  // as many as fit
  CuptiSession* session = g_session.load();
  *buffer = session != nullptr ? session->take_buffer() : nullptr;
  *size = *buffer != nullptr ? kBufferBytes : 0;
}

void CUPTIAPI CuptiSession::buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer,
                                             size_t /*size*/, size_t valid) {
  CuptiSession* session = g_session;
  if (session == nullptr || buffer == nullptr) return;
  {
    // A buffer holds up to a second of the GPU's work: 6,000 kernels of a PyTorch program whose
    // names average 400 bytes overran this thread's recorder buffer and lost 60% of them (H200,
    // 2026-11-30, run 8). This is CUPTI's thread (or the flusher's, or the exit's), never a
    // training thread: it waits for the recorder to drain instead. Launch callbacks inside NCCL
    // calls wait on the translator's lock meanwhile.
    Recorder::WaitForRoom wait(kBufferRoomWait);
    session->translate(buffer, valid);
  }
  size_t dropped = 0;
  if (session->api_.dropped_records(context, stream, &dropped) == CUPTI_SUCCESS && dropped > 0) {
    std::lock_guard lock(session->mutex_);
    session->sink_.emit(StatEvent{"cupti_dropped_records", session->sink_.rank(),
                                  static_cast<int64_t>(dropped), StatSeverity::kDataLoss,
                                  "GPU activity records CUPTI dropped for want of buffer space"});
  }
  session->give_back(buffer);
}

void CuptiSession::translate(uint8_t* buffer, size_t valid) {
  const int64_t offset = clock_offset_ns_.load(std::memory_order_relaxed);
  std::vector<GpuActivity> activities;
  CUpti_Activity* record = nullptr;
  while (api_.next_record(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (std::optional<GpuActivity> activity = parse_activity(*record, offset)) {
      activities.push_back(std::move(*activity));
    }
  }
  std::lock_guard lock(mutex_);
  for (const GpuActivity& activity : activities) translator_.add(activity);
  translator_.flush(/*final=*/false);
}

void CuptiSession::end(bool release_cupti) {
  if (stopped_) return;
  stopped_ = true;
  {
    std::lock_guard lock(flusher_mutex_);
    stopping_ = true;
  }
  flusher_wake_.notify_all();
  if (flusher_.joinable()) flusher_.join();
  // At exit CUDA may be gone, and CUPTI calls that reach the driver with it: the last offset
  // stays (measured within the flusher's second).
  if (release_cupti) sync_clock();
  api_.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (release_cupti) {
    for (CUpti_ActivityKind kind : enabled_) api_.activity_disable(kind);
    api_.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);  // what was recorded until the disable
  }
  g_session = nullptr;  // a buffer CUPTI still asks for gets none: nothing reaches this session
  if (release_cupti && subscriber_ != nullptr) {
    api_.unsubscribe(subscriber_);  // launch callbacks off
    subscriber_ = nullptr;
  }
  std::lock_guard lock(mutex_);
  translator_.flush(/*final=*/true);
  if (translator_.calls_without_gpu_time() > 0) {
    sink_.emit(StatEvent{"nccl_calls_without_gpu_time", sink_.rank(),
                         static_cast<int64_t>(translator_.calls_without_gpu_time()),
                         StatSeverity::kInfo,
                         "NCCL calls whose kernels CUPTI never reported (busbw for them uses "
                         "host time)"});
  }
  if (buffers_refused_ > 0) {
    sink_.emit(StatEvent{"cupti_buffers_refused", sink_.rank(),
                         static_cast<int64_t>(buffers_refused_), StatSeverity::kDataLoss,
                         "CUPTI buffer requests refused: the pool's 256 MiB were all in use"});
  }
}

}  // namespace

std::unique_ptr<GpuTracing> start_session(GpuTraceSink& sink) {
  void* library = load_cupti();
  if (library == nullptr) {
    notice("libcupti was not found (install the CUDA toolkit's CUPTI, or put it on "
           "LD_LIBRARY_PATH): GPU kernels are not recorded; NCCL calls still are");
    return nullptr;
  }
  CuptiApi api;
  find(library, "cuptiActivityEnable", api.activity_enable);
  find(library, "cuptiActivityDisable", api.activity_disable);
  find(library, "cuptiActivityRegisterCallbacks", api.register_callbacks);
  find(library, "cuptiGetTimestamp", api.get_timestamp);
  find(library, "cuptiActivityFlushAll", api.flush_all);
  find(library, "cuptiActivityGetNextRecord", api.next_record);
  find(library, "cuptiActivityGetNumDroppedRecords", api.dropped_records);
  find(library, "cuptiActivityPushExternalCorrelationId", api.push_external);
  find(library, "cuptiActivityPopExternalCorrelationId", api.pop_external);
  find(library, "cuptiSubscribe", api.subscribe);
  find(library, "cuptiSubscribe_v2", api.subscribe_v2);
  find(library, "cuptiUnsubscribe", api.unsubscribe);
  find(library, "cuptiGetResultString", api.result_string);
  find(library, "cuptiEnableCallback", api.enable_callback);
  if (!api.complete()) {
    notice("the libcupti found lacks entry points partrain needs (CUDA 11.6 or newer is): GPU "
           "kernels are not recorded; NCCL calls still are");
    return nullptr;
  }
  auto session = std::make_unique<CuptiSession>(api, sink);
  g_session = session.get();
  if (Status started = session->start(); !started.is_ok()) {
    g_session = nullptr;
    notice(started.message());
    return nullptr;
  }
  return session;
}

}  // namespace partrain::profiler::cupti
