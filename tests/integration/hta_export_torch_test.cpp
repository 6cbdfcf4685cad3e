// HolisticTraceAnalysis (the PyPI package, tests/support/torch_python.h) reads `partrain export
// --per-rank`: every rank of a traced run loads with its rank, and on a trace with GPU streams
// HTA's temporal breakdown and communication/computation overlap agree with `partrain analyze
// --json`'s "gpu" figures over the same steps within 1% per rank. The GPU trace is made of
// synthetic CUPTI activity (kernels on three streams, NCCL all-reduce kernels, copies, fills)
// put through the translator a traced rank uses, with each rank's clock offset; a torch.profiler
// GPU trace imported and exported again reads in HTA as the original files do; the CPU trace is
// a built-in workload on gloo, on which HTA finds no GPU work (docs/import.md, "HTA").
// SKIPPED without the interpreter.
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "profiler/gpu_activity_translator.h"
#include "tests/integration/command_runner.h"
#include "tests/support/kineto_fixture.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/torch_python.h"
#include "tests/support/trace_fixture.h"

namespace partrain::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using profiler::CollectiveRecord;
using profiler::CollectiveState;
using profiler::GpuActivityTranslator;
using profiler::SliceCategory;
using profiler::SliceEvent;
using profiler::TraceEvent;
using profiler::TrackKind;

constexpr int kRanks = 4;
constexpr int kSteps = 4;
constexpr int64_t kStepNs = 2'000'000;

// A traced rank's side of the translator: its clock offset onto the run's timeline, its steps
// (each kStepNs long from step_start), and the rows it would record.
class RankSink final : public profiler::GpuTraceSink {
 public:
  RankSink(int rank, int64_t offset_ns, int64_t step_start_ns)
      : rank_(rank), offset_ns_(offset_ns), step_start_ns_(step_start_ns) {}
  int32_t rank() const override { return rank_; }
  int64_t timeline_ns(int64_t local_ns) const override { return local_ns + offset_ns_; }
  int64_t step_at(int64_t local_ns) const override {
    if (local_ns < step_start_ns_) return -1;
    return std::min<int64_t>(kSteps, 1 + (local_ns - step_start_ns_) / kStepNs);
  }
  void emit(const TraceEvent& event) override { events.push_back(event); }
  void collective(const profiler::CollectiveEvent& event, int64_t gpu_start_ns,
                  int64_t gpu_end_ns) override {
    CollectiveRecord record{rank_, step_at(event.start_ns), -1, -1, event};
    record.gpu_start_ns = timeline_ns(gpu_start_ns);
    record.gpu_end_ns = timeline_ns(gpu_end_ns);
    for (int64_t* ns : {&record.event.enqueue_ns, &record.event.start_ns, &record.event.end_ns}) {
      *ns = timeline_ns(*ns);
    }
    events.push_back(record);
  }
  std::vector<TraceEvent> events;

 private:
  int rank_;
  int64_t offset_ns_, step_start_ns_;
};

profiler::GpuKernel kernel(std::string name, uint32_t stream, int64_t start, int64_t end,
                           uint32_t correlation) {
  profiler::GpuKernel k;
  k.name = std::move(name);
  k.stream = stream;
  k.start_ns = start;
  k.end_ns = end;
  k.correlation = correlation;
  k.grid = {64, 1, 1};
  k.block = {256, 1, 1};
  return k;
}

// One rank's steps of GPU work, in its own clock: a copy in, two GEMMs with an elementwise kernel
// beside the first on another stream, an NCCL all-reduce on the communication stream that
// overlaps the second GEMM and part of a third, then a fill. Durations differ by rank and step
// (so do the answers) and are not whole microseconds.
std::vector<TraceEvent> rank_events(int rank) {
  const int64_t local_start = 5'000'000 + 1'000 * rank;  // the rank's clock is off the run's
  RankSink sink(rank, 1'000'000 - 1'000 * rank + 417 * rank, local_start);
  GpuActivityTranslator translator(sink);
  uint32_t correlation = 100;
  for (int step = 1; step <= kSteps; ++step) {
    const int64_t t = local_start + (step - 1) * kStepNs;
    const int64_t r = rank, s = step;
    profiler::GpuMemcpy copy{profiler::CopyDirection::kHostToDevice,
                             1 << 20,
                             t + 10'123,
                             t + 60'123 + 711 * r,
                             0,
                             7,
                             ++correlation};
    translator.add(copy);
    const int64_t gemm1_end = t + 400'000 + 20'011 * r + 3'003 * s;
    translator.add(
        kernel("_Z11gemm_kernelIfEvPT_", 7, t + 100'000 + 3'001 * r, gemm1_end, ++correlation));
    translator.add(kernel("_Z18elementwise_kernelPf", 21, t + 150'000, t + 250'000 + 9'999 * s,
                          ++correlation));
    translator.add(kernel("_Z11gemm_kernelIfEvPT_", 7, gemm1_end + 50'000,
                          gemm1_end + 350'000 + 1'234 * s, ++correlation));
    translator.add(kernel("_Z11gemm_kernelIfEvPT_", 7, t + 1'200'000, t + 1'500'000 + 7'777 * r,
                          ++correlation));

    profiler::NcclCallRecord call;
    call.correlation = 9'000 + static_cast<uint64_t>(step);
    call.event.comm_id = "nccl-00000000000000aa";
    call.event.seq = static_cast<uint64_t>(step);
    call.event.op = "all_reduce";
    call.event.dtype = "float";
    call.event.reduce_op = "sum";
    call.event.count = 1 << 18;
    call.event.bytes = 1 << 20;
    call.event.rank = rank;
    call.event.group_size = kRanks;
    call.event.group_ranks = {0, 1, 2, 3};
    call.event.enqueue_ns = t + 590'000;
    call.event.start_ns = t + 590'000;
    call.event.end_ns = t + 595'000;
    call.event.state = CollectiveState::kCompleted;
    translator.add_nccl_call(call);
    const uint32_t nccl = ++correlation;
    translator.add(profiler::GpuExternalCorrelation{call.correlation, nccl});
    translator.add(kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 13, t + 600'000,
                          t + 1'350'000 + 13'131 * r, nccl));
    translator.add(
        profiler::GpuMemset{4096, t + 1'600'000, t + 1'610'000 + 333 * s, 0, 13, ++correlation});
    translator.flush(false);
  }
  translator.flush(true);

  std::vector<TraceEvent> events = std::move(sink.events);
  profiler::RankInfo info;
  info.rank = rank;
  info.local_rank = rank;
  info.host = "node0";
  info.device = "cuda:" + std::to_string(rank);
  events.push_back(info);
  for (int step = 1; step <= kSteps; ++step) {
    const int64_t t = sink.timeline_ns(local_start + (step - 1) * kStepNs);
    events.push_back(profiler::StepEvent{rank, step, t, kStepNs, 1.0, 1024});
    // The host's own work: partrain's rank breakdown counts it, HTA (GPU streams only) does not.
    events.push_back(SliceEvent{rank, TrackKind::kCpuThread, "main", "optimizer",
                                SliceCategory::kCompute, t + 1'700'000, 200'000, step});
  }
  return events;
}

class HtaExport : public ::testing::Test {
 protected:
  // `partrain export --per-rank` of the trace into a directory, with extra export flags.
  fs::path export_per_rank(const fs::path& trace, const std::string& flags) {
    const fs::path dir = scratch_.path() / (trace.stem().string() + "-hta");
    CommandResult exported =
        run_partrain("export " + trace.string() + " --per-rank -o " + dir.string() + " " + flags);
    EXPECT_EQ(exported.exit_code, 0) << exported.err;
    return dir;
  }
  json hta_figures(const fs::path& dir, const std::string& env = "") {
    const fs::path script = fs::path(PARTRAIN_SOURCE_DIR) / "tests/data/hta/hta_figures.py";
    CommandResult figures =
        run_shell(env + " " + torch_python() + " " + script.string() + " " + dir.string());
    EXPECT_EQ(figures.exit_code, 0) << figures.err;
    return parse_json_output(figures.out);
  }

  ScratchDir scratch_;
};

// HTA's figure within 1% of partrain's (the bar; on these traces they agree to the ns).
void expect_within_1pct(double hta, double partrain, const std::string& what) {
  EXPECT_NEAR(hta, partrain, 0.01 * std::abs(partrain)) << what;
}

TEST_F(HtaExport, GpuTemporalBreakdownAndOverlapAgreeWithAnalyze) {
  PARTRAIN_REQUIRE_TORCH();
  std::vector<TraceEvent> events;
  for (int rank = 0; rank < kRanks; ++rank) {
    std::vector<TraceEvent> of_rank = rank_events(rank);
    events.insert(events.end(), of_rank.begin(), of_rank.end());
  }
  const fs::path trace = scratch_.path() / "gpu.db";
  write_completed_trace(trace, "{}", kRanks, events);

  // Steps 2..4: the window analyze takes by default (warm-up step 1 left out), asked for by name
  // on both sides.
  const fs::path dir = export_per_rank(trace, "--steps 2:4");
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_TRUE(fs::exists(dir / ("rank" + std::to_string(rank) + ".json")));
  }
  CommandResult analyzed = run_partrain("analyze " + trace.string() + " --steps 2:4 --json");
  ASSERT_EQ(analyzed.exit_code, 0) << analyzed.err;
  const json partrain = parse_json_output(analyzed.out).at("gpu");
  ASSERT_EQ(partrain.size(), static_cast<size_t>(kRanks)) << partrain.dump();

  // ns precision kept (HTA otherwise rounds every event inward to whole microseconds).
  const json hta = hta_figures(dir, "HTA_DISABLE_NS_ROUNDING=1");
  ASSERT_EQ(hta.at("ranks"), json({0, 1, 2, 3})) << hta.dump();
  ASSERT_TRUE(hta.contains("temporal")) << hta.dump();
  for (const json& row : partrain) {
    const int rank = row.at("rank").get<int>();
    const std::string key = std::to_string(rank);
    const std::string what = "rank " + key + ": partrain " + row.dump() + "\nHTA " +
                             hta.at("temporal").at(key).dump() + " overlap " +
                             hta.at("overlap").at(key).dump();
    const json& temporal = hta.at("temporal").at(key);
    // 3 steps x 7 GPU slices (copy, 4 kernels, NCCL kernel, fill).
    EXPECT_EQ(hta.at("gpu_events").at(key), 21) << what;
    for (const char* figure : {"span", "compute", "non_compute", "idle"}) {
      const double ms = row.at(std::string(figure) + "_ms").get<double>();
      EXPECT_GT(ms, 0) << figure << ": " << what;
      expect_within_1pct(temporal.at(std::string(figure) + "_us").get<double>(), 1000 * ms,
                         std::string(figure) + ": " + what);
    }
    std::cout << what << "\n";  // the figures side by side, for the record
    ASSERT_TRUE(hta.at("overlap").at(key).is_number()) << what;
    EXPECT_GT(row.at("overlap_pct").get<double>(), 0) << what;
    expect_within_1pct(hta.at("overlap").at(key).get<double>(), row.at("overlap_pct").get<double>(),
                       "overlap: " + what);
  }
}

// One rank's PyTorch profiler trace of a GPU job, as torch.profiler writes it: ProfilerStep#1..4,
// each launch a cuda_runtime event whose correlation its kernel (pid = device, tid = stream)
// carries: GEMMs and an elementwise kernel, an NCCL all-reduce kernel, a copy and a fill, with
// durations that differ by rank and step and are not whole microseconds.
std::string kineto_gpu_rank(int rank) {
  KinetoFixture trace(rank, 2);
  trace.backend("nccl");
  int correlation = 1000 * (rank + 1);
  auto gpu = [&](std::string_view cat, std::string_view name, int stream, double start,
                 double end) {
    trace.event("cuda_runtime", "cudaLaunchKernel", trace.pid(), start - 5, 2,
                fmt::format("{{\"correlation\": {}}}", ++correlation));
    trace.raw_event(
        fmt::format("{{\"ph\": \"X\", \"cat\": \"{}\", \"name\": \"{}\", \"pid\": 0, \"tid\": {}, "
                    "\"ts\": {:.3f}, \"dur\": {:.3f}, \"args\": {{\"device\": 0, \"stream\": {}, "
                    "\"correlation\": {}}}}}",
                    cat, name, stream, start, end - start, stream, correlation));
  };
  for (int step = 1; step <= 4; ++step) {
    const double t = 1000.0 * step, r = rank;
    trace.step(step, t, 1000);
    gpu("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 7, t + 6.25, t + 9.5);
    gpu("kernel", "void gemm_kernel<float>(float*)", 7, t + 10.5, t + 300.25 + 20 * r);
    gpu("kernel", "void elementwise_kernel<float>(float*)", 21, t + 50, t + 150.125 + step);
    gpu("kernel", "void gemm_kernel<float>(float*)", 7, t + 320, t + 600.375 + 5 * step);
    gpu("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 13,
        t + 400, t + 750.5 + 10 * r);
    gpu("gpu_memset", "Memset (Device)", 13, t + 800, t + 805.001);
  }
  return trace.json();
}

// A torch.profiler trace imported, then exported for HTA: HTA reads partrain's files as it reads
// torch's own, and both agree with `partrain analyze`. HTA leaves out the last ProfilerStep of
// torch's files, so steps 1..3 are compared.
TEST_F(HtaExport, ImportedProfilerTraceReadsInHtaAsTheOriginalDoes) {
  PARTRAIN_REQUIRE_TORCH();
  const fs::path kineto = scratch_.path() / "kineto";
  fs::create_directories(kineto);
  for (int rank = 0; rank < 2; ++rank) {
    write_text(kineto / ("rank" + std::to_string(rank) + ".pt.trace.json"), kineto_gpu_rank(rank));
  }
  const fs::path trace = scratch_.path() / "imported.db";
  CommandResult imported = run_partrain("import " + kineto.string() + " -o " + trace.string());
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  CommandResult analyzed = run_partrain("analyze " + trace.string() + " --steps 1:3 --json");
  ASSERT_EQ(analyzed.exit_code, 0) << analyzed.err;
  const json partrain = parse_json_output(analyzed.out).at("gpu");
  ASSERT_EQ(partrain.size(), 2u) << partrain.dump();

  const json original = hta_figures(kineto, "HTA_DISABLE_NS_ROUNDING=1");
  const json exported =
      hta_figures(export_per_rank(trace, "--steps 1:3"), "HTA_DISABLE_NS_ROUNDING=1");
  EXPECT_EQ(original.at("steps"), json({1, 2, 3})) << original.dump();
  for (const json* hta : {&original, &exported}) {
    ASSERT_EQ(hta->at("ranks"), json({0, 1})) << hta->dump();
    ASSERT_TRUE(hta->contains("temporal")) << hta->dump();
    for (const json& row : partrain) {
      const std::string key = std::to_string(row.at("rank").get<int>());
      const std::string what = "rank " + key + ": partrain " + row.dump() + "\nHTA " +
                               hta->at("temporal").at(key).dump() + " overlap " +
                               hta->at("overlap").at(key).dump();
      std::cout << what << "\n";
      EXPECT_EQ(hta->at("gpu_events").at(key), 18) << what;  // 3 steps x 6
      for (const char* figure : {"span", "compute", "non_compute", "idle"}) {
        const double ms = row.at(std::string(figure) + "_ms").get<double>();
        EXPECT_GT(ms, 0) << figure << ": " << what;
        expect_within_1pct(hta->at("temporal").at(key).at(std::string(figure) + "_us"), 1000 * ms,
                           std::string(figure) + ": " + what);
      }
      EXPECT_GT(row.at("overlap_pct").get<double>(), 0) << what;
      expect_within_1pct(hta->at("overlap").at(key).get<double>(),
                         row.at("overlap_pct").get<double>(), "overlap: " + what);
    }
  }
}

// A CPU run (a built-in workload on gloo: compute, collectives and steps as host slices, no
// GPU stream): HTA loads every rank with all its events, finds no GPU event and no profiler
// step, and its GPU analyses have nothing to work on (docs/import.md, "HTA").
TEST_F(HtaExport, CpuTraceLoadsEveryRankWithNoGpuWork) {
  PARTRAIN_REQUIRE_TORCH();
  const fs::path trace = scratch_.path() / "cpu.db";
  CommandResult launched = run_partrain(
      "-q launch -n 2 --workload gpt --layers 1 --hidden 32 --heads 2 --seq 16 --vocab 64 "
      "--dp 2 --micro-batch 2 --steps 3 --trace " +
      trace.string());
  ASSERT_EQ(launched.exit_code, 0) << launched.err;
  const fs::path dir = export_per_rank(trace, "");
  const json hta = hta_figures(dir);
  ASSERT_EQ(hta.at("ranks"), json({0, 1})) << hta.dump();
  for (const std::string rank : {"0", "1"}) {
    // Every X event of the rank's file (HTA drops metadata, counters and flows).
    CommandResult slices = run_shell("grep -o '\"ph\":\"X\"' " +
                                     (dir / ("rank" + rank + ".json")).string() + " | wc -l");
    EXPECT_EQ(hta.at("events").at(rank).get<int64_t>(), std::stoll(slices.out)) << hta.dump();
    EXPECT_GT(hta.at("events").at(rank).get<int64_t>(), 0);
    EXPECT_EQ(hta.at("gpu_events").at(rank), 0) << hta.dump();
  }
  EXPECT_EQ(hta.at("steps"), json::array()) << hta.dump();
  EXPECT_TRUE(hta.contains("temporal_error")) << hta.dump();
  for (const auto& [rank, overlap] : hta.at("overlap").items()) {
    EXPECT_TRUE(overlap.is_null()) << rank << ": " << hta.dump();
  }
}

}  // namespace
}  // namespace partrain::testing
