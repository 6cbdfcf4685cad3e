// `partrain bench collectives`: an nccl-tests-style bandwidth table over partrain's own
// communicators, checked against a reference. With -n N it launches N local ranks of itself;
// under `partrain launch` (RANK set) it is one of the ranks.
// `partrain bench ingest`: the trace pipeline's rate (writer alone and end to end) and bytes per
// event (cli/bench/ingest_bench.h).
// `partrain bench gemm`: a GEMM's rate as the workloads issue it (runner/device/gemm_benchmark.h).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "cli/bench/bench_report.h"
#include "cli/bench/bench_runner.h"
#include "cli/bench/gemm_report.h"
#include "cli/bench/ingest_bench.h"
#include "cli/command.h"
#include "cli/terminal_progress.h"
#include "core/byte_size.h"
#include "core/log.h"
#include "runner/device/cpu_device.h"
#include "runner/device/cuda_device.h"
#include "runner/device/gemm_benchmark.h"
#include "runner/device/openblas_library.h"
#include "runner/launch/launcher.h"
#include "runner/worker/world.h"
#include "runner/workload/workload_device.h"

namespace partrain::cli {
namespace {

struct BenchFlags {
  std::string min_bytes = "32M";
  std::string max_bytes = "32M";
  uint64_t step_factor = 1;
  std::string step_bytes = "1M";
  int warmup_iters = 5;
  int iters = 20;
  int check = 1;
  std::string dtype = "float";
  std::string redop = "sum";
  int root = 0;
  int average = 1;
  std::string op = "all_reduce";
  std::string backend = "gloo";
  bool json = false;
  int nranks = 0;  // 0: this process is the whole world, or one rank of a launched world
};

StatusOr<bench::BenchOptions> to_options(const BenchFlags& flags) {
  bench::BenchOptions options;
  ASSIGN_OR_RETURN(options.min_bytes, parse_byte_size(flags.min_bytes));
  ASSIGN_OR_RETURN(options.max_bytes, parse_byte_size(flags.max_bytes));
  ASSIGN_OR_RETURN(options.step_bytes, parse_byte_size(flags.step_bytes));
  if (options.min_bytes > options.max_bytes) {
    return invalid_argument("-b/--minbytes ({}) is larger than -e/--maxbytes ({})",
                            flags.min_bytes, flags.max_bytes);
  }
  options.step_factor = flags.step_factor;
  if (options.step_factor <= 1 && options.step_bytes == 0 && options.min_bytes != options.max_bytes) {
    return invalid_argument("-i/--stepbytes 0 with -f/--stepfactor 1 never reaches -e: pass -f 2");
  }
  options.warmup_iters = flags.warmup_iters;
  options.iters = flags.iters;
  options.check = flags.check != 0;
  auto dtype = comm::parse_dtype(flags.dtype);
  if (!dtype) {
    return invalid_argument("-d/--datatype '{}' is not one of float, bfloat16, half, int32, int64",
                            flags.dtype);
  }
  options.dtype = *dtype;
  // nccl-tests' count is size / element size: a size under one element would time nothing.
  const size_t element = comm::dtype_size(*dtype);
  if (options.min_bytes < element) {
    return invalid_argument("-b/--minbytes {} is less than one {} ({} bytes): pass at least {}",
                            flags.min_bytes, flags.dtype, element, element);
  }
  auto redop = comm::parse_reduce_op(flags.redop);
  if (!redop) return invalid_argument("-o/--redop '{}' is not one of sum, avg, max, min", flags.redop);
  options.reduce_op = *redop;
  options.root = flags.root;
  options.average = static_cast<bench::TimeAverage>(flags.average);
  if (flags.op == "all") {
    options.ops.clear();
    for (const auto& test : bench::collective_tests()) options.ops.emplace_back(test.name);
  } else {
    options.ops = {flags.op};
  }
  auto backend = runner::parse_comm_backend(flags.backend);
  if (!backend) return invalid_argument("--backend '{}' is not gloo or nccl", flags.backend);
  options.backend = *backend;
  options.json = flags.json;
  return options;
}

// The same benchmark as N local ranks: re-executes this binary under the launcher, passing the
// parsed flags on explicitly.
int run_as_launcher(const BenchFlags& flags, const std::vector<std::string>& strip_env) {
  launch::LaunchConfig config;
  config.nproc_per_node = flags.nranks;
  config.prefix = false;  // only rank 0 prints the table: keep stdout a clean table or JSON
  config.strip_env = strip_env;
  config.command = {
      std::filesystem::read_symlink("/proc/self/exe").string(), "bench", "collectives",
      "-b", flags.min_bytes, "-e", flags.max_bytes, "-f", std::to_string(flags.step_factor),
      "-i", flags.step_bytes, "-w", std::to_string(flags.warmup_iters),
      "--iters", std::to_string(flags.iters), "-c", std::to_string(flags.check),
      "-d", flags.dtype, "-o", flags.redop, "-r", std::to_string(flags.root),
      "-a", std::to_string(flags.average), "--op", flags.op, "--backend", flags.backend};
  if (flags.json) config.command.emplace_back("--json");
  StatusOr<int> code = launch::launch(config);
  if (!code.is_ok()) {
    log::error("{}", code.status().message());
    return code.status().exit_code();
  }
  return *code;
}

// NCCL moves GPU memory, one rank per GPU: checked before any rank starts, where each rank would
// otherwise fail on its own with the CUDA runtime's words.
Status check_nccl_gpus(int ranks) {
  StatusOr<int> gpus = runner::visible_cuda_devices();
  if (!gpus.is_ok()) {
    return invalid_argument(
        "--backend nccl: no usable GPU: {}; benchmark host memory with "
        "--backend gloo",
        gpus.status().message());
  }
  if (ranks > *gpus) {
    return invalid_argument(
        "--backend nccl runs one rank per GPU, and {} ranks (-n) were asked "
        "for with {} GPU(s) visible: pass -n {} or less, or --backend gloo",
        ranks, *gpus, *gpus);
  }
  return Status::ok();
}

int run_bench(const BenchFlags& flags, const std::vector<std::string>& strip_env) {
  StatusOr<bench::BenchOptions> options = to_options(flags);
  if (!options.is_ok()) {
    log::error("{}", options.status().message());
    return options.status().exit_code();
  }
  if (options->backend == runner::CommBackend::kNccl && !runner::launched_as_worker()) {
    if (Status gpus = check_nccl_gpus(std::max(flags.nranks, 1)); !gpus.is_ok()) {
      return report_error(gpus);
    }
  }
  if (flags.nranks > 0 && !runner::launched_as_worker()) {
    // Checked once here, rather than by every rank after they started.
    if (options->root < 0 || options->root >= flags.nranks) {
      log::error("-r/--root {} is not a rank of this world of {} (-n): pass 0 to {}", options->root,
                 flags.nranks, flags.nranks - 1);
      return 2;
    }
    return run_as_launcher(flags, strip_env);
  }

  runner::WorldOptions world_options;
  world_options.backend = options->backend;
  StatusOr<runner::World> world = runner::join_world(world_options);
  if (!world.is_ok()) {
    log::error("{}", world.status().message());
    return world.status().exit_code();
  }
  comm::Comm& comm = *world->comm;
  if (options->root < 0 || options->root >= comm.size()) {
    log::error("-r/--root {} is not a rank of this world of {}", options->root, comm.size());
    return 2;
  }
  StatusOr<std::unique_ptr<bench::BufferSpace>> space =
      options->backend == runner::CommBackend::kNccl
          ? bench::make_cuda_buffer_space(world->env.local_rank)
          : StatusOr<std::unique_ptr<bench::BufferSpace>>(bench::make_host_buffer_space());
  if (!space.is_ok()) {
    log::error("{}", space.status().message());
    return space.status().exit_code();
  }
  // The table is printed as it is measured, a row per size as nccl-tests does (a sweep to 8G
  // took minutes of silence); --json is one document, printed at the end.
  const bench::BenchContext context{comm.size(), std::string(comm.backend()),
                                    std::string((*space)->name())};
  const bool table = comm.rank() == 0 && !options->json;
  // Between rows (and with --json, where nothing shows until the end), a terminal's stderr says
  // how far the sweep got; rank 0 only.
  std::optional<TerminalProgress> progress;
  if (comm.rank() == 0) progress.emplace("bench collectives");
  int64_t measured = 0;
  const auto total =
      static_cast<int64_t>(options->ops.size() * bench::bench_sizes(*options).size());
  std::optional<bench::BenchRow> previous;
  auto print = [](const std::string& text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  };
  if (table) print(bench::format_bench_header(*options, context));
  StatusOr<std::vector<bench::BenchRow>> rows = bench::run_collective_bench(
      comm, **space, *options, [&](const bench::BenchRow& row) {
        ++measured;
        if (table) {
          progress->finish();  // the row starts on a clean line
          print(bench::format_bench_row(row, previous ? &*previous : nullptr));
          previous = row;
        }
        if (progress) {
          progress->update(fmt::format("{} {} measured", row.op, format_bytes(row.bytes)), measured,
                           total);
        }
      });
  if (progress) progress->finish();
  if (!rows.is_ok()) {
    log::error("rank {}: {}", comm.rank(), rows.status().message());
    return rows.status().exit_code();
  }
  if (comm.rank() == 0) {
    const std::string text = options->json ? bench::format_bench_json(*rows, *options, context)
                                           : bench::format_bench_footer(*rows);
    std::fwrite(text.data(), 1, text.size(), stdout);
    if (const int unwritten = checked_stdout(0); unwritten != 0) return unwritten;
  }
  // Results were checked: wrong values make the benchmark fail, as a test would.
  return bench::total_wrong(*rows) == 0 ? 0 : 1;
}

struct IngestFlags {
  uint64_t events = 2'000'000;
  int producers = 4;
  std::string dir;
  bool keep = false;
  bool json = false;
  std::vector<std::string> cases{"writer", "end-to-end", "kinds"};
};

int run_ingest(const IngestFlags& flags) {
  bench::IngestOptions options;
  options.events = flags.events;
  options.producers = flags.producers;
  options.dir = flags.dir;
  options.keep = flags.keep;
  auto wanted = [&](std::string_view name) {
    return std::find(flags.cases.begin(), flags.cases.end(), name) != flags.cases.end();
  };
  options.writer = wanted("writer");
  options.end_to_end = wanted("end-to-end");
  options.kinds = wanted("kinds");
  StatusOr<bench::IngestReport> report = bench::run_ingest_bench(options);
  if (!report.is_ok()) {
    log::error("bench ingest: {}", report.status().message());
    return report.status().exit_code();
  }
  std::string text = flags.json ? bench::format_ingest_json(*report)
                                : bench::format_ingest_table(*report);
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (const int unwritten = checked_stdout(0); unwritten != 0) return unwritten;
  // Checked like a test: the writer alone must store every event (drops end to end are data).
  return report->writer_lost() == 0 ? 0 : 1;
}

CLI::App* add_ingest(CLI::App& bench, const std::shared_ptr<IngestFlags>& flags) {
  CLI::App* ingest = bench.add_subcommand(
      "ingest",
      "Events per second the trace pipeline stores: the SQLite writer alone, then end to end "
      "(ranks' recorders -> Unix socket -> collector -> writer), and bytes per event on disk");
  ingest->add_option("--events", flags->events, "Events per case")
      ->capture_default_str()->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  ingest->add_option("--producers", flags->producers,
                     "End-to-end producer threads, each a rank with its own recorder and client")
      ->capture_default_str()->check(CLI::Range(1, 256));
  ingest->add_option("--dir", flags->dir,
                     "Directory for the trace files (default: a new temporary one)");
  ingest->add_flag("--keep", flags->keep, "Keep the trace files (and the temporary directory)");
  ingest->add_flag("--json", flags->json, "Print {\"results\": [...]} instead of the table");
  ingest->add_option("--cases", flags->cases,
                     "Cases to run: writer (the mix), end-to-end, kinds (the writer on each kind "
                     "alone)")
      ->capture_default_str()->delimiter(',')
      ->check(CLI::IsMember({"writer", "end-to-end", "kinds"}));
  ingest->footer(
      "Cases: `writer` (TraceWriter::append alone, timed to its last commit), `end-to-end` "
      "(--producers threads, each with its own Recorder and CollectorClient, into a TraceSession, "
      "timed until everything is stored; a producer waits while its recorder buffer is 3/4 "
      "unshipped, so the rate is what the pipeline sustains), then the writer on each kind of "
      "event alone (a quarter of --events each).\n"
      "Mix per 1,000 events: 550 slices (12 names), 350 memory samples, 99 collectives "
      "(all_reduce, reduce_scatter, all_gather, send, recv), 1 step; runs of 1,000 events per "
      "rank, as the collector delivers them. size = file bytes (WAL checkpointed) / events.\n"
      "Every case counts its events in the file afterwards. Exit 1 when the writer alone lost "
      "any; events lost end to end are reported, not a failure.\n"
      "Examples:\n"
      "  partrain bench ingest\n"
      "  partrain bench ingest --events 500000 --producers 8 --json\n"
      "  partrain bench ingest --cases writer,end-to-end");
  return ingest;
}

struct GemmFlags {
  std::vector<std::string> shapes;  // empty: 8192 on a GPU, 1024 on the CPU
  std::string device = "auto";
  std::string precision = "bf16";
  int warmup_iters = 3;
  int iters = 10;
  int check = 1;
  bool bias = false;
  int blas_threads = 1;
  uint64_t seed = 1;
  bool json = false;
};

// `launch`'s precision names (PARTRAIN_PRECISION may be set for it): every bf16 recipe
// multiplies bf16 operands. The flag accepts only names parse_precision knows.
bool is_bf16_precision(const std::string& precision) {
  return runner::is_bf16(runner::parse_precision(precision).value_or(runner::Precision::kFp32));
}

// The device to time on: the GPU CUDA_VISIBLE_DEVICES puts first, or the CPU (--device auto
// falls back to it with the same notice as `launch`).
StatusOr<std::unique_ptr<runner::Device>> create_gemm_device(const GemmFlags& flags) {
  ASSIGN_OR_RETURN(runner::DeviceChoice choice, runner::choose_device(flags.device, "auto", 1));
  if (!choice.notice.empty()) log::info("{}", choice.notice);
  const runner::GemmPrecision precision = is_bf16_precision(flags.precision)
                                              ? runner::GemmPrecision::kBf16
                                              : runner::GemmPrecision::kFp32;
  if (choice.device == "cuda") {
    runner::CudaDeviceOptions options;
    options.precision = precision;
    return runner::create_cuda_device(options);
  }
  runner::CpuDeviceOptions options;
  options.blas_threads = flags.blas_threads;
  options.precision = precision;
  // Opened before the warning asks it anything, with a pool of these threads.
  RETURN_IF_ERROR(runner::openblas_library(flags.blas_threads).status());
  if (const auto warning = runner::blas_kernel_warning()) log::warn("{}", *warning);
  return std::unique_ptr<runner::Device>(std::make_unique<runner::CpuDevice>(options));
}

int run_gemm(const GemmFlags& flags) {
  std::vector<runner::GemmShape> shapes;
  for (const std::string& text : flags.shapes) {
    StatusOr<runner::GemmShape> shape = runner::parse_gemm_shape(text);
    if (!shape.is_ok()) {
      log::error("-s/--shape: {}", shape.status().message());
      return 2;
    }
    shapes.push_back(*shape);
  }
  StatusOr<std::unique_ptr<runner::Device>> device = create_gemm_device(flags);
  if (!device.is_ok()) {
    log::error("bench gemm: {}", device.status().message());
    return device.status().exit_code();
  }
  if (shapes.empty()) {
    const int64_t size = (*device)->host_addressable() ? 1024 : 8192;
    shapes.push_back({size, size, size});
  }
  std::vector<runner::GemmBenchResult> results;
  for (const runner::GemmShape& shape : shapes) {
    runner::GemmBenchOptions options;
    options.shape = shape;
    options.bf16 = is_bf16_precision(flags.precision);
    options.bias = flags.bias;
    options.warmup_iters = flags.warmup_iters;
    options.iters = flags.iters;
    options.check_samples = flags.check != 0 ? 16 : 0;
    options.seed = flags.seed;
    StatusOr<runner::GemmBenchResult> result = runner::run_gemm_bench(**device, options);
    if (!result.is_ok()) {
      log::error("bench gemm {}: {}", runner::format_gemm_shape(shape), result.status().message());
      return result.status().exit_code();
    }
    results.push_back(*result);
  }
  const bench::GemmBenchContext context{(*device)->name(), flags.warmup_iters, flags.iters};
  const std::string text = flags.json ? bench::format_gemm_json(results, context)
                                      : bench::format_gemm_table(results, context);
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (const int unwritten = checked_stdout(0); unwritten != 0) return unwritten;
  // Checked like a test: a sampled entry off the reference fails the benchmark.
  return bench::total_wrong(results) == 0 ? 0 : 1;
}

CLI::App* add_gemm(CLI::App& bench, const std::shared_ptr<GemmFlags>& flags) {
  CLI::App* gemm = bench.add_subcommand(
      "gemm",
      "A GEMM's rate as the workloads issue it: matmul_forward on the device, operands and "
      "output stored in the run's dtype, timed back to back, sampled results checked");
  gemm->add_option("-s,--shape", flags->shapes,
                   "GEMM shapes, each a size (8192: a cube) or MxNxK, out (M, N) with inner "
                   "dimension K; comma-separated (default: 8192 on a GPU, 1024 on the CPU)")
      ->delimiter(',');
  gemm->add_option("--device", flags->device,
                   "cuda, cpu, or auto (cuda when a GPU is visible, else cpu)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "cuda", "cpu"}));
  gemm->add_option(
          "--precision", flags->precision,
          "bf16 (operands and out in bf16, fp32 accumulate: the tensor cores on a GPU) "
          "or fp32 (TF32 off); launch's names (bf16-mixed, bf16-fp32grad, fp32-adam) as well")
      ->capture_default_str()
      ->check(CLI::IsMember({"bf16", "fp32", "bf16-mixed", "bf16-fp32grad", "fp32-adam"}));
  gemm->add_option("-w,--warmup-iters", flags->warmup_iters, "Untimed calls before timing")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  gemm->add_option("--iters", flags->iters, "Timed calls, back to back")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  gemm->add_option("-c,--check", flags->check,
                   "Check 16 sampled entries against a host reference (0 or 1)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1));
  gemm->add_flag("--bias", flags->bias,
                 "Add an fp32 bias of N, as the workloads' linear layers do (not counted in the "
                 "rate)");
  gemm->add_option("--blas-threads", flags->blas_threads, "OpenBLAS threads on the CPU")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  gemm->add_option("--seed", flags->seed, "Seed of the operands' values, uniform in [-1, 1)")
      ->capture_default_str();
  gemm->add_flag("--json", flags->json, "Print {\"results\": [...]} instead of the table");
  gemm->footer(
      "Each shape: inp (M, K) and weight (N, K) filled from --seed and uploaded, then -w untimed "
      "and --iters timed calls of matmul_forward (out = inp @ weight^T, the workloads' linear "
      "layer), queued back to back and waited for once; time = that wall time / --iters, rate "
      "= 2 M N K / time. Operands and out are kept as the workloads keep them under "
      "--precision: a bf16 out is the fp32 product, bias added, rounded once, so on a GPU the "
      "time includes that pass. The buffers are freed after each shape.\n"
      "Check: the first and last entry and 14 drawn ones against a double-precision sum of the "
      "stored operands; wrong when off by more than out's rounding plus fp32 accumulation's "
      "worst case over K terms. Exit 1 when any is wrong.\n"
      "Compare with PyTorch on the same GPU: torch.randn(n, n, dtype=torch.bfloat16, "
      "device='cuda') @ b, timed the same way (scripts/gpu-validate.sh does both).\n"
      "Examples:\n"
      "  partrain bench gemm                              # 8192^3 bf16 on the GPU\n"
      "  partrain bench gemm -s 4096,8192,16384 --bias --json\n"
      "  partrain bench gemm --device cpu --precision fp32 -s 512,1024x4096x1024");
  return gemm;
}

}  // namespace

Subcommand add_bench_command(CLI::App& parent) {
  CLI::App* bench = parent.add_subcommand("bench", "Micro-benchmarks of the runtime");
  bench->require_subcommand(1);
  CLI::App* collectives = bench->add_subcommand(
      "collectives",
      "Bandwidth of each collective over a range of sizes, in the style of nccl-tests: time, "
      "algbw and busbw out of place and in place, results checked against a reference");
  auto flags = std::make_shared<BenchFlags>();
  collectives->add_option("-b,--minbytes", flags->min_bytes, "Smallest message size (8, 64K, 1M)")
      ->capture_default_str();
  collectives->add_option("-e,--maxbytes", flags->max_bytes, "Largest message size")
      ->capture_default_str();
  collectives->add_option("-f,--stepfactor", flags->step_factor, "Multiply the size by this each step")
      ->capture_default_str()->check(CLI::Range(uint64_t{1}, uint64_t{1024}));
  collectives->add_option("-i,--stepbytes", flags->step_bytes, "Add this to the size each step (when -f is 1)")
      ->capture_default_str();
  collectives->add_option("-w,--warmup-iters", flags->warmup_iters, "Untimed runs before timing")
      ->capture_default_str()->check(CLI::Range(0, 1000000));
  collectives->add_option("--iters", flags->iters, "Timed runs per size (nccl-tests' -n)")
      ->capture_default_str()->check(CLI::Range(1, 1000000));
  collectives->add_option("-c,--check", flags->check, "Check results against a reference (0 or 1)")
      ->capture_default_str()->check(CLI::Range(0, 1));
  collectives->add_option("-d,--datatype", flags->dtype, "float, bfloat16, half, int32 or int64")
      ->capture_default_str();
  collectives->add_option("-o,--redop", flags->redop, "Reduction: sum, avg, max or min")
      ->capture_default_str();
  collectives->add_option("-r,--root", flags->root, "Root rank of broadcast")->capture_default_str();
  collectives->add_option("-a,--average", flags->average,
                          "Time reported over ranks: 0 rank 0, 1 mean, 2 min, 3 max")
      ->capture_default_str()->check(CLI::Range(0, 3));
  collectives->add_option("--op", flags->op,
                          "all_reduce, all_gather, reduce_scatter, broadcast, all_to_all, "
                          "send_recv, or all")
      ->capture_default_str()
      ->check(CLI::IsMember({"all_reduce", "all_gather", "reduce_scatter", "broadcast",
                             "all_to_all", "send_recv", "all"}));
  collectives->add_option("--backend", flags->backend, "gloo (host memory) or nccl (GPU memory)")
      ->capture_default_str()->check(CLI::IsMember({"gloo", "nccl"}));
  collectives->add_flag("--json", flags->json, "Print {\"results\": [...]} instead of the table");
  collectives->add_option("-n,--nproc-per-node", flags->nranks,
                          "Launch this many local ranks (as `partrain launch -n`); without it, "
                          "run as one rank or as a rank of an enclosing `partrain launch`")
      ->check(CLI::Range(1, 4096));
  collectives->footer(
      "Examples:\n"
      "  partrain bench collectives -n 4 -b 8 -e 64M -f 2\n"
      "  partrain bench collectives -n 4 --op all -b 1M -e 16M -f 4 --json\n"
      "  partrain launch -n 4 -- partrain bench collectives --op reduce_scatter -d bfloat16\n"
      "busbw = algbw x 2(n-1)/n for all_reduce, (n-1)/n for all_gather, reduce_scatter and "
      "all_to_all, 1 for broadcast and send_recv (nccl-tests' definitions). size is S in bytes "
      "(the gathered or scattered buffer for all_gather and reduce_scatter); count is what the "
      "call takes, one rank's block of S for all_gather, reduce_scatter and all_to_all; Avg bus "
      "bandwidth is the mean over out-of-place and in-place runs. An op that does not reduce "
      "has redop none and one without a root root -1, in the table and in --json alike (as "
      "nccl-tests prints them). Exit 1 when any checked value is wrong.");
  auto ingest_flags = std::make_shared<IngestFlags>();
  CLI::App* ingest = add_ingest(*bench, ingest_flags);
  auto gemm_flags = std::make_shared<GemmFlags>();
  CLI::App* gemm = add_gemm(*bench, gemm_flags);
  return {bench, [flags, collectives, ingest, ingest_flags, gemm, gemm_flags] {
            if (ingest->parsed()) return run_ingest(*ingest_flags);
            if (gemm->parsed()) return run_gemm(*gemm_flags);
            return run_bench(*flags, flag_env_names(*collectives));
          }};
}

}  // namespace partrain::cli
