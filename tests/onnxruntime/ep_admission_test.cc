// Locked execution providers with the real ONNX Runtime and its real CUDA plugin-EP
// library, on a machine without a GPU: each way the GPU path can be missing is refused
// with its own message, and never becomes a session that quietly runs on the CPU.
//
// The silent fallback is reproduced with a driver stand-in: the CUDA toolkit's stub
// libcuda (or the test suite's fake one) is loaded by path with RTLD_GLOBAL, so that the
// EP library's dependency on libcuda.so.1 resolves to it by soname. The library then
// registers and enumerates no device, which is exactly what a container without
// /dev/nvidia* looks like to ORT.
//
// ORT keeps one environment per process and each test makes and drops its own backend,
// so the environment (and its EP registrations) starts fresh in every test. The driver
// stand-in, once loaded, stays: the no-driver test skips itself when it finds one.
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fakes/temp_repository.h"
#include "fastpath/backend/backend.h"
#include "fastpath/onnxruntime/ort_backend.h"
#include "fastpath/config/model_config.h"
#include "fastpath/repository/model_repository.h"
#include "ep_library.h"

namespace fastpath::onnxruntime {
namespace {

using backend::ExecutionProvider;
using backend::InstanceOptions;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::StartsWith;
using ::testing::UnorderedElementsAre;

namespace fs = std::filesystem;

const fs::path kModels = FASTPATH_TEST_MODELS_DIR;
const fs::path kOrtLibraryDir = fs::canonical(FASTPATH_ORT_LIBRARY_DIR);
const fs::path kCudaEpLibrary = kOrtLibraryDir / "libonnxruntime_providers_cuda.so";

fs::path ModelPath(const std::string& name) { return kModels / (name + ".onnx"); }

InstanceOptions GpuOptions(std::vector<ExecutionProvider> providers = {ExecutionProvider::kCuda}) {
  InstanceOptions options;
  options.providers = std::move(providers);
  options.device_id = 0;
  return options;
}

std::unique_ptr<backend::Backend> MakeBackend(const fs::path& ep_dir = {}) {
  OrtBackendOptions options;
  options.ep_library_dir = ep_dir;
  auto backend = CreateOrtBackend(options);
  EXPECT_TRUE(backend.ok()) << backend.status().ToString();
  return backend.ok() ? std::move(backend).value() : nullptr;
}

bool DriverLoadable() {
  void* handle = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) handle = dlopen("libcuda.so.1", RTLD_LAZY);
  return handle != nullptr;  // deliberately kept open: loading it cannot be undone anyway
}

// Loads a libcuda.so.1 stand-in that has no device behind it. Empty on success, else why not.
std::string LoadDriverStandIn() {
  for (const char* path : {"/usr/local/cuda/lib64/stubs/libcuda.so", FASTPATH_FAKE_LIBCUDA}) {
    if (dlopen(path, RTLD_NOW | RTLD_GLOBAL) != nullptr) return "";
  }
  return "neither the CUDA toolkit's stub libcuda nor the fake one could be loaded";
}

// The CUDA EP library's other dependencies come from the CUDA toolkit.
std::string MissingCudaToolkitLibrary() {
  for (const char* soname :
       {"libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13", "libcurand.so.10"}) {
    if (dlopen(soname, RTLD_LAZY) == nullptr) return soname;
  }
  return "";
}

TEST(EpLibraryTest, InterfaceIsReadFromTheSymbolTable) {
  auto cuda = ReadEpLibraryInterface(kCudaEpLibrary);
  ASSERT_TRUE(cuda.ok()) << cuda.status().ToString();
  EXPECT_EQ(*cuda, EpLibraryInterface::kPluginEp);
  auto fake = ReadEpLibraryInterface(fs::path(FASTPATH_FAKE_ORT_EP_DIR) /
                                     "libonnxruntime_providers_cuda.so");
  ASSERT_TRUE(fake.ok()) << fake.status().ToString();
  EXPECT_EQ(*fake, EpLibraryInterface::kPluginEp);
  auto core = ReadEpLibraryInterface(kOrtLibraryDir / "libonnxruntime.so.1");
  ASSERT_TRUE(core.ok()) << core.status().ToString();
  EXPECT_EQ(*core, EpLibraryInterface::kNone);

  const fs::path text = fs::temp_directory_path() / "fastpath-not-an-elf.so";
  std::ofstream(text) << "not a library\n";
  EXPECT_EQ(ReadEpLibraryInterface(text).status().message(),
            "'" + text.string() + "' is not a 64-bit ELF shared library (no ELF magic)");
  EXPECT_EQ(ReadEpLibraryInterface(kModels / "missing.so").status().code(),
            StatusCode::kNotFound);
}

TEST(EpLibraryTest, MissingDependencyIsReadFromTheLoaderMessage) {
  auto driver = FindMissingDependency(
      "Failed to load library /x/libonnxruntime_providers_cuda.so with error: libcuda.so.1: "
      "cannot open shared object file: No such file or directory");
  ASSERT_TRUE(driver.has_value());
  EXPECT_EQ(driver->library, "libcuda.so.1");
  EXPECT_THAT(driver->explanation, StartsWith("the NVIDIA driver's library"));
  auto cublas = FindMissingDependency(
      "libcublasLt.so.13: cannot open shared object file: No such file or directory");
  ASSERT_TRUE(cublas.has_value());
  EXPECT_EQ(cublas->library, "libcublasLt.so.13");
  EXPECT_EQ(cublas->explanation,
            "a CUDA runtime library (cuBLAS): install CUDA's runtime libraries");
  auto trt = FindMissingDependency("with error: libnvinfer.so.10: cannot open shared object file");
  ASSERT_TRUE(trt.has_value());
  EXPECT_EQ(trt->explanation, "TensorRT: install TensorRT 10");
  auto other = FindMissingDependency("libfoo.so.2: cannot open shared object file: x");
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(other->explanation, "a library it depends on");
  EXPECT_FALSE(FindMissingDependency("/x/lib.so: undefined symbol: CreateEpFactories"));
  EXPECT_FALSE(FindMissingDependency(": cannot open shared object file"));
}

TEST(EpAdmissionTest, CpuSessionAuditPutsEveryNodeOnTheCpu) {
  auto backend = MakeBackend();
  ASSERT_NE(backend, nullptr);
  auto instance = backend->CreateInstance(ModelPath("mlp"), InstanceOptions{});
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  const backend::PlacementAudit* audit = (*instance)->placement();
  ASSERT_NE(audit, nullptr);
  // ORT fuses fc0's MatMul and Add into a Gemm before it assigns nodes: two Gemms.
  EXPECT_EQ(audit->total_nodes, 5);
  ASSERT_EQ(audit->providers.size(), 1u);
  const backend::ProviderPlacement& cpu = audit->providers[0];
  EXPECT_EQ(cpu.provider, "CPUExecutionProvider");
  EXPECT_EQ(cpu.nodes, 5);
  EXPECT_EQ(cpu.compute_nodes, 2);
  EXPECT_THAT(cpu.op_types, UnorderedElementsAre(Pair("Gemm", 2), Pair("Relu", 1), Pair("Shape", 1),
                                                 Pair("Gather", 1)));
  EXPECT_EQ(backend::PlacementSummary(*audit), "CPUExecutionProvider 5 nodes (2 compute)");
  EXPECT_TRUE(audit->degraded_reason.empty());
}

TEST(EpAdmissionTest, MissingEpLibraryIsRefusedNamingThePath) {
  const fs::path empty_dir = fs::temp_directory_path() / "fastpath-no-ep-libraries";
  fs::create_directories(empty_dir);
  auto backend = MakeBackend(empty_dir);
  ASSERT_NE(backend, nullptr);
  auto instance = backend->CreateInstance(ModelPath("mlp"), GpuOptions());
  ASSERT_FALSE(instance.ok());
  EXPECT_EQ(instance.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(instance.status().message(),
            "the cuda execution provider library '" +
                (empty_dir / "libonnxruntime_providers_cuda.so").string() +
                "' does not exist (install ONNX Runtime's GPU package there, or point "
                "FASTPATH_ORT_EP_LIBRARY_DIR at the folder that has it)");
}

TEST(EpAdmissionTest, EpLibrariesAreFoundBesideLibonnxruntime) {
  if (std::getenv(kEpLibraryDirEnv) != nullptr) GTEST_SKIP() << kEpLibraryDirEnv << " is set";
  const OrtRuntimeReport report = ProbeOrtRuntime();
  EXPECT_EQ(report.error, "");
  EXPECT_EQ(report.version, OrtVersion());
  EXPECT_EQ(report.ep_library_dir, kOrtLibraryDir.string());
  ASSERT_EQ(report.libraries.size(), 2u);
  EXPECT_EQ(report.libraries[0].provider, "cuda");
  EXPECT_EQ(report.libraries[0].path, kCudaEpLibrary.string());
  EXPECT_EQ(report.libraries[1].provider, "tensorrt");
  // The CPU provider's device is always there.
  bool cpu = false;
  for (const auto& device : report.devices) cpu |= device.ep_name == "CPUExecutionProvider";
  EXPECT_TRUE(cpu);
}

// Whichever library this machine lacks first is named, with what it is: the driver's
// libcuda.so.1 where CUDA's runtime libraries are on the loader path, one of those where
// they are not (a plain Debian without the toolkit).
TEST(EpAdmissionTest, NoDriverIsRefusedNamingTheMissingLibrary) {
  if (DriverLoadable()) GTEST_SKIP() << "libcuda.so.1 is loadable in this process";
  auto backend = MakeBackend(kOrtLibraryDir);
  ASSERT_NE(backend, nullptr);
  auto instance = backend->CreateInstance(ModelPath("mlp"), GpuOptions());
  ASSERT_FALSE(instance.ok());
  EXPECT_EQ(instance.status().code(), StatusCode::kFailedPrecondition);
  const std::string& message = instance.status().message();
  const std::string prefix = "cannot register the cuda execution provider library '" +
                             kCudaEpLibrary.string() + "': it needs ";
  ASSERT_THAT(message, StartsWith(prefix));
  const std::string library =
      message.substr(prefix.size(), message.find(',', prefix.size()) - prefix.size());
  EXPECT_EQ(dlopen(library.c_str(), RTLD_LAZY), nullptr) << library << " loads in this process";
  if (library == "libcuda.so.1") {
    EXPECT_THAT(message, HasSubstr(", which the loader cannot find (the NVIDIA driver's "
                                   "library: no driver is installed, or the container was "
                                   "started without the NVIDIA container toolkit)"));
  } else {
    EXPECT_THAT(library, ::testing::AnyOf(StartsWith("libcudart"), StartsWith("libcublas"),
                                          StartsWith("libcurand")));
    EXPECT_THAT(message, HasSubstr(", which the loader cannot find (a CUDA runtime library"));
  }
  EXPECT_THAT(message, HasSubstr("; ONNX Runtime: "));
  EXPECT_THAT(message, HasSubstr(library + ": cannot open shared object file"));
}

// The npm package's TensorRT library is a provider-bridge library, and its core has no
// bridge: said plainly, whatever the machine has of TensorRT itself.
TEST(EpAdmissionTest, ProviderBridgeLibraryWithoutABridgeInTheCoreIsNamed) {
  const fs::path trt = kOrtLibraryDir / "libonnxruntime_providers_tensorrt.so";
  auto interface = ReadEpLibraryInterface(trt);
  ASSERT_TRUE(interface.ok()) << interface.status().ToString();
  if (*interface != EpLibraryInterface::kProviderBridge) {
    GTEST_SKIP() << "this ONNX Runtime's TensorRT library is not a provider-bridge library";
  }
  auto backend = MakeBackend(kOrtLibraryDir);
  ASSERT_NE(backend, nullptr);
  const OrtRuntimeReport report = ProbeOrtRuntime();
  ASSERT_EQ(report.libraries.size(), 2u);
  const EpLibraryReport& library = report.libraries[1];
  EXPECT_EQ(library.interface, "provider bridge (GetProvider)");
  if (library.error.empty()) GTEST_SKIP() << "this ONNX Runtime core has the TensorRT bridge";
  EXPECT_FALSE(library.registered);
  EXPECT_THAT(library.error,
              StartsWith("this ONNX Runtime build cannot run TensorrtExecutionProvider: '" +
                         trt.string() +
                         "' is a provider-bridge library (it exports GetProvider, not "
                         "CreateEpFactories), which only an ONNX Runtime core built with the "
                         "tensorrt provider bridge can load (Microsoft's GPU release, through "
                         "ONNXRUNTIME_ROOT), and this core (" +
                         OrtVersion() + ") answers: "));
  auto instance = backend->CreateInstance(
      ModelPath("mlp"), GpuOptions({ExecutionProvider::kTensorRt, ExecutionProvider::kCuda}));
  ASSERT_FALSE(instance.ok());
  EXPECT_EQ(instance.status().message(), library.error);
}

// The silent fallback, reproduced: the EP library is present and registers, ORT would
// happily build a session, and every node would run on the CPU. fastpath refuses.
TEST(EpAdmissionTest, CudaLibraryWithoutADeviceIsRefused) {
  if (const std::string missing = MissingCudaToolkitLibrary(); !missing.empty()) {
    GTEST_SKIP() << missing << " (CUDA toolkit) is not on the library path";
  }
  if (const std::string why = LoadDriverStandIn(); !why.empty()) GTEST_SKIP() << why;
  auto backend = MakeBackend(kOrtLibraryDir);
  ASSERT_NE(backend, nullptr);
  const OrtRuntimeReport report = ProbeOrtRuntime();
  ASSERT_EQ(report.libraries.size(), 2u);
  if (!report.libraries[0].devices.empty()) GTEST_SKIP() << "this machine has a GPU";
  EXPECT_TRUE(report.libraries[0].registered) << report.libraries[0].error;

  const std::string expected =
      "the cuda execution provider library '" + kCudaEpLibrary.string() +
      "' loaded, but CUDAExecutionProvider enumerated no device: ONNX Runtime sees no usable "
      "NVIDIA GPU (no driver, a stub libcuda, no /dev/nvidia* device in the container, or "
      "NVIDIA_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES hiding it; `fastpath doctor` shows which)";
  EXPECT_EQ(report.libraries[0].error, expected);
  auto instance = backend->CreateInstance(ModelPath("mlp"), GpuOptions());
  ASSERT_FALSE(instance.ok());
  EXPECT_EQ(instance.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(instance.status().message(), expected);

  // Production: "cpu" after cuda does not rescue it; it is refused before anything loads.
  instance = backend->CreateInstance(
      ModelPath("mlp"), GpuOptions({ExecutionProvider::kCuda, ExecutionProvider::kCpu}));
  ASSERT_FALSE(instance.ok());
  EXPECT_EQ(instance.status().message(),
            "execution provider 'cpu' is listed for a GPU instance, and fastpath never runs a GPU "
            "model on the CPU unasked (remove \"cpu\" from gpu_execution_accelerator, or serve "
            "with --allow-cpu-fallback in the dev profile: DEGRADED)");

  // Dev profile, explicit opt-in and "cpu" listed: it serves, labelled DEGRADED with why.
  InstanceOptions dev = GpuOptions({ExecutionProvider::kCuda, ExecutionProvider::kCpu});
  dev.allow_cpu_fallback_for_gpu = true;
  instance = backend->CreateInstance(ModelPath("mlp"), dev);
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  const backend::PlacementAudit* audit = (*instance)->placement();
  ASSERT_NE(audit, nullptr);
  EXPECT_EQ(audit->NodesOn(backend::kCpuProviderName), 5);
  EXPECT_EQ(audit->degraded_reason,
            expected +
                " (the dev profile allows the cpu provider listed after it); no node was placed "
                "on CUDAExecutionProvider: all 5 nodes run on CPUExecutionProvider (the silent "
                "CPU fallback); a GPU instance that computes nothing on the GPU is refused, "
                "unless --allow-cpu-fallback serves it, in the dev profile");
  EXPECT_THAT(backend::PlacementSummary(*audit),
              HasSubstr("CUDAExecutionProvider 0 nodes (0 compute), CPUExecutionProvider 5 nodes "
                        "(2 compute: Gather, Gemm x2, Relu, Shape); DEGRADED: "));

  // Opt-in without "cpu" in the list changes nothing: the list is the list.
  InstanceOptions opt_in_only = GpuOptions();
  opt_in_only.allow_cpu_fallback_for_gpu = true;
  instance = backend->CreateInstance(ModelPath("mlp"), opt_in_only);
  ASSERT_FALSE(instance.ok());
  EXPECT_EQ(instance.status().message(), expected);
}

// The test suite's fake CUDA plugin EP registers and enumerates one device (CUDA
// ordinal 0) but cannot run a model: device matching and the EP's own failure are errors.
TEST(EpAdmissionTest, FakeEpDeviceMatchingAndFailure) {
  auto backend = MakeBackend(FASTPATH_FAKE_ORT_EP_DIR);
  ASSERT_NE(backend, nullptr);
  InstanceOptions gpu3 = GpuOptions();
  gpu3.device_id = 3;
  auto instance = backend->CreateInstance(ModelPath("mlp"), gpu3);
  ASSERT_FALSE(instance.ok());
  EXPECT_EQ(instance.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(instance.status().message(),
            "GPU 3 is not among the devices CUDAExecutionProvider enumerated (CUDA ordinals: 0); "
            "check instance_group gpus and CUDA_VISIBLE_DEVICES");

  // GPU 0 is appended; the session then fails in the EP, and that is the error: ORT does
  // not get to place the model on the CPU instead.
  instance = backend->CreateInstance(ModelPath("mlp"), GpuOptions());
  ASSERT_FALSE(instance.ok());
  EXPECT_THAT(instance.status().message(),
              HasSubstr("fastpath's fake CUDA execution provider cannot run models"));
}

// The CUDA arena options reach the EP as ORT provider options, and every instance asks
// for its own stream (no user stream): the fake EP's error lists the options it was given.
TEST(EpAdmissionTest, CudaArenaOptionsAndOwnStreamReachTheEp) {
  auto backend = MakeBackend(FASTPATH_FAKE_ORT_EP_DIR);
  ASSERT_NE(backend, nullptr);
  InstanceOptions options = GpuOptions();
  options.provider_options[ExecutionProvider::kCuda] = {
      {"arena_extend_strategy", "kSameAsRequested"}, {"gpu_mem_limit", "1073741824"}};
  auto instance = backend->CreateInstance(ModelPath("mlp"), options);
  ASSERT_FALSE(instance.ok());
  const std::string prefix = "ep.cuda.";  // ORT's prefix for the EP's options
  EXPECT_THAT(instance.status().message(),
              HasSubstr("(options: " + prefix + "arena_extend_strategy=kSameAsRequested " + prefix +
                        "device_id=0 " + prefix + "gpu_mem_limit=1073741824 " + prefix +
                        "has_user_compute_stream=0)"));
}

TEST(EpAdmissionTest, OneEpLibraryFolderPerProcess) {
  auto first = MakeBackend(kOrtLibraryDir);
  ASSERT_NE(first, nullptr);
  OrtBackendOptions other;
  other.ep_library_dir = FASTPATH_FAKE_ORT_EP_DIR;
  auto second = CreateOrtBackend(other);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(second.status().message(),
            "this process's ONNX Runtime environment already loads execution provider libraries "
            "from '" +
                kOrtLibraryDir.string() + "'; a second backend cannot use '" +
                std::string(FASTPATH_FAKE_ORT_EP_DIR) + "'");
  // The same folder, or none named, shares the environment.
  EXPECT_NE(MakeBackend(kOrtLibraryDir), nullptr);
  EXPECT_NE(MakeBackend(), nullptr);
}

TEST(EpAdmissionTest, ProviderListMistakesAreRefusedBeforeLoading) {
  auto backend = MakeBackend(kOrtLibraryDir);
  ASSERT_NE(backend, nullptr);
  auto twice = backend->CreateInstance(
      ModelPath("mlp"), GpuOptions({ExecutionProvider::kCuda, ExecutionProvider::kCuda}));
  EXPECT_EQ(twice.status().message(), "execution provider 'cuda' is listed twice");
  auto cpu_first = backend->CreateInstance(
      ModelPath("mlp"), GpuOptions({ExecutionProvider::kCpu, ExecutionProvider::kCuda}));
  EXPECT_EQ(cpu_first.status().message(),
            "the cpu execution provider must come last in the provider list");
}

// A KIND_GPU model in a repository: UNAVAILABLE with the backend's reason, whatever this
// machine lacks (the driver, or a device); a KIND_CPU one serves and shows its placement.
TEST(EpAdmissionTest, RepositoryMarksARefusedGpuModelUnavailable) {
  auto backend = MakeBackend(kOrtLibraryDir);
  ASSERT_NE(backend, nullptr);
  auto direct = backend->CreateInstance(ModelPath("mlp"), GpuOptions());
  if (direct.ok()) GTEST_SKIP() << "this machine has a GPU";

  testing::TempRepository files(kModels);
  files.AddVersion("mlp_gpu", 1, "mlp");
  files.WriteConfig("mlp_gpu", "backend: \"onnxruntime\"\ninstance_group [ { kind: KIND_GPU } ]\n");
  files.AddVersion("mlp_cpu", 1, "mlp");
  files.WriteConfig("mlp_cpu", "backend: \"onnxruntime\"\ninstance_group [ { kind: KIND_CPU } ]\n");
  repository::RepositoryOptions options;
  options.roots = {files.root()};
  repository::ModelRepository repo(options, backend.get());
  ASSERT_TRUE(repo.LoadStartupModels({}).ok());

  EXPECT_EQ(repo.FindReady("mlp_gpu", "").status().code(), StatusCode::kUnavailable);
  bool found = false;
  for (const auto& entry : repo.Index(false)) {
    if (entry.name != "mlp_gpu") continue;
    found = true;
    EXPECT_EQ(entry.version, "1");
    EXPECT_EQ(entry.state, server::ModelState::kUnavailable);
    EXPECT_EQ(entry.reason, direct.status().message());
  }
  EXPECT_TRUE(found);

  auto cpu = repo.FindReady("mlp_cpu", "");
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  ASSERT_EQ((*cpu)->placements.size(), 1u);
  EXPECT_EQ(backend::PlacementSummary((*cpu)->placements[0]),
            "CPUExecutionProvider 5 nodes (2 compute)");
  repo.StopAll();
}

}  // namespace
}  // namespace fastpath::onnxruntime
