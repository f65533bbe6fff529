#include "ort_environment.h"

#include <dlfcn.h>
#include <onnxruntime_ep_device_ep_metadata_keys.h>
#include <onnxruntime_session_options_config_keys.h>

#include <cstdlib>
#include <system_error>
#include <utility>

#include "ep_library.h"
#include "fastpath/common/log.h"
#include "ort_session.h"
#include "ort_types.h"

namespace fastpath::onnxruntime {
namespace {

OrtLoggingLevel ToOrtLoggingLevel(OrtLogSeverity severity) {
  switch (severity) {
    case OrtLogSeverity::kVerbose:
      return ORT_LOGGING_LEVEL_VERBOSE;
    case OrtLogSeverity::kInfo:
      return ORT_LOGGING_LEVEL_INFO;
    case OrtLogSeverity::kWarning:
      return ORT_LOGGING_LEVEL_WARNING;
    case OrtLogSeverity::kError:
      return ORT_LOGGING_LEVEL_ERROR;
    case OrtLogSeverity::kFatal:
      return ORT_LOGGING_LEVEL_FATAL;
  }
  return ORT_LOGGING_LEVEL_WARNING;
}

log::Level FromOrtLoggingLevel(OrtLoggingLevel severity) {
  switch (severity) {
    case ORT_LOGGING_LEVEL_VERBOSE:
      return log::Level::kTrace;
    case ORT_LOGGING_LEVEL_INFO:
      return log::Level::kInfo;
    case ORT_LOGGING_LEVEL_WARNING:
      return log::Level::kWarn;
    case ORT_LOGGING_LEVEL_ERROR:
    case ORT_LOGGING_LEVEL_FATAL:
      return log::Level::kError;
  }
  return log::Level::kWarn;
}

// ONNX Runtime's own lines (placement warnings, EP fallbacks) through the process logger, so
// that --log-level and --log-format cover them too: the message as ORT wrote it, with ORT's
// "category:logid" tag and its code location as fields. ORT's threshold is still
// OrtBackendOptions::log_severity. Called on ORT's threads; nothing may unwind into ORT.
void ORT_API_CALL LogThroughProcessLogger(void* /*param*/, OrtLoggingLevel severity,
                                          const char* category, const char* logid,
                                          const char* code_location, const char* message) {
  try {
    const log::Level level = FromOrtLoggingLevel(severity);
    if (!log::Enabled(level)) return;
    const std::string source = std::string(category != nullptr ? category : "onnxruntime") + ":" +
                               (logid != nullptr ? logid : "");
    log::Write(level, message != nullptr ? message : "",
               {{"source", source}, {"location", code_location != nullptr ? code_location : ""}});
  } catch (...) {
  }
}

// The folder of the libonnxruntime this process loaded: the GPU package puts the provider
// libraries beside it, and ORT's own provider bridge looks there too.
std::filesystem::path OrtLibraryDir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&OrtGetApiBase), &info) != 0 &&
      info.dli_fname != nullptr) {
    std::error_code ec;
    auto path = std::filesystem::canonical(info.dli_fname, ec);
    if (ec) path = info.dli_fname;
    return path.parent_path();
  }
  return {};
}

std::filesystem::path ChooseLibraryDir(const OrtBackendOptions& options) {
  std::filesystem::path dir = options.ep_library_dir;
  if (dir.empty()) {
    const char* env = std::getenv(kEpLibraryDirEnv);
    dir = env != nullptr && *env != '\0' ? std::filesystem::path(env) : OrtLibraryDir();
  }
  // ORT resolves a relative library path against its own folder, not the working
  // directory: make it absolute here, so the path in every message is the one tried.
  std::error_code ec;
  if (!dir.empty() && dir.is_relative()) {
    auto absolute = std::filesystem::absolute(dir, ec);
    if (!ec) dir = absolute;
  }
  return dir;
}

std::map<std::string, std::string> ToMap(Ort::ConstKeyValuePairs pairs) {
  std::map<std::string, std::string> out;
  if (static_cast<const OrtKeyValuePairs*>(pairs) == nullptr) return out;
  for (const auto& [key, value] : pairs.GetKeyValuePairs()) out.emplace(key, value);
  return out;
}

const char* DeviceTypeName(OrtHardwareDeviceType type) {
  switch (type) {
    case OrtHardwareDeviceType_CPU:
      return "cpu";
    case OrtHardwareDeviceType_GPU:
      return "gpu";
    case OrtHardwareDeviceType_NPU:
      return "npu";
  }
  return "unknown";
}

// The process's environment while anything holds it (see ort_environment.h).
std::mutex g_environment_mu;
std::weak_ptr<OrtEnvironment> g_environment;  // guarded by g_environment_mu

// OK when this ORT core was built with the provider's bridge (Microsoft's GPU release);
// otherwise ORT's own "not enabled in this build" answer.
Status ProbeProviderBridge(backend::ExecutionProvider provider) {
  const OrtApi& api = Ort::GetApi();
  OrtStatus* status = nullptr;
  if (provider == backend::ExecutionProvider::kTensorRt) {
    OrtTensorRTProviderOptionsV2* options = nullptr;
    status = api.CreateTensorRTProviderOptions(&options);
    if (options != nullptr) api.ReleaseTensorRTProviderOptions(options);
  } else {
    OrtCUDAProviderOptionsV2* options = nullptr;
    status = api.CreateCUDAProviderOptions(&options);
    if (options != nullptr) api.ReleaseCUDAProviderOptions(options);
  }
  if (status == nullptr) return Status::Ok();
  std::string message = api.GetErrorMessage(status);
  api.ReleaseStatus(status);
  return FailedPrecondition(message);
}

}  // namespace

std::string EpLibraryFileName(backend::ExecutionProvider provider) {
  return std::string("libonnxruntime_providers_") + backend::ExecutionProviderName(provider) +
         ".so";
}

std::string OrtProviderName(backend::ExecutionProvider provider) {
  switch (provider) {
    case backend::ExecutionProvider::kCpu:
      return std::string(backend::kCpuProviderName);
    case backend::ExecutionProvider::kCuda:
      return std::string(backend::kCudaProviderName);
    case backend::ExecutionProvider::kTensorRt:
      return std::string(backend::kTensorRtProviderName);
  }
  return "unknown";
}

EpDeviceReport DescribeEpDevice(const OrtEpDevice* raw) {
  Ort::ConstEpDevice device(raw);
  EpDeviceReport report;
  report.ep_name = device.EpName() ? device.EpName() : "";
  report.ep_vendor = device.EpVendor() ? device.EpVendor() : "";
  report.ep_metadata = ToMap(device.EpMetadata());
  const auto options = ToMap(device.EpOptions());
  if (auto it = options.find("device_id"); it != options.end()) {
    char* end = nullptr;
    const long id = std::strtol(it->second.c_str(), &end, 10);
    if (end != it->second.c_str() && *end == '\0' && id >= 0 && id < 1 << 20) {
      report.cuda_device_id = static_cast<int>(id);
    }
  }
  Ort::ConstHardwareDevice hardware = device.Device();
  if (static_cast<const OrtHardwareDevice*>(hardware) != nullptr) {
    report.device_type = DeviceTypeName(hardware.Type());
    report.vendor = hardware.Vendor() ? hardware.Vendor() : "";
    report.vendor_id = hardware.VendorId();
    report.device_id = hardware.DeviceId();
    report.metadata = ToMap(hardware.Metadata());
  }
  return report;
}

OrtEnvironment::OrtEnvironment(Ort::Env env, std::filesystem::path library_dir,
                               int global_intra_op_threads)
    : env_(std::move(env)),
      library_dir_(std::move(library_dir)),
      global_intra_op_threads_(global_intra_op_threads) {}

StatusOr<std::shared_ptr<OrtEnvironment>> OrtEnvironment::Get(const OrtBackendOptions& options) {
  std::lock_guard<std::mutex> lock(g_environment_mu);
  if (auto live = g_environment.lock()) {
    // One environment, one EP library folder: a backend that asks for another one would
    // otherwise silently get the first one's libraries.
    if (!options.ep_library_dir.empty() && ChooseLibraryDir(options) != live->library_dir()) {
      return FailedPrecondition(
          "this process's ONNX Runtime environment already loads execution "
          "provider libraries from '" +
          live->library_dir().string() + "'; a second backend cannot use '" +
          options.ep_library_dir.string() + "'");
    }
    // Likewise one process-wide pool: ORT creates it with the environment.
    if (options.global_intra_op_threads != 0 &&
        options.global_intra_op_threads != live->global_intra_op_threads()) {
      return FailedPrecondition("this process's ONNX Runtime environment already has " +
                                (live->global_intra_op_threads() == 0
                                     ? std::string("no process-wide intra-op pool")
                                     : "a process-wide intra-op pool of " +
                                           std::to_string(live->global_intra_op_threads()) +
                                           " threads") +
                                "; a second backend cannot have one of " +
                                std::to_string(options.global_intra_op_threads));
    }
    return live;
  }
  if (options.global_intra_op_threads < 0) {
    return InvalidArgument("global_intra_op_threads must be 0 (none) or more, not " +
                           std::to_string(options.global_intra_op_threads));
  }
  return CatchOrtExceptions(
      "creating the ONNX Runtime environment", [&]() -> StatusOr<std::shared_ptr<OrtEnvironment>> {
        const OrtLoggingLevel level = ToOrtLoggingLevel(options.log_severity);
        Ort::Env env{nullptr};
        if (options.global_intra_op_threads > 0) {
          // Sessions that share it run sequentially (no inter-op parallelism), and its
          // threads do not spin, for the reason ConfigureCpuThreads gives.
          Ort::ThreadingOptions threading;
          threading.SetGlobalIntraOpNumThreads(options.global_intra_op_threads)
              .SetGlobalInterOpNumThreads(1)
              .SetGlobalSpinControl(0);
          env =
              Ort::Env(threading, LogThroughProcessLogger, nullptr, level, options.log_id.c_str());
        } else {
          env = Ort::Env(level, options.log_id.c_str(), LogThroughProcessLogger, nullptr);
        }
        std::shared_ptr<OrtEnvironment> created(new OrtEnvironment(
            std::move(env), ChooseLibraryDir(options), options.global_intra_op_threads));
        g_environment = created;
        return created;
      });
}

StatusOr<Ort::Session> OrtEnvironment::OpenSessionWithCpuArena(
    const std::filesystem::path& model_file, Ort::SessionOptions* session_options,
    uint64_t limit_bytes) {
  std::lock_guard<std::mutex> lock(arena_mu_);
  const std::string context = "creating the CPU memory arena of " +
                              std::to_string(limit_bytes) + " bytes for '" +
                              model_file.string() + "'";
  const Ort::MemoryInfo cpu = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
  FASTPATH_RETURN_IF_ERROR(CatchOrtExceptions(context, [&] {
    const OrtApi& api = Ort::GetApi();
    const char* keys[] = {"max_mem", "arena_extend_strategy"};
    const size_t values[] = {static_cast<size_t>(limit_bytes), 1 /* kSameAsRequested */};
    OrtArenaCfg* raw = nullptr;
    Ort::ThrowOnError(api.CreateArenaCfgV2(keys, values, 2, &raw));
    std::unique_ptr<OrtArenaCfg, decltype(api.ReleaseArenaCfg)> config(raw, api.ReleaseArenaCfg);
    Ort::ThrowOnError(api.CreateAndRegisterAllocator(env_, cpu, config.get()));
    return Status::Ok();
  }));
  session_options->AddConfigEntry(kOrtSessionOptionsConfigUseEnvAllocators, "1");
  StatusOr<Ort::Session> session = OpenSession(env_, model_file, *session_options);
  // The session holds its reference; the next capped session gets an arena of its own.
  if (OrtStatus* status = Ort::GetApi().UnregisterAllocator(env_, cpu); status != nullptr) {
    const std::string message = Ort::GetApi().GetErrorMessage(status);
    Ort::GetApi().ReleaseStatus(status);
    if (session.ok()) return Internal(context + ": cannot unregister it: " + message);
  }
  return session;
}

const EpLibraryState& OrtEnvironment::Library(backend::ExecutionProvider provider) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = libraries_[provider];
  if (!slot) slot = std::make_unique<EpLibraryState>(Register(provider));
  return *slot;
}

EpLibraryState OrtEnvironment::Register(backend::ExecutionProvider provider) {
  EpLibraryState state;
  state.provider = provider;
  const std::string name = backend::ExecutionProviderName(provider);
  const std::string ort_name = OrtProviderName(provider);
  if (provider == backend::ExecutionProvider::kCpu) {
    state.status = Internal("the cpu execution provider is built into ONNX Runtime");
    return state;
  }
  if (library_dir_.empty()) {
    state.status = FailedPrecondition("cannot tell where the " + name +
                                      " execution provider library is: the folder of "
                                      "libonnxruntime is unknown; set " +
                                      kEpLibraryDirEnv);
    return state;
  }
  state.path = library_dir_ / EpLibraryFileName(provider);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(state.path, ec)) {
    // tools/bundle.sh leaves share/fastpath/bundle.json beside lib/; its CPU bundle carries
    // no GPU provider on purpose.
    if (std::filesystem::is_regular_file(
            library_dir_.parent_path() / "share" / "fastpath" / "bundle.json", ec)) {
      state.status = FailedPrecondition(
          "the " + name + " execution provider library '" + state.path.string() +
          "' does not exist: this is a CPU-only fastpath bundle (tools/bundle.sh without "
          "--cuda-arch); GPU models need a bundle built with --cuda-arch");
      return state;
    }
    state.status =
        FailedPrecondition("the " + name + " execution provider library '" + state.path.string() +
                           "' does not exist (install ONNX Runtime's GPU package there, or point " +
                           kEpLibraryDirEnv + " at the folder that has it)");
    return state;
  }
  // Which of ORT's two ways of loading a provider the file supports decides the rest; a
  // provider-bridge library would otherwise fail in RegisterExecutionProviderLibrary on its
  // first missing dependency, which hides the real reason (ep_library.h).
  auto interface = ReadEpLibraryInterface(state.path);
  if (!interface.ok()) {
    state.status = FailedPrecondition("the " + name + " execution provider library cannot be "
                                      "used: " + interface.status().message());
    return state;
  }
  state.interface = *interface;
  if (*state.interface == EpLibraryInterface::kNone) {
    state.status = FailedPrecondition(
        "'" + state.path.string() + "' is not an ONNX Runtime execution provider library: it "
        "exports neither CreateEpFactories (plugin EP) nor GetProvider (provider bridge)");
    return state;
  }
  if (*state.interface == EpLibraryInterface::kProviderBridge) {
    if (Status core = ProbeProviderBridge(provider); !core.ok()) {
      state.status = FailedPrecondition(
          "this ONNX Runtime build cannot run " + ort_name + ": '" + state.path.string() +
          "' is a provider-bridge library (it exports GetProvider, not CreateEpFactories), "
          "which only an ONNX Runtime core built with the " + name + " provider bridge can "
          "load (Microsoft's GPU release, through ONNXRUNTIME_ROOT), and this core (" +
          OrtVersion() + ") answers: " + core.message());
      return state;
    }
    // The core loads the library itself when a session appends the provider; the bridge
    // enumerates no devices, so the device and the placement are checked per session.
    state.registered = true;
    return state;
  }
  const std::string registration_name = "fastpath." + name;
  try {
    env_.RegisterExecutionProviderLibrary(registration_name.c_str(), state.path.native());
  } catch (const Ort::Exception& e) {
    // ORT's message carries the loader's (dlerror) text; the missing dependency is named
    // first, with what it is, since that is what the operator must install.
    std::string why = e.what();
    if (const auto missing = FindMissingDependency(why)) {
      why = "it needs " + missing->library + ", which the loader cannot find (" +
            missing->explanation + "); ONNX Runtime: " + why;
    }
    state.status = FailedPrecondition("cannot register the " + name +
                                      " execution provider library '" + state.path.string() +
                                      "': " + why);
    return state;
  }
  state.registered = true;

  try {
    for (const Ort::ConstEpDevice& device : env_.GetEpDevices()) {
      const char* ep_name = device.EpName();
      if (ep_name == nullptr) continue;
      bool ours = ort_name == ep_name;
      if (!ours) {
        // Match on the library path too, in case a build names its provider differently.
        const auto metadata = ToMap(device.EpMetadata());
        const auto it = metadata.find(kOrtEpDevice_EpMetadataKey_LibraryPath);
        ours = it != metadata.end() && std::filesystem::path(it->second) == state.path &&
               std::string(ep_name) != backend::kCpuProviderName;
      }
      if (!ours) continue;
      const OrtEpDevice* raw = device;
      state.devices.push_back(EpDeviceEntry{raw, DescribeEpDevice(raw)});
    }
  } catch (const Ort::Exception& e) {
    state.status = FailedPrecondition("listing the devices of the " + name +
                                      " execution provider failed: " + e.what());
    return state;
  }
  if (state.devices.empty()) {
    state.status = FailedPrecondition(
        "the " + name + " execution provider library '" + state.path.string() + "' loaded, but " +
        ort_name +
        " enumerated no device: ONNX Runtime sees no usable NVIDIA GPU (no driver, a stub "
        "libcuda, no /dev/nvidia* device in the container, or NVIDIA_VISIBLE_DEVICES / "
        "CUDA_VISIBLE_DEVICES hiding it; `fastpath doctor` shows which)");
  }
  return state;
}

std::vector<EpDeviceReport> OrtEnvironment::AllDevices() {
  std::vector<EpDeviceReport> out;
  try {
    for (const Ort::ConstEpDevice& device : env_.GetEpDevices()) {
      out.push_back(DescribeEpDevice(device));
    }
  } catch (const Ort::Exception&) {
    // Reported as no devices; the per-library reports carry the errors.
  }
  return out;
}

OrtRuntimeReport ProbeOrtRuntime(const OrtBackendOptions& options) {
  OrtRuntimeReport report;
  report.version = OrtVersion();
  if (OrtGetApiBase()->GetApi(ORT_API_VERSION) == nullptr) {
    report.error = "the ONNX Runtime library loaded at run time (version " + report.version +
                   ") is older than the headers fastpath was built with";
    return report;
  }
  auto environment = OrtEnvironment::Get(options);
  if (!environment.ok()) {
    report.error = environment.status().message();
    return report;
  }
  OrtEnvironment& env = **environment;
  report.ep_library_dir = env.library_dir().string();
  for (auto provider : {backend::ExecutionProvider::kCuda, backend::ExecutionProvider::kTensorRt}) {
    const EpLibraryState& state = env.Library(provider);
    EpLibraryReport library;
    library.provider = backend::ExecutionProviderName(provider);
    library.path = state.path.string();
    library.registered = state.registered;
    if (state.interface) library.interface = EpLibraryInterfaceName(*state.interface);
    library.error = state.status.ok() ? "" : state.status.message();
    for (const auto& device : state.devices) library.devices.push_back(device.report);
    report.libraries.push_back(std::move(library));
  }
  report.devices = env.AllDevices();
  return report;
}

}  // namespace fastpath::onnxruntime
