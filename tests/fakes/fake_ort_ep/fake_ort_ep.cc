// A fake ONNX Runtime plugin execution-provider library, built as
// libonnxruntime_providers_cuda.so in its own folder: it registers through the real
// RegisterExecutionProviderLibrary path and enumerates devices the way a CUDA EP on a GPU
// machine would, without a GPU. It claims the first hardware device ORT reports (the
// CPU: this machine has nothing else) under the name CUDAExecutionProvider with CUDA
// ordinal 0, so that the registration, device matching and `fastpath doctor` code runs.
// It cannot run a model: CreateEp fails with a message that says so.
//
// Environment:
//   FASTPATH_FAKE_EP_DEVICES  number of devices to enumerate (default 1; 0 = none)
#include <onnxruntime_c_api.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

namespace {

const OrtApi* g_api = nullptr;

struct FakeFactory : OrtEpFactory {};
FakeFactory g_factory;

const char* ORT_API_CALL GetName(const OrtEpFactory*) noexcept { return "CUDAExecutionProvider"; }
const char* ORT_API_CALL GetVendor(const OrtEpFactory*) noexcept { return "fastpath-fake"; }

OrtStatus* ORT_API_CALL GetSupportedDevices(OrtEpFactory* factory,
                                            const OrtHardwareDevice* const* devices,
                                            size_t num_devices, OrtEpDevice** ep_devices,
                                            size_t max_ep_devices,
                                            size_t* num_ep_devices) noexcept {
  *num_ep_devices = 0;
  const char* wanted_text = std::getenv("FASTPATH_FAKE_EP_DEVICES");
  const int wanted = wanted_text != nullptr ? std::atoi(wanted_text) : 1;
  for (size_t i = 0; i < num_devices && static_cast<int>(*num_ep_devices) < wanted &&
                     *num_ep_devices < max_ep_devices;
       ++i) {
    OrtKeyValuePairs* options = nullptr;
    g_api->CreateKeyValuePairs(&options);
    g_api->AddKeyValuePair(options, "device_id", std::to_string(*num_ep_devices).c_str());
    OrtEpDevice* device = nullptr;
    OrtStatus* status =
        g_api->GetEpApi()->CreateEpDevice(factory, devices[i], nullptr, options, &device);
    g_api->ReleaseKeyValuePairs(options);
    if (status != nullptr) return status;
    ep_devices[(*num_ep_devices)++] = device;
  }
  return nullptr;
}

// Fails, and says which provider options reached it: the session's "ep.*" config entries
// (ORT adds the options given to AppendExecutionProvider_V2 with an "ep.<ep name>." prefix),
// sorted, so that tests can check what fastpath passed to the EP.
OrtStatus* ORT_API_CALL CreateEp(OrtEpFactory*, const OrtHardwareDevice* const*,
                                 const OrtKeyValuePairs* const*, size_t,
                                 const OrtSessionOptions* session_options, const OrtLogger*,
                                 OrtEp**) noexcept {
  std::map<std::string, std::string> seen;
  OrtKeyValuePairs* entries = nullptr;
  if (g_api->GetSessionOptionsConfigEntries(session_options, &entries) == nullptr) {
    const char* const* keys = nullptr;
    const char* const* values = nullptr;
    size_t count = 0;
    g_api->GetKeyValuePairs(entries, &keys, &values, &count);
    for (size_t i = 0; i < count; ++i) {
      if (std::strncmp(keys[i], "ep.", 3) == 0) seen[keys[i]] = values[i];
    }
    g_api->ReleaseKeyValuePairs(entries);
  }
  std::string message = "fastpath's fake CUDA execution provider cannot run models (options:";
  for (const auto& [key, value] : seen) message += " " + key + "=" + value;
  message += ")";
  return g_api->CreateStatus(ORT_NOT_IMPLEMENTED, message.c_str());
}

void ORT_API_CALL ReleaseEp(OrtEpFactory*, OrtEp*) noexcept {}
uint32_t ORT_API_CALL GetVendorId(const OrtEpFactory*) noexcept { return 0x10de; }
const char* ORT_API_CALL GetVersion(const OrtEpFactory*) noexcept { return "0.0.0"; }
OrtStatus* ORT_API_CALL CreateAllocator(OrtEpFactory*, const OrtMemoryInfo*,
                                        const OrtKeyValuePairs*,
                                        OrtAllocator** allocator) noexcept {
  *allocator = nullptr;  // no device memory: ORT uses its own CPU allocator
  return nullptr;
}
void ORT_API_CALL ReleaseAllocator(OrtEpFactory*, OrtAllocator*) noexcept {}
OrtStatus* ORT_API_CALL CreateDataTransfer(OrtEpFactory*,
                                           OrtDataTransferImpl** data_transfer) noexcept {
  *data_transfer = nullptr;
  return nullptr;
}
bool ORT_API_CALL IsStreamAware(const OrtEpFactory*) noexcept { return false; }
OrtStatus* ORT_API_CALL CreateSyncStreamForDevice(OrtEpFactory*, const OrtMemoryDevice*,
                                                  const OrtKeyValuePairs*,
                                                  OrtSyncStreamImpl** stream) noexcept {
  *stream = nullptr;
  return g_api->CreateStatus(ORT_NOT_IMPLEMENTED, "fastpath's fake EP has no streams");
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) OrtStatus* CreateEpFactories(
    const char* /*registered_name*/, const OrtApiBase* ort_api_base,
    const OrtLogger* /*default_logger*/, OrtEpFactory** factories, size_t max_factories,
    size_t* num_factories) {
  // The 1.23 plugin API: ORT calls only what that version defined.
  g_api = ort_api_base->GetApi(23);
  *num_factories = 0;
  if (g_api == nullptr || max_factories < 1) return nullptr;
  g_factory = FakeFactory{};
  g_factory.ort_version_supported = 23;
  g_factory.GetName = GetName;
  g_factory.GetVendor = GetVendor;
  g_factory.GetSupportedDevices = GetSupportedDevices;
  g_factory.CreateEp = CreateEp;
  g_factory.ReleaseEp = ReleaseEp;
  g_factory.GetVendorId = GetVendorId;
  g_factory.GetVersion = GetVersion;
  g_factory.CreateAllocator = CreateAllocator;
  g_factory.ReleaseAllocator = ReleaseAllocator;
  g_factory.CreateDataTransfer = CreateDataTransfer;
  g_factory.IsStreamAware = IsStreamAware;
  g_factory.CreateSyncStreamForDevice = CreateSyncStreamForDevice;
  factories[0] = &g_factory;
  *num_factories = 1;
  return nullptr;
}

__attribute__((visibility("default"))) OrtStatus* ReleaseEpFactory(OrtEpFactory* /*factory*/) {
  return nullptr;
}

}  // extern "C"
