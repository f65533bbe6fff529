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
#include "command_line.h"
#include "fastpath/common/log.h"
#include "fastpath/gpu/node_snapshot.h"
#include "fastpath/onnxruntime/ort_backend.h"
#include "fastpath/onnxruntime/tensorrt/engine_cache.h"
#include "fastpath/config/model_config.h"
#include "fastpath/gpu/capability_snapshot.h"

namespace fastpath::cli {
namespace {

namespace fs = std::filesystem;

struct BuildFlags {
  fs::path repository;
  std::string model;
  fs::path engine_cache;
  log::Options logging;
};

// A path or name option that refuses an empty value, as the hand-written parser did.
CLI::Option* AddNonEmpty(CLI::App& app, const std::string& name, const std::string& value_name,
                         const std::string& help, std::function<void(const std::string&)> set) {
  return AddValue(app, name, value_name, help, "",
                  [name, set = std::move(set)](const std::string& value) -> Status {
                    if (value.empty()) return InvalidArgument(name + " needs a value");
                    set(value);
                    return Status::Ok();
                  });
}

void DefineBuildOptions(CLI::App& app, BuildFlags& flags) {
  OnlyOnce(AddNonEmpty(app, "--model-repository", "DIR", "Triton-layout model repository",
                       [&flags](const std::string& value) { flags.repository = value; }))
      ->required();
  AddNonEmpty(app, "--model", "NAME", "only this model (default: every model)",
              [&flags](const std::string& value) { flags.model = value; });
  AddNonEmpty(app, "--engine-cache", "DIR",
              "the engine cache root (default: .engine-cache in the repository; serve takes "
              "the same option)",
              [&flags](const std::string& value) { flags.engine_cache = value; });
  AddLogOptions(app, &flags.logging);
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
  BuildFlags flags;
  CLI::App app{
      "Builds the TensorRT engines of every model that lists \"tensorrt\" in its "
      "gpu_execution_accelerator, for each version and GPU, into the keyed engine cache "
      "(model sha256, TensorRT version, compute capability, precision, shape profile).",
      "fastpath build-engines"};
  UseHelpLayout(app, "usage: fastpath build-engines --model-repository DIR [options]");
  app.footer(
      "Exit codes: 0 built (or already there), 1 a model failed to build, 2 usage,\n"
      "17 TensorRT cannot be used on this machine (the message names why).");
  DefineBuildOptions(app, flags);
  if (auto exit_code = ParseCommandLine(app, args)) return *exit_code;
  flags.logging.name = "fastpath build-engines";
  log::Configure(flags.logging);
  std::error_code ec;
  if (!fs::is_directory(flags.repository, ec)) {
    std::cerr << "fastpath build-engines: model repository '" << flags.repository.string()
              << "' is not a directory\n";
    return kExitUsage;
  }
  if (fs::directory_iterator(flags.repository, ec); ec) {
    std::cerr << "fastpath build-engines: model repository '" << flags.repository.string()
              << "' cannot be listed: " << ec.message() << "\n";
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
      log::Error("model '" + name + "': " + config.status().message());
      return kExitRuntime;
    }
    if (ListsTensorRt(*config) && GpuGroups(*config).empty()) {
      log::Warn("model '" + name +
                "' lists \"tensorrt\" but has no KIND_GPU instance_group (without one it runs on "
                "the CPU, as serve loads it); skipped");
    } else if (ListsTensorRt(*config)) {
      trt_models.emplace_back(name, std::move(config).value());
    } else {
      log::Info("model '" + name +
                "' does not list \"tensorrt\" in gpu_execution_accelerator; skipped");
    }
  }
  if (trt_models.empty()) {
    log::Info("no model to build");
    return kExitOk;
  }

  const gpu::CapabilitySnapshot snapshot = gpu::TakeNodeSnapshot(FASTPATH_VERSION);
  repository::RepositoryOptions cache;
  SetEngineCacheFromSnapshot(snapshot, flags.repository, flags.engine_cache, &cache);
  cache.trt_engine_cache.rebuild_stale = true;  // building is what this command is for
  if (const std::string why = TensorRtUnusable(snapshot, cache.trt_engine_cache); !why.empty()) {
    log::Error("TensorRT cannot be used on this machine, so no engine can be built: " + why +
               " (exit " + std::to_string(kExitNoGpuExecutionProvider) + ")");
    return kExitNoGpuExecutionProvider;
  }
  auto backend = onnxruntime::CreateOrtBackend();
  if (!backend.ok()) {
    log::Error("ONNX Runtime is unusable: " + backend.status().ToString());
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
                log::Info(what + ": " + plan->decision.stale_reason);
              }
              status = (*backend)->CreateInstance(model_file, *options).status();
            }
          }
          if (!status.ok()) {
            ++failures;
            log::Error(what + ": " + status.message());
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
