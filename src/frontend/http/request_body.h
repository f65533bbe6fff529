// The HTTP front end's request body (http_server.cc): a std::string that reserves its
// room as the body arrives, not all the announced length at once.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/buffer_traits.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/optional.hpp>

#include "infer_codec.h"

namespace fastpath::frontend::http {

// What a body with a known length reserves before any of it arrives (see RequestBody).
inline constexpr size_t kBodyFirstReserveBytes = 1024 * 1024;

// A request body read into a std::string, as Beast's string_body reads it but for the
// reservation. string_body reserves the whole Content-Length as soon as the header is
// read: 100 clients that each announced 64 MB and sent nothing held 6.4 GB of address
// space, outside the bound on request bytes in flight (which counts bytes as they come);
// under `ulimit -v` other clients' requests then failed to allocate. Here a body reserves
// at most 1 MiB up front and grows by doubling as it arrives, so what it holds stays below
// twice what came plus 1 MiB; the last step reserves the announced length exactly. Each
// reservation leaves the codec's padding after the body (kInferBodyPadding), so that the
// JSON fast path never copies the body to make room.
struct RequestBody {
  using value_type = std::string;
  static uint64_t size(const value_type& body) { return body.size(); }

  class reader {
   public:
    template <bool isRequest, class Fields>
    reader(boost::beast::http::header<isRequest, Fields>& /*header*/, value_type& body) : body_(body) {}

    void init(const boost::optional<uint64_t>& length, boost::beast::error_code& ec) {
      ec = {};
      if (!length) return;
      if (*length > body_.max_size() - kInferBodyPadding) {
        ec = boost::beast::http::error::buffer_overflow;
        return;
      }
      announced_ = *length;
      body_.reserve(std::min<uint64_t>(announced_, kBodyFirstReserveBytes) + kInferBodyPadding);
    }

    template <class ConstBufferSequence>
    size_t put(const ConstBufferSequence& buffers, boost::beast::error_code& ec) {
      const size_t extra = boost::beast::buffer_bytes(buffers);
      const size_t size = body_.size();
      if (extra > body_.max_size() - kInferBodyPadding - size) {
        ec = boost::beast::http::error::buffer_overflow;
        return 0;
      }
      const size_t needed = size + extra;
      if (needed + kInferBodyPadding > body_.capacity()) {
        size_t room = std::max(needed, 2 * body_.capacity());
        if (announced_ >= needed) room = std::min<uint64_t>(room, announced_);
        body_.reserve(room + kInferBodyPadding);
      }
      body_.resize(needed);
      boost::asio::buffer_copy(boost::asio::buffer(body_.data() + size, extra), buffers);
      ec = {};
      return extra;
    }

    void finish(boost::beast::error_code& ec) { ec = {}; }

   private:
    value_type& body_;
    uint64_t announced_ = 0;  // the Content-Length; 0 when chunked
  };
};

}  // namespace fastpath::frontend::http
