// One-shot HTTP/1.1 exchanges with a server: a new connection for each request, and one
// deadline for connecting, sending and reading. They are for what is asked once and untimed
// (the soak's metrics scrape; `fastpath gate`'s model config, admission report and outputs),
// beside the timed sessions of client.h, which keep their connections, have no deadline and
// discard what the server answers.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "fastpath/bench/client.h"
#include "fastpath/common/status.h"
#include "fastpath/common/tensor.h"

namespace fastpath::bench {

// "http://host:port" ("[::1]" for an IPv6 host).
std::string DescribeServer(const ServerAddress& server);

// GET `path`: the body of a 200 answer. Unavailable otherwise, naming "GET http://host:port
// path" and saying why (cannot resolve or connect, no answer within `timeout`, the status
// and the start of the body). `accept`, when not empty, is sent as the Accept header.
StatusOr<std::string> GetOnce(const ServerAddress& server, const std::string& path,
                              std::chrono::milliseconds timeout, const std::string& accept = "",
                              uint64_t body_limit = uint64_t{64} << 20);

// One KServe v2 inference of `model` with `inputs`, asking for `outputs`, all in the binary
// tensor extension, and the outputs it answered, decoded. Unavailable when no answer came
// within `timeout`; FailedPrecondition when the server answered an error, or an output as
// JSON (the server must support the binary tensor extension); Internal when the answer is
// not a KServe v2 response.
StatusOr<std::vector<Tensor>> InferOnce(const ServerAddress& server, const std::string& model,
                                        const std::vector<Tensor>& inputs,
                                        const std::vector<std::string>& outputs,
                                        std::chrono::milliseconds timeout);

}  // namespace fastpath::bench
