// A program annotated with NVTX the way training loops are (PyTorch's ProfilerStep#N ranges, a
// library's own domain with registered strings, a start/end range), for the NVTX injection
// tests: `nvtx_program FIRST_STEP STEPS`. It uses the real NVTX loader from the nvtx3 headers, so
// under `partrain trace` its calls reach libpartrain_inject.so through NVTX_INJECTION64_PATH.
#include <nvtx3/nvToolsExt.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace {

void busy(int microseconds) { std::this_thread::sleep_for(std::chrono::microseconds(microseconds)); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: nvtx_program FIRST_STEP STEPS\n");
    return 2;
  }
  const int first = std::atoi(argv[1]);
  const int steps = std::atoi(argv[2]);
  nvtxDomainHandle_t domain = nvtxDomainCreateA("mylib");
  nvtxStringHandle_t allreduce = nvtxDomainRegisterStringA(domain, "mylib.allreduce");
  const nvtxRangeId_t whole = nvtxRangeStartA("training");
  for (int step = first; step < first + steps; ++step) {
    const std::string marker = "ProfilerStep#" + std::to_string(step);
    nvtxRangePushA(marker.c_str());
    nvtxRangePushA("forward");
    busy(200);
    nvtxRangePop();
    nvtxEventAttributes_t attributes{};
    attributes.version = NVTX_VERSION;
    attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attributes.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    attributes.message.registered = allreduce;
    nvtxDomainRangePushEx(domain, &attributes);
    busy(100);
    nvtxDomainRangePop(domain);
    nvtxRangePop();
  }
  nvtxRangeEnd(whole);
  std::printf("ran %d steps\n", steps);
  return 0;
}
