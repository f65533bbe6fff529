#include "stream_infer_reactor.h"

#include <exception>
#include <string>
#include <utility>

#include "call_util.h"

namespace fastpath::frontend::grpc_internal {
namespace {

using inference::ModelStreamInferResponse;

std::unique_ptr<ModelStreamInferResponse> ErrorResponse(const RequestEcho& echo,
                                                        const std::string& message) {
  auto response = std::make_unique<ModelStreamInferResponse>();
  response->set_error_message(message.empty() ? "unknown error" : message);
  FillErrorEcho(echo, response->mutable_infer_response());
  return response;
}

}  // namespace

StreamInferReactor::StreamInferReactor(grpc::CallbackServerContext* context,
                                       server::InferenceServer& server, int64_t max_message_bytes)
    : context_(context), server_(server), max_message_bytes_(max_message_bytes) {
  StartRead(&read_buf_);
}

void StreamInferReactor::OnReadDone(bool ok) {
  if (!ok) {
    // The client half-closed (or the call broke): no more requests, finish once the
    // pending ones are answered.
    Actions actions;
    {
      std::lock_guard lock(mu_);
      reading_ = false;
      reads_done_ = true;
      actions = NextActionsLocked();
    }
    Run(actions);
    return;
  }
  // Moved out so that the next read can reuse the buffer while this request runs.
  inference::ModelInferRequest request = std::move(read_buf_);
  read_buf_.Clear();
  Dispatch(std::move(request));

  Actions actions;
  {
    std::lock_guard lock(mu_);
    reading_ = false;
    actions = NextActionsLocked();
  }
  Run(actions);
}

void StreamInferReactor::Dispatch(inference::ModelInferRequest request) {
  RequestEcho echo{request.model_name(), request.model_version(), request.id()};
  StatusOr<InferRequest> parsed = Internal("request not parsed");
  const grpc::Status net = Guarded([&] {
    parsed = ParseModelInferRequest(request, max_message_bytes_);
    return grpc::Status::OK;
  });
  if (!net.ok()) parsed = Internal(net.error_message());
  if (!parsed.ok()) {
    Complete(ErrorResponse(echo, parsed.status().message()), /*from_facade=*/false);
    return;
  }
  parsed->deadline = SteadyDeadline(context_->deadline());
  {
    std::lock_guard lock(mu_);
    ++in_flight_;
  }
  // The callback may run right here, on this thread, before InferAsync returns: it only
  // takes mu_, which is not held now.
  server_.InferAsync(std::move(parsed).value(),
                     [this, echo = std::move(echo)](StatusOr<InferResponse> result) {
                       std::unique_ptr<ModelStreamInferResponse> response;
                       const grpc::Status net = Guarded([&] {
                         if (!result.ok()) {
                           response = ErrorResponse(echo, result.status().message());
                           return grpc::Status::OK;
                         }
                         response = std::make_unique<ModelStreamInferResponse>();
                         const Status filled = FillModelInferResponse(
                             std::move(result).value(), echo, response->mutable_infer_response());
                         if (!filled.ok()) response = ErrorResponse(echo, filled.message());
                         return grpc::Status::OK;
                       });
                       if (!net.ok() || response == nullptr) {
                         response = ErrorResponse(echo, net.error_message());
                       }
                       Complete(std::move(response), /*from_facade=*/true);
                     });
}

void StreamInferReactor::Complete(std::unique_ptr<ModelStreamInferResponse> response,
                                  bool from_facade) {
  Actions actions;
  {
    std::lock_guard lock(mu_);
    if (from_facade) --in_flight_;
    if (!broken_) writes_.push_back(std::move(response));
    actions = NextActionsLocked();
  }
  // `response`, if not queued, is freed here, before Run: after a Finish nothing of this
  // reactor may be touched.
  Run(actions);
}

void StreamInferReactor::OnWriteDone(bool ok) {
  Actions actions;
  {
    std::lock_guard lock(mu_);
    writing_ = false;
    writes_.pop_front();
    if (!ok) {
      // The stream is broken (client cancelled or went away): what is left cannot be
      // delivered. Reads fail too, so the call still ends through NextActionsLocked.
      broken_ = true;
      writes_.clear();
    }
    actions = NextActionsLocked();
  }
  Run(actions);
}

void StreamInferReactor::OnDone() { delete this; }

StreamInferReactor::Actions StreamInferReactor::NextActionsLocked() {
  Actions actions;
  if (finished_) return actions;
  if (!writing_ && !writes_.empty()) {
    writing_ = true;
    actions.write = writes_.front().get();
  }
  const int outstanding = in_flight_ + static_cast<int>(writes_.size());
  if (!reading_ && !reads_done_ && outstanding < kMaxOutstanding) {
    reading_ = true;
    actions.start_read = true;
  }
  if (reads_done_ && in_flight_ == 0 && writes_.empty() && !writing_) {
    finished_ = true;
    actions.finish = true;
  }
  return actions;
}

void StreamInferReactor::Run(const Actions& actions) {
  if (actions.write != nullptr) StartWrite(actions.write);
  if (actions.start_read) StartRead(&read_buf_);
  // Last: once Finish is called, OnDone may delete this on another thread.
  if (actions.finish) Finish(grpc::Status::OK);
}

}  // namespace fastpath::frontend::grpc_internal
