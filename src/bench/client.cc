// The transport-neutral half of client.h: flag parsing (--protocol, --encoding, --url,
// --shape) and the deterministic request inputs (MakeInputs). Each transport has its own
// file: http_client.cc, grpc_client.cc, in_process_client.cc.
#include "fastpath/bench/client.h"

#include <algorithm>
#include <charconv>

#include "client_internal.h"
#include "fastpath/bench/measurement.h"

namespace fastpath::bench {

StatusOr<Transport> ParseTransport(std::string_view text) {
  if (text == "http") return Transport::kHttp;
  if (text == "grpc") return Transport::kGrpc;
  return InvalidArgument("--protocol must be http or grpc, not '" + std::string(text) + "'");
}
StatusOr<Encoding> ParseEncoding(std::string_view text) {
  if (text == "json") return Encoding::kJson;
  if (text == "binary") return Encoding::kBinary;
  return InvalidArgument("--encoding must be json or binary, not '" + std::string(text) + "'");
}
const char* TransportName(Transport transport) {
  return transport == Transport::kGrpc ? "grpc" : "http";
}
const char* EncodingName(Encoding encoding) {
  return encoding == Encoding::kJson ? "json" : "binary";
}

StatusOr<ServerAddress> ParseAddress(std::string_view url, int default_port) {
  std::string_view rest = url;
  if (const size_t end = rest.find("://"); end != std::string_view::npos) {
    const std::string_view scheme = rest.substr(0, end);
    if (scheme != "http" && scheme != "grpc") {
      return InvalidArgument("--url '" + std::string(url) + "': '" + std::string(scheme) +
                             "://' is not spoken here (plain http:// or grpc://, or no scheme)");
    }
    rest.remove_prefix(end + 3);
  }
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (const size_t slash = rest.find('/'); slash != std::string_view::npos) {
    return InvalidArgument("--url '" + std::string(url) + "': a server's address has no path ('" +
                           std::string(rest.substr(slash)) + "'); give HOST:PORT");
  }
  ServerAddress address;
  address.port = default_port;
  std::string_view port_text;
  if (!rest.empty() && rest.front() == '[') {
    const size_t close = rest.find(']');
    if (close == std::string_view::npos)
      return InvalidArgument("--url '" + std::string(url) + "': unclosed '['");
    address.host = std::string(rest.substr(1, close - 1));
    rest.remove_prefix(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':')
        return InvalidArgument("--url '" + std::string(url) + "': expected ':port' after ']'");
      port_text = rest.substr(1);
    }
  } else {
    const size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos) {
      address.host = std::string(rest);
    } else {
      address.host = std::string(rest.substr(0, colon));
      port_text = rest.substr(colon + 1);
    }
  }
  if (address.host.empty()) return InvalidArgument("--url '" + std::string(url) + "' has no host");
  if (!port_text.empty() || rest.find(':') != std::string_view::npos) {
    int port = 0;
    auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (port_text.empty() || ec != std::errc() || ptr != port_text.data() + port_text.size() ||
        port < 1 || port > 65535) {
      return InvalidArgument("--url '" + std::string(url) + "': the port must be in [1, 65535]");
    }
    address.port = port;
  }
  return address;
}

StatusOr<std::pair<std::string, std::vector<int64_t>>> ParseShapeOverride(std::string_view text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size()) {
    return InvalidArgument("--shape must be NAME:D1,D2,... (e.g. image:3,224,224), not '" +
                           std::string(text) + "'");
  }
  std::pair<std::string, std::vector<int64_t>> out;
  out.first = std::string(text.substr(0, colon));
  std::string_view dims = text.substr(colon + 1);
  size_t start = 0;
  while (start <= dims.size()) {
    size_t comma = dims.find(',', start);
    std::string_view part = dims.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    int64_t d = 0;
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), d);
    if (part.empty() || ec != std::errc() || ptr != part.data() + part.size() || d < 1) {
      return InvalidArgument("--shape " + std::string(text) + ": '" + std::string(part) +
                             "' is not a positive dimension");
    }
    out.second.push_back(d);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

namespace internal {

std::string Truncate(std::string s, size_t n) {
  if (s.size() > n) s = s.substr(0, n) + "...";
  return s;
}

std::chrono::nanoseconds Patience(std::chrono::nanoseconds slowest) {
  return std::clamp<std::chrono::nanoseconds>(2 * slowest, std::chrono::seconds(1),
                                              std::chrono::minutes(1));
}

std::optional<InferOutcome> GiveUp(std::chrono::steady_clock::time_point sent,
                                   std::chrono::steady_clock::time_point stopped,
                                   std::chrono::steady_clock::time_point now,
                                   std::chrono::nanoseconds patience) {
  if (stopped - sent <= patience) return std::nullopt;
  auto ms = [](auto d) {
    return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
  };
  return InferOutcome{false, kUnanswered,
                      "no answer " + ms(now - sent) + " ms after it was sent (" +
                          ms(stopped - sent) + " ms of them before the run ended): the server " +
                          "stopped answering"};
}

}  // namespace internal

namespace {

constexpr int64_t kMaxRequestElements = int64_t{1} << 28;

void FillData(Tensor* t, int64_t count, uint64_t seed) {
  uint64_t state = seed;
  auto put = [&](const auto& v) {
    const char* p = reinterpret_cast<const char*>(&v);
    t->data.append(p, sizeof(v));
  };
  switch (t->dtype) {
    case DataType::kFp32:
      for (int64_t i = 0; i < count; ++i) put(static_cast<float>(UniformDouble(&state) * 2 - 1));
      break;
    case DataType::kFp64:
      for (int64_t i = 0; i < count; ++i) put(UniformDouble(&state) * 2 - 1);
      break;
    case DataType::kFp16:
      for (int64_t i = 0; i < count; ++i) put(uint16_t{0x3C00});
      break;
    case DataType::kBf16:
      for (int64_t i = 0; i < count; ++i) put(uint16_t{0x3F80});
      break;
    case DataType::kBool:
      for (int64_t i = 0; i < count; ++i) put(static_cast<uint8_t>(i % 2));
      break;
    case DataType::kBytes:
      for (int64_t i = 0; i < count; ++i)
        AppendBytesElement(&t->data, "fastpath-" + std::to_string(SplitMix64(&state) % 1000));
      break;
    default: {
      const size_t size = ElementSize(t->dtype);
      for (int64_t i = 0; i < count; ++i) {
        const uint64_t v = SplitMix64(&state) % 100;
        t->data.append(reinterpret_cast<const char*>(&v), size);  // little-endian low bytes
      }
    }
  }
}

}  // namespace

StatusOr<std::vector<Tensor>> MakeInputs(const ModelMetadata& metadata,
                                         const std::map<std::string, std::vector<int64_t>>& shapes,
                                         int64_t batch_size, uint64_t seed,
                                         uint64_t request_index) {
  for (const auto& [name, dims] : shapes) {
    bool found = false;
    for (const auto& in : metadata.inputs) found = found || in.name == name;
    if (!found) {
      std::string names;
      for (const auto& in : metadata.inputs) names += (names.empty() ? "" : ", ") + in.name;
      return InvalidArgument("--shape names input '" + name +
                             "', which the model does not have (inputs: " + names + ")");
    }
  }
  std::vector<Tensor> out;
  uint64_t position = 0;
  for (const auto& in : metadata.inputs) {
    Tensor t;
    t.name = in.name;
    t.dtype = in.dtype;
    t.shape = in.dims;
    // A leading -1 is the batch, unless the config says the model does not batch: then it is
    // a dim of its own, which --shape gives.
    const bool batched = metadata.max_batch_size != 0 && !t.shape.empty() && t.shape[0] == -1;
    if (auto it = shapes.find(in.name); it != shapes.end()) {
      if (it->second.size() == in.dims.size()) {
        t.shape = it->second;
        // The leading dynamic dim is where -b goes: a different value there would be
        // replaced without a word.
        if (batched && t.shape[0] != batch_size) {
          return InvalidArgument("--shape " + in.name + ": the first dim of the model's shape " +
                                 ShapeToString(in.dims) + " is the batch, which -b sets (" +
                                 std::to_string(batch_size) + "), not " +
                                 std::to_string(t.shape[0]) + ": give -b " +
                                 std::to_string(t.shape[0]) + ", or the dims after the batch");
        }
      } else if (batched && it->second.size() + 1 == in.dims.size()) {
        t.shape = {batch_size};
        t.shape.insert(t.shape.end(), it->second.begin(), it->second.end());
      } else {
        return InvalidArgument(
            "--shape " + in.name + ": the model's shape is " + ShapeToString(in.dims) +
            ", so give " + std::to_string(in.dims.size()) + " dims" +
            (batched ? " (or " + std::to_string(in.dims.size() - 1) + " without the batch dim)"
                     : ""));
      }
      for (size_t i = 0; i < in.dims.size() && i < t.shape.size(); ++i) {
        if (in.dims[i] >= 0 && t.shape[i] != in.dims[i] && !(batched && i == 0)) {
          return InvalidArgument("--shape " + in.name + ": dim " + std::to_string(i) +
                                 " is fixed at " + std::to_string(in.dims[i]) +
                                 " by the model, not " + std::to_string(t.shape[i]));
        }
      }
    } else if (batched) {
      t.shape[0] = batch_size;
    }
    for (int64_t d : t.shape) {
      if (d < 0) {
        return InvalidArgument("input '" + in.name + "' has shape " + ShapeToString(in.dims) +
                               (batched ? " with a dynamic dim besides the batch"
                                        : " with a dynamic dim (the model does not batch)") +
                               ": give it with --shape " + in.name + ":D1,D2,...");
      }
    }
    FASTPATH_ASSIGN_OR_RETURN(int64_t count, ElementCount(t.shape, kMaxRequestElements));
    // Each (seed, request, input) has its own stream.
    uint64_t stream = seed;
    SplitMix64(&stream);
    stream ^= (request_index + 1) * 0x9e3779b97f4a7c15ULL + (position++ << 32);
    FillData(&t, count, stream);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace fastpath::bench
