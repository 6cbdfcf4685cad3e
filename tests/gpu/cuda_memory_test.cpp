// The CUDA device's block cache (cuda_memory.h) on a GPU (label gpu): freed blocks come back for
// the same rounded size without cudaMalloc, categories stay exact, a block reused while queued
// work still reads it sees that work finish first (stream order), and a full GPU gives its cache
// back before refusing. Skipped, never passed, where no GPU is visible.
#include "runner/device/cuda_memory.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "runner/device/cuda_device.h"
#include "tests/gpu/visible_gpus.h"

namespace partrain::runner {
namespace {

class CudaMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = partrain::testing::no_gpu_reason();
    if (!reason.empty()) GTEST_SKIP() << reason;
  }
};

TEST_F(CudaMemoryTest, BlocksRoundUpToTheGranuleOfTheirSize) {
  EXPECT_EQ(CudaMemory::block_bytes(0), CudaMemory::kSmallGranule);
  EXPECT_EQ(CudaMemory::block_bytes(1), 512u);
  EXPECT_EQ(CudaMemory::block_bytes(512), 512u);
  EXPECT_EQ(CudaMemory::block_bytes(513), 1024u);
  EXPECT_EQ(CudaMemory::block_bytes(CudaMemory::kLargeBlock - 1), CudaMemory::kLargeBlock);
  EXPECT_EQ(CudaMemory::block_bytes(CudaMemory::kLargeBlock + 1), 2 * CudaMemory::kLargeBlock);
}

TEST_F(CudaMemoryTest, FreedBlocksAreReusedForTheSameRoundedSize) {
  CudaMemory memory(0);
  void* first = memory.allocate(1000);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(memory.reserved_bytes(), 1024u);
  memory.free(first, 1000);
  EXPECT_EQ(memory.cached_bytes(), 1024u);
  EXPECT_EQ(memory.allocate(1020), first);  // same 1024-byte block
  EXPECT_EQ(memory.cached_bytes(), 0u);
  void* other = memory.allocate(3000);      // another size: a new block
  ASSERT_NE(other, nullptr);
  EXPECT_NE(other, first);
  EXPECT_EQ(memory.reserved_bytes(), 1024u + 3072u);
  memory.free(first, 1020);
  memory.free(other, 3000);
  memory.release_cached();
  EXPECT_EQ(memory.reserved_bytes(), 0u);
  EXPECT_EQ(memory.cached_bytes(), 0u);
}

TEST_F(CudaMemoryTest, CategoriesCountTheBytesAskedForNotTheBlocks) {
  StatusOr<std::unique_ptr<Device>> gpu = create_cuda_device(CudaDeviceOptions{});
  ASSERT_TRUE(gpu.is_ok()) << gpu.status().message();
  TrackedAllocator& allocator = (*gpu)->allocator();
  const uint64_t before = allocator.current_bytes(memory::Category::kActivations);
  {
    StatusOr<TrackedBuffer> a = allocator.allocate(1000, memory::Category::kActivations);
    ASSERT_TRUE(a.is_ok());
    EXPECT_EQ(allocator.current_bytes(memory::Category::kActivations), before + 1000);
  }
  EXPECT_EQ(allocator.current_bytes(memory::Category::kActivations), before);
  StatusOr<TrackedBuffer> again = allocator.allocate(1000, memory::Category::kActivations);
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(allocator.current_bytes(memory::Category::kActivations), before + 1000);
}

// A buffer freed while a long fill is queued on it, reused at once and uploaded into: the upload,
// queued behind the fill on the compute stream, is what a download sees.
TEST_F(CudaMemoryTest, AReusedBlockSeesTheQueuedWorkOnItFinishFirst) {
  StatusOr<std::unique_ptr<Device>> created = create_cuda_device(CudaDeviceOptions{});
  ASSERT_TRUE(created.is_ok()) << created.status().message();
  Device& gpu = **created;
  constexpr int64_t n = 64 << 20;  // 256 MiB: its fills take long enough to still be queued
  void* used = nullptr;
  {
    StatusOr<TrackedBuffer> buffer = gpu.allocator().allocate(n * sizeof(float),
                                                              memory::Category::kActivations);
    ASSERT_TRUE(buffer.is_ok());
    used = buffer->data();
    for (int i = 0; i < 20; ++i) gpu.fill(static_cast<float*>(used), n, static_cast<float>(i));
  }  // freed with the fills queued
  StatusOr<TrackedBuffer> reused = gpu.allocator().allocate(n * sizeof(float),
                                                            memory::Category::kActivations);
  ASSERT_TRUE(reused.is_ok());
  ASSERT_EQ(reused->data(), used);
  std::vector<float> values(static_cast<size_t>(n), 7.0f);
  gpu.upload(reused->data(), values.data(), values.size() * sizeof(float));
  std::vector<float> back(values.size(), 0.0f);
  gpu.download(back.data(), reused->data(), back.size() * sizeof(float));
  ASSERT_TRUE(gpu.status().is_ok()) << gpu.status().message();
  EXPECT_EQ(back, values);
}

TEST_F(CudaMemoryTest, AFullGpuGivesItsCacheBackBeforeRefusing) {
  size_t free_bytes = 0, total_bytes = 0;
  StatusOr<std::unique_ptr<Device>> gpu = create_cuda_device(CudaDeviceOptions{});
  ASSERT_TRUE(gpu.is_ok()) << gpu.status().message();
  StatusOr<Device::MemoryInfo> info = (*gpu)->memory_info();
  ASSERT_TRUE(info.is_ok()) << info.status().message();
  free_bytes = info->free_bytes;
  total_bytes = info->total_bytes;
  ASSERT_GT(total_bytes, 0u);
  CudaMemory memory(0);
  // Three fifths of what is free, cached; then three fifths again in another size: only fits
  // once the cache is given back.
  const size_t big = free_bytes / 5 * 3 / CudaMemory::kLargeBlock * CudaMemory::kLargeBlock;
  void* first = memory.allocate(big);
  ASSERT_NE(first, nullptr);
  memory.free(first, big);
  EXPECT_EQ(memory.cached_bytes(), big);
  void* second = memory.allocate(big + CudaMemory::kLargeBlock);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(memory.cached_bytes(), 0u);
  EXPECT_EQ(memory.reserved_bytes(), big + CudaMemory::kLargeBlock);
  memory.free(second, big + CudaMemory::kLargeBlock);
}

}  // namespace
}  // namespace partrain::runner
