// The per-thread record ring: records come out whole and in order across wrap-arounds, a full
// ring drops and counts exactly, and one producer with one concurrent drainer loses nothing it
// did not count.
#include "profiler/record_buffer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "profiler/collector_protocol.h"

namespace partrain::profiler {
namespace {

std::vector<uint8_t> make_record(uint32_t seq, size_t size) {
  std::vector<uint8_t> record(size);
  for (size_t i = 0; i < size; ++i) record[i] = static_cast<uint8_t>(seq + i);
  if (size >= 4) std::memcpy(record.data(), &seq, 4);
  return record;
}

std::vector<std::vector<uint8_t>> split(const std::vector<uint8_t>& batch) {
  std::vector<std::vector<uint8_t>> out;
  for_each_record(batch, [&](std::span<const uint8_t> r) { out.emplace_back(r.begin(), r.end()); });
  return out;
}

TEST(RecordBuffer, RoundTripsVariableLengthRecordsAcrossWrapArounds) {
  RecordBuffer buffer(256, 200);
  EXPECT_EQ(buffer.capacity(), 256u);
  uint32_t seq = 0;
  for (int round = 0; round < 50; ++round) {
    std::vector<std::vector<uint8_t>> sent;
    for (size_t size : {0, 1, 7, 33, 60}) {
      sent.push_back(make_record(seq++, size));
      ASSERT_TRUE(buffer.append(sent.back()));
    }
    std::vector<uint8_t> batch;
    EXPECT_EQ(buffer.drain(batch, 1 << 20), sent.size());
    EXPECT_EQ(split(batch), sent);
    EXPECT_TRUE(buffer.empty());
  }
  EXPECT_EQ(buffer.dropped(), 0u);
  EXPECT_EQ(buffer.appended(), seq);
}

TEST(RecordBuffer, FullBufferDropsAndCountsExactly) {
  RecordBuffer buffer(64, 64);
  const auto record = make_record(1, 12);  // 16 bytes with its length: 4 fit in 64
  int accepted = 0;
  for (int i = 0; i < 10; ++i) accepted += buffer.append(record) ? 1 : 0;
  EXPECT_EQ(accepted, 4);
  EXPECT_EQ(buffer.dropped(), 6u);
  std::vector<uint8_t> batch;
  EXPECT_EQ(buffer.drain(batch, 1 << 20), 4u);
  EXPECT_TRUE(buffer.append(record));  // room again after the drain
}

TEST(RecordBuffer, RecordsOverTheLimitAreDropped) {
  RecordBuffer buffer(1024, 100);
  EXPECT_FALSE(buffer.append(make_record(1, 101)));
  EXPECT_TRUE(buffer.append(make_record(1, 100)));
  EXPECT_EQ(buffer.dropped(), 1u);
}

TEST(RecordBuffer, DrainStopsAtMaxBytesButTakesAtLeastOne) {
  RecordBuffer buffer(1024, 512);
  for (uint32_t i = 0; i < 4; ++i) ASSERT_TRUE(buffer.append(make_record(i, 96)));
  std::vector<uint8_t> batch;
  EXPECT_EQ(buffer.drain(batch, 250), 2u);  // 2 x 100 bytes fit in 250, a third does not
  EXPECT_EQ(batch.size(), 200u);
  batch.clear();
  EXPECT_EQ(buffer.drain(batch, 10), 1u);
  EXPECT_EQ(buffer.drain(batch, 1 << 20), 1u);
  EXPECT_TRUE(buffer.empty());
}

TEST(RecordBuffer, ConcurrentDrainLosesNothingUncounted) {
  RecordBuffer buffer(4096, 64);
  constexpr uint32_t kRecords = 300'000;
  std::atomic<bool> done{false};
  std::thread producer([&] {
    for (uint32_t i = 0; i < kRecords; ++i) buffer.append(make_record(i, 4 + i % 29));
    done = true;
  });
  uint64_t received = 0;
  int64_t last = -1;
  bool ordered = true, intact = true;
  std::vector<uint8_t> batch;
  while (!done.load() || !buffer.empty()) {
    batch.clear();
    buffer.drain(batch, 1 << 16);
    for_each_record(batch, [&](std::span<const uint8_t> r) {
      uint32_t seq = 0;
      std::memcpy(&seq, r.data(), 4);
      ordered = ordered && static_cast<int64_t>(seq) > last;
      intact = intact && r.size() == 4 + seq % 29 && make_record(seq, r.size()) ==
                                                         std::vector<uint8_t>(r.begin(), r.end());
      last = seq;
      ++received;
    });
  }
  producer.join();
  EXPECT_TRUE(ordered);
  EXPECT_TRUE(intact);
  EXPECT_EQ(received, buffer.appended());
  EXPECT_EQ(received + buffer.dropped(), kRecords);
}

}  // namespace
}  // namespace partrain::profiler
