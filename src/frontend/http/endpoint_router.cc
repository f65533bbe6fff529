#include "endpoint_router.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <exception>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/beast/core/string.hpp>
#include <rapidjson/document.h>
#include <zlib.h>

#include "endpoint_json.h"
#include "infer_codec.h"
#include "json_reader.h"
#include "json_writer.h"
#include "rollout_verdict.h"
#include "fastpath/protocol/request_policy.h"

namespace fastpath::frontend::http {
namespace {

namespace bhttp = boost::beast::http;

constexpr char kInferHeaderLength[] = "Inference-Header-Content-Length";

// Makes the "exactly once" promise hold even when the safety net fires after a handler
// already replied (or handed the reply to the facade).
class ReplyOnce {
 public:
  explicit ReplyOnce(ReplyFn reply) : reply_(std::move(reply)) {}
  void operator()(HttpReply r) {
    if (!sent_.exchange(true)) reply_(std::move(r));
  }
  bool sent() const { return sent_.load(); }

 private:
  ReplyFn reply_;
  std::atomic<bool> sent_{false};
};

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "/v2/models/m" -> {"v2", "models", "m"}; nullopt for an undecodable segment. Empty
// segments are kept, so "/v2/" does not match "/v2" (Triton's regexes are anchored).
std::optional<std::vector<std::string>> SplitPath(std::string_view target) {
  const size_t query = target.find('?');
  std::string_view path = target.substr(0, query);
  if (path.empty() || path.front() != '/') return std::nullopt;
  path.remove_prefix(1);
  std::vector<std::string> segments;
  while (true) {
    const size_t slash = path.find('/');
    auto decoded = PercentDecode(path.substr(0, slash));
    if (!decoded) return std::nullopt;
    segments.push_back(std::move(*decoded));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return segments;
}

bool IsVersion(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

HttpReply NotFoundReply() { return ErrorReply(404, "Not Found"); }
HttpReply MethodNotAllowedReply() { return ErrorReply(405, "Method Not Allowed"); }

// A body that is absent or empty means "all defaults" (tritonclient sends the index
// request with no body at all); otherwise it must be a JSON object.
Status ParseOptionalObject(std::string& body, std::string_view endpoint, rapidjson::Document* doc) {
  doc->SetObject();
  if (body.find_first_not_of(" \t\r\n") == std::string::npos) return Status::Ok();
  const std::string where = "the " + std::string(endpoint) + " request body";
  if (auto error = ParseJsonInPlace(body.data(), body.size(), doc)) {
    return InvalidArgument(DescribeJsonError(*error, where));
  }
  if (!doc->IsObject()) return InvalidArgument(where + " must be a JSON object");
  return CheckMembersUnique(*doc, where);
}

// Content-Encoding gzip or deflate (zlib), as tritonclient's request compression sends.
// The inflated size is held to the same limit as a plain body.
Status Inflate(std::string* body, size_t limit) {
  z_stream zs{};
  // 15 window bits + 32: accept both the zlib and the gzip wrapper.
  if (inflateInit2(&zs, 15 + 32) != Z_OK) return Internal("cannot initialise zlib");
  std::string out;
  out.resize(std::min<size_t>(limit, std::max<size_t>(body->size() * 4, 4096)));
  zs.next_in = reinterpret_cast<Bytef*>(body->data());
  zs.avail_in = static_cast<uInt>(body->size());
  size_t produced = 0;
  for (;;) {
    if (produced == out.size()) {
      if (out.size() >= limit) {
        inflateEnd(&zs);
        return PayloadTooLarge("the decompressed request body exceeds the limit of " +
                               std::to_string(limit) + " bytes");
      }
      out.resize(std::min(limit, out.size() * 2));
    }
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + produced);
    zs.avail_out = static_cast<uInt>(out.size() - produced);
    int rc = inflate(&zs, Z_NO_FLUSH);
    produced = out.size() - zs.avail_out;
    if (rc == Z_STREAM_END) {
      if (zs.avail_in == 0) break;
      // More follows: a gzip body may be several members, each inflated in turn (RFC 1952
      // §2.2); bytes that are no member are an error, not dropped.
      inflateReset(&zs);
      continue;
    }
    if (rc == Z_BUF_ERROR && zs.avail_in == 0) rc = Z_DATA_ERROR;  // truncated stream
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      inflateEnd(&zs);
      return InvalidArgument(std::string("the request body is not valid compressed data: ") +
                             (zs.msg ? zs.msg : "truncated"));
    }
  }
  inflateEnd(&zs);
  out.resize(produced);
  *body = std::move(out);
  return Status::Ok();
}

Status DecodeContentEncoding(Request& request, size_t limit) {
  auto it = request.find(bhttp::field::content_encoding);
  if (it == request.end()) return Status::Ok();
  const boost::beast::string_view enc = it->value();
  if (enc.empty() || boost::beast::iequals(enc, "identity")) return Status::Ok();
  if (boost::beast::iequals(enc, "gzip") || boost::beast::iequals(enc, "deflate")) {
    return Inflate(&request.body(), limit);
  }
  return InvalidArgument("unsupported Content-Encoding '" + std::string(enc) +
                         "'; fastpath accepts gzip, deflate and identity");
}

StatusOr<std::optional<size_t>> ParseInferHeaderLength(const Request& request) {
  auto it = request.find(kInferHeaderLength);
  if (it == request.end()) return std::optional<size_t>();
  std::string_view v(it->value().data(), it->value().size());
  size_t n = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size()) {
    return InvalidArgument(std::string(kInferHeaderLength) +
                           " must be a non-negative integer, got '" + std::string(v) + "'");
  }
  return std::optional<size_t>(n);
}

}  // namespace

std::optional<std::string> PercentDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    if (i + 2 >= s.size()) return std::nullopt;
    const int hi = HexValue(s[i + 1]);
    const int lo = HexValue(s[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

HttpReply JsonReply(unsigned status, std::string body) {
  HttpReply r;
  r.status = status;
  r.content_type = "application/json";
  r.body = std::move(body);
  return r;
}

HttpReply ErrorReply(unsigned status, std::string_view message) {
  return JsonReply(status, ErrorJson(message));
}

HttpReply ErrorReply(const Status& status) {
  HttpReply reply =
      ErrorReply(static_cast<unsigned>(HttpStatusFor(status.code())), status.message());
  if (status.code() == StatusCode::kResourceExhausted) reply.retry_after_s = 1;
  return reply;
}

EndpointRouter::EndpointRouter(server::InferenceServer& server, size_t max_body_bytes,
                               RolloutVerdictEndpoint& verdict)
    : server_(server), max_body_bytes_(max_body_bytes), verdict_(verdict) {}

void EndpointRouter::Handle(Request&& request, ReplyFn reply, ClientGone client_gone) {
  auto once = std::make_shared<ReplyOnce>(std::move(reply));
  ReplyFn reply_once = [once](HttpReply r) { (*once)(std::move(r)); };
  try {
    Route(request, reply_once, client_gone);
  } catch (const std::exception& e) {
    (*once)(ErrorReply(500, std::string("internal error: ") + e.what()));
  } catch (...) {
    (*once)(ErrorReply(500, "internal error"));
  }
}

void EndpointRouter::Route(Request& request, const ReplyFn& reply, const ClientGone& client_gone) {
  auto segments_or = SplitPath(std::string_view(request.target().data(), request.target().size()));
  if (!segments_or || segments_or->empty() || (*segments_or)[0] != "v2") {
    return reply(NotFoundReply());
  }
  const std::vector<std::string>& s = *segments_or;
  const bhttp::verb method = request.method();
  const bool get = method == bhttp::verb::get;
  const bool post = method == bhttp::verb::post;
  // Every body may come compressed, as Triton accepts (an inference request's JSON header
  // length then counts the inflated bytes).
  if (post) {
    if (Status s = DecodeContentEncoding(request, max_body_bytes_); !s.ok()) {
      return reply(ErrorReply(s));
    }
  }

  // /v2 and /v2/health/{live,ready}
  if (s.size() == 1) {
    if (!get) return reply(MethodNotAllowedReply());
    return reply(JsonReply(200, ServerMetadataJson(server_.Metadata())));
  }
  if (s.size() == 3 && s[1] == "health" && (s[2] == "live" || s[2] == "ready")) {
    if (!get) return reply(MethodNotAllowedReply());
    const bool ok = s[2] == "live" ? server_.IsLive() : server_.IsReady();
    // Ready: no body, as Triton. Not ready is 503 (Triton says 400): "try another replica"
    // is what a readiness failure means, and load balancers read 503 that way. Its body
    // says why (the admission report's reasons that make it not ready), for whoever reads
    // a failed probe.
    if (!ok && s[2] == "ready") {
      std::string why;
      for (const std::string& reason : server_.Admission().unready_because) {
        why += (why.empty() ? "" : "; ") + reason;
      }
      if (why.empty()) why = "see /v2/health/admission";
      return reply(ErrorReply(503, "not ready: " + why));
    }
    HttpReply r;
    r.status = ok ? 200 : 503;
    return reply(std::move(r));
  }

  // /v2/health/admission (issue 4 §6): why the server is or is not ready, always 200 with
  // the report; /v2/health/ready stays the probe.
  if (s.size() == 3 && s[1] == "health" && s[2] == "admission") {
    if (!get) return reply(MethodNotAllowedReply());
    return reply(JsonReply(200, admission::ReportToJson(server_.Admission())));
  }

  // /v2/rollout/verdict (issue 12 §3): GET for Argo's web provider, POST for Flagger's
  // webhooks; the measurement runs off the event loop (rollout_verdict.h).
  if (s[1] == "rollout") {
    if (s.size() != 3 || s[2] != "verdict") return reply(NotFoundReply());
    if (!get && !post) return reply(MethodNotAllowedReply());
    return verdict_.Handle(request, reply);
  }

  if (s[1] == "repository") {
    // Triton's paths take an optional repository name, /v2/repository[/NAME]/index and
    // /v2/repository[/NAME]/models/M/load, and answer for all repositories whatever it is:
    // so does fastpath, whose repositories are served as one.
    const size_t at =
        (s.size() == 4 && s[3] == "index") || (s.size() == 6 && s[3] == "models") ? 3 : 2;
    if (s.size() == at + 1 && s[at] == "index") {
      if (!post) return reply(MethodNotAllowedReply());
      return HandleRepositoryIndex(request, reply);
    }
    if (s.size() == at + 3 && s[at] == "models" && !s[at + 1].empty() &&
        (s[at + 2] == "load" || s[at + 2] == "unload")) {
      if (!post) return reply(MethodNotAllowedReply());
      return HandleRepositoryControl(request, s[at + 1], s[at + 2] == "load", reply);
    }
    return reply(NotFoundReply());
  }

  // Triton's extensions that fastpath does not implement, answered as request_policy.h says
  // rather than with a bare 404.
  if (s[1] == "systemsharedmemory" || s[1] == "cudasharedmemory") {
    const auto kind = s[1] == "systemsharedmemory" ? protocol::SharedMemory::kSystem
                                                   : protocol::SharedMemory::kCuda;
    const bool named = s.size() >= 4 && s[2] == "region" && !s[3].empty();
    const std::string_view action = s.back();
    if (s.size() != (named ? 5u : 3u)) return reply(NotFoundReply());
    if (action == "status") {
      if (!get) return reply(MethodNotAllowedReply());
      if (named) return reply(ErrorReply(protocol::SharedMemoryRegionNotFound(kind, s[3])));
      return reply(JsonReply(200, "[]"));
    }
    if (action == "unregister") {
      if (!post) return reply(MethodNotAllowedReply());
      HttpReply r;
      r.status = 200;
      return reply(std::move(r));
    }
    if (action == "register" && named) {
      if (!post) return reply(MethodNotAllowedReply());
      return reply(ErrorReply(protocol::SharedMemoryRegisterRefused(kind)));
    }
    return reply(NotFoundReply());
  }
  const bool trace = s.back() == "setting" && s[s.size() - 2] == "trace" &&
                     (s.size() == 3 || (s.size() == 5 && s[1] == "models"));
  if (trace || (s.size() == 2 && s[1] == "logging")) {
    if (!get && !post) return reply(MethodNotAllowedReply());
    return reply(ErrorReply(
        protocol::SettingsRefused(trace ? protocol::Settings::kTrace : protocol::Settings::kLog)));
  }

  if (s[1] != "models" || s.size() < 3 || s[2].empty()) return reply(NotFoundReply());
  // Triton checks this path before treating "stats" as a model name.
  if (s.size() == 3 && s[2] == "stats") {
    if (!get) return reply(MethodNotAllowedReply());
    auto stats = server_.GetModelStatistics("", "");
    if (!stats.ok()) return reply(ErrorReply(stats.status()));
    return reply(JsonReply(200, ModelStatisticsJson(*stats)));
  }

  // /v2/models/{m}[/versions/{v}][/{infer,ready,config,stats}], /v2/models/{m}/rollout
  const std::string& model = s[2];
  std::string version;
  size_t next = 3;
  if (s.size() >= 5 && s[3] == "versions") {
    if (!IsVersion(s[4])) return reply(NotFoundReply());
    version = s[4];
    next = 5;
  }
  if (s.size() > next + 1) return reply(NotFoundReply());
  const std::string action = s.size() == next + 1 ? s[next] : "";

  if (action.empty()) {
    if (!get) return reply(MethodNotAllowedReply());
    auto metadata = server_.GetModelMetadata(model, version);
    if (!metadata.ok()) return reply(ErrorReply(metadata.status()));
    return reply(JsonReply(200, ModelMetadataJson(*metadata)));
  }
  if (action == "infer") {
    if (!post) return reply(MethodNotAllowedReply());
    return HandleInfer(request, model, version, reply, client_gone);
  }
  if (action == "ready") {
    if (!get) return reply(MethodNotAllowedReply());
    auto ready = server_.IsModelReady(model, version);
    if (!ready.ok()) return reply(ErrorReply(ready.status()));
    // Triton's words; 503 rather than Triton's 400 for the same reason as /v2/health/ready.
    if (!*ready) return reply(ErrorReply(503, "Model version not ready"));
    HttpReply r;
    r.status = 200;
    return reply(std::move(r));
  }
  if (action == "config") {
    if (!get) return reply(MethodNotAllowedReply());
    auto config = server_.GetModelConfig(model, version);
    if (!config.ok()) return reply(ErrorReply(config.status()));
    auto json = ModelConfigJson(*config);
    if (!json.ok()) return reply(ErrorReply(json.status()));
    return reply(JsonReply(200, std::move(*json)));
  }
  if (action == "rollout" && version.empty()) {
    if (!get) return reply(MethodNotAllowedReply());
    auto history = server_.RolloutHistory(model);
    if (!history.ok()) return reply(ErrorReply(history.status()));
    return reply(JsonReply(200, RolloutHistoryJson(model, *history)));
  }
  if (action == "stats") {
    if (!get) return reply(MethodNotAllowedReply());
    auto stats = server_.GetModelStatistics(model, version);
    if (!stats.ok()) return reply(ErrorReply(stats.status()));
    return reply(JsonReply(200, ModelStatisticsJson(*stats)));
  }
  if (action == "generate" || action == "generate_stream") {
    if (!post) return reply(MethodNotAllowedReply());
    return reply(ErrorReply(Unimplemented(
        "the generate extension is not supported: send a KServe inference request to infer")));
  }
  return reply(NotFoundReply());
}

void EndpointRouter::HandleInfer(Request& request, const std::string& model,
                                 const std::string& version, const ReplyFn& reply,
                                 const ClientGone& client_gone) {
  auto header_length = ParseInferHeaderLength(request);
  if (!header_length.ok()) return reply(ErrorReply(header_length.status()));

  InferCodecLimits limits;
  // No encoding spends less than a byte per element, so a shape with more elements than
  // the largest acceptable body cannot be honest.
  limits.max_elements = static_cast<int64_t>(std::max<size_t>(max_body_bytes_, 1));
  auto decoded = DecodeInferRequest(request.body(), *header_length, limits);
  if (!decoded.ok()) return reply(ErrorReply(decoded.status()));
  // The body is no longer needed: free it before the (possibly long) inference.
  std::string().swap(request.body());

  InferRequest infer = std::move(decoded->request);
  infer.model_name = model;
  infer.model_version = version;
  infer.cancelled = client_gone;
  // This is an event-loop thread: the scheduler may run a short model on it when an
  // instance is idle, which spares the request two thread hand-offs.
  infer.caller_may_run_model = true;
  std::string request_id = infer.id;
  server_.InferAsync(std::move(infer), [reply, encoding = std::move(decoded->encoding), model,
                                        request_id](StatusOr<InferResponse> result) {
    // Runs on the facade's thread: its own safety net, since the router's has returned.
    try {
      if (!result.ok()) return reply(ErrorReply(result.status()));
      InferResponse& response = *result;
      if (response.id.empty()) response.id = request_id;
      if (response.model_name.empty()) response.model_name = model;
      auto encoded = EncodeInferResponse(response, encoding);
      if (!encoded.ok()) return reply(ErrorReply(encoded.status()));
      HttpReply r;
      r.status = 200;
      if (encoded->has_binary) {
        r.content_type = "application/octet-stream";
        r.inference_header_length = encoded->json_length;
      } else {
        r.content_type = "application/json";
      }
      r.body = std::move(encoded->body);
      reply(std::move(r));
    } catch (const std::exception& e) {
      reply(ErrorReply(500, std::string("internal error: ") + e.what()));
    } catch (...) {
      reply(ErrorReply(500, "internal error"));
    }
  });
}

void EndpointRouter::HandleRepositoryIndex(Request& request, const ReplyFn& reply) {
  rapidjson::Document doc;
  if (Status s = ParseOptionalObject(request.body(), "repository index", &doc); !s.ok()) {
    return reply(ErrorReply(s));
  }
  bool ready_only = false;
  auto it = doc.FindMember("ready");
  if (it != doc.MemberEnd()) {
    if (!it->value.IsBool()) {
      return reply(ErrorReply(InvalidArgument("'ready' must be true or false")));
    }
    ready_only = it->value.GetBool();
  }
  reply(JsonReply(200, RepositoryIndexJson(server_.RepositoryIndex(ready_only))));
}

void EndpointRouter::HandleRepositoryControl(Request& request, const std::string& model, bool load,
                                             const ReplyFn& reply) {
  const char* endpoint = load ? "model load" : "model unload";
  rapidjson::Document doc;
  if (Status s = ParseOptionalObject(request.body(), endpoint, &doc); !s.ok()) {
    return reply(ErrorReply(s));
  }
  Parameters parameters;
  if (auto params = doc.FindMember("parameters"); params != doc.MemberEnd()) {
    if (Status s = DecodeParameters(params->value, "'parameters'", &parameters); !s.ok()) {
      return reply(ErrorReply(s));
    }
  }
  // What a load or unload may ask is decided below both front ends.
  bool unload_dependents = false;
  LoadOverride override;
  if (Status s = load ? protocol::CheckLoadParameters(parameters, protocol::FileEncoding::kBase64,
                                                      &override)
                      : protocol::CheckUnloadParameters(parameters, &unload_dependents);
      !s.ok()) {
    return reply(ErrorReply(s));
  }
  // The facade's control pool runs it, off the event loop.
  auto answer = [reply](Status s) { reply(s.ok() ? JsonReply(200, "") : ErrorReply(s)); };
  if (load) {
    server_.LoadModelAsync(model, std::move(override), std::move(answer));
  } else {
    server_.UnloadModelAsync(model, unload_dependents, std::move(answer));
  }
}

}  // namespace fastpath::frontend::http
