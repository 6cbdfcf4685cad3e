// NVTX injection: `partrain trace` names libpartrain_inject.so in NVTX_INJECTION64_PATH, so the
// NVTX loader compiled into a program (PyTorch, Megatron, nvtx3 users) hands its range calls to
// this file. Ranges become slices on the calling thread's track; those the step marker matches
// (default `ProfilerStep#N`) become the rank's steps, and what is recorded inside them carries
// the step. Only ranges are recorded (marks, categories, resources and payloads are ignored).
// Built in CUDA builds, where the nvtx3 headers are.
#include <nvtx3/nvToolsExt.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/clock.h"
#include "profiler/inject/injected_process.h"

namespace partrain::profiler::inject {
namespace {

struct OpenRange {
  std::string name;
  int64_t start_ns = 0;
  std::optional<int64_t> marked_step;  // the step this range is, when it is a step marker
  int64_t step_at_start = -1;          // the step the rank was in when it began
};

thread_local std::vector<OpenRange> t_pushed;  // nvtxRangePush/Pop nest per thread
std::mutex g_started_mutex;                     // nvtxRangeStart/End may cross threads
std::unordered_map<uint64_t, OpenRange> g_started;
std::atomic<uint64_t> g_next_range_id{1};
std::mutex g_strings_mutex;
std::deque<std::string> g_registered;  // nvtxStringHandle_t points into it (never moves)

std::string message_of(const nvtxEventAttributes_t* attributes) {
  if (attributes == nullptr) return "(unnamed range)";
  switch (attributes->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
      return attributes->message.ascii != nullptr ? attributes->message.ascii : "";
    case NVTX_MESSAGE_TYPE_REGISTERED:
      return attributes->message.registered != nullptr
                 ? *reinterpret_cast<const std::string*>(attributes->message.registered)
                 : "";
    default:
      return "(unnamed range)";  // wide-character names are not converted
  }
}

OpenRange open(std::string name) {
  OpenRange range{std::move(name), monotonic_ns(), std::nullopt, -1};
  if (InjectedProcess* process = InjectedProcess::current()) {
    range.step_at_start = process->current_step();
    range.marked_step = process->step_started(range.name);
  }
  return range;
}

void close(const OpenRange& range) {
  if (InjectedProcess* process = InjectedProcess::current()) {
    process->range_ended(range.name, range.start_ns, monotonic_ns(), range.marked_step,
                         range.step_at_start);
  }
}

int push(std::string name) {
  t_pushed.push_back(open(std::move(name)));
  return static_cast<int>(t_pushed.size()) - 1;
}

int pop() {
  if (t_pushed.empty()) return -1;  // NVTX's answer for a pop without a push
  close(t_pushed.back());
  t_pushed.pop_back();
  return static_cast<int>(t_pushed.size());
}

nvtxRangeId_t start(std::string name) {
  const uint64_t id = g_next_range_id.fetch_add(1);
  OpenRange range = open(std::move(name));
  std::lock_guard lock(g_started_mutex);
  g_started.emplace(id, std::move(range));
  return id;
}

void end(nvtxRangeId_t id) {
  OpenRange range;
  {
    std::lock_guard lock(g_started_mutex);
    auto found = g_started.find(id);
    if (found == g_started.end()) return;
    range = std::move(found->second);
    g_started.erase(found);
  }
  close(range);
}

int NVTX_API range_push_a(const char* message) { return push(message != nullptr ? message : ""); }
int NVTX_API range_push_ex(const nvtxEventAttributes_t* attributes) {
  return push(message_of(attributes));
}
int NVTX_API range_pop() { return pop(); }
nvtxRangeId_t NVTX_API range_start_a(const char* message) {
  return start(message != nullptr ? message : "");
}
nvtxRangeId_t NVTX_API range_start_ex(const nvtxEventAttributes_t* attributes) {
  return start(message_of(attributes));
}
void NVTX_API range_end(nvtxRangeId_t id) { end(id); }

int NVTX_API domain_range_push_ex(nvtxDomainHandle_t, const nvtxEventAttributes_t* attributes) {
  return push(message_of(attributes));
}
int NVTX_API domain_range_pop(nvtxDomainHandle_t) { return pop(); }
nvtxRangeId_t NVTX_API domain_range_start_ex(nvtxDomainHandle_t,
                                             const nvtxEventAttributes_t* attributes) {
  return start(message_of(attributes));
}
void NVTX_API domain_range_end(nvtxDomainHandle_t, nvtxRangeId_t id) { end(id); }
nvtxStringHandle_t NVTX_API domain_register_string_a(nvtxDomainHandle_t, const char* text) {
  std::lock_guard lock(g_strings_mutex);
  g_registered.emplace_back(text != nullptr ? text : "");
  return reinterpret_cast<nvtxStringHandle_t>(&g_registered.back());
}
nvtxDomainHandle_t NVTX_API domain_create_a(const char*) {
  static int domain;  // one handle for every domain: ranges are recorded alike
  return reinterpret_cast<nvtxDomainHandle_t>(&domain);
}

template <typename Fn>
void install(NvtxFunctionTable table, unsigned int size, unsigned int slot, Fn function) {
  if (table != nullptr && slot < size && table[slot] != nullptr) {
    *table[slot] = reinterpret_cast<NvtxFunctionPointer>(function);
  }
}

}  // namespace
}  // namespace partrain::profiler::inject

using namespace partrain::profiler::inject;  // NOLINT: the entry point below is C

// The NVTX loader's entry point. Returns 1 (a tool is attached) when the callback tables could be
// filled; 0 leaves the program's NVTX calls as the no-ops they were.
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    NvtxGetExportTableFunc_t get_export_table) {
  const auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr || callbacks->GetModuleFunctionTable == nullptr) return 0;
  NvtxFunctionTable core = nullptr;
  unsigned int core_size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &core_size) == 0) return 0;
  install(core, core_size, NVTX_CBID_CORE_RangePushA, &range_push_a);
  install(core, core_size, NVTX_CBID_CORE_RangePushEx, &range_push_ex);
  install(core, core_size, NVTX_CBID_CORE_RangePop, &range_pop);
  install(core, core_size, NVTX_CBID_CORE_RangeStartA, &range_start_a);
  install(core, core_size, NVTX_CBID_CORE_RangeStartEx, &range_start_ex);
  install(core, core_size, NVTX_CBID_CORE_RangeEnd, &range_end);
  NvtxFunctionTable core2 = nullptr;
  unsigned int core2_size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &core2_size) != 0) {
    install(core2, core2_size, NVTX_CBID_CORE2_DomainRangePushEx, &domain_range_push_ex);
    install(core2, core2_size, NVTX_CBID_CORE2_DomainRangePop, &domain_range_pop);
    install(core2, core2_size, NVTX_CBID_CORE2_DomainRangeStartEx, &domain_range_start_ex);
    install(core2, core2_size, NVTX_CBID_CORE2_DomainRangeEnd, &domain_range_end);
    install(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringA, &domain_register_string_a);
    install(core2, core2_size, NVTX_CBID_CORE2_DomainCreateA, &domain_create_a);
  }
  return 1;
}
