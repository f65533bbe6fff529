#include "stream_infer_call.h"

#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "call_util.h"

namespace fastpath::frontend::grpc_internal {
namespace {

using inference::ModelStreamInferResponse;

constexpr char kShuttingDown[] = "the server is shutting down";
constexpr char kFinalResponse[] = "triton_final_response";

std::unique_ptr<ModelStreamInferResponse> ErrorResponse(const RequestEcho& echo,
                                                        const std::string& message) {
  auto response = std::make_unique<ModelStreamInferResponse>();
  response->set_error_message(message.empty() ? "unknown error" : message);
  FillErrorEcho(echo, response->mutable_infer_response());
  return response;
}

// The stream's message for one request's result: its answer, or error_message.
std::unique_ptr<ModelStreamInferResponse> Answer(StatusOr<InferResponse> result,
                                                 const RequestEcho& echo) {
  std::unique_ptr<ModelStreamInferResponse> response;
  const grpc::Status net = Guarded([&] {
    if (!result.ok()) {
      response = ErrorResponse(echo, result.status().message());
      return grpc::Status::OK;
    }
    response = std::make_unique<ModelStreamInferResponse>();
    const Status filled =
        FillModelInferResponse(std::move(result).value(), echo, response->mutable_infer_response());
    if (!filled.ok()) response = ErrorResponse(echo, filled.message());
    return grpc::Status::OK;
  });
  if (!net.ok() || response == nullptr) response = ErrorResponse(echo, net.error_message());
  return response;
}

}  // namespace

// ---------------------------------------------------------------- StreamRegistry

bool StreamRegistry::Add(StreamInferCall* call) {
  std::lock_guard lock(mu_);
  if (draining_) return false;
  live_.insert(call);
  return true;
}

void StreamRegistry::Remove(StreamInferCall* call) {
  std::lock_guard lock(mu_);
  live_.erase(call);
}

void StreamRegistry::DrainAll() {
  std::vector<StreamInferCall*> held;
  {
    std::lock_guard lock(mu_);
    draining_ = true;
    held.reserve(live_.size());
    // The reference keeps each call alive past its Finished, which may run on a queue's
    // thread as soon as mu_ is released; Remove waits for mu_, so none is gone yet.
    for (StreamInferCall* r : live_) {
      r->Ref();
      held.push_back(r);
    }
  }
  // Outside mu_: Drain may start Finish, whose completion calls Remove.
  for (StreamInferCall* r : held) {
    r->Drain();
    r->Unref();
  }
}

// ---------------------------------------------------------------- StreamInferCall

void StreamInferCall::RequestOn(const Shared* shared, Queues* queues,
                                grpc::ServerCompletionQueue* cq) {
  queues->Request([&] { new StreamInferCall(shared, queues, cq); });
}

StreamInferCall::StreamInferCall(const Shared* shared, Queues* queues,
                                 grpc::ServerCompletionQueue* cq)
    : shared_(*shared), queues_(queues), cq_(cq) {
  context_.AsyncNotifyWhenDone(static_cast<Tag*>(&done_));
  shared_.service->RequestRawStream(&context_, &stream_, cq_, cq_, static_cast<Tag*>(&arrived_));
}

void StreamInferCall::Unref() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  Queues* queues = queues_;
  delete this;
  queues->Ended();
}

void StreamInferCall::Arrived(bool ok) {
  queues_->Arrived();
  if (!ok) {  // the server is shutting down; the call never began (no "done" comes)
    Unref();
    return;
  }
  // The request's reference becomes the call's, dropped when Finish completes; gRPC's
  // "done" comes once the call is over and holds one of its own.
  Ref();
  StreamInferCall::RequestOn(&shared_, queues_, cq_);
  // Once added, DrainAll may call Drain from another thread; mu_ orders the two.
  const bool added = shared_.registry->Add(this);
  Actions actions;
  {
    std::lock_guard lock(mu_);
    if (!added) draining_ = true;  // a stream opened during shutdown ends at once
    actions = NextActionsLocked();
  }
  Run(actions);
}

void StreamInferCall::ReadDone(bool ok) {
  enum class Take { kNothing, kDispatch, kRefuse } take = Take::kNothing;
  uint64_t sequence = 0;
  {
    std::lock_guard lock(mu_);
    if (!ok) {
      // The client half-closed (or the call broke): no more requests, finish once the
      // pending ones are answered.
      reads_done_ = true;
    } else if (!finished_) {
      take = draining_ ? Take::kRefuse : Take::kDispatch;
      ++in_flight_;  // under the lock that read draining_: see in_flight_
      sequence = next_read_++;
    }
    // After Finish (a drain ended the call with this read outstanding) the request is
    // dropped: the client learns from the call's UNAVAILABLE status.
  }
  if (take != Take::kNothing) {
    // Charged before it is parsed: a request past the bound is answered in its place (the
    // parsed copy only echoes its id) and freed at once.
    const size_t bytes = read_buf_.Length();
    std::optional<RequestBytes::Hold> hold;
    if (take == Take::kDispatch) hold = shared_.request_bytes->TryHold(bytes);
    // Parsed out of the buffer (which Deserialize empties), so that the next read can reuse
    // it while this request runs. One that does not parse is answered on the stream, which
    // goes on: gRPC itself would have ended the stream with OK, the request unanswered.
    inference::ModelInferRequest request;
    if (!grpc::SerializationTraits<inference::ModelInferRequest>::Deserialize(&read_buf_, &request)
             .ok()) {
      Complete(sequence,
               ErrorResponse({}, Service::NotParsed(request.GetDescriptor()->full_name())));
    } else if (take == Take::kRefuse) {
      Complete(sequence,
               ErrorResponse({request.model_name(), request.model_version(), request.id()},
                             kShuttingDown));
    } else if (!hold) {
      Complete(sequence,
               ErrorResponse({request.model_name(), request.model_version(), request.id()},
                             shared_.request_bytes->Refusal("this one's " + std::to_string(bytes) +
                                                            " bytes")));
    } else {
      Dispatch(sequence, std::move(request), std::move(*hold));
    }
  }

  Actions actions;
  {
    std::lock_guard lock(mu_);
    reading_ = false;
    actions = NextActionsLocked();
  }
  Run(actions);
  Unref();  // the read's
}

void StreamInferCall::Dispatch(uint64_t sequence, inference::ModelInferRequest request,
                               RequestBytes::Hold hold) {
  RequestEcho echo{request.model_name(), request.model_version(), request.id()};
  StatusOr<InferRequest> parsed = Internal("request not parsed");
  const grpc::Status net = Guarded([&] {
    parsed = ParseModelInferRequest(request, shared_.max_message_bytes);
    return grpc::Status::OK;
  });
  if (!net.ok()) parsed = Internal(net.error_message());
  if (!parsed.ok()) {
    Complete(sequence, ErrorResponse(echo, parsed.status().message()));
    return;
  }
  parsed->deadline = SteadyDeadline(context_.deadline());
  parsed->cancelled = cancelled_;
  // The answer is made and written on this call's queue thread, as ModelInfer's are: an
  // instance's worker that answers a batch hands each answer over and goes back to its
  // model. The call outlives the hand-over: in_flight_ counts this request until Complete,
  // and the call does not finish before. The callback may run right here, before
  // InferAsync returns; then the answer is made at once (it only takes mu_, not held now).
  // The callback must be copyable (std::function): the hold is shared with it.
  auto held = std::make_shared<RequestBytes::Hold>(std::move(hold));
  shared_.server->InferAsync(
      std::move(parsed).value(), [this, sequence, echo = std::move(echo),
                                  held = std::move(held)](StatusOr<InferResponse> result) mutable {
        held->Reset();  // the request is answered: its room goes back
        queues_->RunOn(
            cq_, [this, sequence, echo = std::move(echo), result = std::move(result)]() mutable {
              Complete(sequence, Answer(std::move(result), echo));
            });
      });
}

void StreamInferCall::Complete(uint64_t sequence,
                               std::unique_ptr<ModelStreamInferResponse> response) {
  // Each request gets one answer, its last, and says so as Triton does on every stream
  // response: clients read responses until triton_final_response (a missing key in the map
  // reads as false, and such a client would wait for ever).
  (*response->mutable_infer_response()->mutable_parameters())[kFinalResponse].set_bool_param(true);
  Actions actions;
  {
    std::lock_guard lock(mu_);
    --in_flight_;
    if (!broken_) {
      // Written in the order the requests came: an answer waits for those read before it.
      held_.emplace(sequence, std::move(response));
      for (auto next = held_.begin(); next != held_.end() && next->first == next_write_;
           next = held_.erase(next), ++next_write_) {
        writes_.push_back(std::move(next->second));
      }
    }
    actions = NextActionsLocked();
  }
  // `response`, if not queued, is freed here, before Run: after a Finish nothing of this
  // call may be touched.
  Run(actions);
}

void StreamInferCall::WriteDone(bool ok) {
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
      held_.clear();
    }
    actions = NextActionsLocked();
  }
  Run(actions);
  Unref();  // the write's
}

void StreamInferCall::Drain() {
  Actions actions;
  {
    std::lock_guard lock(mu_);
    draining_ = true;
    actions = NextActionsLocked();
  }
  Run(actions);
}

void StreamInferCall::DoneNotified(bool) {
  if (context_.IsCancelled()) cancelled_->store(true, std::memory_order_relaxed);
  Unref();  // gRPC's "done"
}

void StreamInferCall::Finished(bool) {
  shared_.registry->Remove(this);
  Unref();  // the call's
}

StreamInferCall::Actions StreamInferCall::NextActionsLocked() {
  Actions actions;
  if (finished_) return actions;
  if (!writing_ && !writes_.empty()) {
    writing_ = true;
    actions.write = writes_.front().get();
  }
  const int outstanding =
      in_flight_ + static_cast<int>(held_.size()) + static_cast<int>(writes_.size());
  // Reading goes on while draining: a request read then is refused inline, and a
  // half-close is seen, so that a client that had finished gets OK.
  if (!reading_ && !read_starting_ && !reads_done_ && outstanding < kMaxOutstanding) {
    reading_ = true;
    read_starting_ = true;
    actions.start_read = true;
  }
  // A drain does not wait for the client to half-close, nor for an outstanding read:
  // Finish makes that read complete with ok=false.
  if ((reads_done_ || draining_) && in_flight_ == 0 && held_.empty() && writes_.empty() &&
      !writing_ && !read_starting_) {
    finished_ = true;
    actions.finish = true;
    actions.finish_ok = reads_done_;
  }
  return actions;
}

void StreamInferCall::Run(Actions actions) {
  for (;;) {
    if (actions.write != nullptr) {
      Ref();  // the write's, dropped in WriteDone
      stream_.Write(*actions.write, static_cast<Tag*>(&write_done_));
    }
    if (!actions.start_read) break;
    Ref();  // the read's, dropped in ReadDone
    stream_.Read(&read_buf_, static_cast<Tag*>(&read_done_));
    // A drain that came meanwhile held its Finish back for this StartRead, and a read
    // that completed meanwhile could not start the next one: decide again.
    std::lock_guard lock(mu_);  // released at the end of each turn
    read_starting_ = false;
    actions = NextActionsLocked();
  }
  // Last: once Finish is started, its completion may delete this on the queue's thread.
  // (Never in the same Actions as start_read: NextActionsLocked does not finish while a
  // read starts.)
  if (actions.finish) {
    stream_.Finish(actions.finish_ok ? grpc::Status::OK
                                     : grpc::Status(grpc::StatusCode::UNAVAILABLE, kShuttingDown),
                   static_cast<Tag*>(&finished_event_));
  }
}

}  // namespace fastpath::frontend::grpc_internal
