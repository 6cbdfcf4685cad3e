// Memory a host pointer cannot reach, as a GPU's: the addresses handed out lie in a reserved
// range of the address space that is never readable or writable, and each allocation's bytes live
// in ordinary host memory beside it, found again through resolve(). Host code that dereferences
// such an address faults at once (a SIGSEGV naming it, see install_isolated_fault_report), so a
// workload that runs on the isolated CPU device touches its tensors only through Device calls,
// which is what running on a CUDA device requires.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/status.h"
#include "runner/device/tracked_allocator.h"

namespace partrain::runner {

class IsolatedMemory final : public RawMemory {
 public:
  // cudaMalloc's alignment: tensor offsets behave as on a GPU.
  static constexpr size_t kAlignment = 256;
  // Fresh memory holds this byte in every position (0xff...: a float NaN), as a GPU's holds
  // whatever was there: a read of memory nobody wrote shows up as a NaN loss, not as zeros.
  static constexpr unsigned char kPoison = 0xff;

  // Reserves `address_space_bytes` of addresses (no memory is committed for them). Addresses are
  // never reused, so a pointer into a freed buffer resolves to nothing instead of to a newer one.
  static StatusOr<std::unique_ptr<IsolatedMemory>> reserve(size_t address_space_bytes);
  ~IsolatedMemory() override;
  IsolatedMemory(const IsolatedMemory&) = delete;
  IsolatedMemory& operator=(const IsolatedMemory&) = delete;

  std::string name() const override { return "cpu-isolated"; }
  // nullptr once the reserved addresses are used up (the allocator reports out of memory).
  void* allocate(size_t bytes) override;
  void free(void* pointer, size_t bytes) override;

  // The host bytes behind [address, address + bytes), or nullptr when that range does not lie
  // inside one live allocation. Thread-safe.
  void* resolve(const void* address, size_t bytes) const;
  // Whether `address` is in the reserved range (live, freed or never handed out).
  bool contains(const void* address) const;
  size_t reserved_bytes() const { return size_; }
  size_t live_bytes() const;  // of the allocations not yet freed, rounded to the alignment

 private:
  IsolatedMemory(uintptr_t base, size_t size) : base_(base), size_(size), next_(base) {}

  struct Block {
    size_t bytes = 0;
    void* host = nullptr;
  };
  const uintptr_t base_;
  const size_t size_;
  mutable std::mutex mutex_;
  uintptr_t next_;                     // guarded by mutex_: the next address to hand out
  std::map<uintptr_t, Block> blocks_;  // guarded by mutex_: live allocations by address
  HostMemory host_;
};

// Installs, once per process, a SIGSEGV handler that names a fault inside an IsolatedMemory's
// range ("host code read or wrote isolated device memory at 0x...") with a backtrace, then lets
// the signal end the process as before. Other faults pass through unchanged.
void install_isolated_fault_report();

}  // namespace partrain::runner
