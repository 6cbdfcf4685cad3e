#include <gtest/gtest.h>
#include <stdlib.h>

#include "runner/rendezvous/store_server.h"
#include "runner/worker/world.h"

namespace partrain::runner {
namespace {

// Sets environment variables for one test and restores them afterwards.
class ScopedEnv {
 public:
  explicit ScopedEnv(std::vector<std::pair<std::string, std::string>> values) {
    for (auto& [name, value] : values) {
      const char* old = std::getenv(name.c_str());
      saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
      ::setenv(name.c_str(), value.c_str(), 1);
    }
  }
  ~ScopedEnv() {
    for (auto& [name, value] : saved_) {
      if (value) ::setenv(name.c_str(), value->c_str(), 1);
      else ::unsetenv(name.c_str());
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST(WorkerEnv, NamesTheMissingOrMalformedVariable) {
  ScopedEnv env({{"RANK", "5"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"},
                 {"LOCAL_WORLD_SIZE", "4"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "1"}});
  auto result = read_worker_env();
  ASSERT_FALSE(result.is_ok());
  EXPECT_NE(result.status().message().find("RANK=5"), std::string::npos)
      << result.status().message();
  ScopedEnv bad_port({{"RANK", "1"}, {"MASTER_PORT", "http"}});
  auto port = read_worker_env();
  ASSERT_FALSE(port.is_ok());
  EXPECT_NE(port.status().message().find("MASTER_PORT"), std::string::npos);
}

TEST(JoinWorld, SingleRankThroughTheStoreMeasuresTheClockOffset) {
  auto server = rendezvous::StoreServer::start("127.0.0.1", 0, "secret");
  ASSERT_TRUE(server.is_ok()) << server.status().message();
  ScopedEnv env({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"},
                 {"LOCAL_WORLD_SIZE", "1"}, {"MASTER_ADDR", "127.0.0.1"},
                 {"MASTER_PORT", std::to_string((*server)->port())}, {"PARTRAIN_TOKEN", "secret"}});
  auto world = join_world({});
  ASSERT_TRUE(world.is_ok()) << world.status().message();
  EXPECT_EQ(world->comm->size(), 1);
  ASSERT_TRUE(world->clock_offset.has_value());
  // Same host, same clock: the offset is within its own uncertainty of zero.
  EXPECT_LE(std::abs(world->clock_offset->offset_ns), world->clock_offset->uncertainty_ns + 1000);
  float value = 3;
  ASSERT_TRUE(world->comm->all_reduce(&value, &value, 1, comm::DType::kF32, comm::ReduceOp::kSum)
                  .is_ok());
  EXPECT_EQ(value, 3);
  EXPECT_EQ(world->recorder->total_recorded(), 1u);
}

TEST(JoinWorld, WrongTokenIsRejected) {
  auto server = rendezvous::StoreServer::start("127.0.0.1", 0, "secret");
  ASSERT_TRUE(server.is_ok());
  ScopedEnv env({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"},
                 {"LOCAL_WORLD_SIZE", "1"}, {"MASTER_ADDR", "127.0.0.1"},
                 {"MASTER_PORT", std::to_string((*server)->port())}, {"PARTRAIN_TOKEN", "guess"}});
  auto world = join_world({});
  ASSERT_FALSE(world.is_ok());
  EXPECT_NE(world.status().message().find("token"), std::string::npos) << world.status().message();
}

// A rank that never comes is waited for as long as the launcher's --rdzv-timeout says
// (PARTRAIN_STORE_TIMEOUT), not the fixed 300 s the workers used to wait.
TEST(JoinWorld, AMissingRankIsWaitedForAsLongAsTheRendezvousTimeout) {
  auto server = rendezvous::StoreServer::start("127.0.0.1", 0, "secret");
  ASSERT_TRUE(server.is_ok());
  ScopedEnv env({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"},
                 {"LOCAL_WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"},
                 {"MASTER_PORT", std::to_string((*server)->port())}, {"PARTRAIN_TOKEN", "secret"},
                 {"PARTRAIN_STORE_TIMEOUT", "1s"}});
  const auto start = std::chrono::steady_clock::now();
  auto world = join_world({});
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(world.is_ok());
  EXPECT_EQ(world.status().code(), StatusCode::kTimeout) << world.status().message();
  EXPECT_GE(waited, std::chrono::milliseconds(900));
  EXPECT_LT(waited, std::chrono::seconds(20)) << world.status().message();

  ScopedEnv bad({{"PARTRAIN_STORE_TIMEOUT", "soon"}, {"WORLD_SIZE", "2"}});
  auto refused = read_worker_env();
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("PARTRAIN_STORE_TIMEOUT=soon"), std::string::npos);
}

}  // namespace
}  // namespace partrain::runner
