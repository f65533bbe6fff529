#include "external_data.h"

#include <google/protobuf/io/coded_stream.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <system_error>

namespace fastpath::onnxruntime {
namespace {

using google::protobuf::io::CodedInputStream;

// The ONNX messages on the way from a ModelProto to a TensorProto's external_data, and the
// fields (numbers from onnx.proto) that lead from each to the next.
enum class Message { kModel, kTraining, kFunction, kGraph, kNode, kAttribute, kSparse, kTensor, kEntry };

struct Field {
  Message parent;
  uint32_t number;
  Message child;
};

constexpr Field kPaths[] = {
    {Message::kModel, 7, Message::kGraph},           // ModelProto.graph
    {Message::kModel, 20, Message::kTraining},       // ModelProto.training_info
    {Message::kModel, 25, Message::kFunction},       // ModelProto.functions
    {Message::kTraining, 1, Message::kGraph},        // TrainingInfoProto.initialization
    {Message::kTraining, 2, Message::kGraph},        // TrainingInfoProto.algorithm
    {Message::kFunction, 7, Message::kNode},         // FunctionProto.node
    {Message::kGraph, 1, Message::kNode},            // GraphProto.node
    {Message::kGraph, 5, Message::kTensor},          // GraphProto.initializer
    {Message::kGraph, 15, Message::kSparse},         // GraphProto.sparse_initializer
    {Message::kNode, 5, Message::kAttribute},        // NodeProto.attribute
    {Message::kAttribute, 5, Message::kTensor},      // AttributeProto.t
    {Message::kAttribute, 6, Message::kGraph},       // AttributeProto.g
    {Message::kAttribute, 10, Message::kTensor},     // AttributeProto.tensors
    {Message::kAttribute, 11, Message::kGraph},      // AttributeProto.graphs
    {Message::kAttribute, 22, Message::kSparse},     // AttributeProto.sparse_tensor
    {Message::kAttribute, 23, Message::kSparse},     // AttributeProto.sparse_tensors
    {Message::kSparse, 1, Message::kTensor},         // SparseTensorProto.values
    {Message::kSparse, 2, Message::kTensor},         // SparseTensorProto.indices
    {Message::kTensor, 13, Message::kEntry},         // TensorProto.external_data
};

// Subgraphs nest (an If in a Loop's body...); ORT's own protobuf parse stops at 100.
constexpr int kMaxDepth = 100;

class Walker {
 public:
  explicit Walker(std::string_view bytes)
      : in_(reinterpret_cast<const uint8_t*>(bytes.data()), static_cast<int>(bytes.size())) {
    in_.SetTotalBytesLimit(INT_MAX);
  }

  Status Walk(Message message, int depth) {
    if (depth > kMaxDepth) return Malformed("nests deeper than " + std::to_string(kMaxDepth));
    std::string key, value;  // a StringStringEntryProto's
    while (true) {
      const uint32_t tag = in_.ReadTag();
      if (tag == 0) break;  // the end of this message (its limit), or of the bytes
      const uint32_t number = tag >> 3;
      switch (tag & 7) {
        case 0: {  // varint
          uint64_t ignored = 0;
          if (!in_.ReadVarint64(&ignored)) return Malformed("a varint is cut short");
          break;
        }
        case 1:  // 64-bit
          if (!in_.Skip(8)) return Malformed("a fixed64 is cut short");
          break;
        case 5:  // 32-bit
          if (!in_.Skip(4)) return Malformed("a fixed32 is cut short");
          break;
        case 2: {  // length-delimited
          uint32_t length = 0;
          if (!in_.ReadVarint32(&length)) return Malformed("a length is cut short");
          if (message == Message::kEntry && (number == 1 || number == 2)) {
            if (!in_.ReadString(number == 1 ? &key : &value, static_cast<int>(length))) {
              return Malformed("a string is cut short");
            }
            break;
          }
          const Field* path = std::find_if(std::begin(kPaths), std::end(kPaths), [&](const Field& f) {
            return f.parent == message && f.number == number;
          });
          if (path == std::end(kPaths)) {
            if (!in_.Skip(static_cast<int>(length))) return Malformed("a field is cut short");
            break;
          }
          const CodedInputStream::Limit limit = in_.PushLimit(static_cast<int>(length));
          FASTPATH_RETURN_IF_ERROR(Walk(path->child, depth + 1));
          if (!in_.ConsumedEntireMessage() || in_.BytesUntilLimit() != 0) {
            return Malformed("a message is cut short");
          }
          in_.PopLimit(limit);
          break;
        }
        default:
          return Malformed("wire type " + std::to_string(tag & 7) + " is not one ONNX uses");
      }
    }
    if (message == Message::kEntry && key == "location" &&
        std::find(locations_.begin(), locations_.end(), value) == locations_.end()) {
      locations_.push_back(std::move(value));
    }
    return Status::Ok();
  }

  Status WalkAll() {
    FASTPATH_RETURN_IF_ERROR(Walk(Message::kModel, 0));
    if (!in_.ConsumedEntireMessage()) return Malformed("it ends inside a field");
    return Status::Ok();
  }

  std::vector<std::string> TakeLocations() { return std::move(locations_); }

 private:
  static Status Malformed(const std::string& why) {
    return InvalidArgument("the model is not a well-formed ONNX protobuf: " + why);
  }

  CodedInputStream in_;
  std::vector<std::string> locations_;
};

StatusOr<std::string> ReadWholeFile(const std::filesystem::path& path, const std::string& what) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return NotFound("cannot open " + what + " '" + path.string() + "'");
  std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (file.bad()) return Internal("cannot read " + what + " '" + path.string() + "'");
  return bytes;
}

// Whether the folder holds anything but the model file: without a file beside it, a model
// can name no external data ORT would accept (it refuses locations outside the folder).
bool HasNeighbours(const std::filesystem::path& model_file) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(model_file.parent_path(), ec)) {
    if (entry.path().filename() != model_file.filename()) return true;
  }
  return ec.operator bool();  // a folder that cannot be listed: read the model to be sure
}

}  // namespace

StatusOr<std::vector<std::string>> ExternalDataLocations(std::string_view model) {
  if (model.size() > static_cast<size_t>(INT_MAX)) {
    return InvalidArgument("the model file is over 2 GB, the most a protobuf can be");
  }
  Walker walker(model);
  FASTPATH_RETURN_IF_ERROR(walker.WalkAll());
  return walker.TakeLocations();
}

StatusOr<ExternalDataFiles> ReadExternalData(const std::filesystem::path& model_file) {
  ExternalDataFiles files;
  if (!HasNeighbours(model_file)) return files;
  FASTPATH_ASSIGN_OR_RETURN(std::string model, ReadWholeFile(model_file, "model file"));
  StatusOr<std::vector<std::string>> locations = ExternalDataLocations(model);
  // ORT's own parse says what is wrong with a model that is not a protobuf.
  if (!locations.ok() || locations->empty()) return files;
  model.clear();
  model.shrink_to_fit();

  std::error_code ec;
  const std::filesystem::path folder = std::filesystem::weakly_canonical(model_file.parent_path(), ec);
  for (std::string& location : *locations) {
    const std::string what = "external data file '" + location + "' named by model '" +
                             model_file.string() + "'";
    const std::filesystem::path path =
        std::filesystem::weakly_canonical(model_file.parent_path() / location, ec);
    const auto [end, ignored] = std::mismatch(folder.begin(), folder.end(), path.begin(), path.end());
    if (ec || std::filesystem::path(location).is_absolute() || end != folder.end()) {
      return InvalidArgument(what + " is outside the model's folder");
    }
    if (!std::filesystem::is_regular_file(path, ec)) {
      return NotFound(what + " is missing or not a regular file");
    }
    FASTPATH_ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(path, "the " + what));
    files.locations.push_back(std::move(location));
    files.contents.push_back(std::move(bytes));
  }
  return files;
}

}  // namespace fastpath::onnxruntime
