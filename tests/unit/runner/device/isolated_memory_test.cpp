#include "runner/device/isolated_memory.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace partrain::runner {
namespace {

std::unique_ptr<IsolatedMemory> reserve_memory(size_t bytes = size_t{1} << 30) {
  auto memory = IsolatedMemory::reserve(bytes);
  EXPECT_TRUE(memory.is_ok()) << memory.status().message();
  return memory.is_ok() ? std::move(*memory) : nullptr;
}

TEST(IsolatedMemory, AddressesResolveToTheirBlockWithinBounds) {
  auto memory = reserve_memory();
  ASSERT_NE(memory, nullptr);
  void* a = memory->allocate(1000);
  void* b = memory->allocate(10);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % IsolatedMemory::kAlignment, 0u);
  EXPECT_TRUE(memory->contains(a));
  auto* host = static_cast<unsigned char*>(memory->resolve(a, 1000));
  ASSERT_NE(host, nullptr);
  EXPECT_NE(host, a);  // the bytes live elsewhere
  EXPECT_EQ(memory->resolve(static_cast<char*>(a) + 600, 400), host + 600);
  // Rounded up to the alignment, but no further: past it lies no block.
  EXPECT_NE(memory->resolve(a, 1024), nullptr);
  EXPECT_EQ(memory->resolve(a, 1025), nullptr);
  EXPECT_EQ(memory->resolve(static_cast<char*>(a) + 1024, 1), nullptr);
  EXPECT_EQ(memory->live_bytes(), 1024u + 256u);
  memory->free(a, 1000);
  memory->free(b, 10);
}

TEST(IsolatedMemory, FreshBytesArePoisonAndFreedAddressesResolveToNothing) {
  auto memory = reserve_memory();
  ASSERT_NE(memory, nullptr);
  void* a = memory->allocate(64);
  float value;
  std::memcpy(&value, memory->resolve(a, sizeof value), sizeof value);
  EXPECT_TRUE(std::isnan(value));
  memory->free(a, 64);
  EXPECT_EQ(memory->resolve(a, 4), nullptr);
  EXPECT_TRUE(memory->contains(a));
  void* again = memory->allocate(64);
  EXPECT_NE(again, a);  // addresses are never reused
  EXPECT_EQ(memory->live_bytes(), 256u);
  memory->free(again, 64);
}

TEST(IsolatedMemory, HostPointersAreNotIsolated) {
  auto memory = reserve_memory();
  ASSERT_NE(memory, nullptr);
  int on_stack = 0;
  EXPECT_FALSE(memory->contains(&on_stack));
  EXPECT_EQ(memory->resolve(&on_stack, sizeof on_stack), nullptr);
}

TEST(IsolatedMemory, RunningOutOfAddressesIsAFailedAllocation) {
  auto memory = reserve_memory(size_t{1} << 20);
  ASSERT_NE(memory, nullptr);
  void* big = memory->allocate((size_t{1} << 20) - 2 * IsolatedMemory::kAlignment);
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(memory->allocate(IsolatedMemory::kAlignment), nullptr);
  memory->free(big, 0);
}

using IsolatedMemoryDeathTest = ::testing::Test;

// A host dereference of an isolated address ends the process with a report naming it.
TEST(IsolatedMemoryDeathTest, AHostReadFaultsWithAReport) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        install_isolated_fault_report();
        auto memory = IsolatedMemory::reserve(size_t{1} << 30);
        auto* pointer = static_cast<volatile float*>((*memory)->allocate(16));
        float value = *pointer;
        (void)value;
      },
      "host code read or wrote isolated device memory at 0x[0-9a-f]+");
}

}  // namespace
}  // namespace partrain::runner
