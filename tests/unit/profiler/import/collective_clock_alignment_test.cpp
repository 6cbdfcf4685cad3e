#include "profiler/import/collective_clock_alignment.h"

#include <gtest/gtest.h>

namespace partrain::profiler {
namespace {

TEST(CollectiveClockAlignment, RanksOfOneHostAreNeverShifted) {
  std::vector<CollectiveEnd> ends = {{"pg:0", 0, 0, 1000}, {"pg:0", 0, 1, 5000}};
  auto fits = align_clocks_by_collectives({{0, "a"}, {1, "a"}}, ends);
  EXPECT_EQ(fits[1].offset_ns, 0);
  EXPECT_TRUE(fits[1].aligned);
}

TEST(CollectiveClockAlignment, OtherHostsOffsetIsTheMedianEstimate) {
  // Host b reads 1.5 ms ahead of host a; the ends scatter by a few microseconds.
  std::vector<CollectiveEnd> ends;
  const int64_t jitter[] = {0, 3000, -2000, 1000, 40000 /* one outlier */, -1000, 2000};
  for (uint64_t seq = 0; seq < 7; ++seq) {
    const int64_t t = 1'000'000 * static_cast<int64_t>(seq + 1);
    ends.push_back({"pg:0", seq, 0, t});
    ends.push_back({"pg:0", seq, 1, t + 10});
    ends.push_back({"pg:0", seq, 2, t + 1'500'000 + jitter[seq]});
  }
  auto fits = align_clocks_by_collectives({{0, "a"}, {1, "a"}, {2, "b"}}, ends);
  EXPECT_EQ(fits[0].offset_ns, 0);
  EXPECT_EQ(fits[1].offset_ns, 0);
  // The latest end on a (rank 1, t + 10) minus b's: -1.5 ms less the jitter's median (1000).
  EXPECT_EQ(fits[2].offset_ns, 10 - 1'500'000 - 1000);
  EXPECT_EQ(fits[2].estimates, 7);
  // 90% of the estimates lie within it; the outlier does not.
  EXPECT_GE(fits[2].uncertainty_ns, 3000);
  EXPECT_LT(fits[2].uncertainty_ns, 40000);
}

TEST(CollectiveClockAlignment, HostsChainThroughEachOther) {
  // a-b share one communicator, b-c another; a and c never meet.
  std::vector<CollectiveEnd> ends = {
      {"x", 0, 0, 100}, {"x", 0, 1, 300}, {"y", 0, 1, 1000}, {"y", 0, 2, 1500}};
  auto fits = align_clocks_by_collectives({{0, "a"}, {1, "b"}, {2, "c"}}, ends);
  EXPECT_EQ(fits[1].offset_ns, -200);
  EXPECT_EQ(fits[2].offset_ns, -200 - 500);
}

TEST(CollectiveClockAlignment, UnlinkedHostIsLeftAndSaidSo) {
  std::vector<CollectiveEnd> ends = {{"x", 0, 0, 100}, {"x", 0, 1, 300}};
  auto fits = align_clocks_by_collectives({{0, "a"}, {1, "b"}, {2, "c"}}, ends);
  EXPECT_TRUE(fits[1].aligned);
  EXPECT_FALSE(fits[2].aligned);
  EXPECT_EQ(fits[2].offset_ns, 0);
}

TEST(CollectiveClockAlignment, UnknownHostsAreEachTheirOwnClock) {
  std::vector<CollectiveEnd> ends = {{"x", 0, 0, 100}, {"x", 0, 1, 250}};
  auto fits = align_clocks_by_collectives({{0, ""}, {1, ""}}, ends);
  EXPECT_EQ(fits[1].offset_ns, -150);
}

}  // namespace
}  // namespace partrain::profiler
