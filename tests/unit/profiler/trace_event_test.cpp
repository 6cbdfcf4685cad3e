#include "profiler/trace_event.h"

#include <gtest/gtest.h>

#include <random>

namespace partrain::profiler {
namespace {

std::vector<TraceEvent> sample_events() {
  SliceEvent slice{3, TrackKind::kCudaStream, "stream 7", "forward", SliceCategory::kPhase,
                   1'000, 250, 4, 1, 12};
  CollectiveRecord coll;
  coll.world_rank = 5;
  coll.step = 9;
  coll.gpu_start_ns = 1'100;
  coll.gpu_end_ns = 1'900;
  coll.event.comm_id = "dp:0,1,2,3";
  coll.event.seq = 42;
  coll.event.op = "all_reduce";
  coll.event.dtype = "bfloat16";
  coll.event.reduce_op = "sum";
  coll.event.count = 1 << 20;
  coll.event.bytes = 2 << 20;
  coll.event.rank = 1;
  coll.event.group_ranks = {4, 5, 6, 7};
  coll.event.group_size = 4;
  coll.event.enqueue_ns = 1'000;
  coll.event.start_ns = 1'050;
  coll.event.end_ns = 2'000;
  coll.event.algorithm = "Ring";
  coll.event.protocol = "LL128";
  coll.event.channels = 16;
  coll.event.label = "moe_dispatch";
  coll.event.state = CollectiveState::kCompleted;
  return {slice,
          coll,
          MemorySample{2, 3, 5'000, int64_t{1} << 40},
          StepEvent{1, 7, 10'000, 900, 2.75, 8192, 3},
          StatEvent{"recorder_dropped_events", 2, 17, StatSeverity::kDataLoss, "buffer full"},
          RankInfo{6, 2, 1, "node-b", 4411, "cuda:2", -1234, 50, -3.25, true, 0, 9},
          RunInfo{"run-1", "partrain launch -n 8", R"({"dp":8})", 8, 1'700'000'000'000'000'000, 0},
          CounterSample{3, "gpu3.power_w", 12'000, 412.345},
          TransferRecord{SliceEvent{1, TrackKind::kCudaStream, "gpu1 stream 9", "memcpy DtoH",
                                    SliceCategory::kMemcpy, 13'000, 250, 4},
                         uint64_t{3} << 33, 77, 1, 9},
          ExpertLoadRecord{2, 11, 3, {40, 0, int64_t{1} << 35, 7}, 5, 0.0125}};
}

std::vector<uint8_t> encode_all(const std::vector<TraceEvent>& events) {
  std::vector<uint8_t> bytes;
  for (const TraceEvent& e : events) encode_event(e, bytes);
  return bytes;
}

TEST(TraceEventTest, EveryTypeRoundTrips) {
  std::vector<TraceEvent> events = sample_events();
  std::vector<uint8_t> bytes = encode_all(events);
  auto decoded = decode_events(bytes);
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().message();
  ASSERT_EQ(decoded->size(), events.size());
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(decoded->at(i).index(), events[i].index());
  EXPECT_EQ(encode_all(*decoded), bytes);  // every field survived

  const auto& slice = std::get<SliceEvent>(decoded->at(0));
  EXPECT_EQ(slice.track, "stream 7");
  EXPECT_EQ(slice.name, "forward");
  EXPECT_EQ(slice.layer, 12);
  const auto& coll = std::get<CollectiveRecord>(decoded->at(1));
  EXPECT_EQ(coll.event.op, "all_reduce");
  EXPECT_EQ(coll.event.dtype, "bfloat16");
  EXPECT_EQ(coll.event.reduce_op, "sum");
  EXPECT_EQ(coll.event.group_ranks, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(coll.event.group_size, 4);
  EXPECT_EQ(coll.event.state, CollectiveState::kCompleted);
  EXPECT_EQ(coll.event.algorithm, "Ring");
  EXPECT_EQ(coll.event.protocol, "LL128");
  EXPECT_EQ(coll.event.channels, 16);
  EXPECT_EQ(coll.event.label, "moe_dispatch");
  EXPECT_EQ(std::get<MemorySample>(decoded->at(2)).bytes, int64_t{1} << 40);
  EXPECT_DOUBLE_EQ(std::get<StepEvent>(decoded->at(3)).loss, 2.75);
  EXPECT_EQ(std::get<StepEvent>(decoded->at(3)).attempt, 3);  // torchrun's restarts before it
  EXPECT_EQ(std::get<RankInfo>(decoded->at(5)).clock_offset_ns, -1234);
  EXPECT_EQ(std::get<RunInfo>(decoded->at(6)).config_json, R"({"dp":8})");
  const auto& counter = std::get<CounterSample>(decoded->at(7));
  EXPECT_EQ(counter.name, "gpu3.power_w");
  EXPECT_EQ(counter.ts_ns, 12'000);
  EXPECT_DOUBLE_EQ(counter.value, 412.345);
  const auto& transfer = std::get<TransferRecord>(decoded->at(8));
  EXPECT_EQ(transfer.slice.name, "memcpy DtoH");
  EXPECT_EQ(transfer.bytes, uint64_t{3} << 33);
  EXPECT_EQ(transfer.correlation_id, 77u);
  EXPECT_EQ(transfer.stream, 9);
  const auto& experts = std::get<ExpertLoadRecord>(decoded->at(9));
  EXPECT_EQ(experts.rank, 2);
  EXPECT_EQ(experts.step, 11);
  EXPECT_EQ(experts.layer, 3);
  EXPECT_EQ(experts.tokens_per_expert, (std::vector<int64_t>{40, 0, int64_t{1} << 35, 7}));
  EXPECT_EQ(experts.dropped_tokens, 5);
  EXPECT_DOUBLE_EQ(experts.aux_loss, 0.0125);
}

TEST(TraceEventTest, ExpertsPastTheLimitAreCutAndAForgedCountDoesNotAllocate) {
  ExpertLoadRecord many;
  many.tokens_per_expert.assign(kMaxExperts + 10, 1);
  std::vector<uint8_t> bytes;
  encode_event(many, bytes);
  auto decoded = decode_events(bytes);
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().message();
  EXPECT_EQ(std::get<ExpertLoadRecord>(decoded->at(0)).tokens_per_expert.size(), kMaxExperts);

  ExpertLoadRecord two{0, 1, 0, {3, 4}, 0, 0};
  bytes.clear();
  encode_event(two, bytes);
  // The expert count sits before the two counts, the dropped tokens and the auxiliary loss.
  const size_t count_at = bytes.size() - (2 * 8 + 8 + 8) - 4;
  ASSERT_EQ(bytes[count_at], 2);
  bytes[count_at + 3] = 0xff;  // ~4 billion experts
  auto forged = decode_events(bytes);
  ASSERT_FALSE(forged.is_ok());
  EXPECT_EQ(forged.status().code(), StatusCode::kUnreadable);
}

// A step's attempt counts restarts: a negative one is no count a worker could have.
TEST(TraceEventTest, ANegativeStepAttemptIsRejected) {
  std::vector<uint8_t> bytes;
  encode_event(StepEvent{0, 1, 2, 3, 4.0, 5, -1}, bytes);
  auto decoded = decode_events(bytes);
  ASSERT_FALSE(decoded.is_ok());
  EXPECT_EQ(decoded.status().code(), StatusCode::kUnreadable);
}

TEST(TraceEventTest, FieldsAreLittleEndian) {
  std::vector<uint8_t> bytes;
  encode_event(MemorySample{0x01020304, 5, 0, 0}, bytes);
  // u32 size, u8 type (3 = memory), then the rank's low byte first.
  ASSERT_GE(bytes.size(), 9u);
  EXPECT_EQ(bytes[0], bytes.size() - 4);
  EXPECT_EQ(bytes[4], 3);
  EXPECT_EQ(bytes[5], 0x04);
  EXPECT_EQ(bytes[8], 0x01);
}

TEST(TraceEventTest, UnknownNamesTravelAsOther) {
  CollectiveRecord coll;
  coll.event.op = "all_to_all_v_custom";
  coll.event.dtype = "float";
  std::vector<uint8_t> bytes;
  encode_event(coll, bytes);
  auto decoded = decode_events(bytes);
  ASSERT_TRUE(decoded.is_ok());
  EXPECT_EQ(std::get<CollectiveRecord>(decoded->at(0)).event.op, "other");
  EXPECT_EQ(std::get<CollectiveRecord>(decoded->at(0)).event.reduce_op, "");
}

TEST(TraceEventTest, LongStringsAreCutToTheLimit) {
  SliceEvent slice;
  slice.name = std::string(kMaxEventStringBytes + 100, 'x');
  std::vector<uint8_t> bytes;
  encode_event(slice, bytes);
  auto decoded = decode_events(bytes);
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().message();
  EXPECT_EQ(std::get<SliceEvent>(decoded->at(0)).name.size(), kMaxEventStringBytes);
}

TEST(TraceEventTest, EveryTruncationFailsCleanly) {
  std::vector<uint8_t> bytes = encode_all(sample_events());
  size_t failures = 0;
  for (size_t n = 1; n < bytes.size(); ++n) {
    auto decoded = decode_events(std::span<const uint8_t>(bytes.data(), n));
    if (!decoded.is_ok()) {
      EXPECT_EQ(decoded.status().code(), StatusCode::kUnreadable);
      ++failures;
    }
  }
  // Only cuts at record boundaries decode (to fewer events).
  EXPECT_EQ(failures, bytes.size() - 1 - (sample_events().size() - 1));
}

TEST(TraceEventTest, CorruptRecordsAreRejectedWithTheReason) {
  std::vector<uint8_t> good;
  encode_event(sample_events()[1], good);

  std::vector<uint8_t> huge = good;
  huge[3] = 0x7f;  // size field says ~2 GiB
  auto result = decode_events(huge);
  ASSERT_FALSE(result.is_ok());
  EXPECT_NE(result.status().message().find("outside"), std::string::npos);

  std::vector<uint8_t> bad_type = good;
  bad_type[4] = 99;
  result = decode_events(bad_type);
  ASSERT_FALSE(result.is_ok());
  EXPECT_NE(result.status().message().find("unknown event type"), std::string::npos);

  std::vector<uint8_t> trailing = good;
  trailing.push_back(0);
  trailing[0] = static_cast<uint8_t>(trailing[0] + 1);  // record claims the extra byte
  result = decode_events(trailing);
  ASSERT_FALSE(result.is_ok());
  EXPECT_NE(result.status().message().find("do not fill"), std::string::npos);

  std::vector<uint8_t> zero = {0, 0, 0, 0};
  EXPECT_FALSE(decode_events(zero).is_ok());
}

TEST(TraceEventTest, ForgedGroupSizeDoesNotAllocate) {
  CollectiveRecord coll;
  coll.event.comm_id = "c";
  coll.event.op = "all_reduce";
  coll.event.dtype = "float";
  coll.event.group_ranks = {0, 1};
  std::vector<uint8_t> bytes;
  encode_event(coll, bytes);
  // The member count sits right before the two ranks, the group size, three timestamps, the
  // state, NCCL's algorithm and protocol (empty: a 2-byte length each), channels and the label.
  size_t count_at = bytes.size() - (2 * 4 + 4 + 3 * 8 + 1 + 2 * 2 + 4 + 2) - 4;
  ASSERT_EQ(bytes[count_at], 2);
  bytes[count_at + 3] = 0xff;  // ~4 billion members
  auto result = decode_events(bytes);
  ASSERT_FALSE(result.is_ok());
  EXPECT_EQ(result.status().code(), StatusCode::kUnreadable);
}

TEST(TraceEventTest, RandomBytesNeverCrash) {
  std::mt19937 rng(7);
  std::vector<uint8_t> seed = encode_all(sample_events());
  for (int round = 0; round < 20'000; ++round) {
    std::vector<uint8_t> bytes = seed;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < flips; ++i) bytes[rng() % bytes.size()] = static_cast<uint8_t>(rng());
    auto result = decode_events(bytes);
    if (!result.is_ok()) {
      EXPECT_EQ(result.status().code(), StatusCode::kUnreadable);
    }
  }
}

}  // namespace
}  // namespace partrain::profiler
