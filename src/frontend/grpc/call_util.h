// Small pieces every handler of the gRPC front end uses: the status mapping, the
// deadline conversion and the outermost exception net.
#pragma once

#include <chrono>
#include <exception>
#include <string>

#include <grpcpp/grpcpp.h>

#include "fastpath/common/status.h"

namespace fastpath::frontend::grpc_internal {

inline grpc::Status ToGrpcStatus(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // GrpcCodeFor is the one place codes are mapped; its values are grpc::StatusCode's.
  return grpc::Status(static_cast<grpc::StatusCode>(GrpcCodeFor(status.code())), status.message());
}

// The client's deadline on the facade's clock; max() when the client set none.
inline std::chrono::steady_clock::time_point SteadyDeadline(
    std::chrono::system_clock::time_point deadline) {
  if (deadline == std::chrono::system_clock::time_point::max()) {
    return std::chrono::steady_clock::time_point::max();
  }
  const auto left = deadline - std::chrono::system_clock::now();
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(left);
}

// The outermost safety net of a handler: no exception may escape into gRPC's threads
// (it would terminate the process). A caught one becomes INTERNAL with its message.
template <typename Fn>
grpc::Status Guarded(Fn&& fn) noexcept {
  try {
    return fn();
  } catch (const std::exception& e) {
    return grpc::Status(grpc::StatusCode::INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "internal error: unknown exception");
  }
}

}  // namespace fastpath::frontend::grpc_internal
