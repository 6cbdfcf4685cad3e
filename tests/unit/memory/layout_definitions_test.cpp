// The parallel layout is defined once: its type, resolve and enums in memory/training_layout.h,
// its text form parsed in memory/layout_spec.cpp, its config read in memory/workload_json.cpp,
// its rank order in memory/mesh_order.cpp. This test reads the sources of every layer and fails,
// naming the file, when a second definition of any of them appears. Each detector is first shown
// the kinds of duplicates the project once had, so it is known to find them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace partrain::memory {
namespace {

struct Source {
  std::string path;  // relative to the source root: "runner/workload/mesh.cpp"
  std::string text;
};

// The text with comments blanked (newlines kept), so prose about a layout is not code.
std::string without_comments(const std::string& text) {
  std::string out = text;
  for (size_t i = 0; i + 1 < out.size(); ++i) {
    if (out[i] == '"') {  // skip a string literal: "//" inside one is not a comment
      for (++i; i < out.size() && out[i] != '"' && out[i] != '\n'; ++i) {
        if (out[i] == '\\') ++i;
      }
    } else if (out[i] == '/' && out[i + 1] == '/') {
      for (; i < out.size() && out[i] != '\n'; ++i) out[i] = ' ';
    } else if (out[i] == '/' && out[i + 1] == '*') {
      for (; i + 1 < out.size() && !(out[i] == '*' && out[i + 1] == '/'); ++i) {
        if (out[i] != '\n') out[i] = ' ';
      }
      if (i + 1 < out.size()) out[i] = out[i + 1] = ' ';
    }
  }
  return out;
}

bool allowed(const std::string& path, std::initializer_list<const char*> files) {
  for (const char* file : files) {
    if (path == file) return true;
  }
  return false;
}

// `pattern`'s matches in the code, when the text has `hint` at all (std::regex is slow: most
// files are passed over by the hint).
std::vector<std::string> matches(const Source& s, const std::regex& pattern, const char* what,
                                 std::initializer_list<const char*> hints) {
  std::vector<std::string> found;
  bool hinted = false;
  for (const char* hint : hints) hinted = hinted || s.text.find(hint) != std::string::npos;
  if (!hinted) return found;
  const std::string code = without_comments(s.text);
  for (std::sregex_iterator it(code.begin(), code.end(), pattern), end; it != end; ++it) {
    found.push_back(s.path + ": " + what + ": " + it->str());
  }
  return found;
}

// A function that resolves a layout: named resolve_layout, or returning StatusOr<ResolvedLayout>.
std::vector<std::string> second_resolves(const Source& s) {
  if (allowed(s.path, {"memory/training_layout.h", "memory/training_layout.cpp"})) return {};
  static const std::regex kResolve(
      R"(\bresolve_layout\s*\([^;{}()]*\)\s*(const\s*)?\{|StatusOr<\s*(\w+::)*ResolvedLayout\s*>\s+(\w+::)*\w+\s*\()");
  return matches(s, kResolve, "a layout resolve", {"ResolvedLayout", "resolve_layout"});
}

// A type's own declarations: its body without what is nested in braces or parentheses (member
// functions' bodies and parameter lists).
std::string top_level(const std::string& code, size_t begin) {
  std::string top;
  int braces = 1, parens = 0;
  for (size_t i = begin; i < code.size() && braces > 0; ++i) {
    const char c = code[i];
    braces += c == '{' ? 1 : c == '}' ? -1 : 0;
    parens += c == '(' ? 1 : c == ')' ? -1 : 0;
    if (braces == 1 && parens == 0 && c != '}' && c != ')') top += c;
  }
  return top;
}

// A type that holds the parallel degrees (int-like members dp, tp and pp). Allowed: the layout,
// a rank's coordinates in it, and the two commands' flags, which CLI11 parses into before the
// layout is built from them once.
std::vector<std::string> second_layout_types(const Source& s) {
  static const std::set<std::pair<std::string, std::string>> kAllowed = {
      {"memory/training_layout.h", "TrainingLayout"},
      {"memory/mesh_order.h", "MeshCoords"},
      {"cli/memory_command.cpp", "MemoryFlags"},
      {"cli/workload_flags.h", "WorkloadFlags"},
  };
  static const std::regex kType(R"(\b(struct|class)\s+(\w+)[^;{}()]*\{)");
  static const std::vector<std::regex> kMembers = [] {
    std::vector<std::regex> members;
    for (const char* degree : {"dp", "tp", "pp"}) {
      members.emplace_back(std::string(R"(\b(int|int64_t|std::optional<\s*int\s*>)\s+[^;]*\b)") +
                           degree + R"(\b\s*(=[^,;]*)?[,;])");
    }
    return members;
  }();
  std::vector<std::string> found;
  const std::string code = without_comments(s.text);
  if (code.find("dp") == std::string::npos) return found;
  for (std::sregex_iterator it(code.begin(), code.end(), kType), end; it != end; ++it) {
    const std::string members = top_level(code, static_cast<size_t>(it->position() + it->length()));
    bool all = true;
    for (const std::regex& member : kMembers) all = all && std::regex_search(members, member);
    if (all && !kAllowed.contains({s.path, (*it)[2].str()})) {
      found.push_back(s.path + ": a layout type: " + (*it)[2].str());
    }
  }
  return found;
}

// The pipeline schedules or recompute modes as an enum.
std::vector<std::string> second_layout_enums(const Source& s) {
  if (allowed(s.path, {"memory/training_layout.h"})) return {};
  static const std::regex kEnum(R"(\benum\s+(class\s+)?\w+[^;{]*\{[^}]*\b(kGpipe|kOneFOneB|kInterleaved|kSelective)\b)");
  return matches(s, kEnum, "a layout enum", {"kGpipe", "kOneFOneB", "kInterleaved", "kSelective"});
}

// Text compared with a layout spec's keys (the strategy shorthands tp, sp and pp are not among
// them), or a layout field read from JSON by name: a second parser of a layout spec or config.
std::vector<std::string> second_layout_parsers(const Source& s) {
  static const std::initializer_list<const char*> kQuotedKeys = {
      "\"dp\"", "\"tp\"", "\"pp\"", "\"cp\"", "\"vpp\"", "\"zero\"", "\"sp\"", "\"mb\"",
      "\"micro_batch\"", "\"global_batch\"", "\"schedule\"", "\"recompute\"", "\"pp_split\""};
  std::vector<std::string> found;
  if (allowed(s.path, {"memory/layout_spec.cpp"})) return found;  // the one parser
  static const std::regex kKeys(
      R"re((==|!=)\s*"(dp|cp|vpp|zero|mb|micro_batch|schedule|recompute|pp_split)"|"(dp|cp|vpp|zero|mb|micro_batch|schedule|recompute|pp_split)"\s*(==|!=))re");
  found = matches(s, kKeys, "a layout spec key compared", kQuotedKeys);
  static const std::regex kJsonReads(
      R"re(\b(at|value|contains|find|count|integer|integers|boolean|choice)\s*\(\s*(\w+\s*,\s*)?"(dp|tp|pp|cp|vpp|zero|sp|micro_batch|global_batch|schedule|pp_split)")re");
  for (std::string& f : matches(s, kJsonReads, "a layout field read from JSON", kQuotedKeys)) {
    found.push_back(std::move(f));
  }
  return found;
}

// Rank-order arithmetic (rank / (tp x dp), rank % tp) outside the one rank order.
std::vector<std::string> second_rank_orders(const Source& s) {
  static const std::regex kOrder(
      R"(([/%]\s*\(\s*[\w.>-]*\btp\b\s*\*\s*[\w.>-]*\b(dp|cp)\b)|(\brank\w*\s*[/%]\s*\(?\s*[\w.>-]*\b(tp|dp|cp|pp)\b))");
  return matches(s, kOrder, "rank-order arithmetic", {"tp *", "tp*", "rank"});
}

std::vector<std::string> findings(const Source& s) {
  std::vector<std::string> all;
  for (auto detect : {second_resolves, second_layout_types, second_layout_enums,
                      second_layout_parsers, second_rank_orders}) {
    for (std::string& f : detect(s)) all.push_back(std::move(f));
  }
  return all;
}

std::vector<Source> read_sources(const std::filesystem::path& root) {
  std::vector<Source> sources;
  for (const char* layer : {"core", "memory", "profiler", "analyzers", "runner", "tui", "cli"}) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root / layer)) {
      const std::string ext = entry.path().extension().string();
      if (!entry.is_regular_file() || (ext != ".h" && ext != ".cpp" && ext != ".cu")) continue;
      std::ifstream in(entry.path());
      std::stringstream text;
      text << in.rdbuf();
      sources.push_back({std::filesystem::relative(entry.path(), root).string(), text.str()});
    }
  }
  return sources;
}

// What the tree had before the layout was defined once: each must be found.
TEST(LayoutDefinitions, EachDetectorFindsTheDuplicatesThereWere) {
  const Source duplicates[] = {
      {"runner/workload/parallel_layout.h",
       "struct ParallelLayout {\n  int world = 1;\n  std::optional<int> dp;  // unset\n  int tp = 1;\n"
       "  int pp = 1;\n};"},
      {"runner/workload/parallel_layout.cpp",
       "StatusOr<ResolvedLayout> resolve_layout(const ParallelLayout& layout,\n"
       "                                        const LayoutModel& model) {\n  return out;\n}"},
      {"runner/workload/plan.cpp", "StatusOr<ResolvedLayout> plan_degrees(int world) {"},
      {"runner/workload/parallel_layout.h",
       "enum class PipelineSchedule { kGpipe, kOneFOneB, kInterleaved };"},
      {"analyzers/workload_run_config.h",
       "struct WorkloadRunConfig {\n  int world = 1;\n  int dp = 1, tp = 1, pp = 1, vpp = 1;\n};"},
      {"analyzers/workload_run_config.h",
       "  int pp_stage(int rank) const { return rank / (tp * dp); }"},
      {"runner/workload/mesh.cpp", "  coords.tp = rank % layout.tp;"},
      {"cli/recommend_command.cpp", "    if (key == \"recompute\") {"},
      {"cli/recommend_command.cpp", "    else if (key == \"zero\") l.zero = n;"},
      {"analyzers/workload_run_config.cpp", "    c.tp = count(l, \"tp\", 1);"},
      {"runner/workload/workload_config.cpp", "  l.pp_split = j.at(\"pp_split\").get<std::vector<int>>();"},
  };
  for (const Source& s : duplicates) EXPECT_FALSE(findings(s).empty()) << s.path << ":\n" << s.text;
  // Prose is not code, and a coordinate or a call is not a definition.
  const Source fine[] = {
      {"runner/a.h", "// struct ParallelLayout { int dp; int tp; int pp; };"},
      {"runner/a.cpp", "  ASSIGN_OR_RETURN(r, memory::resolve_layout(l, m));\n"
                       "  if (!memory::resolve_layout(l, m).is_ok()) {\n"},
      {"runner/a.cpp", "  StatusOr<memory::ResolvedLayout> resolved = memory::resolve_layout(l, m);"},
      {"runner/a.cpp", "  if (strategy == \"tp\" || strategy == \"sp\") {"},
      {"analyzers/a.cpp", "  return {{\"dp\", l.dp}, {\"micro_batch\", l.micro_batch}};"},
  };
  for (const Source& s : fine) {
    EXPECT_TRUE(findings(s).empty()) << s.path << ":\n" << s.text << "\n" << findings(s).front();
  }
}

TEST(LayoutDefinitions, TheTreeDefinesTheLayoutOnce) {
  const std::vector<Source> sources = read_sources(PARTRAIN_SOURCE_DIR);
  ASSERT_GT(sources.size(), 100u);  // the tree was found
  std::vector<std::string> all;
  bool saw_the_layout = false;
  for (const Source& s : sources) {
    saw_the_layout |= s.path == "memory/training_layout.h";
    for (std::string& f : findings(s)) all.push_back(std::move(f));
  }
  EXPECT_TRUE(saw_the_layout);
  std::string report;
  for (const std::string& f : all) report += "  " + f + "\n";
  EXPECT_TRUE(all.empty()) << "a second definition of the parallel layout; use memory's "
                              "(docs/architecture.md):\n"
                           << report;
}

}  // namespace
}  // namespace partrain::memory
