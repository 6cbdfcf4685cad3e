#include "runner/device/isolated_memory.h"

#include <execinfo.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>

#include "core/byte_size.h"

namespace partrain::runner {
namespace {

// The reserved ranges the fault handler recognises. A signal handler can read nothing but
// process-wide state, so this is the one global here: written when a range is reserved or
// released, read only by the handler.
struct ReservedRange {
  std::atomic<uintptr_t> base{0};
  std::atomic<size_t> size{0};
};
std::array<ReservedRange, 16> g_ranges;
struct sigaction g_previous_segv {};

void register_range(uintptr_t base, size_t size) {
  for (ReservedRange& range : g_ranges) {
    uintptr_t expected = 0;
    if (range.base.compare_exchange_strong(expected, base)) {
      range.size.store(size);
      return;
    }
  }
}

void unregister_range(uintptr_t base) {
  for (ReservedRange& range : g_ranges) {
    if (range.base.load() == base) {
      range.size.store(0);
      range.base.store(0);
    }
  }
}

bool in_reserved_range(uintptr_t address) {
  for (const ReservedRange& range : g_ranges) {
    const uintptr_t base = range.base.load();
    if (base != 0 && address >= base && address - base < range.size.load()) return true;
  }
  return false;
}

void report_isolated_fault(int signal, siginfo_t* info, void* context) {
  const auto address = reinterpret_cast<uintptr_t>(info->si_addr);
  if (in_reserved_range(address)) {
    // Only async-signal-safe calls: snprintf into a stack buffer is not listed as such, but it
    // formats no floating point here and takes no lock in glibc; write(2) and backtrace_symbols_fd
    // are the usual crash-report pair.
    char message[256];
    const int length = std::snprintf(
        message, sizeof message,
        "partrain: host code read or wrote isolated device memory at %#lx (--device "
        "cpu-isolated): a workload must reach its tensors through Device calls; backtrace:\n",
        static_cast<unsigned long>(address));
    if (length > 0) (void)!write(STDERR_FILENO, message, static_cast<size_t>(length));
    void* frames[64];
    backtrace_symbols_fd(frames, backtrace(frames, 64), STDERR_FILENO);
  }
  // Hand the fault to whoever had it before (the default: the process ends with SIGSEGV, as
  // its launcher reports).
  if (g_previous_segv.sa_flags & SA_SIGINFO) {
    if (g_previous_segv.sa_sigaction != nullptr) {
      g_previous_segv.sa_sigaction(signal, info, context);
      return;
    }
  } else if (g_previous_segv.sa_handler != SIG_DFL && g_previous_segv.sa_handler != SIG_IGN) {
    g_previous_segv.sa_handler(signal);
    return;
  }
  ::signal(SIGSEGV, SIG_DFL);  // returning re-runs the faulting access, which now ends us
}

}  // namespace

StatusOr<std::unique_ptr<IsolatedMemory>> IsolatedMemory::reserve(size_t address_space_bytes) {
  void* base = mmap(nullptr, address_space_bytes, PROT_NONE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    return unavailable("cannot reserve {} of address space for the isolated device: {} (is "
                       "ulimit -v set?)",
                       format_bytes(address_space_bytes), std::strerror(errno));
  }
  const auto address = reinterpret_cast<uintptr_t>(base);
  register_range(address, address_space_bytes);
  return std::unique_ptr<IsolatedMemory>(new IsolatedMemory(address, address_space_bytes));
}

IsolatedMemory::~IsolatedMemory() {
  for (auto& [address, block] : blocks_) host_.free(block.host, block.bytes);
  unregister_range(base_);
  munmap(reinterpret_cast<void*>(base_), size_);
}

void* IsolatedMemory::allocate(size_t bytes) {
  const size_t rounded = (std::max<size_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
  void* host = host_.allocate(rounded);
  if (host == nullptr) return nullptr;
  std::memset(host, kPoison, rounded);
  std::lock_guard lock(mutex_);
  // One unused alignment unit between blocks: a range running past its block's end lands in no
  // block rather than at the start of the next.
  if (next_ - base_ + rounded + kAlignment > size_) {
    host_.free(host, rounded);
    return nullptr;
  }
  const uintptr_t address = next_;
  next_ += rounded + kAlignment;
  blocks_.emplace(address, Block{rounded, host});
  return reinterpret_cast<void*>(address);
}

void IsolatedMemory::free(void* pointer, size_t /*bytes*/) {
  Block block;
  {
    std::lock_guard lock(mutex_);
    auto found = blocks_.find(reinterpret_cast<uintptr_t>(pointer));
    if (found == blocks_.end()) return;
    block = found->second;
    blocks_.erase(found);
  }
  host_.free(block.host, block.bytes);
}

void* IsolatedMemory::resolve(const void* address, size_t bytes) const {
  const auto at = reinterpret_cast<uintptr_t>(address);
  std::lock_guard lock(mutex_);
  auto after = blocks_.upper_bound(at);
  if (after == blocks_.begin()) return nullptr;
  const auto& [start, block] = *std::prev(after);
  const uintptr_t offset = at - start;
  if (offset > block.bytes || bytes > block.bytes - offset) return nullptr;
  return static_cast<unsigned char*>(block.host) + offset;
}

size_t IsolatedMemory::live_bytes() const {
  std::lock_guard lock(mutex_);
  size_t bytes = 0;
  for (const auto& [address, block] : blocks_) bytes += block.bytes;
  return bytes;
}

bool IsolatedMemory::contains(const void* address) const {
  const auto at = reinterpret_cast<uintptr_t>(address);
  return at >= base_ && at - base_ < size_;
}

void install_isolated_fault_report() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = report_isolated_fault;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &g_previous_segv);
  });
}

}  // namespace partrain::runner
