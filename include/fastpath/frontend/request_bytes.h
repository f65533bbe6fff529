// The request bytes both front ends hold at once: HTTP bodies being read or served, gRPC
// request messages being served. One bound for the process, shared by the two front ends,
// so that a burst of large requests over either protocol, or both, cannot run it out of
// memory. A request that would pass the bound is refused (HTTP 503 with Retry-After, gRPC
// RESOURCE_EXHAUSTED) and holds nothing. `fastpath serve` sizes it from the memory the
// process may use (--max-request-bytes-in-flight).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace fastpath::frontend {

class RequestBytes {
 public:
  explicit RequestBytes(uint64_t limit) : limit_(limit) {}
  RequestBytes(const RequestBytes&) = delete;
  RequestBytes& operator=(const RequestBytes&) = delete;

  // Takes `bytes`; false, taking nothing, when that would pass the limit. Any thread.
  [[nodiscard]] bool TryTake(uint64_t bytes) {
    uint64_t held = held_.load(std::memory_order_relaxed);
    do {
      if (held + bytes > limit_) return false;
    } while (!held_.compare_exchange_weak(held, held + bytes, std::memory_order_relaxed));
    return true;
  }
  // Gives back what TryTake took. Any thread.
  void Release(uint64_t bytes) { held_.fetch_sub(bytes, std::memory_order_relaxed); }

  uint64_t limit() const { return limit_; }
  uint64_t held() const { return held_.load(std::memory_order_relaxed); }

  // A refused request's answer: `these` names its bytes ("this one's 3000 bytes").
  std::string Refusal(const std::string& these) const {
    return "the server holds " + std::to_string(held()) +
           " bytes of requests read or being served, and " + these + " would pass its limit of " +
           std::to_string(limit_) + " (--max-request-bytes-in-flight); retry";
  }

  // Bytes taken, given back when it is destroyed or reset. Move-only.
  class Hold {
   public:
    Hold() = default;
    Hold(Hold&& other) noexcept
        : owner_(std::exchange(other.owner_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
    Hold& operator=(Hold&& other) noexcept {
      if (this != &other) {
        Reset();
        owner_ = std::exchange(other.owner_, nullptr);
        bytes_ = std::exchange(other.bytes_, 0);
      }
      return *this;
    }
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    ~Hold() { Reset(); }

    void Reset() {
      if (owner_ != nullptr) owner_->Release(bytes_);
      owner_ = nullptr;
      bytes_ = 0;
    }

   private:
    friend class RequestBytes;
    Hold(RequestBytes* owner, uint64_t bytes) : owner_(owner), bytes_(bytes) {}
    RequestBytes* owner_ = nullptr;
    uint64_t bytes_ = 0;
  };

  // TryTake as a Hold; nothing when refused. The Hold must not outlive this.
  [[nodiscard]] std::optional<Hold> TryHold(uint64_t bytes) {
    if (!TryTake(bytes)) return std::nullopt;
    return Hold(this, bytes);
  }

 private:
  const uint64_t limit_;
  std::atomic<uint64_t> held_{0};
};

// What a front end without a bound of its own given uses.
inline constexpr uint64_t kDefaultRequestBytesInFlight = uint64_t{1} << 30;

}  // namespace fastpath::frontend
