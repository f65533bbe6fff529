#include "fastpath/onnxruntime/ort_backend.h"

#include <onnxruntime_cxx_api.h>

#include <utility>

#include "ort_environment.h"
#include "ort_instance.h"
#include "ort_session.h"
#include "ort_types.h"

namespace fastpath::onnxruntime {
namespace {

class OrtBackend final : public backend::Backend {
 public:
  OrtBackend(std::shared_ptr<OrtEnvironment> env, std::string log_id)
      : env_(std::move(env)), log_id_(std::move(log_id)) {}

  std::string Name() const override { return "onnxruntime"; }

  StatusOr<backend::ModelSignature> Inspect(const std::filesystem::path& model_file) override {
    return CatchOrtExceptions(
        "inspecting model '" + model_file.string() + "'",
        [&]() -> StatusOr<backend::ModelSignature> {
          // A throwaway CPU session: ORT has no cheaper way to report the signature with
          // symbolic dims resolved the way Run will see them.
          FASTPATH_ASSIGN_OR_RETURN(Ort::SessionOptions options,
                                    MakeInspectSessionOptions(log_id_));
          FASTPATH_ASSIGN_OR_RETURN(Ort::Session session,
                                    OpenSession(env_->env(), model_file, options));
          auto signature = ReadSignature(session);
          if (!signature.ok()) {
            return signature.status().WithContext("model '" + model_file.string() + "'");
          }
          return signature;
        });
  }

  StatusOr<std::unique_ptr<backend::ModelInstance>> CreateInstance(
      const std::filesystem::path& model_file, const backend::InstanceOptions& options) override {
    FASTPATH_ASSIGN_OR_RETURN(auto instance,
                              OrtModelInstance::Create(env_, model_file, options, log_id_));
    return std::unique_ptr<backend::ModelInstance>(std::move(instance));
  }

 private:
  // Shared with every instance this backend creates (see ort_backend.h).
  std::shared_ptr<OrtEnvironment> env_;
  std::string log_id_;
};

}  // namespace

std::string OrtVersion() { return OrtGetApiBase()->GetVersionString(); }

StatusOr<std::unique_ptr<backend::Backend>> CreateOrtBackend(const OrtBackendOptions& options) {
  // The C++ API fetches the API table for the headers' version on first use and would
  // crash on a null table; ask first, so an old libonnxruntime is an error that says so.
  if (OrtGetApiBase()->GetApi(ORT_API_VERSION) == nullptr) {
    return FailedPrecondition("the ONNX Runtime library loaded at run time (version " +
                              OrtVersion() + ") is older than the headers fastpath was built " +
                              "with (API version " + std::to_string(ORT_API_VERSION) + ")");
  }
  FASTPATH_ASSIGN_OR_RETURN(auto env, OrtEnvironment::Get(options));
  return std::unique_ptr<backend::Backend>(new OrtBackend(std::move(env), options.log_id));
}

}  // namespace fastpath::onnxruntime

#if defined(__SANITIZE_ADDRESS__)
// libonnxruntime 1.29 leaks one 14-byte allocation when the first Ort::Env is created
// (reproduced with a program that only constructs an Env), so every ASan binary that
// links this backend would fail LeakSanitizer for a leak that is not its own. The
// suppression lives with the library that brings ORT in, and covers only ORT's frames.
// Weak, so that an executable with its own suppression list replaces this one.
extern "C" __attribute__((weak)) const char* __lsan_default_suppressions() {
  return "leak:libonnxruntime.so\n";
}
#endif
