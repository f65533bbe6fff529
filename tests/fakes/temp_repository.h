// A model repository in a fresh temporary folder, filled from the tiny test models
// (tools/make_test_models.py --out), for repository, server and integration tests.
#pragma once

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

namespace fastpath::testing {

class TempRepository {
 public:
  // `models_dir`: the flat folder of <name>.onnx test models.
  explicit TempRepository(std::filesystem::path models_dir) : models_dir_(std::move(models_dir)) {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "fastpath-repo-XXXXXX").string();
    root_ = mkdtemp(pattern.data());
  }
  ~TempRepository() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  TempRepository(const TempRepository&) = delete;
  TempRepository& operator=(const TempRepository&) = delete;

  const std::filesystem::path& root() const { return root_; }

  // Copies <models_dir>/<onnx_name>.onnx to <root>/<model>/<version>/model.onnx.
  void AddVersion(const std::string& model, int version, const std::string& onnx_name) {
    auto dir = root_ / model / std::to_string(version);
    std::filesystem::create_directories(dir);
    std::filesystem::copy_file(models_dir_ / (onnx_name + ".onnx"), dir / "model.onnx",
                               std::filesystem::copy_options::overwrite_existing);
  }
  void WriteConfig(const std::string& model, const std::string& text) {
    std::filesystem::create_directories(root_ / model);
    std::ofstream(root_ / model / "config.pbtxt", std::ios::trunc) << text;
  }
  void Remove(const std::string& model) { std::filesystem::remove_all(root_ / model); }
  // A later modification time for the file at `relative` (e.g. "simple/1/model.onnx"), as
  // new contents copied in give it: a reload loads what reads it again.
  void Touch(const std::filesystem::path& relative) {
    const std::filesystem::path file = root_ / relative;
    std::filesystem::last_write_time(
        file, std::filesystem::last_write_time(file) + std::chrono::seconds(5));
  }

 private:
  std::filesystem::path models_dir_;
  std::filesystem::path root_;
};

// The Triton "simple" model's config: INPUT0 + INPUT1 -> OUTPUT0 (sum), OUTPUT1 (difference).
inline constexpr const char* kSimpleConfig = R"(
name: "simple"
max_batch_size: 8
input [
  { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] },
  { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] }
]
output [
  { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] },
  { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] }
]
instance_group [ { kind: KIND_CPU count: 1 } ]
)";

}  // namespace fastpath::testing
