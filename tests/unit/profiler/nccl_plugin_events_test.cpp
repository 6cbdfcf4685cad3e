// NcclPluginEvents: a task's report comes once its host side is done and every channel NCCL
// gave it has ended, with the earliest channel start and latest channel end; proxy operations
// are only counted.
#include "profiler/nccl_plugin_events.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace partrain::profiler {
namespace {

class NcclPluginEventsTest : public ::testing::Test {
 protected:
  std::vector<NcclPluginOp> reports_;
  NcclPluginEvents events_{[this](const NcclPluginOp& op) { reports_.push_back(op); }};
  NcclPluginEvents::Context& context_ = events_.create_context(0xabc, 4, 1);
};

TEST_F(NcclPluginEventsTest, ACollectiveIsReportedWhenItsLastChannelEnds) {
  void* task = events_.collective_started(context_, "AllReduce", 7, 1024, "Ring", "LL128", 2);
  events_.stopped(task);  // host side done: NCCL stops the task when it is enqueued
  EXPECT_TRUE(reports_.empty());
  void* first = events_.kernel_channel_started(task, 0, 5'000);
  void* second = events_.kernel_channel_started(task, 1, 4'000);
  events_.kernel_channel_ended(first, 9'000);
  events_.stopped(first);
  EXPECT_TRUE(reports_.empty());
  events_.kernel_channel_ended(second, 12'000);
  ASSERT_EQ(reports_.size(), 1u);
  events_.stopped(second);
  const NcclPluginOp& op = reports_[0];
  EXPECT_EQ(op.comm_hash, 0xabcu);
  EXPECT_EQ(op.op, "all_reduce");
  EXPECT_EQ(op.nccl_seq, 7u);
  EXPECT_EQ(op.count, 1024u);
  EXPECT_EQ(op.algorithm, "Ring");
  EXPECT_EQ(op.protocol, "LL128");
  EXPECT_EQ(op.channels, 2);
  EXPECT_EQ(op.channels_timed, 2);
  EXPECT_EQ(op.gpu_start_ns, 4'000);
  EXPECT_EQ(op.gpu_end_ns, 12'000);
  EXPECT_EQ(reports_.size(), 1u);
  EXPECT_EQ(events_.open_tasks(), 0u);
}

TEST_F(NcclPluginEventsTest, ATaskWhoseChannelsNeverAllReportIsReportedAtTheEnd) {
  void* task = events_.p2p_started(context_, "Send", 256, 3, 2);
  void* only = events_.kernel_channel_started(task, 0, 100);
  events_.stopped(task);
  events_.stopped(only);          // stopped without its end (a timer that never came)
  EXPECT_TRUE(reports_.empty());  // its second channel may still come
  events_.flush();
  ASSERT_EQ(reports_.size(), 1u);
  EXPECT_EQ(reports_[0].op, "send");
  EXPECT_EQ(reports_[0].peer, 3);
  EXPECT_EQ(reports_[0].channels_timed, 0);
  EXPECT_EQ(reports_[0].gpu_start_ns, -1);
  EXPECT_EQ(events_.open_tasks(), 1u);
  events_.flush();
  EXPECT_EQ(reports_.size(), 1u);  // once
}

TEST_F(NcclPluginEventsTest, BackwardTimersAndForeignParentsAreNotTimed) {
  void* task = events_.collective_started(context_, "Broadcast", 0, 8, "Tree", "LL", 1);
  int not_a_task = 0;
  EXPECT_EQ(events_.kernel_channel_started(&not_a_task, 0, 10), nullptr);
  EXPECT_EQ(events_.kernel_channel_started(nullptr, 0, 10), nullptr);
  void* channel = events_.kernel_channel_started(task, 0, 500);
  events_.kernel_channel_ended(channel, 400);  // ends before it began
  events_.stopped(channel);
  events_.stopped(task);
  ASSERT_EQ(reports_.size(), 1u);
  EXPECT_EQ(reports_[0].gpu_start_ns, -1);
  EXPECT_EQ(reports_[0].op, "broadcast");
}

TEST_F(NcclPluginEventsTest, ProxyOperationsAreSummedOverContexts) {
  NcclPluginEvents::Context& other = events_.create_context(0xdef, 4, 1);
  context_.proxy_op(true, 4, 65536);
  context_.proxy_op(false, 2, 1024);
  other.proxy_op(true, 1, 10);
  const NcclProxySummary all = events_.proxy_summary();
  EXPECT_EQ(all.ops, 3u);
  EXPECT_EQ(all.send_bytes, 4u * 65536 + 10);
  EXPECT_EQ(all.recv_bytes, 2048u);
}

TEST_F(NcclPluginEventsTest, ChannelsEndingOnOtherThreadsReportOnce) {
  void* task = events_.collective_started(context_, "AllGather", 0, 64, "Ring", "Simple", 8);
  std::vector<void*> channels;
  for (int c = 0; c < 8; ++c) channels.push_back(events_.kernel_channel_started(task, c, 1000 + c));
  events_.stopped(task);
  std::vector<std::thread> proxies;
  for (int c = 0; c < 8; ++c) {
    proxies.emplace_back([&, c] {
      events_.kernel_channel_ended(channels[c], 2000 + c);
      events_.stopped(channels[c]);
    });
  }
  for (std::thread& proxy : proxies) proxy.join();
  ASSERT_EQ(reports_.size(), 1u);
  EXPECT_EQ(reports_[0].gpu_start_ns, 1000);
  EXPECT_EQ(reports_[0].gpu_end_ns, 2007);
  EXPECT_EQ(reports_[0].channels_timed, 8);
}

TEST(NcclFunctionOpName, NcclsNamesMapToTheTracesOps) {
  EXPECT_EQ(nccl_function_op_name("ReduceScatter"), "reduce_scatter");
  EXPECT_EQ(nccl_function_op_name("Recv"), "recv");
  EXPECT_EQ(nccl_function_op_name("AlltoAll"), "all_to_all");
  EXPECT_EQ(nccl_function_op_name("Something"), "other");
}

}  // namespace
}  // namespace partrain::profiler
