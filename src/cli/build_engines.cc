// `fastpath build-engines`: prebuilds the TensorRT engines of a model repository as
// artifacts. For every model whose gpu_execution_accelerator lists "tensorrt", every
// version and every GPU of its KIND_GPU instance groups, it creates the instance's session
// with the engine cache pointed at the keyed folder (onnxruntime/tensorrt/engine_cache.h), so that the
// TensorRT EP builds and saves the engines there, and writes the folder's manifest. A
// production `serve` on a machine with the same key then loads them instead of building.
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli.h"
#include "fastpath/gpu/node_snapshot.h"
#include "fastpath/onnxruntime/tensorrt/engine_cache.h"
#include "fastpath/onnxruntime/ort_backend.h"
#include "fastpath/config/model_config.h"
#include "fastpath/gpu/capability_snapshot.h"

namespace fastpath::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kBuildEnginesUsage =
    R"(usage: fastpath build-engines --model-repository DIR [options]

Builds the TensorRT engines of every model that lists "tensorrt" in its
gpu_execution_accelerator, for each version and GPU, into the keyed engine cache
(model sha256, TensorRT version, compute capability, precision, shape profile).

  --model-repository DIR   Triton-layout model repository (required)
  --model NAME             only this model
  --engine-cache DIR       the engine cache root (default DIR/.engine-cache; serve takes
                           the same flag)

Exit codes: 0 built (or already there), 1 a model failed to build, 2 usage,
17 TensorRT cannot be used on this machine (the message names why).
)";

struct BuildFlags {
  fs::path repository;
  std::string model;
  fs::path engine_cache;
};

StatusOr<BuildFlags> ParseFlags(const std::vector<std::string>& args) {
  BuildFlags flags;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::string value;
    if (flag == "--help" || flag == "-h") return FailedPrecondition("help");
    if (auto eq = flag.find('='); eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return InvalidArgument("flag " + flag + " needs a value");
    }
    if (value.empty()) return InvalidArgument("flag " + flag + " needs a value");
    if (flag == "--model-repository") {
      flags.repository = value;
    } else if (flag == "--model") {
      flags.model = value;
    } else if (flag == "--engine-cache") {
      flags.engine_cache = value;
    } else {
      return InvalidArgument("unknown flag " + flag);
    }
  }
  if (flags.repository.empty()) return InvalidArgument("--model-repository is required");
  return flags;
}

bool ListsTensorRt(const inference::ModelConfig& config) {
  for (const auto& accelerator :
       config.optimization().execution_accelerators().gpu_execution_accelerator()) {
    if (accelerator.name() == backend::ExecutionProviderName(backend::ExecutionProvider::kTensorRt))
      return true;
  }
  return false;
}

StatusOr<inference::ModelConfig> ReadConfig(const fs::path& model_dir) {
  std::ifstream in(model_dir / "config.pbtxt", std::ios::binary);
  if (!in) return NotFound("cannot read '" + (model_dir / "config.pbtxt").string() + "'");
  std::stringstream text;
  text << in.rdbuf();
  return config::ParseModelConfig(text.str(), (model_dir / "config.pbtxt").string());
}

// The numeric version folders that hold the model file, in order.
std::vector<int64_t> Versions(const fs::path& model_dir, const std::string& file) {
  std::vector<int64_t> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(model_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory(ec) || name.empty() ||
        !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
        name.size() > 18 || !fs::is_regular_file(entry.path() / file, ec)) {
      continue;
    }
    out.push_back(std::stoll(name));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The KIND_GPU groups engines are built for; a config without instance_group gets
// serve's default (config::DefaultInstanceGroup: the CPU), so none.
std::vector<inference::ModelInstanceGroup> GpuGroups(const inference::ModelConfig& config) {
  std::vector<inference::ModelInstanceGroup> declared(config.instance_group().begin(),
                                                      config.instance_group().end());
  if (declared.empty()) declared.push_back(config::DefaultInstanceGroup());
  std::vector<inference::ModelInstanceGroup> gpu;
  for (const auto& group : declared) {
    if (group.kind() == inference::ModelInstanceGroup::KIND_GPU) gpu.push_back(group);
  }
  return gpu;
}

// Why TensorRT cannot be used here, or empty.
std::string TensorRtUnusable(const gpu::CapabilitySnapshot& snapshot,
                             const backend::EngineCacheOptions& cache) {
  for (const gpu::EpLibraryInfo& library : snapshot.onnxruntime.libraries) {
    if (library.provider != "tensorrt") continue;
    if (!library.error.empty()) return library.error;
    // A plugin EP lists its devices; a provider bridge lists none (its session finds out).
    const bool plugin = library.interface.rfind("plugin", 0) == 0;
    if (plugin && library.devices.empty()) {
      return "the tensorrt execution provider enumerated no device";
    }
  }
  if (!snapshot.onnxruntime.probed || !snapshot.onnxruntime.error.empty()) {
    return "ONNX Runtime could not be probed: " + snapshot.onnxruntime.error;
  }
  if (cache.tensorrt_version.empty()) {
    return "libnvinfer was not found, so the TensorRT version the engines would be keyed by "
           "is unknown";
  }
  return "";
}

}  // namespace

void SetEngineCacheFromSnapshot(const gpu::CapabilitySnapshot& snapshot, const fs::path& repository,
                                const fs::path& engine_cache,
                                repository::RepositoryOptions* options) {
  options->trt_engine_cache.root =
      engine_cache.empty() ? repository / ".engine-cache" : engine_cache;
  for (const gpu::LibraryInfo& library : snapshot.libraries) {
    if (library.name == "tensorrt" && library.found) {
      options->trt_engine_cache.tensorrt_version = library.version;
    }
  }
  for (const gpu::DriverDevice& device : snapshot.driver.devices) {
    if (device.compute_capability_major > 0) {
      options->compute_capabilities[device.ordinal] =
          std::to_string(device.compute_capability_major) + "." +
          std::to_string(device.compute_capability_minor);
    }
  }
}

int BuildEngines(const std::vector<std::string>& args) {
  auto parsed = ParseFlags(args);
  if (!parsed.ok()) {
    if (parsed.status().code() == StatusCode::kFailedPrecondition) {
      std::cout << kBuildEnginesUsage;
      return kExitOk;
    }
    std::cerr << "fastpath build-engines: " << parsed.status().message() << "\n\n"
              << kBuildEnginesUsage;
    return kExitUsage;
  }
  const BuildFlags& flags = *parsed;
  std::error_code ec;
  if (!fs::is_directory(flags.repository, ec)) {
    std::cerr << "fastpath build-engines: model repository '" << flags.repository.string()
              << "' is not a directory\n";
    return kExitUsage;
  }
  std::vector<std::string> models;
  if (!flags.model.empty()) {
    if (!fs::exists(flags.repository / flags.model / "config.pbtxt", ec)) {
      std::cerr << "fastpath build-engines: model '" << flags.model << "' has no config.pbtxt in '"
                << flags.repository.string() << "'\n";
      return kExitUsage;
    }
    models.push_back(flags.model);
  } else {
    for (const auto& entry : fs::directory_iterator(flags.repository, ec)) {
      const std::string name = entry.path().filename().string();
      if (entry.is_directory(ec) && name[0] != '.' && fs::exists(entry.path() / "config.pbtxt", ec))
        models.push_back(name);
    }
    std::sort(models.begin(), models.end());
  }

  // The models to build, before anything is loaded: a repository without TensorRT models
  // has nothing to do on any machine.
  std::vector<std::pair<std::string, inference::ModelConfig>> trt_models;
  for (const std::string& name : models) {
    auto config = ReadConfig(flags.repository / name);
    if (!config.ok()) {
      std::cerr << "fastpath build-engines: model '" << name << "': " << config.status().message()
                << "\n";
      return kExitRuntime;
    }
    if (ListsTensorRt(*config) && GpuGroups(*config).empty()) {
      std::cerr << "fastpath build-engines: model '" << name
                << "' lists \"tensorrt\" but has no KIND_GPU instance_group (without one it "
                   "runs on the CPU, as serve loads it); skipped\n";
    } else if (ListsTensorRt(*config)) {
      trt_models.emplace_back(name, std::move(config).value());
    } else {
      std::cerr << "fastpath build-engines: model '" << name
                << "' does not list \"tensorrt\" in gpu_execution_accelerator; skipped\n";
    }
  }
  if (trt_models.empty()) {
    std::cerr << "fastpath build-engines: no model to build\n";
    return kExitOk;
  }

  const gpu::CapabilitySnapshot snapshot = gpu::TakeNodeSnapshot(FASTPATH_VERSION);
  repository::RepositoryOptions cache;
  SetEngineCacheFromSnapshot(snapshot, flags.repository, flags.engine_cache, &cache);
  cache.trt_engine_cache.rebuild_stale = true;  // building is what this command is for
  if (const std::string why = TensorRtUnusable(snapshot, cache.trt_engine_cache); !why.empty()) {
    std::cerr << "fastpath build-engines: TensorRT cannot be used on this machine, so no engine "
                 "can be built: "
              << why << " (exit " << kExitNoGpuExecutionProvider << ")\n";
    return kExitNoGpuExecutionProvider;
  }
  auto backend = onnxruntime::CreateOrtBackend();
  if (!backend.ok()) {
    std::cerr << "fastpath build-engines: ONNX Runtime is unusable: " << backend.status().ToString()
              << "\n";
    return kExitRuntime;
  }

  int failures = 0;
  for (const auto& [name, config] : trt_models) {
    const std::string file =
        config.default_model_filename().empty() ? "model.onnx" : config.default_model_filename();
    const std::vector<inference::ModelInstanceGroup> groups = GpuGroups(config);
    for (const int64_t version : Versions(flags.repository / name, file)) {
      const fs::path model_file = flags.repository / name / std::to_string(version) / file;
      for (const auto& group : groups) {
        std::vector<int> gpus(group.gpus().begin(), group.gpus().end());
        if (gpus.empty()) gpus.push_back(0);
        for (const int gpu : gpus) {
          const std::string what = "model '" + name + "' version " + std::to_string(version) +
                                   " on GPU " + std::to_string(gpu);
          auto options = config::InstanceOptionsFor(config, group, gpu);
          Status status = options.status();
          std::string dir;
          if (options.ok()) {
            options->engine_cache = cache.trt_engine_cache;
            options->engine_cache.model_name = name;
            options->engine_cache.model_version = version;
            if (auto cc = cache.compute_capabilities.find(gpu);
                cc != cache.compute_capabilities.end()) {
              options->engine_cache.compute_capability = cc->second;
            }
            auto plan = onnxruntime::PlanTrtEngineCache(*options, model_file);
            status = plan.status();
            if (plan.ok()) {
              dir = plan->decision.dir.string();
              if (!plan->decision.stale_reason.empty()) {
                std::cerr << "fastpath build-engines: " << what << ": "
                          << plan->decision.stale_reason << "\n";
              }
              status = (*backend)->CreateInstance(model_file, *options).status();
            }
          }
          if (!status.ok()) {
            ++failures;
            std::cerr << "fastpath build-engines: " << what << ": " << status.message() << "\n";
            continue;
          }
          std::cout << "fastpath build-engines: " << what << ": engines in " << dir << "\n";
        }
      }
    }
  }
  return failures == 0 ? kExitOk : kExitRuntime;
}

}  // namespace fastpath::cli
