#include "fastpath/onnxruntime/tensorrt/engine_cache.h"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <fstream>
#include <memory>
#include <sstream>
#include <system_error>

#include "fastpath/backend/backend.h"

namespace fastpath::onnxruntime {

using backend::EngineCacheOptions;
using backend::ExecutionProvider;
using backend::InstanceOptions;

namespace {

namespace fs = std::filesystem;

// SHA-256 through OpenSSL's EVP interface (libcrypto, already a dependency of gRPC).
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) {
    ok_ = ctx_ != nullptr && EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) == 1;
  }
  void Update(const void* data, size_t size) {
    ok_ = ok_ && EVP_DigestUpdate(ctx_.get(), data, size) == 1;
  }
  StatusOr<std::string> HexDigest() {
    std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
    unsigned int size = 0;
    ok_ = ok_ && EVP_DigestFinal_ex(ctx_.get(), digest.data(), &size) == 1;
    if (!ok_) return Internal("OpenSSL could not compute a SHA-256");
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (unsigned int i = 0; i < size; ++i) {
      out += kHex[digest[i] >> 4];
      out += kHex[digest[i] & 0xf];
    }
    return out;
  }

 private:
  struct Free {
    void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
  };
  std::unique_ptr<EVP_MD_CTX, Free> ctx_;
  bool ok_ = false;
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
  hash.Update(data.data(), data.size());
  // Only an OpenSSL without SHA-256 fails here; a key id must still be deterministic.
  StatusOr<std::string> hex = hash.HexDigest();
  return hex.ok() ? *std::move(hex) : "sha256-unavailable";
}

StatusOr<std::string> Sha256File(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read '" + path.string() + "' to hash it");
  Sha256 hash;
  std::array<char, 1 << 16> buffer;
  while (in) {
    in.read(buffer.data(), buffer.size());
    hash.Update(buffer.data(), static_cast<size_t>(in.gcount()));
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

int CountEngineFiles(const fs::path& dir) {
  std::error_code ec;
  int count = 0;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".engine" && it->is_regular_file(ec)) ++count;
  }
  return count;
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

}  // namespace fastpath::onnxruntime
