// What a model load request may give in place of the repository's own files: Triton's
// load parameters "config" and "file:<path>". protocol::CheckLoadParameters decodes them
// from either front end; ModelRepository::Load uses them.
#pragma once

#include <map>
#include <string>

namespace fastpath {

struct LoadOverride {
  // The model configuration as JSON (protobuf's mapping of Triton's ModelConfig), used
  // instead of config.pbtxt. Empty: no override at all (the model loads from its folder).
  std::string config_json;
  // The model folder's files, by path within it ("1/model.onnx"), decoded. When there are
  // any, they are the whole folder: the repository's folder for the model is not read.
  std::map<std::string, std::string> files;

  bool empty() const { return config_json.empty() && files.empty(); }
};

}  // namespace fastpath
