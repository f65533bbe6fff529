#include "fastpath/common/status.h"

namespace fastpath {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case StatusCode::kNotFound: return "NOT_FOUND";
    case StatusCode::kUnavailable: return "UNAVAILABLE";
    case StatusCode::kPayloadTooLarge: return "PAYLOAD_TOO_LARGE";
    case StatusCode::kFailedPrecondition: return "FAILED_PRECONDITION";
    case StatusCode::kAlreadyExists: return "ALREADY_EXISTS";
    case StatusCode::kUnimplemented: return "UNIMPLEMENTED";
    case StatusCode::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case StatusCode::kCancelled: return "CANCELLED";
    case StatusCode::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case StatusCode::kInternal: return "INTERNAL";
  }
  return "UNKNOWN";
}

int HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return 200;
    case StatusCode::kInvalidArgument: return 400;
    case StatusCode::kFailedPrecondition: return 400;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kAlreadyExists: return 409;
    case StatusCode::kPayloadTooLarge: return 413;
    case StatusCode::kResourceExhausted: return 503;  // out of memory: retry (Retry-After)
    case StatusCode::kCancelled: return 499;
    case StatusCode::kInternal: return 500;
    case StatusCode::kUnimplemented: return 501;
    case StatusCode::kUnavailable: return 503;
    case StatusCode::kDeadlineExceeded: return 504;
  }
  return 500;
}

int GrpcCodeFor(StatusCode code) {
  // Values of grpc::StatusCode / google.rpc.Code.
  switch (code) {
    case StatusCode::kOk: return 0;
    case StatusCode::kCancelled: return 1;
    case StatusCode::kInvalidArgument: return 3;
    case StatusCode::kDeadlineExceeded: return 4;
    case StatusCode::kNotFound: return 5;
    case StatusCode::kAlreadyExists: return 6;
    case StatusCode::kResourceExhausted: return 8;
    case StatusCode::kFailedPrecondition: return 9;
    case StatusCode::kPayloadTooLarge: return 8;  // RESOURCE_EXHAUSTED, as gRPC reports oversized messages
    case StatusCode::kUnimplemented: return 12;
    case StatusCode::kInternal: return 13;
    case StatusCode::kUnavailable: return 14;
  }
  return 2;  // UNKNOWN
}

Status::Status(StatusCode code, std::string message) {
  if (code != StatusCode::kOk) state_ = std::make_shared<const State>(State{code, std::move(message)});
}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return state_ ? state_->message : kEmpty;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(code())) + ": " + message();
}

Status Status::WithContext(const std::string& prefix) const {
  if (ok()) return *this;
  return Status(code(), prefix + ": " + message());
}

}  // namespace fastpath
