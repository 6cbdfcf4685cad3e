// The store's notices of peers it turns away: one line at once per kind of rejection, so a node
// with the wrong token is named even amid a flood of foreign bytes.
#include "runner/rendezvous/store_notices.h"

#include <gtest/gtest.h>

#include <string>

namespace partrain::rendezvous::detail {
namespace {

TEST(StoreNotices, AReasonsKindLeavesOutItsFigures) {
  EXPECT_EQ(Notices::kind_of_reason("not a partrain rendezvous frame (bad magic 5e 7b 30 4c)"),
            Notices::kind_of_reason("not a partrain rendezvous frame (bad magic 39 6d af c8)"));
  EXPECT_EQ(Notices::kind_of_reason("unknown TCPStore query type 254"),
            Notices::kind_of_reason("unknown TCPStore query type 17"));
  EXPECT_EQ(Notices::kind_of_reason("wrong token (the run's PARTRAIN_TOKEN)"), "wrong token");
  EXPECT_EQ(Notices::kind_of_reason("rendezvous protocol version 9 is not supported (this build "
                                    "speaks 2): use the same partrain version on every node"),
            "rendezvous protocol version # is not supported");
  EXPECT_NE(Notices::kind_of_reason("wrong token (the run's PARTRAIN_TOKEN)"),
            Notices::kind_of_reason("not a partrain rendezvous frame (bad magic 5e 7b 30 4c)"));
}

// Foreign bytes, a wrong token, foreign bytes again: the wrong token is said at once, not held
// back behind the first foreign client and summed up under its message.
TEST(StoreNotices, EachKindOfRejectionIsSaidAtOnce) {
  Notices notices;
  ::testing::internal::CaptureStderr();
  notices.note(Notice::kRejected, "client A: not a partrain rendezvous frame (bad magic 01)",
               "not a partrain rendezvous frame (bad magic 01)");
  notices.note(Notice::kRejected, "client B: wrong token (the run's PARTRAIN_TOKEN)",
               "wrong token (the run's PARTRAIN_TOKEN)");
  notices.note(Notice::kRejected, "client C: not a partrain rendezvous frame (bad magic 02)",
               "not a partrain rendezvous frame (bad magic 02)");
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("client A"), std::string::npos) << said;
  EXPECT_NE(said.find("client B: wrong token"), std::string::npos) << said;
  EXPECT_EQ(said.find("client C"), std::string::npos) << said;  // held back: A's kind
  EXPECT_TRUE(notices.pending());
  ::testing::internal::CaptureStderr();
  notices.flush();
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("client C"), std::string::npos);
  EXPECT_FALSE(notices.pending());
}

// Random bytes give endless distinct reasons: past 32 kinds they share one, and the lines stay
// few.
TEST(StoreNotices, AFloodOfDistinctReasonsStaysBounded) {
  Notices notices;
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 1000; ++i) {
    const std::string reason = "foreign reason " + std::string(1, static_cast<char>('a' + i % 26)) +
                               std::string(1, static_cast<char>('a' + i / 26 % 26));
    notices.note(Notice::kRejected, reason, reason);
  }
  const std::string said = ::testing::internal::GetCapturedStderr();
  size_t lines = 0;
  for (char c : said) lines += c == '\n';
  EXPECT_EQ(lines, 33u) << said;
}

}  // namespace
}  // namespace partrain::rendezvous::detail
