// parse_fault_spec and friends: the --inject grammar, and which faults fire in which step.
#include "runner/fault/fault_spec.h"

#include <algorithm>
#include <charconv>
#include <map>

namespace partrain::runner::fault {
namespace {

struct KnownKind {
  std::string_view name;
  FaultKind kind;
};
constexpr KnownKind kKinds[] = {{"slow", FaultKind::kSlow},   {"crash", FaultKind::kCrash},
                                {"exit", FaultKind::kExit},   {"hang", FaultKind::kHang},
                                {"stop", FaultKind::kStop},   {"desync", FaultKind::kDesync},
                                {"oom", FaultKind::kOom}};
constexpr std::string_view kKindList = "slow, crash, exit, hang, stop, desync, oom";
// Exit codes a process can report (a shell's $? is 0-255).
constexpr int64_t kMaxExitCode = 255;
constexpr std::string_view kKeys[] = {"rank", "step", "ms", "code"};

StatusOr<int64_t> parse_count(std::string_view kind, std::string_view key, std::string_view value) {
  int64_t number = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
  if (ec != std::errc() || end != value.data() + value.size() || number < 0) {
    return invalid_argument("key '{}' of {} needs a non-negative integer, got '{}'", key, kind,
                            value);
  }
  return number;
}

// "rank=2,ms=30" -> {rank: "2", ms: "30"}; unknown, repeated or empty keys are errors.
StatusOr<std::map<std::string, std::string, std::less<>>> parse_pairs(std::string_view kind,
                                                                      std::string_view text) {
  std::map<std::string, std::string, std::less<>> pairs;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    const size_t equals = item.find('=');
    if (equals == std::string_view::npos || equals == 0 || equals + 1 == item.size()) {
      return invalid_argument("'{}' is not key=value (keys: rank, step, ms, code)", item);
    }
    const std::string_view key = item.substr(0, equals);
    if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys)) {
      return invalid_argument("unknown key '{}' in a {} fault: known keys: rank, step, ms, code",
                              key, kind);
    }
    if (!pairs.emplace(std::string(key), std::string(item.substr(equals + 1))).second) {
      return invalid_argument("key '{}' given twice", key);
    }
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return pairs;
}

using Pairs = std::map<std::string, std::string, std::less<>>;

// The form each kind takes, for the messages: "slow:rank=R,ms=M[,step=S]".
std::string_view usage(FaultKind kind) {
  switch (kind) {
    case FaultKind::kSlow: return "slow:rank=R,ms=M[,step=S]";
    case FaultKind::kExit: return "exit:rank=R[,step=S][,code=C]";
    case FaultKind::kCrash: return "crash:rank=R[,step=S]";
    case FaultKind::kHang: return "hang:rank=R[,step=S]";
    case FaultKind::kStop: return "stop:rank=R[,step=S]";
    case FaultKind::kDesync: return "desync:rank=R[,step=S]";
    case FaultKind::kOom: return "oom:rank=R[,step=S]";
  }
  return "";
}

// Fills spec from the pairs: rank always, ms for slow only, code for exit only.
Status fill(FaultKind kind, const Pairs& pairs, FaultSpec& spec) {
  const std::string_view name = fault_kind_name(kind);
  const bool slow = kind == FaultKind::kSlow;
  for (std::string_view needed : {"rank", "ms"}) {
    if ((needed == "rank" || slow) && !pairs.contains(needed)) {
      return invalid_argument("{} needs {}= ({})", name, needed, usage(kind));
    }
  }
  if (!slow && pairs.contains("ms")) {
    return invalid_argument("key 'ms' does not apply to {} ({})", name, usage(kind));
  }
  if (kind != FaultKind::kExit && pairs.contains("code")) {
    return invalid_argument("key 'code' does not apply to {} ({})", name, usage(kind));
  }
  ASSIGN_OR_RETURN(int64_t rank, parse_count(name, "rank", pairs.find("rank")->second));
  spec.rank = static_cast<int>(rank);
  if (slow) {
    ASSIGN_OR_RETURN(spec.ms, parse_count(name, "ms", pairs.find("ms")->second));
  }
  if (auto step = pairs.find("step"); step != pairs.end()) {
    ASSIGN_OR_RETURN(spec.step, parse_count(name, "step", step->second));
  }
  if (auto code = pairs.find("code"); code != pairs.end()) {
    ASSIGN_OR_RETURN(int64_t value, parse_count(name, "code", code->second));
    // 0 would be a success the launcher cannot tell from a finished rank.
    if (value == 0 || value > kMaxExitCode) {
      return invalid_argument("key 'code' of exit needs an exit code in 1-{}, got {}",
                              kMaxExitCode, value);
    }
    spec.code = static_cast<int>(value);
  }
  return Status::ok();
}

// Whether `f` is a `kind` fault of `rank` in `step` (every step without step=).
bool fires(const FaultSpec& f, FaultKind kind, int rank, int64_t step) {
  return f.kind == kind && f.rank == rank && (!f.step || *f.step == step);
}

}  // namespace

std::string_view fault_kind_name(FaultKind kind) {
  for (const KnownKind& known : kKinds) {
    if (known.kind == kind) return known.name;
  }
  return "unknown";
}

StatusOr<FaultSpec> parse_fault_spec(std::string_view text) {
  const size_t colon = text.find(':');
  const std::string_view kind_name = text.substr(0, colon);
  const KnownKind* known = nullptr;
  for (const KnownKind& k : kKinds) {
    if (k.name == kind_name) known = &k;
  }
  if (known == nullptr) {
    return invalid_argument("unknown fault kind '{}': known kinds: {}", kind_name, kKindList);
  }
  if (colon == std::string_view::npos || colon + 1 == text.size()) {
    return invalid_argument("{} needs parameters: {}", kind_name, usage(known->kind));
  }
  ASSIGN_OR_RETURN(auto pairs, parse_pairs(kind_name, text.substr(colon + 1)));
  FaultSpec spec;
  spec.kind = known->kind;
  RETURN_IF_ERROR(fill(known->kind, pairs, spec));
  return spec;
}

Status validate_fault_spec(const FaultSpec& spec, int world, int steps) {
  if (spec.rank >= world) {
    return invalid_argument("rank {} is outside the world of {} ranks (0-{})", spec.rank, world,
                            world - 1);
  }
  if (spec.step && *spec.step >= steps) {
    return invalid_argument("step {} is outside the run's {} steps (0-{})", *spec.step, steps,
                            steps - 1);
  }
  return Status::ok();
}

std::string fault_spec_text(const FaultSpec& spec) {
  std::string text = fmt::format("{}:rank={}", fault_kind_name(spec.kind), spec.rank);
  if (spec.step) text += fmt::format(",step={}", *spec.step);
  if (spec.kind == FaultKind::kSlow) text += fmt::format(",ms={}", spec.ms);
  if (spec.code) text += fmt::format(",code={}", *spec.code);
  return text;
}

int64_t slow_delay_ms(const std::vector<FaultSpec>& faults, int rank, int64_t step) {
  int64_t total = 0;
  for (const FaultSpec& f : faults) {
    if (fires(f, FaultKind::kSlow, rank, step)) total += f.ms;
  }
  return total;
}

const FaultSpec* fault_at(const std::vector<FaultSpec>& faults, FaultKind kind, int rank,
                          int64_t step) {
  for (const FaultSpec& f : faults) {
    if (fires(f, kind, rank, step)) return &f;
  }
  return nullptr;
}

int exit_fault_code(const FaultSpec& spec) { return spec.code.value_or(1); }

}  // namespace partrain::runner::fault
