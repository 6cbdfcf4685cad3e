// Status and StatusOr: how errors travel in the runner and the CLI. A Status says what failed,
// where and what to do; its code maps onto partrain's documented exit codes (DESIGN.md).
#pragma once

#include <fmt/format.h>

#include <string>
#include <utility>
#include <variant>

namespace partrain {

enum class StatusCode {
  kOk,
  kFailed,           // exit 1: something went wrong at run time
  kInvalidArgument,  // exit 2: usage or invalid configuration
  kUnreadable,       // exit 3: input that is not ours, newer schema, malformed preset
  kTimeout,          // exit 124: a deadline passed (collective watchdog, rendezvous)
  kNotFound,         // exit 127: a command that does not exist
  kNotExecutable,    // exit 126: a command found but not executable (as shells say)
  kUnavailable,      // exit 1: a peer or port that could not be reached or bound
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return Status(); }
  bool is_ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // The process exit code DESIGN.md "Conventions" assigns to this kind of failure.
  int exit_code() const;
  // Prefixes context ("while joining the rendezvous: ...") and keeps the code.
  Status with_context(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

template <typename... Args>
Status make_status(StatusCode code, fmt::format_string<Args...> format, Args&&... args) {
  return Status(code, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
Status failed(fmt::format_string<Args...> format, Args&&... args) {
  return make_status(StatusCode::kFailed, format, std::forward<Args>(args)...);
}
template <typename... Args>
Status invalid_argument(fmt::format_string<Args...> format, Args&&... args) {
  return make_status(StatusCode::kInvalidArgument, format, std::forward<Args>(args)...);
}
template <typename... Args>
Status unavailable(fmt::format_string<Args...> format, Args&&... args) {
  return make_status(StatusCode::kUnavailable, format, std::forward<Args>(args)...);
}
template <typename... Args>
Status timeout_error(fmt::format_string<Args...> format, Args&&... args) {
  return make_status(StatusCode::kTimeout, format, std::forward<Args>(args)...);
}

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : value_(std::move(status)) {}  // NOLINT: implicit by design
  StatusOr(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design

  bool is_ok() const { return std::holds_alternative<T>(value_); }
  const Status& status() const {
    static const Status kOk;
    return is_ok() ? kOk : std::get<Status>(value_);
  }
  T& value() & { return std::get<T>(value_); }
  const T& value() const& { return std::get<T>(value_); }
  T&& value() && { return std::get<T>(std::move(value_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<Status, T> value_;
};

}  // namespace partrain

#define PARTRAIN_CONCAT_INNER(a, b) a##b
#define PARTRAIN_CONCAT(a, b) PARTRAIN_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)                      \
  do {                                             \
    ::partrain::Status partrain_status_ = (expr);  \
    if (!partrain_status_.is_ok()) return partrain_status_; \
  } while (0)

#define PARTRAIN_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.is_ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

#define ASSIGN_OR_RETURN(lhs, expr) \
  PARTRAIN_ASSIGN_OR_RETURN_IMPL(PARTRAIN_CONCAT(partrain_statusor_, __LINE__), lhs, expr)
