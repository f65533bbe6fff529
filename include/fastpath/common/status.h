// Status and StatusOr: the error type of every fallible call in fastpath.
// No exceptions cross a module boundary on the request path; a Status carries a
// code that maps to HTTP and gRPC statuses in exactly one place (status.cc).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace fastpath {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // malformed request, shape or datatype mismatch: HTTP 400
  kNotFound,            // unknown model, version, input or output: HTTP 404
  kUnavailable,         // not ready, queue full, shutting down: HTTP 503
  kPayloadTooLarge,     // body or tensor over the configured limit: HTTP 413
  kFailedPrecondition,  // operation not allowed in the current state: HTTP 400
  kAlreadyExists,       // HTTP 409
  kUnimplemented,       // HTTP 501
  kDeadlineExceeded,    // request timeout: HTTP 504
  kCancelled,           // client went away: HTTP 499 (never sent in practice)
  kResourceExhausted,   // out of memory: HTTP 503 with Retry-After, gRPC RESOURCE_EXHAUSTED
  kInternal,            // a bug or a backend failure: HTTP 500
};

// Short stable name of a code, e.g. "INVALID_ARGUMENT".
const char* StatusCodeName(StatusCode code);
// The one place where codes become transport statuses.
int HttpStatusFor(StatusCode code);
// The numeric value of the matching grpc::StatusCode (kept as int so that
// common does not depend on gRPC).
int GrpcCodeFor(StatusCode code);

class [[nodiscard]] Status {
 public:
  // The OK status allocates nothing.
  Status() = default;
  Status(StatusCode code, std::string message);

  static Status Ok() { return Status(); }

  bool ok() const { return state_ == nullptr; }
  StatusCode code() const { return state_ ? state_->code : StatusCode::kOk; }
  const std::string& message() const;
  // "INVALID_ARGUMENT: message", or "OK".
  std::string ToString() const;

  // Returns a copy whose message is "prefix: message"; OK stays OK.
  Status WithContext(const std::string& prefix) const;

  bool operator==(const Status& other) const {
    return code() == other.code() && message() == other.message();
  }

 private:
  struct State {
    StatusCode code;
    std::string message;
  };
  std::shared_ptr<const State> state_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status PayloadTooLarge(std::string m) { return {StatusCode::kPayloadTooLarge, std::move(m)}; }
inline Status FailedPrecondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
inline Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) { return {StatusCode::kDeadlineExceeded, std::move(m)}; }
inline Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    if (status_.ok()) status_ = Internal("StatusOr constructed from an OK status without a value");
  }
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace fastpath

#define FASTPATH_CONCAT_INNER_(a, b) a##b
#define FASTPATH_CONCAT_(a, b) FASTPATH_CONCAT_INNER_(a, b)

#define FASTPATH_RETURN_IF_ERROR(expr)                 \
  do {                                                 \
    ::fastpath::Status fastpath_status_ = (expr);      \
    if (!fastpath_status_.ok()) return fastpath_status_; \
  } while (0)

#define FASTPATH_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                    \
  if (!tmp.ok()) return tmp.status();                   \
  lhs = std::move(tmp).value()

// FASTPATH_ASSIGN_OR_RETURN(auto x, FunctionReturningStatusOr());
#define FASTPATH_ASSIGN_OR_RETURN(lhs, expr) \
  FASTPATH_ASSIGN_OR_RETURN_IMPL_(FASTPATH_CONCAT_(fastpath_statusor_, __LINE__), lhs, expr)
