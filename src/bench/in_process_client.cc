// The in-process target: ONNX Runtime through the backend interface with no server in
// between, one model instance per session; the ceiling the server's throughput is
// compared with.
#include <ctime>
#include <filesystem>

#include "fastpath/bench/client.h"

namespace fastpath::bench {
namespace {

class InProcessSession : public InferSession {
 public:
  InProcessSession(std::unique_ptr<backend::ModelInstance> instance,
                   std::shared_ptr<const std::vector<std::vector<Tensor>>> requests,
                   std::vector<std::string> outputs)
      : instance_(std::move(instance)),
        requests_(std::move(requests)),
        outputs_(std::move(outputs)) {}

  InferOutcome Infer(size_t index) override {
    auto result = instance_->Run((*requests_)[index % requests_->size()], outputs_);
    if (!result.ok()) {
      cpu_mark_ns_ = -1;  // the span no longer holds only successful runs
      return {false, std::string("ort_") + StatusCodeName(result.status().code()),
              result.status().message()};
    }
    InferOutcome outcome;
    if (measure_cpu_ && ++runs_since_mark_ >= kCpuSpan) {
      const int64_t now = ThreadCpuNs();
      if (cpu_mark_ns_ >= 0 && now > cpu_mark_ns_) {
        outcome.cpu_ns = now - cpu_mark_ns_;
        outcome.cpu_runs = runs_since_mark_;
      }
      cpu_mark_ns_ = now;
      runs_since_mark_ = 0;
    }
    return outcome;
  }

  // With one intra-op and one inter-op thread ORT runs on the calling thread, so its CPU
  // time is the run's compute time whatever else the machine is doing.
  void set_measure_cpu(bool on) { measure_cpu_ = on; }

 private:
  static int64_t ThreadCpuNs() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  }
  static constexpr uint64_t kCpuSpan = 16;
  bool measure_cpu_ = false;
  int64_t cpu_mark_ns_ = -1;
  uint64_t runs_since_mark_ = 0;
  std::unique_ptr<backend::ModelInstance> instance_;
  std::shared_ptr<const std::vector<std::vector<Tensor>>> requests_;
  std::vector<std::string> outputs_;
};

class InProcessTarget : public Target {
 public:
  InProcessTarget(std::shared_ptr<backend::Backend> backend, std::filesystem::path model_file,
                  backend::InstanceOptions options)
      : backend_(std::move(backend)),
        model_file_(std::move(model_file)),
        options_(std::move(options)) {}

  StatusOr<ModelMetadata> Metadata() override {
    FASTPATH_ASSIGN_OR_RETURN(backend::ModelSignature signature, backend_->Inspect(model_file_));
    ModelMetadata m;
    m.name = model_file_.parent_path().parent_path().filename().string();
    m.inputs = signature.inputs;
    m.outputs = signature.outputs;
    outputs_.clear();
    for (const auto& o : m.outputs) outputs_.push_back(o.name);
    return m;
  }
  StatusOr<std::optional<ModelStatsSnapshot>> Stats() override {
    return std::optional<ModelStatsSnapshot>();
  }
  Status Prepare(const std::vector<std::vector<Tensor>>& requests) override {
    requests_ = std::make_shared<const std::vector<std::vector<Tensor>>>(requests);
    return Status::Ok();
  }
  StatusOr<std::unique_ptr<InferSession>> NewSession() override {
    if (!requests_) return FailedPrecondition("Prepare was not called");
    FASTPATH_ASSIGN_OR_RETURN(auto instance, backend_->CreateInstance(model_file_, options_));
    auto session = std::make_unique<InProcessSession>(std::move(instance), requests_, outputs_);
    session->set_measure_cpu(options_.intra_op_threads == 1 && options_.inter_op_threads == 1);
    return std::unique_ptr<InferSession>(std::move(session));
  }
  std::string Describe() const override { return "in-process " + model_file_.string(); }

 private:
  std::shared_ptr<backend::Backend> backend_;
  std::filesystem::path model_file_;
  backend::InstanceOptions options_;
  std::vector<std::string> outputs_;
  std::shared_ptr<const std::vector<std::vector<Tensor>>> requests_;
};

}  // namespace

StatusOr<std::unique_ptr<Target>> MakeInProcessTarget(std::shared_ptr<backend::Backend> backend,
                                                      const std::filesystem::path& model_file,
                                                      const backend::InstanceOptions& options) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(model_file, ec)) {
    return NotFound("model file " + model_file.string() + " does not exist");
  }
  return std::unique_ptr<Target>(
      std::make_unique<InProcessTarget>(std::move(backend), model_file, options));
}

}  // namespace fastpath::bench
