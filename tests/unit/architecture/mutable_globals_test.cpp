// No mutable globals (STYLE.md habit 8): state lives in objects passed as context. A scan of
// every C++ and CUDA source of the product (core, memory, profiler, runner, analyzers, tui,
// metrics, cli) for variables that outlive a call and are shared by whoever reaches them:
// namespace-scope variables (std::atomic ones included), static data members and function-local
// statics that are not const, and thread_local ones. Constants (const, constexpr) pass, and so
// do lazily built immutable tables (`static const T table = ...`: C++ makes their initialisation
// thread-safe).
//
// Left out: profiler/inject/, the injection library, whose NCCL, CUDA and NVTX entry points are
// called by the host program without a context to carry (its one reachable state is
// InjectedProcess::current(), profiler/inject/injected_process.h). Everything else that must
// stay is in kAllowed below, each with the reason; an entry no longer found fails too, so the
// list stays the list of what there is.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "tests/unit/architecture/mutable_state_scanner.h"

namespace partrain::testing {
namespace {
namespace fs = std::filesystem;
using source_scan::Finding;
using source_scan::scan_source;

std::vector<std::string> names(const std::vector<Finding>& findings) {
  std::vector<std::string> out;
  for (const Finding& f : findings) out.push_back(f.name);
  return out;
}

// ---- the scanner's own checks: what it must find, and what it must let pass ---------------------

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

TEST(MutableGlobalsScanner, FindsNamespaceScopeVariables) {
  EXPECT_THAT(names(scan_source("namespace a {\nint g_count;\n}")), ElementsAre("g_count"));
  EXPECT_THAT(names(scan_source("namespace {\nstd::atomic<Tracer*> g_active{nullptr};\n}")),
              ElementsAre("g_active"));
  EXPECT_THAT(names(scan_source("static std::mutex g_mutex;")), ElementsAre("g_mutex"));
  EXPECT_THAT(names(scan_source("std::map<std::string, int> g_table = {{\"a\", 1}};")),
              ElementsAre("g_table"));
  EXPECT_THAT(names(scan_source("const char* g_name = \"x\";")), ElementsAre("g_name"));
  EXPECT_THAT(names(scan_source("thread_local std::vector<uint8_t> t_buffer;")),
              ElementsAre("t_buffer"));
  EXPECT_THAT(names(scan_source("struct sigaction g_previous {};")), ElementsAre("g_previous"));
  EXPECT_THAT(names(scan_source("std::array<Range, 16> g_ranges;")), ElementsAre("g_ranges"));
  EXPECT_THAT(names(scan_source("extern \"C\" {\nint g_c;\n}")), ElementsAre("g_c"));
  EXPECT_THAT(names(scan_source("__device__ float g_device_value;")),
              ElementsAre("g_device_value"));
  EXPECT_THAT(names(scan_source("struct { int a; } g_anonymous;")), ElementsAre("g_anonymous"));
}

TEST(MutableGlobalsScanner, FindsFunctionStaticsAndStaticMembers) {
  EXPECT_THAT(names(scan_source("std::set<int>& options() {\n"
                                "  static std::set<int> options;\n  return options;\n}")),
              ElementsAre("options"));
  EXPECT_THAT(names(scan_source("void f() {\n  if (x) {\n    static int calls = 0;\n  }\n}")),
              ElementsAre("calls"));
  EXPECT_THAT(names(scan_source("void f() {\n  static std::once_flag once;\n}")),
              ElementsAre("once"));
  EXPECT_THAT(names(scan_source("void f() {\n  static pid_t groups[64];\n}")),
              ElementsAre("groups"));
  EXPECT_THAT(names(scan_source("void f() {\n  static auto cache = std::vector<int>(3);\n}")),
              ElementsAre("cache"));
  EXPECT_THAT(names(scan_source("class A {\n public:\n  static int instances;\n};")),
              ElementsAre("instances"));
  EXPECT_THAT(names(scan_source("struct A {\n  inline static std::atomic<int> n{0};\n};")),
              ElementsAre("n"));
  EXPECT_THAT(names(scan_source("A::A(int x) : x_{x}, y_(x) {\n  static int made = 0;\n}")),
              ElementsAre("made"));
  EXPECT_THAT(names(scan_source("auto f = [] {\n  static int inside_a_lambda;\n};")),
              UnorderedElementsAre("f", "inside_a_lambda"));
}

TEST(MutableGlobalsScanner, LetsConstantsFunctionsAndTypesPass) {
  const char* kAllowed =
      "#include <x>\n"
      "#define GLOBAL int g_macro;\n"
      "namespace partrain::core {\n"
      "namespace fs = std::filesystem;\n"
      "using Clock = std::chrono::steady_clock;\n"
      "constexpr int kThreads = 256;\n"
      "inline constexpr std::string_view kEnv = \"PARTRAIN\";\n"
      "const std::string kMain = \"main\";\n"
      "const char* const kNames[] = {\"a\", \"b\"};\n"
      "static const std::map<int, int> kTable = {{1, 2}};\n"
      "template <typename T = int>\nstruct Box {\n  T value;\n  static constexpr int kSize = 4;\n"
      "  static Box make(int n);\n  Box& operator=(const Box&) = delete;\n};\n"
      "enum class Kind : uint8_t { kA = 1, kB = 2 };\n"
      "class Forward;\n"
      "int function(int x = 3);\n"
      "bool operator==(const Box<int>& a, const Box<int>& b) { return a.value == b.value; }\n"
      "void g() {\n  int local = 0;\n  static const std::regex kFlag(R\"(--[a-z]+)\");\n"
      "  static constexpr const char* kWords[] = {\"x\"};\n"
      "  thread_local const std::string track = name();\n"
      "  std::string s = \"static int not_code;\";\n  // static int commented;\n"
      "  static_assert(sizeof(int) == 4);\n  auto n = static_cast<long>(local);\n}\n"
      "Foo::Foo(int a) : a_{a}, b_(a) {}\n"
      "auto trailing() -> std::map<int, int> { static const int kOnce = 1; return {}; }\n"
      "extern \"C\" void entry_point(int);\n"
      "extern char** environ;\n"
      "PARTRAIN_TEST_MACRO(x);\n"
      "}  // namespace partrain::core\n";
  EXPECT_THAT(scan_source(kAllowed), IsEmpty());
}

TEST(MutableGlobalsScanner, ReportsTheLine) {
  const std::vector<Finding> found = scan_source("namespace {\n\nint a = 1'000;\n}\n");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].line, 3);
  EXPECT_EQ(found[0].declaration, "int a");
}

// ---- the product's sources --------------------------------------------------------------------

// What stays, and why: a state whose reader is called without a context to hand it.
struct Allowed {
  std::string_view file;
  std::string_view name;
  std::string_view why;
};
constexpr Allowed kAllowed[] = {
    {"core/log.cpp", "g_level",
     "the process's log level, set once by main from -v/-q and read by every layer's log lines "
     "(glog's and spdlog's is global too)"},
    {"profiler/cupti/cupti_session.cpp", "g_session",
     "CUPTI's buffer-requested and buffer-completed callbacks carry no user data"},
    {"profiler/cupti/cupti_session.cpp", "t_nccl_call",
     "the NCCL call a thread is inside, read by CUPTI's launch callback on that thread (CUPTI's "
     "external-correlation stack is per thread too)"},
    {"profiler/recorder.cpp", "t_registration",
     "each thread's event buffers, found without a lock on the recording fast path (as "
     "Kineto's per-thread buffers are)"},
    {"profiler/recorder.cpp", "g_next_recorder_id",
     "ids that keep a thread's entry for a destroyed recorder from matching a new one at the same "
     "address"},
    {"core/remove_on_signal.cpp", "g_slots",
     "the files a SIGINT/SIGTERM/SIGHUP handler removes before the process ends (a signal carries "
     "no context)"},
    {"core/remove_on_signal.cpp", "g_retired_mutex",
     "guards the lists taken out of g_slots, which a handler on another thread may still read"},
    {"core/remove_on_signal.cpp", "g_retired",
     "those lists, freed at exit rather than while a handler may read them"},
    {"core/remove_on_signal.cpp", "once", "installs those signal handlers once per process"},
    {"core/process_start.cpp", "g_started_open_files",
     "the soft limit on open files partrain was started with, written once in main before any "
     "thread and given back to each child between fork and exec (no allocation, no lock there)"},
    {"core/process_start.cpp", "g_open_files_raised", "whether main raised that limit"},
    {"core/process_start.cpp", "g_closed_at_start",
     "which standard descriptors were closed at the start, written once in main before any thread "
     "and read in each child between fork and exec"},
    {"runner/device/isolated_memory.cpp", "g_ranges",
     "the isolated device's reserved ranges, read by its SIGSEGV handler (a signal carries no "
     "context)"},
    {"runner/device/isolated_memory.cpp", "g_previous_segv",
     "the SIGSEGV handler the isolated device's handler passes other faults on to"},
    {"runner/device/isolated_memory.cpp", "once", "installs that SIGSEGV handler once per process"},
    {"tui/dashboard.cpp", "g_signal",
     "the signal that ends the dashboard, set by its handler (a signal carries no context)"},
};

// Folders of the product, relative to the source root; what is under profiler/inject/ is not
// scanned (see the file's header).
constexpr std::string_view kProductFolders[] = {"core",      "memory", "profiler", "runner",
                                                "analyzers", "tui",    "metrics",  "cli"};
constexpr std::string_view kInjectionLibrary = "profiler/inject/";

bool is_source(const fs::path& path) {
  const std::string extension = path.extension().string();
  return extension == ".cpp" || extension == ".h" || extension == ".cu" || extension == ".cuh" ||
         extension == ".cc" || extension == ".hpp";
}

TEST(MutableGlobals, NoneOutsideTheInjectionLibraryExceptTheListed) {
  const fs::path root = PARTRAIN_SOURCE_DIR;
  std::vector<std::string> unexpected;
  std::set<std::pair<std::string, std::string>> found_allowed;
  size_t files = 0;
  for (std::string_view folder : kProductFolders) {
    for (const auto& entry : fs::recursive_directory_iterator(root / folder)) {
      if (!entry.is_regular_file() || !is_source(entry.path())) continue;
      const std::string relative = fs::relative(entry.path(), root).generic_string();
      if (relative.rfind(kInjectionLibrary, 0) == 0) continue;
      ++files;
      std::ifstream in(entry.path());
      std::stringstream text;
      text << in.rdbuf();
      for (const Finding& f : scan_source(text.str())) {
        const bool allowed = std::any_of(std::begin(kAllowed), std::end(kAllowed),
                                         [&](const Allowed& a) {
                                           return a.file == relative && a.name == f.name;
                                         });
        if (allowed) {
          found_allowed.emplace(relative, f.name);
        } else {
          unexpected.push_back(relative + ":" + std::to_string(f.line) + ": " + f.declaration);
        }
      }
    }
  }
  EXPECT_GT(files, 300u) << "the scan found too few sources under " << root;
  EXPECT_THAT(unexpected, IsEmpty())
      << "mutable state outside an object: pass it as context (a constructor's argument, the "
         "caller's object), or make it const; what truly cannot have a context (a signal "
         "handler, a vendor callback without user data) goes into kAllowed with the reason";
  for (const Allowed& a : kAllowed) {
    EXPECT_TRUE(found_allowed.count({std::string(a.file), std::string(a.name)}) > 0)
        << a.file << ": " << a.name << " is allowed but no longer there: remove it from kAllowed";
  }
}

}  // namespace
}  // namespace partrain::testing
