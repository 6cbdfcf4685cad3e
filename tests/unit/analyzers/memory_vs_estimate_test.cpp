// Memory peaks vs the estimator on a hand-written trace of the built-in gpt workload
// (layers 4, hidden 64, heads 4, seq 32, vocab 128) split over pp = 2 stages in fp32.
#include "analyzers/memory_vs_estimate.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/unit/analyzers/workload_trace_fixture.h"

namespace partrain::analyzers {
namespace {

using namespace testing;
using memory::Category;

// Stage 0 holds 2 blocks of 12h^2 + 13h = 49,984 parameters, the word embedding V h = 8,192
// and the learned positions s h = 2,048: 110,208 parameters, 440,832 bytes in fp32; the same
// again for gradients and twice that (Adam m and v) for the optimizer: 881,664 bytes.
constexpr int64_t kStage0Params = 440'832;

profiler::MemorySample sample(int rank, Category category, double ms, int64_t bytes) {
  return profiler::MemorySample{rank, static_cast<uint8_t>(category),
                                static_cast<int64_t>(ms * kMsNs), bytes};
}

const CategoryPeak* find(const RankMemory& rank, Category category) {
  for (const CategoryPeak& c : rank.categories) {
    if (c.category == category) return &c;
  }
  return nullptr;
}

class MemoryVsEstimateTest : public WorkloadTraceTest {
 protected:
  // Rank 0: params, grads, optimizer 1.5x the estimate, 1,000,000 activation bytes that are
  // freed again, then 90,112 workspace bytes. Peak of the sum at t = 4:
  // 440,832 x 2 + 1,322,496 + 1,000,000 = 3,204,160.
  std::vector<profiler::TraceEvent> rank0_samples() {
    return {sample(0, Category::kParams, 1, kStage0Params),
            sample(0, Category::kGrads, 2, kStage0Params),
            sample(0, Category::kOptimizer, 3, 3 * kStage0Params),
            sample(0, Category::kActivations, 4, 1'000'000),
            sample(0, Category::kActivations, 5, 0),
            sample(0, Category::kWorkspace, 6, 90'112)};
  }

  // The comm estimate for a 2-rank run of the fixture's gpt at ZeRO `zero` in `precision` (its
  // measured peak is irrelevant to the estimate), or nullopt with a test failure.
  std::optional<double> comm_estimate(int zero, const char* precision, int vocab = 128) {
    std::string config = gpt_config(2, 1, "1f1b", 2, 4, 64, 4, 32, vocab);
    config.replace(config.find("\"zero\":0"), 8, fmt::format("\"zero\":{}", zero));
    config.replace(config.find("\"precision\":\"fp32\""), 18,
                   fmt::format("\"precision\":\"{}\"", precision));
    for (const char* file : {"trace.db", "trace.db-wal", "trace.db-shm"}) {
      std::filesystem::remove(dir_ / file);  // one trace per call
    }
    auto trace = write_trace(config, 2, {sample(0, Category::kComm, 1, 1000)});
    AnalysisWindow window = window_of(2, 1, 1, 0, 10);
    window.ranks = {0};
    auto report = analyze_memory_vs_estimate(trace.db, window);
    EXPECT_TRUE(report.is_ok()) << report.status().message();
    if (!report.is_ok() || !report->has_estimate) return std::nullopt;
    const CategoryPeak* comm = find(report->ranks[0], Category::kComm);
    return comm != nullptr ? comm->estimate_bytes : std::nullopt;
  }
};

TEST_F(MemoryVsEstimateTest, PeaksAgainstTheEstimate) {
  auto trace = write_trace(gpt_config(2, 2, "1f1b", 4), 2, rank0_samples());
  AnalysisWindow window = window_of(2, 1, 1, 0, 10);
  window.ranks = {0};
  auto report = analyze_memory_vs_estimate(trace.db, window);
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  ASSERT_TRUE(report->has_estimate) << report->estimate_note;
  ASSERT_EQ(report->ranks.size(), 1u);
  const RankMemory& rank = report->ranks[0];
  EXPECT_EQ(rank.pp_stage, 0);
  EXPECT_DOUBLE_EQ(rank.peak_total_bytes, 3'204'160);

  const CategoryPeak* params = find(rank, Category::kParams);
  ASSERT_NE(params, nullptr);
  EXPECT_DOUBLE_EQ(params->peak_bytes, kStage0Params);
  EXPECT_DOUBLE_EQ(*params->estimate_bytes, kStage0Params);
  EXPECT_NEAR(*params->error_pct(), 0, 1e-9);
  const CategoryPeak* optimizer = find(rank, Category::kOptimizer);
  ASSERT_NE(optimizer, nullptr);
  EXPECT_DOUBLE_EQ(*optimizer->estimate_bytes, 2 * kStage0Params);
  EXPECT_NEAR(*optimizer->error_pct(), 50, 1e-9);
  const CategoryPeak* activations = find(rank, Category::kActivations);
  ASSERT_NE(activations, nullptr);
  EXPECT_DOUBLE_EQ(activations->peak_bytes, 1'000'000);
  EXPECT_TRUE(activations->estimate_bytes.has_value());
  const CategoryPeak* workspace = find(rank, Category::kWorkspace);
  ASSERT_NE(workspace, nullptr);
  EXPECT_FALSE(workspace->estimate_bytes.has_value());  // the estimator has no workspace line

  auto findings = memory_vs_estimate_findings(*report);
  bool optimizer_flagged = false;
  for (const Finding& f : findings) {
    EXPECT_EQ(f.kind, "memory_estimate_error");
    EXPECT_EQ(f.evidence.find("params"), std::string::npos) << f.evidence;  // params are exact
    if (f.evidence.find("optimizer") != std::string::npos) {
      optimizer_flagged = true;
      EXPECT_NE(f.evidence.find("+50.0%"), std::string::npos) << f.evidence;
    }
  }
  EXPECT_TRUE(optimizer_flagged);
  EXPECT_NE(format_memory_vs_estimate(*report).find("+50.0%"), std::string::npos);
  EXPECT_DOUBLE_EQ(
      memory_vs_estimate_json(*report)[0]["categories"]["optimizer"]["error_pct"]
          .get<double>(),
      50.0);
}

// A block of the fixture's gpt: 12h^2 + 13h parameters.
constexpr double kBlockParams = 12 * 64 * 64 + 13 * 64;

// ZeRO-2 in partrain's workload stages two units' gradients in fp32 for the reduce-scatter: 2 x
// 4 B per element of a block, under bf16 too. ZeRO-3, from the second step (with prefetching): the
// block in backward gathered (4 or 2 B) with its fp32 staging (4 B), the previous block's staging
// in its reduce-scatter (4 B) and the next block prefetched (4 or 2 B): 16 and 12 B, as measured
// on 4-layer gpts (the estimate said 12 and 10, two units with the bf16 gradients beside).
TEST_F(MemoryVsEstimateTest, ZeroCommIsTheWorkloadsStaging) {
  EXPECT_EQ(comm_estimate(2, "fp32"), 2 * 4 * kBlockParams);
  EXPECT_EQ(comm_estimate(2, "bf16"), 2 * 4 * kBlockParams);
  EXPECT_EQ(comm_estimate(3, "bf16"), 12 * kBlockParams);
  EXPECT_EQ(comm_estimate(3, "fp32"), 16 * kBlockParams);
}

// With a vocabulary past 12 h the token embedding (V h) is the largest unit (the estimate took
// two blocks, 74% under for V = 4096, within 1% of the measured peaks now). ZeRO-3 peaks at the
// end of backward: the embedding with its staging, the first block's staging in its
// reduce-scatter, the position embedding prefetched; ZeRO-2 stages it beside the first block.
TEST_F(MemoryVsEstimateTest, ZeroCommCountsAnEmbeddingLargerThanTheBlocks) {
  constexpr double kEmbedding = 4096 * 64;
  constexpr double kPosition = 32 * 64;
  EXPECT_EQ(comm_estimate(2, "fp32", 4096), 4 * (kEmbedding + kBlockParams));
  EXPECT_EQ(comm_estimate(3, "fp32", 4096), 8 * kEmbedding + 4 * kBlockParams + 4 * kPosition);
  EXPECT_EQ(comm_estimate(3, "bf16", 4096), 6 * kEmbedding + 4 * kBlockParams + 2 * kPosition);
}

// A category the estimate has none of but the run used a good share of is a finding: no
// percentage measures it, and it was skipped.
TEST(MemoryVsEstimateFindings, ACategoryTheEstimateHasNoneOfIsFlagged) {
  MemoryVsEstimate report;
  report.has_estimate = true;
  RankMemory rank;
  rank.rank = 1;
  rank.peak_total_bytes = 1'600'000;
  rank.estimate_total_bytes = 1'200'000;
  rank.categories.push_back(CategoryPeak{Category::kComm, 400'000, 0.0});
  rank.categories.push_back(CategoryPeak{Category::kParams, 400'000, 400'000.0});
  report.ranks.push_back(rank);
  auto findings = memory_vs_estimate_findings(report);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].rank, 1);
  // Byte sizes in the unit that fits: "0.00 MiB" read as a zero where there were 400 kB.
  EXPECT_NE(findings[0].evidence.find("comm on rank 1 (stage 0) peaks at 390.62 KiB, the "
                                      "estimate says 0 B (it has none)"),
            std::string::npos)
      << findings[0].evidence;
}

// Ranks with the same figures (a dp replica's) are one block, named by their ranks: analyze
// printed four identical blocks for ranks 0-3 before. 256 B of "other" is 256 B, not 0.00 MiB.
TEST(MemoryVsEstimateText, IdenticalRanksAreOneBlock) {
  MemoryVsEstimate report;
  report.has_estimate = true;
  report.estimate_note = "test";
  for (int r = 0; r < 6; ++r) {
    RankMemory rank;
    rank.rank = r;
    rank.pp_stage = r == 4 ? 1 : 0;  // ranks 0-3 and 5 alike, rank 4 on another stage
    rank.peak_total_bytes = 1'000'000;
    rank.estimate_total_bytes = 900'000;
    rank.categories.push_back(CategoryPeak{Category::kParams, 999'744, 900'000.0});
    rank.categories.push_back(CategoryPeak{Category::kOther, 256, std::nullopt});
    report.ranks.push_back(rank);
  }
  const std::string text = format_memory_vs_estimate(report);
  auto count = [&](const std::string& needle) {
    size_t n = 0;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
      ++n;
    }
    return n;
  };
  EXPECT_EQ(count(" params "), 2u) << text;  // two blocks, not six
  EXPECT_NE(text.find("0-3,5      0  params"), std::string::npos) << text;
  EXPECT_NE(text.find("    4      1  params"), std::string::npos) << text;
  EXPECT_NE(text.find("256 B"), std::string::npos) << text;
  EXPECT_EQ(text.find("0.00"), std::string::npos) << text;
}

TEST_F(MemoryVsEstimateTest, ForeignRunGetsPeaksOnly) {
  auto trace = write_trace("{\"command\": \"python train.py\"}", 1, rank0_samples());
  AnalysisWindow window = window_of(1, 1, 1, 0, 10);
  auto report = analyze_memory_vs_estimate(trace.db, window);
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  EXPECT_FALSE(report->has_estimate);
  ASSERT_EQ(report->ranks.size(), 1u);
  EXPECT_DOUBLE_EQ(report->ranks[0].peak_total_bytes, 3'204'160);
  for (const CategoryPeak& c : report->ranks[0].categories) EXPECT_FALSE(c.error_pct());
  EXPECT_TRUE(memory_vs_estimate_findings(*report).empty());
}

// A CPU PyTorch job records no memory (its memory comes from the CUDA caching allocator): such a
// rank's peak is unknown, and the text and --json said it was 0 B.
TEST_F(MemoryVsEstimateTest, ARankWithNoMemoryRecordedHasNoPeak) {
  auto trace = write_trace("{\"command\": \"python train.py\"}", 3, rank0_samples());
  AnalysisWindow window = window_of(3, 1, 1, 0, 10);
  auto report = analyze_memory_vs_estimate(trace.db, window);
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  ASSERT_EQ(report->ranks.size(), 3u);
  EXPECT_TRUE(report->ranks[0].recorded);
  EXPECT_FALSE(report->ranks[1].recorded);
  const std::string text = format_memory_vs_estimate(*report);
  EXPECT_NE(text.find("no memory recorded on ranks 1,2: partrain records a PyTorch job's memory "
                      "from the CUDA caching allocator"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find(" 0 B "), std::string::npos) << text;
  EXPECT_NE(text.find("3.06 MiB"), std::string::npos) << text;  // rank 0's 3,204,160 B
  const nlohmann::json json = memory_vs_estimate_json(*report);
  EXPECT_EQ(json[0]["peak_total_bytes"], 3'204'160);
  EXPECT_TRUE(json[0]["peak_total_bytes"].is_number_integer()) << json.dump();  // whole bytes
  EXPECT_TRUE(json[1]["peak_total_bytes"].is_null()) << json.dump();
  EXPECT_EQ(json[1]["recorded"], false);
  // --json says what the text says: why there is no estimate, why there is no memory.
  EXPECT_EQ(json[1]["estimate_note"], "not a built-in workload run: peaks only");
  EXPECT_NE(json[1]["note"].get<std::string>().find("a CPU job has none"), std::string::npos);
}

// An imported torch.profiler trace: ranks without [memory] events need profile_memory=True, and
// the CPU allocator's samples (import_cpu_memory_relative) count from when profiling began, which
// the text and --json say beside the peak.
TEST_F(MemoryVsEstimateTest, ImportedCpuSamplesAreAChangeNotBytesInUse) {
  std::vector<profiler::TraceEvent> events = rank0_samples();
  events.push_back(profiler::StatEvent{"import_cpu_memory_relative", 0, 6,
                                       profiler::StatSeverity::kInfo, "from zero"});
  auto trace = write_trace(R"({"imported_from": "kineto", "world_size": 2})", 2, events);
  auto report = analyze_memory_vs_estimate(trace.db, window_of(2, 1, 1, 0, 10));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  const std::string text = format_memory_vs_estimate(*report);
  EXPECT_NE(text.find("no memory recorded on rank 1: the imported profile holds no [memory] "
                      "events: profile with torch.profiler(profile_memory=True)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rank 0: torch.profiler's CPU memory samples count what was allocated "
                      "after profiling began"),
            std::string::npos)
      << text;
  const nlohmann::json json = memory_vs_estimate_json(*report);
  EXPECT_EQ(json[0]["relative"], true);
  EXPECT_NE(json[0]["note"].get<std::string>().find("after profiling began"), std::string::npos);
  EXPECT_EQ(json[1]["relative"], false);
  EXPECT_NE(json[1]["note"].get<std::string>().find("profile_memory=True"), std::string::npos);
}

}  // namespace
}  // namespace partrain::analyzers
