// A scriptable InferenceServer for front-end unit tests: the test sets the models'
// metadata/config and a handler for inference, and the front end under test is driven
// through real sockets. Header-only; link fastpath::proto and fastpath::common.
#pragma once

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fastpath/server/server.h"

namespace fastpath::testing {

class FakeInferenceServer : public server::InferenceServer {
 public:
  struct Model {
    server::ModelMetadata metadata;
    inference::ModelConfig config;
    bool ready = true;
  };
  using Handler = std::function<StatusOr<InferResponse>(const InferRequest&)>;

  void AddModel(Model model) {
    std::lock_guard lock(mu_);
    models_[model.metadata.name] = std::move(model);
  }
  // Runs synchronously on the caller's thread unless SetAsync(true): then on a new thread,
  // as a real scheduler would.
  void SetHandler(Handler handler) {
    std::lock_guard lock(mu_);
    handler_ = std::move(handler);
  }
  void SetAsync(bool async) { async_ = async; }
  void SetReady(bool ready) { ready_ = ready; }
  void SetExplicitControl(bool on) { explicit_control_ = on; }

  // The last request seen by InferAsync, for assertions on parsing.
  InferRequest last_request() const {
    std::lock_guard lock(mu_);
    return last_request_;
  }
  int infer_calls() const { return infer_calls_; }
  std::vector<std::string> load_calls() const {
    std::lock_guard lock(mu_);
    return load_calls_;
  }

  bool IsLive() const override { return true; }
  bool IsReady() const override { return ready_; }
  server::ServerMetadata Metadata() const override {
    return {"fastpath", "0.0.0-test", {"binary_tensor_data", "statistics", "model_repository", "model_configuration"}};
  }
  StatusOr<server::ModelMetadata> GetModelMetadata(const std::string& name,
                                                   const std::string& version) const override {
    std::lock_guard lock(mu_);
    FASTPATH_ASSIGN_OR_RETURN(const Model* m, Find(name, version));
    return m->metadata;
  }
  StatusOr<bool> IsModelReady(const std::string& name, const std::string& version) const override {
    std::lock_guard lock(mu_);
    FASTPATH_ASSIGN_OR_RETURN(const Model* m, Find(name, version));
    return m->ready;
  }
  StatusOr<inference::ModelConfig> GetModelConfig(const std::string& name,
                                                  const std::string& version) const override {
    std::lock_guard lock(mu_);
    FASTPATH_ASSIGN_OR_RETURN(const Model* m, Find(name, version));
    return m->config;
  }
  StatusOr<std::vector<ModelStatistics>> GetModelStatistics(
      const std::string& name, const std::string& version) const override {
    std::lock_guard lock(mu_);
    std::vector<ModelStatistics> out;
    for (const auto& [n, m] : models_) {
      if (!name.empty() && n != name) continue;
      ModelStatistics s;
      s.name = n;
      s.version = m.metadata.versions.empty() ? "1" : m.metadata.versions.front();
      s.inference_count = static_cast<uint64_t>(infer_calls_);
      s.execution_count = static_cast<uint64_t>(infer_calls_);
      s.inference_stats.success = {static_cast<uint64_t>(infer_calls_), 1000};
      out.push_back(s);
    }
    if (!name.empty() && out.empty()) return NotFound("unknown model '" + name + "'");
    return out;
  }
  std::vector<server::RepositoryEntry> RepositoryIndex(bool ready_only) const override {
    std::lock_guard lock(mu_);
    std::vector<server::RepositoryEntry> out;
    for (const auto& [n, m] : models_) {
      if (ready_only && !m.ready) continue;
      out.push_back({n, "1", m.ready ? server::ModelState::kReady : server::ModelState::kUnavailable,
                     m.ready ? "" : "not ready"});
    }
    return out;
  }
  // Answered on the caller's thread, before returning: the front ends must cope with that
  // as with the real server's immediate refusals.
  void LoadModelAsync(const std::string& name, LoadOverride load,
                      server::ControlCallback done) override {
    {
      std::lock_guard lock(mu_);
      last_load_ = std::move(load);
    }
    done(LoadModel(name));
  }
  // The config and files the last load carried, as the front end decoded them.
  LoadOverride last_load() const {
    std::lock_guard lock(mu_);
    return last_load_;
  }
  void UnloadModelAsync(const std::string& name, bool unload_dependents,
                        server::ControlCallback done) override {
    done(UnloadModel(name, unload_dependents));
  }
  Status LoadModel(const std::string& name) {
    std::lock_guard lock(mu_);
    load_calls_.push_back("load:" + name);
    if (!explicit_control_) return FailedPrecondition("model control mode is not explicit");
    auto it = models_.find(name);
    if (it == models_.end()) return NotFound("no model '" + name + "' in the repository");
    it->second.ready = true;
    return Status::Ok();
  }
  Status UnloadModel(const std::string& name, bool unload_dependents = false) {
    std::lock_guard lock(mu_);
    load_calls_.push_back((unload_dependents ? "unload+dependents:" : "unload:") + name);
    if (!explicit_control_) return FailedPrecondition("model control mode is not explicit");
    auto it = models_.find(name);
    if (it == models_.end()) return NotFound("no model '" + name + "' in the repository");
    it->second.ready = false;
    return Status::Ok();
  }
  void InferAsync(InferRequest request, server::InferCallback done) override {
    Handler handler;
    {
      std::lock_guard lock(mu_);
      ++infer_calls_;
      last_request_ = request;
      if (auto found = Find(request.model_name, request.model_version); !found.ok()) {
        done(found.status());
        return;
      }
      handler = handler_;
    }
    auto run = [handler, done = std::move(done), request = std::move(request)]() mutable {
      if (!handler) {
        done(Unimplemented("no handler set"));
        return;
      }
      done(handler(request));
    };
    if (async_) {
      std::thread(std::move(run)).detach();
    } else {
      run();
    }
  }

 private:
  StatusOr<const Model*> Find(const std::string& name, const std::string& version) const {
    auto it = models_.find(name);
    if (it == models_.end()) return NotFound("unknown model '" + name + "'");
    if (!version.empty()) {
      const auto& vs = it->second.metadata.versions;
      if (std::find(vs.begin(), vs.end(), version) == vs.end()) {
        return NotFound("unknown version '" + version + "' of model '" + name + "'");
      }
    }
    return &it->second;
  }

  mutable std::mutex mu_;
  std::map<std::string, Model> models_;
  Handler handler_;
  InferRequest last_request_;
  std::vector<std::string> load_calls_;
  LoadOverride last_load_;
  std::atomic<int> infer_calls_{0};
  std::atomic<bool> async_{false};
  std::atomic<bool> ready_{true};
  std::atomic<bool> explicit_control_{true};
};

}  // namespace fastpath::testing
