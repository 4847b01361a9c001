// Errors as values: everything a user can cause (a bad configuration, a missing file, a corrupt
// .npy, a full disk) comes back as a Status, never as an exception or an abort.
#pragma once

#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace graphdump {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad configuration or usage: the CLI exits 2
  kNotFound,         // a file or directory that should exist does not
  kIOError,          // reading or writing failed (ENOSPC, EACCES, ...)
  kCorrupt,          // a file exists but its content is malformed
  kUnsupported,      // valid input that graphdump cannot handle (a dtype, a node kind)
  kInternal,         // a broken invariant inside graphdump
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status IOError(std::string m) { return {StatusCode::kIOError, std::move(m)}; }
  static Status Corrupt(std::string m) { return {StatusCode::kCorrupt, std::move(m)}; }
  static Status Unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // The message as it is (no prefix: callers add "graphdump CMD: error: "); "ok" for Ok.
  std::string ToString() const { return ok() ? std::string("ok") : message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Either a value or a non-ok Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : value_(std::move(status)) {}  // NOLINT: implicit by design
  StatusOr(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(value_); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(value_); }
  // REQUIRES: ok().
  T& value() & { return std::get<T>(value_); }
  const T& value() const& { return std::get<T>(value_); }
  T&& value() && { return std::get<T>(std::move(value_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<Status, T> value_;
};

// Aborts with a message: for programmer errors only, never for anything user input can cause.
[[noreturn]] void CheckFailed(const char* file, int line, const char* condition);
#define GRAPHDUMP_CHECK(cond) \
  ((cond) ? (void)0 : ::graphdump::CheckFailed(__FILE__, __LINE__, #cond))

#define GRAPHDUMP_RETURN_IF_ERROR(expr)      \
  do {                                       \
    ::graphdump::Status _st = (expr);        \
    if (!_st.ok()) return _st;               \
  } while (0)

#define GRAPHDUMP_CONCAT_INNER(a, b) a##b
#define GRAPHDUMP_CONCAT(a, b) GRAPHDUMP_CONCAT_INNER(a, b)
#define GRAPHDUMP_ASSIGN_OR_RETURN(lhs, expr) \
  GRAPHDUMP_ASSIGN_OR_RETURN_IMPL(GRAPHDUMP_CONCAT(_statusor_, __LINE__), lhs, expr)
#define GRAPHDUMP_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                    \
  if (!tmp.ok()) return tmp.status();                   \
  lhs = std::move(tmp).value()

}  // namespace graphdump
