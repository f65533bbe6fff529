#include "stream_infer_reactor.h"

#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "call_util.h"

namespace fastpath::frontend::grpc_internal {
namespace {

using inference::ModelStreamInferResponse;

constexpr char kShuttingDown[] = "the server is shutting down";

std::unique_ptr<ModelStreamInferResponse> ErrorResponse(const RequestEcho& echo,
                                                        const std::string& message) {
  auto response = std::make_unique<ModelStreamInferResponse>();
  response->set_error_message(message.empty() ? "unknown error" : message);
  FillErrorEcho(echo, response->mutable_infer_response());
  return response;
}

}  // namespace

// ---------------------------------------------------------------- StreamRegistry

bool StreamRegistry::Add(StreamInferReactor* reactor) {
  std::lock_guard lock(mu_);
  if (draining_) return false;
  live_.insert(reactor);
  return true;
}

void StreamRegistry::Remove(StreamInferReactor* reactor) {
  std::lock_guard lock(mu_);
  live_.erase(reactor);
}

void StreamRegistry::DrainAll() {
  std::vector<StreamInferReactor*> held;
  {
    std::lock_guard lock(mu_);
    draining_ = true;
    held.reserve(live_.size());
    // The reference keeps each reactor alive past its OnDone, which may run on a gRPC
    // thread as soon as mu_ is released; Remove waits for mu_, so none is gone yet.
    for (StreamInferReactor* r : live_) {
      r->Ref();
      held.push_back(r);
    }
  }
  // Outside mu_: Drain may call Finish, and with it OnDone (hence Remove) on this thread.
  for (StreamInferReactor* r : held) {
    r->Drain();
    r->Unref();
  }
}

// ---------------------------------------------------------------- StreamInferReactor

StreamInferReactor::StreamInferReactor(grpc::CallbackServerContext* context,
                                       server::InferenceServer& server, int64_t max_message_bytes,
                                       StreamRegistry& registry)
    : context_(context), server_(server), max_message_bytes_(max_message_bytes),
      registry_(registry) {
  // Once added, DrainAll may call Drain from another thread; mu_ orders the two, and an
  // operation started before the handler returns is held by gRPC until the reactor is
  // bound, in the order it was asked for.
  const bool added = registry_.Add(this);
  Actions actions;
  {
    std::lock_guard lock(mu_);
    if (!added) draining_ = true;  // a stream opened during shutdown ends at once
    actions = NextActionsLocked();
  }
  Run(actions);
}

void StreamInferReactor::OnReadDone(bool ok) {
  enum class Take { kNothing, kDispatch, kRefuse } take = Take::kNothing;
  {
    std::lock_guard lock(mu_);
    if (!ok) {
      // The client half-closed (or the call broke): no more requests, finish once the
      // pending ones are answered.
      reads_done_ = true;
    } else if (!finished_) {
      take = draining_ ? Take::kRefuse : Take::kDispatch;
      ++in_flight_;  // under the lock that read draining_: see in_flight_
    }
    // After Finish (a drain ended the call with this read outstanding) the request is
    // dropped: the client learns from the call's UNAVAILABLE status.
  }
  if (take != Take::kNothing) {
    // Moved out so that the next read can reuse the buffer while this request runs.
    inference::ModelInferRequest request = std::move(read_buf_);
    read_buf_.Clear();
    if (take == Take::kDispatch) {
      Dispatch(std::move(request));
    } else {
      Complete(ErrorResponse({request.model_name(), request.model_version(), request.id()},
                             kShuttingDown));
    }
  }

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
    Complete(ErrorResponse(echo, parsed.status().message()));
    return;
  }
  parsed->deadline = SteadyDeadline(context_->deadline());
  parsed->cancelled = cancelled_;
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
                       Complete(std::move(response));
                     });
}

void StreamInferReactor::Complete(std::unique_ptr<ModelStreamInferResponse> response) {
  Actions actions;
  {
    std::lock_guard lock(mu_);
    --in_flight_;
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

void StreamInferReactor::Drain() {
  Actions actions;
  {
    std::lock_guard lock(mu_);
    draining_ = true;
    actions = NextActionsLocked();
  }
  Run(actions);
}

void StreamInferReactor::OnCancel() { cancelled_->store(true, std::memory_order_relaxed); }

void StreamInferReactor::OnDone() {
  registry_.Remove(this);
  Unref();
}

StreamInferReactor::Actions StreamInferReactor::NextActionsLocked() {
  Actions actions;
  if (finished_) return actions;
  if (!writing_ && !writes_.empty()) {
    writing_ = true;
    actions.write = writes_.front().get();
  }
  const int outstanding = in_flight_ + static_cast<int>(writes_.size());
  // Reading goes on while draining: a request read then is refused inline, and a
  // half-close is seen, so that a client that had finished gets OK.
  if (!reading_ && !read_starting_ && !reads_done_ && outstanding < kMaxOutstanding) {
    reading_ = true;
    read_starting_ = true;
    actions.start_read = true;
  }
  // A drain does not wait for the client to half-close, nor for an outstanding read:
  // Finish makes that read complete with ok=false.
  if ((reads_done_ || draining_) && in_flight_ == 0 && writes_.empty() && !writing_ &&
      !read_starting_) {
    finished_ = true;
    actions.finish = true;
    actions.finish_ok = reads_done_;
  }
  return actions;
}

void StreamInferReactor::Run(Actions actions) {
  for (;;) {
    if (actions.write != nullptr) StartWrite(actions.write);
    if (!actions.start_read) break;
    StartRead(&read_buf_);
    // A drain that came meanwhile held its Finish back for this StartRead, and a read
    // that completed meanwhile could not start the next one: decide again.
    std::lock_guard lock(mu_);  // released at the end of each turn
    read_starting_ = false;
    actions = NextActionsLocked();
  }
  // Last: once Finish is called, OnDone may delete this on another thread. (Never in the
  // same Actions as start_read: NextActionsLocked does not finish while a read starts.)
  if (actions.finish) {
    Finish(actions.finish_ok ? grpc::Status::OK
                             : grpc::Status(grpc::StatusCode::UNAVAILABLE, kShuttingDown));
  }
}

}  // namespace fastpath::frontend::grpc_internal
