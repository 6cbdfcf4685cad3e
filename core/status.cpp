#include "core/status.h"

namespace partrain {

int Status::exit_code() const {
  switch (code_) {
    case StatusCode::kOk: return 0;
    case StatusCode::kInvalidArgument: return 2;
    case StatusCode::kUnreadable: return 3;
    case StatusCode::kTimeout: return 124;
    case StatusCode::kNotExecutable:
      return 126;
    case StatusCode::kNotFound: return 127;
    case StatusCode::kFailed:
    case StatusCode::kUnavailable: return 1;
  }
  return 1;
}

Status Status::with_context(std::string_view context) const {
  if (is_ok()) return *this;
  return Status(code_, fmt::format("{}: {}", context, message_));
}

}  // namespace partrain
