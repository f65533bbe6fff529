// The TensorRT engine cache (issue 4 §4): engines are kept per model version in a folder
// keyed by everything that decides whether an engine can be reused, and an engine built
// under another key is never silently rebuilt in production.
//
// Layout, under the cache root (`fastpath serve|build-engines --engine-cache DIR`, by
// default <model repository>/.engine-cache, which the repository scan skips):
//
//   <root>/<model>/<version>/<key id>/             the TensorRT EP's trt_engine_cache_path
//   <root>/<model>/<version>/<key id>/fastpath-engine.manifest
//
// <key id> is the first 16 hex digits of the SHA-256 of the key's canonical text; the
// manifest holds the key's components, one "name: value" line each, and is written once a
// session has built (or loaded) its engines there. A folder without a manifest (a build
// that did not finish) is ignored.
//
// The key functions are pure and the folder checks touch only the file system, so both
// are tested without a GPU.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "fastpath/backend/backend.h"
#include "fastpath/common/status.h"

namespace fastpath::onnxruntime {

// Lower-case hex SHA-256 (FIPS 180-4) of `data`.
std::string Sha256Hex(std::string_view data);
// Of a file's bytes. NotFound / Internal naming the file when it cannot be read.
StatusOr<std::string> Sha256File(const std::filesystem::path& path);

struct EngineCacheKey {
  std::string model_sha256;        // of the ONNX file
  std::string tensorrt_version;    // libnvinfer's, e.g. "10.13.0"
  std::string compute_capability;  // of the instance's GPU, e.g. "9.0"
  std::string precision;           // "fp32", "fp16" or "int8"
  std::string shape_profile;       // "min=...;opt=...;max=...", or "none"

  // "model_sha256: ...\ntensorrt: ...\ncompute_capability: ...\nprecision: ...\n
  // shape_profile: ...\n": the manifest's lines, in this order.
  std::string Canonical() const;
  std::string Id() const;  // first 16 hex digits of Sha256Hex(Canonical())
  bool operator==(const EngineCacheKey&) const = default;
};

// The precision the TensorRT EP builds with, from its provider options: "int8" when
// trt_int8_enable is set, else "fp16" when trt_fp16_enable is, else "fp32". A value other
// than 0, 1, true or false is InvalidArgument naming the option.
StatusOr<std::string> TrtPrecision(const std::map<std::string, std::string>& trt_options);
// The explicit shape profile (trt_profile_min_shapes, _opt_, _max_), or "none". Either all
// three are given or none: otherwise InvalidArgument naming the missing ones.
StatusOr<std::string> TrtShapeProfile(const std::map<std::string, std::string>& trt_options);

// The TensorRT provider options fastpath sets itself (the config may not): the cache
// switch and its folder.
inline constexpr std::string_view kTrtEngineCacheEnable = "trt_engine_cache_enable";
inline constexpr std::string_view kTrtEngineCachePath = "trt_engine_cache_path";
inline constexpr std::string_view kEngineManifestFile = "fastpath-engine.manifest";

// <root>/<model>/<version>
std::filesystem::path ModelEngineDir(const backend::EngineCacheOptions& options);

// Reads a manifest. InvalidArgument naming the file and line when it is malformed.
StatusOr<EngineCacheKey> ReadManifest(const std::filesystem::path& file);
// Writes <dir>/fastpath-engine.manifest (via a temporary file and rename).
[[nodiscard]] Status WriteManifest(const std::filesystem::path& dir, const EngineCacheKey& key);

// The TensorRT engine files (*.engine) in dir. A manifest vouches for engines, so it is
// written only where this is above zero: a model with dynamic shapes and no shape profile
// builds its engines at its first run, not when its session is created.
int CountEngineFiles(const std::filesystem::path& dir);

struct EngineCacheDecision {
  std::filesystem::path dir;  // <root>/<model>/<version>/<key id>: the engines' folder
  bool found = false;         // a manifest with exactly this key is there
  // Set when the cache holds only engines built under other keys, naming each differing
  // component; in dev (rebuild_stale) they are rebuilt and this is the DEGRADED reason.
  std::string stale_reason;
};

// Looks for `key` among the model version's cached engines. Engines built under other
// keys only: FailedPrecondition naming every differing component of each (production),
// or, with options.rebuild_stale, a decision whose stale_reason says so. A manifest that
// cannot be read is an error naming it.
StatusOr<EngineCacheDecision> ChooseEngineDir(const backend::EngineCacheOptions& options,
                                              const EngineCacheKey& key);

// What a "tensorrt" instance's session needs: its key and folder. The key hashes
// `model_file` and takes precision and shape profile from the instance's TensorRT
// options, TensorRT version and compute capability from options.engine_cache (unknown:
// FailedPrecondition saying so, since an engine cannot be keyed without them).
struct TrtEngineCachePlan {
  EngineCacheKey key;
  EngineCacheDecision decision;
};
StatusOr<TrtEngineCachePlan> PlanTrtEngineCache(const backend::InstanceOptions& options,
                                                const std::filesystem::path& model_file);

}  // namespace fastpath::onnxruntime
