#include "fastpath/backend/engine_cache.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>

#include "fastpath/backend/backend.h"

namespace fastpath::backend {
namespace {

namespace fs = std::filesystem;

// SHA-256 (FIPS 180-4), streaming.
class Sha256 {
 public:
  void Update(const unsigned char* data, size_t size) {
    length_ += size;
    while (size > 0) {
      const size_t take = std::min(size, block_.size() - used_);
      std::memcpy(block_.data() + used_, data, take);
      used_ += take;
      data += take;
      size -= take;
      if (used_ == block_.size()) {
        Compress(block_.data());
        used_ = 0;
      }
    }
  }

  std::string HexDigest() {
    const uint64_t bits = length_ * 8;
    const unsigned char pad = 0x80;
    Update(&pad, 1);
    const unsigned char zero = 0;
    while (used_ != 56) Update(&zero, 1);
    unsigned char length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(bits >> (56 - 8 * i));
    Update(length, 8);
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (uint32_t word : state_) {
      for (int shift = 28; shift >= 0; shift -= 4) out += kHex[(word >> shift) & 0xf];
    }
    return out;
  }

 private:
  static uint32_t Rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

  void Compress(const unsigned char* block) {
    static constexpr uint32_t kK[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2};
    uint32_t w[64];
    for (int i = 0; i < 16; ++i) {
      w[i] = uint32_t{block[4 * i]} << 24 | uint32_t{block[4 * i + 1]} << 16 |
             uint32_t{block[4 * i + 2]} << 8 | uint32_t{block[4 * i + 3]};
    }
    for (int i = 16; i < 64; ++i) {
      const uint32_t s0 = Rotr(w[i - 15], 7) ^ Rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const uint32_t s1 = Rotr(w[i - 2], 17) ^ Rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3], e = state_[4],
             f = state_[5], g = state_[6], h = state_[7];
    for (int i = 0; i < 64; ++i) {
      const uint32_t s1 = Rotr(e, 6) ^ Rotr(e, 11) ^ Rotr(e, 25);
      const uint32_t t1 = h + s1 + ((e & f) ^ (~e & g)) + kK[i] + w[i];
      const uint32_t s0 = Rotr(a, 2) ^ Rotr(a, 13) ^ Rotr(a, 22);
      const uint32_t t2 = s0 + ((a & b) ^ (a & c) ^ (b & c));
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    state_[0] += a;
    state_[1] += b;
    state_[2] += c;
    state_[3] += d;
    state_[4] += e;
    state_[5] += f;
    state_[6] += g;
    state_[7] += h;
  }

  std::array<uint32_t, 8> state_ = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  std::array<unsigned char, 64> block_{};
  size_t used_ = 0;
  uint64_t length_ = 0;
};

// The manifest's component names, in Canonical() order.
constexpr std::array<std::string_view, 5> kComponents = {
    "model_sha256", "tensorrt", "compute_capability", "precision", "shape_profile"};

std::array<const std::string*, 5> Fields(const EngineCacheKey& key) {
  return {&key.model_sha256, &key.tensorrt_version, &key.compute_capability, &key.precision,
          &key.shape_profile};
}

std::array<std::string*, 5> MutableFields(EngineCacheKey& key) {
  return {&key.model_sha256, &key.tensorrt_version, &key.compute_capability, &key.precision,
          &key.shape_profile};
}

StatusOr<bool> ParseBool(const std::map<std::string, std::string>& options,
                         const std::string& name) {
  const auto it = options.find(name);
  if (it == options.end()) return false;
  if (it->second == "1" || it->second == "true") return true;
  if (it->second == "0" || it->second == "false") return false;
  return InvalidArgument("TensorRT option '" + name + "' is '" + it->second +
                         "'; it must be 0, 1, true or false");
}

// "component a (here b)" for each component that differs.
std::string Differences(const EngineCacheKey& cached, const EngineCacheKey& wanted) {
  const auto have = Fields(cached);
  const auto want = Fields(wanted);
  std::string out;
  for (size_t i = 0; i < kComponents.size(); ++i) {
    if (*have[i] == *want[i]) continue;
    if (!out.empty()) out += ", ";
    out += std::string(kComponents[i]) + " " + *have[i] + " (here " + *want[i] + ")";
  }
  return out;
}

}  // namespace

std::string Sha256Hex(std::string_view data) {
  Sha256 hash;
  hash.Update(reinterpret_cast<const unsigned char*>(data.data()), data.size());
  return hash.HexDigest();
}

StatusOr<std::string> Sha256File(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read '" + path.string() + "' to hash it");
  Sha256 hash;
  std::array<char, 1 << 16> buffer;
  while (in) {
    in.read(buffer.data(), buffer.size());
    hash.Update(reinterpret_cast<const unsigned char*>(buffer.data()),
                static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) return Internal("reading '" + path.string() + "' failed while hashing it");
  return hash.HexDigest();
}

std::string EngineCacheKey::Canonical() const {
  std::string out;
  const auto fields = Fields(*this);
  for (size_t i = 0; i < kComponents.size(); ++i) {
    out += std::string(kComponents[i]) + ": " + *fields[i] + "\n";
  }
  return out;
}

std::string EngineCacheKey::Id() const { return Sha256Hex(Canonical()).substr(0, 16); }

StatusOr<std::string> TrtPrecision(const std::map<std::string, std::string>& trt_options) {
  FASTPATH_ASSIGN_OR_RETURN(const bool int8, ParseBool(trt_options, "trt_int8_enable"));
  FASTPATH_ASSIGN_OR_RETURN(const bool fp16, ParseBool(trt_options, "trt_fp16_enable"));
  return std::string(int8 ? "int8" : fp16 ? "fp16" : "fp32");
}

StatusOr<std::string> TrtShapeProfile(const std::map<std::string, std::string>& trt_options) {
  std::string profile;
  std::string missing;
  for (const char* which : {"min", "opt", "max"}) {
    const std::string name = std::string("trt_profile_") + which + "_shapes";
    const auto it = trt_options.find(name);
    if (it == trt_options.end() || it->second.empty()) {
      missing += (missing.empty() ? "" : ", ") + name;
      continue;
    }
    profile += (profile.empty() ? "" : ";") + std::string(which) + "=" + it->second;
  }
  if (profile.empty()) return std::string("none");
  if (!missing.empty()) {
    return InvalidArgument(
        "a TensorRT shape profile needs trt_profile_min_shapes, "
        "trt_profile_opt_shapes and trt_profile_max_shapes; missing: " +
        missing);
  }
  return profile;
}

fs::path ModelEngineDir(const EngineCacheOptions& options) {
  return options.root / options.model_name / std::to_string(options.model_version);
}

StatusOr<EngineCacheKey> ReadManifest(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return NotFound("cannot read the engine manifest '" + file.string() + "'");
  EngineCacheKey key;
  auto fields = MutableFields(key);
  std::array<bool, 5> seen{};
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    const size_t colon = line.find(": ");
    const std::string name = line.substr(0, colon);
    const auto it = std::find(kComponents.begin(), kComponents.end(), name);
    if (colon == std::string::npos || it == kComponents.end()) {
      return InvalidArgument("engine manifest '" + file.string() + "' line " +
                             std::to_string(number) + ": '" + line +
                             "' is not one of model_sha256, tensorrt, compute_capability, "
                             "precision, shape_profile followed by ': ' and a value");
    }
    const size_t index = static_cast<size_t>(it - kComponents.begin());
    *fields[index] = line.substr(colon + 2);
    seen[index] = true;
  }
  for (size_t i = 0; i < seen.size(); ++i) {
    if (!seen[i]) {
      return InvalidArgument("engine manifest '" + file.string() + "' has no " +
                             std::string(kComponents[i]) + " line");
    }
  }
  return key;
}

Status WriteManifest(const fs::path& dir, const EngineCacheKey& key) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Internal("cannot create '" + dir.string() + "': " + ec.message());
  const fs::path file = dir / kEngineManifestFile;
  const fs::path tmp = dir / (std::string(kEngineManifestFile) + ".tmp");
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!(out << key.Canonical())) return Internal("cannot write '" + tmp.string() + "'");
  }
  fs::rename(tmp, file, ec);
  if (ec) return Internal("cannot rename '" + tmp.string() + "': " + ec.message());
  return Status::Ok();
}

StatusOr<EngineCacheDecision> ChooseEngineDir(const EngineCacheOptions& options,
                                              const EngineCacheKey& key) {
  EngineCacheDecision decision;
  const fs::path model_dir = ModelEngineDir(options);
  decision.dir = model_dir / key.Id();
  std::error_code ec;
  if (!fs::is_directory(model_dir, ec)) return decision;  // nothing cached yet
  // Every keyed folder with a manifest, in name order so that messages are stable.
  std::vector<fs::path> folders;
  for (const auto& entry : fs::directory_iterator(model_dir, ec)) {
    if (entry.is_directory(ec) && fs::exists(entry.path() / kEngineManifestFile, ec)) {
      folders.push_back(entry.path());
    }
  }
  std::sort(folders.begin(), folders.end());
  std::string others;
  for (const fs::path& folder : folders) {
    FASTPATH_ASSIGN_OR_RETURN(const EngineCacheKey cached,
                              ReadManifest(folder / kEngineManifestFile));
    if (cached == key) {
      decision.dir = folder;
      decision.found = true;
      return decision;
    }
    others +=
        (others.empty() ? "" : "; ") + folder.filename().string() + ": " + Differences(cached, key);
  }
  if (folders.empty()) return decision;
  const std::string reason = "the TensorRT engine cache '" + model_dir.string() +
                             "' holds only engines built under another key (" + others + ")";
  if (!options.rebuild_stale) {
    return FailedPrecondition(reason +
                              "; production never rebuilds them silently: run `fastpath "
                              "build-engines` on a machine like this one, or remove them");
  }
  decision.stale_reason = reason + "; rebuilt under key " + key.Id();
  return decision;
}

StatusOr<TrtEngineCachePlan> PlanTrtEngineCache(const InstanceOptions& options,
                                                const fs::path& model_file) {
  const EngineCacheOptions& cache = options.engine_cache;
  const std::string what = "TensorRT engine cache of model '" + cache.model_name + "' version " +
                           std::to_string(cache.model_version);
  if (cache.tensorrt_version.empty()) {
    return FailedPrecondition(what +
                              ": the TensorRT version is unknown (libnvinfer was not found; "
                              "`fastpath doctor` shows the library search), so no engine can "
                              "be keyed");
  }
  if (cache.compute_capability.empty()) {
    return FailedPrecondition(what + ": the compute capability of GPU " +
                              std::to_string(options.device_id) +
                              " is unknown (the driver does not report it), so no engine can "
                              "be keyed");
  }
  std::map<std::string, std::string> trt_options;
  if (const auto it = options.provider_options.find(ExecutionProvider::kTensorRt);
      it != options.provider_options.end()) {
    trt_options = it->second;
  }
  TrtEngineCachePlan plan;
  FASTPATH_ASSIGN_OR_RETURN(plan.key.model_sha256, Sha256File(model_file));
  plan.key.tensorrt_version = cache.tensorrt_version;
  plan.key.compute_capability = cache.compute_capability;
  FASTPATH_ASSIGN_OR_RETURN(plan.key.precision, TrtPrecision(trt_options));
  FASTPATH_ASSIGN_OR_RETURN(plan.key.shape_profile, TrtShapeProfile(trt_options));
  FASTPATH_ASSIGN_OR_RETURN(plan.decision, ChooseEngineDir(cache, plan.key));
  return plan;
}

}  // namespace fastpath::backend
