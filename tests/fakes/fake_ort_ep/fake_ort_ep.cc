// A fake ONNX Runtime plugin execution-provider library, built as
// libonnxruntime_providers_cuda.so in its own folder: it registers through the real
// RegisterExecutionProviderLibrary path and enumerates devices the way a CUDA EP on a GPU
// machine would, without a GPU. It claims the first hardware device ORT reports (the
// CPU: this machine has nothing else) under the name CUDAExecutionProvider with CUDA
// ordinal 0, so that the registration, device matching and `fastpath doctor` code runs.
//
// By default it cannot run a model: CreateEp fails with a message that says so (and lists
// the "ep.*" session options it was given). With FASTPATH_FAKE_EP_RUNS=1, CreateEp returns
// a real compile-based OrtEp named CUDAExecutionProvider that claims every MatMul of two
// float tensors (one fused node per MatMul) and computes it on the host; every other node
// stays on ORT's CPU provider. It has no device memory and no data transfer, so ORT keeps
// every tensor in host memory: a KIND_GPU model then loads, is placed and serves on a
// machine without a GPU.
//
// Environment:
//   FASTPATH_FAKE_EP_DEVICES  number of devices to enumerate (default 1; 0 = none)
//   FASTPATH_FAKE_EP_RUNS     "1": CreateEp succeeds and the EP runs MatMul (default: fails)
#include <onnxruntime_c_api.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <new>
#include <string>
#include <vector>

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

// ---- The running EP (FASTPATH_FAKE_EP_RUNS=1) ----

constexpr const char* kEpName = "CUDAExecutionProvider";
// The plugin API this library is written against (ORT 1.23): every struct it hands ORT
// says so, and ORT reads no member added after it.
constexpr uint32_t kApiVersion = 23;

bool RunsModels() {
  const char* runs = std::getenv("FASTPATH_FAKE_EP_RUNS");
  return runs != nullptr && std::strcmp(runs, "1") == 0;
}

OrtStatus* Error(OrtErrorCode code, const std::string& message) {
  return g_api->CreateStatus(code, ("fastpath's fake CUDA execution provider: " + message).c_str());
}

#define FAKE_EP_RETURN_IF_ERROR(expr)                     \
  do {                                                    \
    OrtStatus* fake_ep_status = (expr);                   \
    if (fake_ep_status != nullptr) return fake_ep_status; \
  } while (0)

// True when `value_info` is a tensor of float.
OrtStatus* IsFloatTensor(const OrtValueInfo* value_info, bool* is_float) {
  *is_float = false;
  if (value_info == nullptr) return nullptr;  // an optional input left out
  const OrtTypeInfo* type_info = nullptr;
  FAKE_EP_RETURN_IF_ERROR(g_api->GetValueInfoTypeInfo(value_info, &type_info));
  if (type_info == nullptr) return nullptr;
  ONNXType onnx_type = ONNX_TYPE_UNKNOWN;
  FAKE_EP_RETURN_IF_ERROR(g_api->GetOnnxTypeFromTypeInfo(type_info, &onnx_type));
  if (onnx_type != ONNX_TYPE_TENSOR) return nullptr;
  const OrtTensorTypeAndShapeInfo* tensor_info = nullptr;  // owned by type_info
  FAKE_EP_RETURN_IF_ERROR(g_api->CastTypeInfoToTensorInfo(type_info, &tensor_info));
  if (tensor_info == nullptr) return nullptr;
  ONNXTensorElementDataType element_type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  FAKE_EP_RETURN_IF_ERROR(g_api->GetTensorElementType(tensor_info, &element_type));
  *is_float = element_type == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
  return nullptr;
}

// An ONNX-domain MatMul whose two inputs are float tensors.
OrtStatus* IsFloatMatMul(const OrtNode* node, bool* claimed) {
  *claimed = false;
  const char* op_type = nullptr;
  const char* domain = nullptr;
  FAKE_EP_RETURN_IF_ERROR(g_api->Node_GetOperatorType(node, &op_type));
  FAKE_EP_RETURN_IF_ERROR(g_api->Node_GetDomain(node, &domain));
  if (op_type == nullptr || std::strcmp(op_type, "MatMul") != 0) return nullptr;
  if (domain != nullptr && *domain != '\0' && std::strcmp(domain, "ai.onnx") != 0) return nullptr;
  size_t num_inputs = 0;
  FAKE_EP_RETURN_IF_ERROR(g_api->Node_GetNumInputs(node, &num_inputs));
  if (num_inputs != 2) return nullptr;
  const OrtValueInfo* inputs[2] = {nullptr, nullptr};
  FAKE_EP_RETURN_IF_ERROR(g_api->Node_GetInputs(node, inputs, 2));
  for (const OrtValueInfo* input : inputs) {
    bool is_float = false;
    FAKE_EP_RETURN_IF_ERROR(IsFloatTensor(input, &is_float));
    if (!is_float) return nullptr;
  }
  *claimed = true;
  return nullptr;
}

// The shape of a float tensor, or an error naming `what` when it is not one.
OrtStatus* FloatTensorShape(const OrtValue* value, const char* what, std::vector<int64_t>* dims) {
  if (value == nullptr) return Error(ORT_INVALID_ARGUMENT, std::string("MatMul: no ") + what);
  OrtTensorTypeAndShapeInfo* info = nullptr;
  FAKE_EP_RETURN_IF_ERROR(g_api->GetTensorTypeAndShape(value, &info));
  ONNXTensorElementDataType element_type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  size_t rank = 0;
  OrtStatus* status = g_api->GetTensorElementType(info, &element_type);
  if (status == nullptr) status = g_api->GetDimensionsCount(info, &rank);
  if (status == nullptr) {
    dims->assign(rank, 0);
    status = g_api->GetDimensions(info, dims->data(), rank);
  }
  g_api->ReleaseTensorTypeAndShapeInfo(info);
  if (status != nullptr) return status;
  if (element_type != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
    return Error(ORT_INVALID_ARGUMENT, std::string("MatMul: ") + what + " is not a float tensor");
  }
  return nullptr;
}

std::string ShapeText(const std::vector<int64_t>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? "," : "") + std::to_string(dims[i]);
  return out + "]";
}

// [..., M, K] x [..., K, N] -> [..., M, N] with the same leading (batch) dims on both sides,
// on the host, i-k-j so that the inner loop walks both B's row and C's row in order. A and
// B are the fused node's inputs `a_index` and `b_index` (the same one for MatMul(X, X)).
OrtStatus* ComputeMatMul(OrtKernelContext* context, size_t a_index, size_t b_index) {
  std::vector<int64_t> a_dims, b_dims;
  const OrtValue* a = nullptr;
  const OrtValue* b = nullptr;
  FAKE_EP_RETURN_IF_ERROR(g_api->KernelContext_GetInput(context, a_index, &a));
  FAKE_EP_RETURN_IF_ERROR(g_api->KernelContext_GetInput(context, b_index, &b));
  FAKE_EP_RETURN_IF_ERROR(FloatTensorShape(a, "input A", &a_dims));
  FAKE_EP_RETURN_IF_ERROR(FloatTensorShape(b, "input B", &b_dims));
  const size_t rank = a_dims.size();
  bool supported = rank >= 2 && b_dims.size() == rank && a_dims[rank - 1] == b_dims[rank - 2];
  for (size_t i = 0; supported && i + 2 < rank; ++i) supported = a_dims[i] == b_dims[i];
  if (!supported) {
    return Error(ORT_INVALID_ARGUMENT,
                 "MatMul of shapes " + ShapeText(a_dims) + " and " + ShapeText(b_dims) +
                     " is not supported (it computes [..., M, K] x [..., K, N] of equal rank "
                     "of at least 2 with equal leading dims, no broadcasting)");
  }
  const int64_t m = a_dims[rank - 2];
  const int64_t k = a_dims[rank - 1];
  const int64_t n = b_dims[rank - 1];
  int64_t batch = 1;
  for (size_t i = 0; i + 2 < rank; ++i) batch *= a_dims[i];
  std::vector<int64_t> out_dims(a_dims.begin(), a_dims.end() - 1);
  out_dims.push_back(n);

  OrtValue* out = nullptr;
  FAKE_EP_RETURN_IF_ERROR(
      g_api->KernelContext_GetOutput(context, 0, out_dims.data(), out_dims.size(), &out));
  if (out == nullptr) return Error(ORT_FAIL, "MatMul: ORT gave no output tensor");
  if (batch == 0 || m == 0 || n == 0) return nullptr;  // an empty output: nothing to write
  const void* a_raw = nullptr;
  const void* b_raw = nullptr;
  void* c_raw = nullptr;
  FAKE_EP_RETURN_IF_ERROR(g_api->GetTensorData(a, &a_raw));
  FAKE_EP_RETURN_IF_ERROR(g_api->GetTensorData(b, &b_raw));
  FAKE_EP_RETURN_IF_ERROR(g_api->GetTensorMutableData(out, &c_raw));
  const float* a_data = static_cast<const float*>(a_raw);
  const float* b_data = static_cast<const float*>(b_raw);
  float* c_data = static_cast<float*>(c_raw);
  for (int64_t p = 0; p < batch; ++p) {
    const float* a_mat = a_data + p * m * k;
    const float* b_mat = b_data + p * k * n;
    float* c_mat = c_data + p * m * n;
    for (int64_t i = 0; i < m; ++i) {
      float* c_row = c_mat + i * n;
      for (int64_t j = 0; j < n; ++j) c_row[j] = 0.0f;
      for (int64_t kk = 0; kk < k; ++kk) {
        const float a_ik = a_mat[i * k + kk];
        const float* b_row = b_mat + kk * n;
        for (int64_t j = 0; j < n; ++j) c_row[j] += a_ik * b_row[j];
      }
    }
  }
  return nullptr;
}

// One per fused node (one MatMul each); read-only once compiled, so concurrent runs are
// fine. A fused node lists each distinct input once (MatMul(X, X) has one input), so the
// MatMul's A and B are looked up by name in Compile.
struct MatMulComputeInfo : OrtNodeComputeInfo {
  size_t a_index = 0;
  size_t b_index = 0;
};

OrtStatus* ORT_API_CALL CreateState(OrtNodeComputeInfo*, OrtNodeComputeContext*,
                                    void** compute_state) noexcept {
  *compute_state = nullptr;
  return nullptr;
}

OrtStatus* ORT_API_CALL Compute(OrtNodeComputeInfo* this_ptr, void*,
                                OrtKernelContext* context) noexcept {
  const auto* info = static_cast<const MatMulComputeInfo*>(this_ptr);
  try {
    return ComputeMatMul(context, info->a_index, info->b_index);
  } catch (const std::exception& e) {  // std::bad_alloc from the shape vectors
    return Error(ORT_FAIL, std::string("MatMul: ") + e.what());
  }
}

void ORT_API_CALL ReleaseState(OrtNodeComputeInfo*, void*) noexcept {}

struct FakeEp : OrtEp {};

const char* ORT_API_CALL EpGetName(const OrtEp*) noexcept { return kEpName; }

OrtStatus* ORT_API_CALL GetCapability(OrtEp*, const OrtGraph* graph,
                                      OrtEpGraphSupportInfo* graph_support_info) noexcept {
  try {
    size_t num_nodes = 0;
    FAKE_EP_RETURN_IF_ERROR(g_api->Graph_GetNumNodes(graph, &num_nodes));
    std::vector<const OrtNode*> nodes(num_nodes, nullptr);
    if (num_nodes > 0)
      FAKE_EP_RETURN_IF_ERROR(g_api->Graph_GetNodes(graph, nodes.data(), num_nodes));
    for (const OrtNode* node : nodes) {
      bool claimed = false;
      FAKE_EP_RETURN_IF_ERROR(IsFloatMatMul(node, &claimed));
      if (!claimed) continue;
      // One fused node per MatMul: never a group with an unclaimed node between two members.
      FAKE_EP_RETURN_IF_ERROR(g_api->GetEpApi()->EpGraphSupportInfo_AddNodesToFuse(
          graph_support_info, &node, 1, nullptr));
    }
    return nullptr;
  } catch (const std::exception& e) {
    return Error(ORT_FAIL, std::string("GetCapability: ") + e.what());
  }
}

// The names of a node's inputs (an absent optional input is "").
OrtStatus* InputNames(const OrtNode* node, std::vector<std::string>* names) {
  size_t count = 0;
  FAKE_EP_RETURN_IF_ERROR(g_api->Node_GetNumInputs(node, &count));
  std::vector<const OrtValueInfo*> inputs(count, nullptr);
  if (count > 0) FAKE_EP_RETURN_IF_ERROR(g_api->Node_GetInputs(node, inputs.data(), count));
  names->clear();
  for (const OrtValueInfo* input : inputs) {
    const char* name = nullptr;
    if (input != nullptr) FAKE_EP_RETURN_IF_ERROR(g_api->GetValueInfoName(input, &name));
    names->emplace_back(name != nullptr ? name : "");
  }
  return nullptr;
}

// Each graph is what GetCapability fused: exactly one float MatMul. Nothing of the graphs
// is kept past this call (ORT frees them); the compute infos hold input indices only.
OrtStatus* CompileGraphs(const OrtGraph** graphs, const OrtNode** fused_nodes, size_t count,
                         OrtNodeComputeInfo** node_compute_infos) {
  for (size_t g = 0; g < count; ++g) {
    size_t num_nodes = 0;
    FAKE_EP_RETURN_IF_ERROR(g_api->Graph_GetNumNodes(graphs[g], &num_nodes));
    const OrtNode* node = nullptr;
    bool claimed = false;
    if (num_nodes == 1) {
      FAKE_EP_RETURN_IF_ERROR(g_api->Graph_GetNodes(graphs[g], &node, 1));
      FAKE_EP_RETURN_IF_ERROR(IsFloatMatMul(node, &claimed));
    }
    if (!claimed) {
      return Error(ORT_INVALID_ARGUMENT, "Compile: graph " + std::to_string(g) + " has " +
                                             std::to_string(num_nodes) +
                                             " nodes; only a single float MatMul compiles");
    }
    std::vector<std::string> matmul_inputs, fused_inputs;
    FAKE_EP_RETURN_IF_ERROR(InputNames(node, &matmul_inputs));
    FAKE_EP_RETURN_IF_ERROR(InputNames(fused_nodes[g], &fused_inputs));
    size_t index[2] = {0, 0};
    for (size_t i = 0; i < 2; ++i) {
      size_t at = 0;
      while (at < fused_inputs.size() && fused_inputs[at] != matmul_inputs[i]) ++at;
      if (at == fused_inputs.size()) {
        return Error(ORT_FAIL, "Compile: MatMul input '" + matmul_inputs[i] +
                                   "' is not an input of the fused node");
      }
      index[i] = at;
    }
    auto* info = new MatMulComputeInfo();
    info->ort_version_supported = kApiVersion;
    info->CreateState = CreateState;
    info->Compute = Compute;
    info->ReleaseState = ReleaseState;
    info->a_index = index[0];
    info->b_index = index[1];
    node_compute_infos[g] = info;  // ORT releases what was set, even on an error
  }
  return nullptr;
}

OrtStatus* ORT_API_CALL Compile(OrtEp*, const OrtGraph** graphs, const OrtNode** fused_nodes,
                                size_t count, OrtNodeComputeInfo** node_compute_infos,
                                OrtNode** /*ep_context_nodes: no EPContext models*/) noexcept {
  for (size_t i = 0; i < count; ++i) node_compute_infos[i] = nullptr;
  try {
    return CompileGraphs(graphs, fused_nodes, count, node_compute_infos);
  } catch (const std::exception& e) {
    return Error(ORT_FAIL, std::string("Compile: ") + e.what());
  }
}

void ORT_API_CALL ReleaseNodeComputeInfos(OrtEp*, OrtNodeComputeInfo** node_compute_infos,
                                          size_t num_node_compute_infos) noexcept {
  for (size_t i = 0; i < num_node_compute_infos; ++i) {
    delete static_cast<MatMulComputeInfo*>(node_compute_infos[i]);
  }
}

OrtStatus* CreateRunningEp(OrtEp** ep) {
  auto* created = new (std::nothrow) FakeEp();  // value-initialised: every optional member null
  if (created == nullptr) return Error(ORT_FAIL, "CreateEp: out of memory");
  created->ort_version_supported = kApiVersion;
  created->GetName = EpGetName;
  created->GetCapability = GetCapability;
  created->Compile = Compile;
  created->ReleaseNodeComputeInfos = ReleaseNodeComputeInfos;
  // GetPreferredDataLayout, ShouldConvertDataLayoutForOp, SetDynamicOptions, OnRunStart,
  // OnRunEnd, CreateAllocator, CreateSyncStreamForDevice and
  // GetCompiledModelCompatibilityInfo are optional in API 23 and left null: ORT's defaults
  // (NCHW, no dynamic options, the factory's allocator and stream functions).
  *ep = created;
  return nullptr;
}

// With FASTPATH_FAKE_EP_RUNS=1, the running EP above. Otherwise it fails, and says which
// provider options reached it: the session's "ep.*" config entries (ORT adds the options
// given to AppendExecutionProvider_V2 with an "ep.<ep name>." prefix), sorted, so that tests
// can check what fastpath passed to the EP.
OrtStatus* ORT_API_CALL CreateEp(OrtEpFactory*, const OrtHardwareDevice* const*,
                                 const OrtKeyValuePairs* const*, size_t,
                                 const OrtSessionOptions* session_options, const OrtLogger*,
                                 OrtEp** ep) noexcept {
  *ep = nullptr;
  if (RunsModels()) return CreateRunningEp(ep);
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

void ORT_API_CALL ReleaseEp(OrtEpFactory*, OrtEp* ep) noexcept { delete static_cast<FakeEp*>(ep); }
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
