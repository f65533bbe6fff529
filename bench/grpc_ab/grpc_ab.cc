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
//   nghttp2    not gRPC's server: ModelInfer alone on nghttp2 (Debian's libnghttp2, the
//              HTTP/2 library h2load is built on) and epoll, one thread, the gRPC framing
//              (length prefix, grpc-status trailer) by hand. What a front end on another
//              HTTP/2 stack could cost per call; built where libnghttp2-dev is installed
//              (tools/setup.sh --bench).
// The client is fastpath bench's: a blocking stub, one channel and connection per client
// thread. Each style runs in a child process of its own, alternately (A B A B ...), and the
// report is the ratio of each style to the first one, per round and over all rounds.
//
//   grpc_ab [--styles callback,cq:1,cq:2] [--concurrency 1,32] [--seconds 3] [--rounds 2]
//           [--floats 64]
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef GRPC_AB_NGHTTP2
#include <nghttp2/nghttp2.h>
#endif

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
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

#ifdef GRPC_AB_NGHTTP2
// The nghttp2 style: one epoll thread; per connection an nghttp2 server session whose
// output is collected in `out` and written once per read.
namespace h2 {

struct Stream {
  std::string body;      // the request's DATA: the gRPC length prefix, then the message
  std::string response;  // the same framing for the answer
  size_t sent = 0;
};

struct Connection {
  int fd = -1;
  nghttp2_session* session = nullptr;
  std::map<int32_t, Stream> streams;
  std::string out;
};

nghttp2_nv Header(const char* name, const char* value) {
  return {reinterpret_cast<uint8_t*>(const_cast<char*>(name)),
          reinterpret_cast<uint8_t*>(const_cast<char*>(value)), std::strlen(name),
          std::strlen(value), NGHTTP2_NV_FLAG_NONE};
}

ssize_t ReadResponse(nghttp2_session* session, int32_t stream_id, uint8_t* buf, size_t length,
                     uint32_t* flags, nghttp2_data_source*, void* user) {
  Stream& s = static_cast<Connection*>(user)->streams[stream_id];
  const size_t n = std::min(length, s.response.size() - s.sent);
  std::copy_n(s.response.data() + s.sent, n, reinterpret_cast<char*>(buf));
  s.sent += n;
  if (s.sent == s.response.size()) {
    // The stream ends with the trailer, not with the data.
    *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
    const nghttp2_nv trailer[] = {Header("grpc-status", "0")};
    nghttp2_submit_trailer(session, stream_id, trailer, 1);
  }
  return static_cast<ssize_t>(n);
}

int OnDataChunk(nghttp2_session*, uint8_t, int32_t stream_id, const uint8_t* data, size_t len,
                void* user) {
  static_cast<Connection*>(user)->streams[stream_id].body.append(
      reinterpret_cast<const char*>(data), len);
  return 0;
}

// A request is whole at END_STREAM: parse it, answer at once.
int OnFrame(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
  if ((frame->hd.type != NGHTTP2_DATA && frame->hd.type != NGHTTP2_HEADERS) ||
      (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) == 0) {
    return 0;
  }
  Stream& s = static_cast<Connection*>(user)->streams[frame->hd.stream_id];
  inference::ModelInferRequest request;
  if (s.body.size() < 5 ||
      !request.ParseFromArray(s.body.data() + 5, static_cast<int>(s.body.size() - 5))) {
    const nghttp2_nv headers[] = {Header(":status", "200"),
                                  Header("content-type", "application/grpc"),
                                  Header("grpc-status", "13")};  // INTERNAL, trailers only
    nghttp2_submit_response(session, frame->hd.stream_id, headers, 3, nullptr);
    return 0;
  }
  inference::ModelInferResponse response;
  Answer(request, &response);
  const std::string message = response.SerializeAsString();
  const uint32_t size = htonl(static_cast<uint32_t>(message.size()));
  s.response.assign(1, '\0');  // not compressed
  s.response.append(reinterpret_cast<const char*>(&size), 4);
  s.response += message;
  const nghttp2_nv headers[] = {Header(":status", "200"),
                                Header("content-type", "application/grpc")};
  nghttp2_data_provider provider{};
  provider.read_callback = ReadResponse;
  nghttp2_submit_response(session, frame->hd.stream_id, headers, 2, &provider);
  return 0;
}

int OnStreamClose(nghttp2_session*, int32_t stream_id, uint32_t, void* user) {
  static_cast<Connection*>(user)->streams.erase(stream_id);
  return 0;
}

ssize_t Collect(nghttp2_session*, const uint8_t* data, size_t length, int, void* user) {
  static_cast<Connection*>(user)->out.append(reinterpret_cast<const char*>(data), length);
  return static_cast<ssize_t>(length);
}

// Writes everything; a full socket buffer makes it wait (a benchmark server, no backlog).
bool WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && errno == EAGAIN) {
      fd_set w;
      FD_ZERO(&w);
      FD_SET(fd, &w);
      select(fd + 1, nullptr, &w, nullptr, nullptr);
    } else {
      return false;
    }
  }
  return true;
}

[[noreturn]] void Serve(int port, int ready_fd) {
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      listen(listener, 128) != 0) {
    std::cerr << "cannot listen on port " << port << "\n";
    _exit(2);
  }
  const int ep = epoll_create1(0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // the listener
  epoll_ctl(ep, EPOLL_CTL_ADD, listener, &ev);
  nghttp2_session_callbacks* callbacks = nullptr;
  nghttp2_session_callbacks_new(&callbacks);
  nghttp2_session_callbacks_set_send_callback(callbacks, Collect);
  nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, OnFrame);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, OnDataChunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, OnStreamClose);
  const char byte = 1;
  (void)!write(ready_fd, &byte, 1);
  close(ready_fd);
  epoll_event events[64];
  std::string buffer(1 << 16, '\0');
  for (;;) {
    const int n = epoll_wait(ep, events, 64, -1);
    for (int i = 0; i < n; ++i) {
      if (events[i].data.ptr == nullptr) {
        for (int fd; (fd = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK)) >= 0;) {
          const int one = 1;
          setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          auto* c = new Connection();
          c->fd = fd;
          nghttp2_session_server_new(&c->session, callbacks, c);
          const nghttp2_settings_entry settings[] = {
              {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100}};
          nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, settings, 1);
          epoll_event cev{};
          cev.events = EPOLLIN;
          cev.data.ptr = c;
          epoll_ctl(ep, EPOLL_CTL_ADD, fd, &cev);
        }
        continue;
      }
      auto* c = static_cast<Connection*>(events[i].data.ptr);
      bool open = true;
      for (;;) {
        const ssize_t got = recv(c->fd, buffer.data(), buffer.size(), 0);
        if (got < 0 && errno == EAGAIN) break;
        if (got <= 0 ||
            nghttp2_session_mem_recv(c->session, reinterpret_cast<const uint8_t*>(buffer.data()),
                                     static_cast<size_t>(got)) < 0) {
          open = false;
          break;
        }
        if (static_cast<size_t>(got) < buffer.size()) break;
      }
      if (open && nghttp2_session_send(c->session) == 0 && !c->out.empty()) {
        open = WriteAll(c->fd, c->out);
        c->out.clear();
      }
      if (!open) {
        epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, nullptr);
        close(c->fd);
        nghttp2_session_del(c->session);
        delete c;
      }
    }
  }
}

}  // namespace h2
#endif

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
  if (style == "nghttp2") {
#ifdef GRPC_AB_NGHTTP2
    h2::Serve(port, ready_fd);
#else
    std::cerr << "style nghttp2: grpc_ab was built without libnghttp2 (tools/setup.sh --bench "
                 "installs libnghttp2-dev; then configure again)\n";
    _exit(2);
#endif
  }
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
