// Helpers shared by the bench clients (client.cc, http_client.cc, grpc_client.cc,
// in_process_client.cc); not part of fastpath::bench's interface.
#pragma once

#include <cstddef>
#include <string>

namespace fastpath::bench::internal {

// `s` cut to `n` characters and marked "...": a server's error text as an error sample.
std::string Truncate(std::string s, size_t n = 300);

}  // namespace fastpath::bench::internal
