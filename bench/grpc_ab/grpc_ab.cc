// grpc_ab: which gRPC server style serves a unary ModelInfer fastest on this machine's
// gRPC (issue 11 §2), measured side by side in one run with no model behind it.
//
// The server answers each ModelInfer at once on the thread that received it, copying the
// request's first raw input into the response, which is what fastpath's front end does
// for a short model run on the caller's thread (inference excluded). Styles:
//   callback   inference.GRPCInferenceService::CallbackService (what fastpath serves with)
//   cq:N       ModelInfer on the async API (the other RPCs on the callback API): N threads,
//              each with its own completion queue, each running the requests its queue
//              delivers inline
//   pure:N     as cq:N, with every RPC on the async API (no callback method at all)
// The client is fastpath bench's: a blocking stub, one channel and connection per client
// thread. Each style runs in a child process of its own, alternately (A B A B ...), and the
// report is the ratio of each style to the first one, per round and over all rounds.
//
//   grpc_ab [--styles callback,cq:1,cq:2] [--concurrency 1,32] [--seconds 3] [--rounds 2]
//           [--floats 64]
#include <grpcpp/grpcpp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "grpc_service.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

// The answer: one output with the first input's bytes, as an identity model would give.
void Answer(const inference::ModelInferRequest& request, inference::ModelInferResponse* response) {
  response->set_model_name(request.model_name());
  response->set_id(request.id());
  auto* out = response->add_outputs();
  out->set_name("output");
  out->set_datatype("FP32");
  if (request.inputs_size() > 0) {
    out->mutable_shape()->CopyFrom(request.inputs(0).shape());
  }
  if (request.raw_input_contents_size() > 0) {
    *response->add_raw_output_contents() = request.raw_input_contents(0);
  }
}

class CallbackStyle final : public inference::GRPCInferenceService::CallbackService {
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const inference::ModelInferRequest* request,
                                       inference::ModelInferResponse* response) override {
    Answer(*request, response);
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

// The async API for ModelInfer alone; the rest stays on the callback API (fastpath's
// other RPCs and streams), so the callback machinery is there beside it.
// gRPC clears a method's handler only when it turns a sync method async, so the async
// method goes below the callback ones.
using G = inference::GRPCInferenceService;
using AsyncStyle = G::WithCallbackMethod_ServerLive<G::WithCallbackMethod_ServerReady<
    G::WithCallbackMethod_ModelReady<G::WithCallbackMethod_ServerMetadata<
        G::WithCallbackMethod_ModelMetadata<G::WithCallbackMethod_ModelStreamInfer<
            G::WithCallbackMethod_ModelConfig<G::WithCallbackMethod_ModelStatistics<
                G::WithCallbackMethod_RepositoryIndex<G::WithCallbackMethod_RepositoryModelLoad<
                    G::WithCallbackMethod_RepositoryModelUnload<
                        G::WithAsyncMethod_ModelInfer<G::Service>>>>>>>>>>>>;

// One outstanding ModelInfer on one completion queue; it re-arms itself when answered.
template <typename AsyncService>
class AsyncCall {
 public:
  AsyncCall(AsyncService* service, grpc::ServerCompletionQueue* cq)
      : service_(service), cq_(cq), writer_(&context_) {
    service_->RequestModelInfer(&context_, &request_, &writer_, cq_, cq_, this);
  }
  // Called with the tag's `ok`: a call arrived (answer it, and arm the next one), or its
  // answer was sent, or the queue is shutting down.
  void Proceed(bool ok) {
    if (finished_ || !ok) {
      delete this;
      return;
    }
    new AsyncCall(service_, cq_);
    Answer(request_, &response_);
    finished_ = true;
    writer_.Finish(response_, grpc::Status::OK, this);
  }

 private:
  AsyncService* service_;
  grpc::ServerCompletionQueue* cq_;
  grpc::ServerContext context_;
  inference::ModelInferRequest request_;
  inference::ModelInferResponse response_;
  grpc::ServerAsyncResponseWriter<inference::ModelInferResponse> writer_;
  bool finished_ = false;
};

[[noreturn]] void Serve(const std::string& style, int port, int ready_fd) {
  grpc::ServerBuilder builder;
  int bound = 0;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials(),
                           &bound);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  CallbackStyle callback;
  AsyncStyle async;
  G::AsyncService pure;
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues;
  int threads = 0;
  if (style == "callback") {
    builder.RegisterService(&callback);
  } else if (style.rfind("cq:", 0) == 0) {
    threads = std::stoi(style.substr(3));
    builder.RegisterService(&async);
    for (int i = 0; i < threads; ++i) queues.push_back(builder.AddCompletionQueue());
  } else if (style.rfind("pure:", 0) == 0) {
    threads = std::stoi(style.substr(5));
    builder.RegisterService(&pure);
    for (int i = 0; i < threads; ++i) queues.push_back(builder.AddCompletionQueue());
  } else {
    std::cerr << "unknown style " << style << "\n";
    _exit(2);
  }
  auto server = builder.BuildAndStart();
  if (!server || bound == 0) {
    std::cerr << "cannot listen on port " << port << "\n";
    _exit(2);
  }
  std::vector<std::thread> pollers;
  for (auto& q : queues) {
    grpc::ServerCompletionQueue* cq = q.get();
    const bool is_pure = style.rfind("pure:", 0) == 0;
    for (int k = 0; k < 64; ++k) {
      if (is_pure) {
        new AsyncCall<G::AsyncService>(&pure, cq);
      } else {
        new AsyncCall<AsyncStyle>(&async, cq);
      }
    }
    pollers.emplace_back([cq, is_pure] {
      void* tag = nullptr;
      bool ok = false;
      while (cq->Next(&tag, &ok)) {
        if (is_pure) {
          static_cast<AsyncCall<G::AsyncService>*>(tag)->Proceed(ok);
        } else {
          static_cast<AsyncCall<AsyncStyle>*>(tag)->Proceed(ok);
        }
      }
    });
  }
  const char byte = 1;
  (void)!write(ready_fd, &byte, 1);
  close(ready_fd);
  server->Wait();  // until killed
  _exit(0);
}

struct Result {
  double ips = 0;
  double p50_us = 0;
  double p99_us = 0;
  long errors = 0;
};

Result Drive(int port, int concurrency, double seconds, int floats) {
  inference::ModelInferRequest request;
  request.set_model_name("mlp");
  auto* in = request.add_inputs();
  in->set_name("input");
  in->set_datatype("FP32");
  in->add_shape(1);
  in->add_shape(floats);
  request.add_raw_input_contents(std::string(static_cast<size_t>(floats) * 4, '\1'));

  std::atomic<bool> stop{false};
  std::atomic<bool> measuring{false};
  std::vector<std::vector<double>> latencies(static_cast<size_t>(concurrency));
  std::atomic<long> errors{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < concurrency; ++c) {
    clients.emplace_back([&, c] {
      grpc::ChannelArguments args;
      args.SetInt("grpc_ab.client", c);  // a connection per client thread
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      auto stub = inference::GRPCInferenceService::NewStub(grpc::CreateCustomChannel(
          "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials(), args));
      while (!stop.load()) {
        grpc::ClientContext context;
        inference::ModelInferResponse response;
        const auto start = Clock::now();
        const grpc::Status status = stub->ModelInfer(&context, request, &response);
        const double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
        if (!measuring.load()) continue;
        if (!status.ok() || response.raw_output_contents_size() != 1) {
          errors.fetch_add(1);
          continue;
        }
        latencies[static_cast<size_t>(c)].push_back(us);
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // warm-up
  measuring.store(true);
  const auto start = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  measuring.store(false);
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  stop.store(true);
  for (auto& t : clients) t.join();
  std::vector<double> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  Result r;
  r.errors = errors.load();
  if (all.empty()) return r;
  std::sort(all.begin(), all.end());
  r.ips = static_cast<double>(all.size()) / elapsed;
  r.p50_us = all[all.size() / 2];
  r.p99_us = all[std::min(all.size() - 1, all.size() * 99 / 100)];
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::string(argv[1]) == "--serve") {
    Serve(argv[2], std::stoi(argv[3]), std::stoi(argv[4]));
  }
  std::vector<std::string> styles = {"callback", "cq:1", "cq:2"};
  std::vector<int> concurrencies = {1, 32};
  double seconds = 3;
  int rounds = 2;
  int floats = 64;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--styles") {
      styles = Split(value);
    } else if (flag == "--concurrency") {
      concurrencies.clear();
      for (const auto& c : Split(value)) concurrencies.push_back(std::stoi(c));
    } else if (flag == "--seconds") {
      seconds = std::stod(value);
    } else if (flag == "--rounds") {
      rounds = std::stoi(value);
    } else if (flag == "--floats") {
      floats = std::stoi(value);
    } else {
      std::cerr << "unknown flag " << flag << "\n";
      return 2;
    }
  }
  const int port = 20000 + static_cast<int>(getpid() % 20000);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::printf("%-6s %-5s %-10s %10s %9s %9s %6s %10s %10s\n", "round", "c", "style", "infer/s",
              "p50 us", "p99 us", "errors", "ips ratio", "p50 ratio");
  for (const int c : concurrencies) {
    std::vector<double> ips_sum(styles.size(), 0), p50_sum(styles.size(), 0);
    for (int round = 1; round <= rounds; ++round) {
      std::vector<Result> results;
      for (const auto& style : styles) {
        int fds[2];
        if (pipe(fds) != 0) return 1;
        const pid_t child = fork();
        if (child == 0) {
          // A fresh process: gRPC's state in this one (threads, pollers) does not survive
          // a fork.
          close(fds[0]);
          const std::string port_arg = std::to_string(port);
          const std::string fd_arg = std::to_string(fds[1]);
          execl("/proc/self/exe", argv[0], "--serve", style.c_str(), port_arg.c_str(),
                fd_arg.c_str(), static_cast<char*>(nullptr));
          _exit(127);
        }
        close(fds[1]);
        char byte = 0;
        if (read(fds[0], &byte, 1) != 1) {
          std::cerr << "server " << style << " did not start\n";
          return 1;
        }
        close(fds[0]);
        results.push_back(Drive(port, c, seconds, floats));
        kill(child, SIGKILL);
        waitpid(child, nullptr, 0);
      }
      for (size_t s = 0; s < styles.size(); ++s) {
        const Result& r = results[s];
        ips_sum[s] += r.ips;
        p50_sum[s] += r.p50_us;
        std::printf("%-6d %-5d %-10s %10.0f %9.1f %9.1f %6ld %10.3f %10.3f\n", round, c,
                    styles[s].c_str(), r.ips, r.p50_us, r.p99_us, r.errors, r.ips / results[0].ips,
                    r.p50_us / results[0].p50_us);
      }
    }
    for (size_t s = 0; s < styles.size(); ++s) {
      std::printf("%-6s %-5d %-10s %10.0f %9.1f %9s %6s %10.3f %10.3f\n", "all", c,
                  styles[s].c_str(), ips_sum[s] / rounds, p50_sum[s] / rounds, "", "",
                  ips_sum[s] / ips_sum[0], p50_sum[s] / p50_sum[0]);
    }
  }
  return 0;
}
