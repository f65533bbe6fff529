// ParseModelConfig: config.pbtxt text -> inference::ModelConfig, refusing anything the
// schema does not say.
//
// Why a shadow schema: parsing straight into the generated proto3 message would let
// three things through silently: a scalar written twice when its first value was the
// default ("max_batch_size: 0 max_batch_size: 8"), a map key written twice (the last
// value wins), and an enum written as a number outside the enum. So the text is parsed
// into a dynamic message of a copy of model_config.proto turned into proto2 (fields get
// presence, enums are closed) with its map entries turned into plain repeated messages
// (duplicates stay visible). Its wire format is the same, so the result is re-read into
// the generated ModelConfig. The copy is built once from the generated descriptor, so it
// can never drift from the schema.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/text_format.h>

#include <climits>
#include <memory>
#include <set>
#include <string>

#include "fastpath/common/utf8.h"
#include "fastpath/config/model_config.h"

namespace fastpath::config {
namespace {

namespace pb = google::protobuf;

// A config.pbtxt is a few kilobytes; this bound keeps a hostile file cheap to refuse.
constexpr size_t kMaxConfigBytes = 4 << 20;

struct ShadowSchema {
  pb::DescriptorPool pool;
  const pb::Descriptor* config = nullptr;
  std::set<std::string> map_entries;  // full names of former map-entry messages
  std::unique_ptr<pb::DynamicMessageFactory> factory;
};

void StripMapEntries(pb::DescriptorProto* message, const std::string& scope,
                     std::set<std::string>* map_entries) {
  const std::string full_name = scope + "." + message->name();
  if (message->options().map_entry()) {
    message->mutable_options()->clear_map_entry();
    map_entries->insert(full_name);
  }
  for (auto& nested : *message->mutable_nested_type()) {
    StripMapEntries(&nested, full_name, map_entries);
  }
}

const ShadowSchema& Shadow() {
  static const ShadowSchema* const shadow = [] {
    auto* s = new ShadowSchema;
    pb::FileDescriptorProto file;
    inference::ModelConfig::descriptor()->file()->CopyTo(&file);
    file.set_syntax("proto2");
    for (auto& message : *file.mutable_message_type()) {
      StripMapEntries(&message, file.package(), &s->map_entries);
    }
    const pb::FileDescriptor* built = s->pool.BuildFile(file);
    if (built != nullptr) s->config = built->FindMessageTypeByName("ModelConfig");
    s->factory = std::make_unique<pb::DynamicMessageFactory>(&s->pool);
    return s;
  }();
  return *shadow;
}

// Keeps the first error (the parser stops there anyway) with its position.
class FirstErrorCollector : public pb::io::ErrorCollector {
 public:
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    if (has_error_) return;
    has_error_ = true;
    line_ = line;  // zero-based, as protobuf gives them
    column_ = column;
    message_ = message;
  }
  bool has_error() const { return has_error_; }
  int line() const { return line_; }
  int column() const { return column_; }
  const std::string& message() const { return message_; }

 private:
  bool has_error_ = false;
  int line_ = 0;
  int column_ = 0;
  std::string message_;
};

// Text between the first pair of double quotes after `marker`, if any.
std::string QuotedAfter(const std::string& text, std::string_view marker) {
  const size_t at = text.find(marker);
  if (at == std::string::npos) return "";
  const size_t open = text.find('"', at + marker.size());
  if (open == std::string::npos) return "";
  const size_t close = text.find('"', open + 1);
  if (close == std::string::npos) return "";
  return text.substr(open + 1, close - open - 1);
}

// Rewrites protobuf's wording for the one error users hit most: a Triton field that
// fastpath does not support. Names the field and lists what the message does accept.
std::string Explain(const std::string& message) {
  const std::string field = QuotedAfter(message, "has no field named");
  if (field.empty()) return message;
  const std::string type = QuotedAfter(message, "Message type");
  std::string out = "unsupported field '" + field + "'";
  const pb::Descriptor* d = Shadow().pool.FindMessageTypeByName(type);
  if (d != nullptr) {
    out += " in " + d->name() + " (fastpath supports:";
    for (int i = 0; i < d->field_count(); ++i) out += (i ? ", " : " ") + d->field(i)->name();
    out += ")";
  }
  return out;
}

std::string Position(std::string_view source, int line, int column) {
  return std::string(source) + ":" + std::to_string(line) + ":" + std::to_string(column);
}

// protobuf's tokenizer counts columns with tabs expanded to multiples of 8; these two
// convert between its zero-based (line, column) and byte offsets in the text.
constexpr int kTabWidth = 8;

size_t OffsetOf(std::string_view text, int line, int column) {
  size_t pos = 0;
  for (int l = 0; l < line && pos < text.size(); ++pos) {
    if (text[pos] == '\n') ++l;
  }
  for (int c = 0; pos < text.size() && text[pos] != '\n' && c < column; ++pos) {
    c += text[pos] == '\t' ? kTabWidth - c % kTabWidth : 1;
  }
  return pos;
}

void LineColumnOf(std::string_view text, size_t offset, int* line, int* column) {
  *line = 0;
  *column = 0;
  for (size_t pos = 0; pos < offset && pos < text.size(); ++pos) {
    if (text[pos] == '\n') {
      ++*line;
      *column = 0;
    } else {
      *column += text[pos] == '\t' ? kTabWidth - *column % kTabWidth : 1;
    }
  }
}

bool IsIdentChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// protobuf reports an unknown field at the token after its name; users look for the
// name, so point at the last whole-word occurrence of it before that token.
void PointAtFieldName(std::string_view text, const std::string& field, int* line, int* column) {
  if (field.empty()) return;
  size_t end = OffsetOf(text, *line, *column);
  while (end > 0) {
    const size_t at = text.rfind(field, end - 1);
    if (at == std::string_view::npos) return;
    const size_t after = at + field.size();
    const bool starts_word = at == 0 || !IsIdentChar(text[at - 1]);
    const bool ends_word = after >= text.size() || !IsIdentChar(text[after]);
    if (starts_word && ends_word && after <= OffsetOf(text, *line, *column)) {
      LineColumnOf(text, at, line, column);
      return;
    }
    if (at == 0) return;
    end = at;
  }
}

std::string MapKeyString(const pb::Message& entry) {
  const pb::FieldDescriptor* key = entry.GetDescriptor()->FindFieldByNumber(1);
  const pb::Reflection* r = entry.GetReflection();
  if (key == nullptr) return "";
  switch (key->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_STRING: return "'" + r->GetString(entry, key) + "'";
    case pb::FieldDescriptor::CPPTYPE_UINT64: return std::to_string(r->GetUInt64(entry, key));
    case pb::FieldDescriptor::CPPTYPE_INT64: return std::to_string(r->GetInt64(entry, key));
    case pb::FieldDescriptor::CPPTYPE_UINT32: return std::to_string(r->GetUInt32(entry, key));
    case pb::FieldDescriptor::CPPTYPE_INT32: return std::to_string(r->GetInt32(entry, key));
    default: return "";
  }
}

// Finds a string that is not UTF-8 anywhere in `message` (protobuf would log it and then
// fail the conversion below without saying where; JSON answers and Prometheus labels
// carry these strings, and both must be UTF-8).
Status CheckUtf8(const pb::Message& message, const pb::TextFormat::ParseInfoTree* tree,
                 std::string_view source) {
  const pb::Reflection* r = message.GetReflection();
  std::vector<const pb::FieldDescriptor*> fields;
  r->ListFields(message, &fields);
  for (const pb::FieldDescriptor* field : fields) {
    const int n = field->is_repeated() ? r->FieldSize(message, field) : 1;
    for (int i = 0; i < n; ++i) {
      const int index = field->is_repeated() ? i : -1;
      if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
        const pb::Message& nested = field->is_repeated() ? r->GetRepeatedMessage(message, field, i)
                                                         : r->GetMessage(message, field);
        FASTPATH_RETURN_IF_ERROR(
            CheckUtf8(nested, tree ? tree->GetTreeForNested(field, index) : nullptr, source));
        continue;
      }
      if (field->type() != pb::FieldDescriptor::TYPE_STRING) continue;
      std::string scratch;
      const std::string& value = field->is_repeated()
                                     ? r->GetRepeatedStringReference(message, field, i, &scratch)
                                     : r->GetStringReference(message, field, &scratch);
      if (IsValidUtf8(value)) continue;
      std::string where(source);
      if (tree != nullptr) {
        const auto loc = tree->GetLocation(field, index);
        if (loc.line >= 0) where = Position(source, loc.line + 1, loc.column + 1);
      }
      return InvalidArgument(where + ": the value of '" + field->name() +
                             "' is not valid UTF-8 (a config's text must be UTF-8): \"" +
                             ToValidUtf8(value) + "\"");
    }
  }
  return Status::Ok();
}

// Finds a map key written twice anywhere in `message`.
Status CheckDuplicateMapKeys(const pb::Message& message, const pb::TextFormat::ParseInfoTree* tree,
                             std::string_view source) {
  const ShadowSchema& shadow = Shadow();
  const pb::Reflection* r = message.GetReflection();
  std::vector<const pb::FieldDescriptor*> fields;
  r->ListFields(message, &fields);
  for (const pb::FieldDescriptor* field : fields) {
    if (field->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (!field->is_repeated()) {
      FASTPATH_RETURN_IF_ERROR(CheckDuplicateMapKeys(
          r->GetMessage(message, field),
          tree ? tree->GetTreeForNested(field, -1) : nullptr,
          source));
      continue;
    }
    const bool is_map = shadow.map_entries.count(field->message_type()->full_name()) > 0;
    std::set<std::string> keys;
    for (int i = 0; i < r->FieldSize(message, field); ++i) {
      const pb::Message& element = r->GetRepeatedMessage(message, field, i);
      if (is_map && !keys.insert(MapKeyString(element)).second) {
        std::string where(source);
        if (tree != nullptr) {
          const auto loc = tree->GetLocation(field, i);
          if (loc.line >= 0) where = Position(source, loc.line + 1, loc.column + 1);
        }
        return InvalidArgument(where + ": key " + MapKeyString(element) + " appears twice in '" +
                               field->name() + "'");
      }
      FASTPATH_RETURN_IF_ERROR(CheckDuplicateMapKeys(
          element,
          tree ? tree->GetTreeForNested(field, i) : nullptr,
          source));
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<inference::ModelConfig> ParseModelConfig(std::string_view text,
                                                  std::string_view source_name) {
  return ParseModelConfig(text, source_name, nullptr);
}

StatusOr<inference::ModelConfig> ParseModelConfig(std::string_view text,
                                                  std::string_view source_name,
                                                  ParseDetails* details) {
  if (text.size() > kMaxConfigBytes) {
    return InvalidArgument(std::string(source_name) + ": " + std::to_string(text.size()) +
                           " bytes is more than a config may hold (" +
                           std::to_string(kMaxConfigBytes) + ")");
  }
  const ShadowSchema& shadow = Shadow();
  if (shadow.config == nullptr) {
    return Internal("config schema could not be rebuilt from model_config.proto");
  }
  std::unique_ptr<pb::Message> parsed(shadow.factory->GetPrototype(shadow.config)->New());

  FirstErrorCollector errors;
  pb::TextFormat::ParseInfoTree tree;
  pb::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(&tree);
  parser.AllowUnknownField(false);
  parser.AllowUnknownExtension(false);
  pb::io::ArrayInputStream input(text.data(), static_cast<int>(text.size()));
  if (!parser.Parse(&input, parsed.get())) {
    if (!errors.has_error()) return InvalidArgument(std::string(source_name) + ": parse error");
    int line = errors.line();
    int column = errors.column();
    PointAtFieldName(text, QuotedAfter(errors.message(), "has no field named"), &line, &column);
    return InvalidArgument(Position(source_name, line + 1, column + 1) + ": " +
                           Explain(errors.message()));
  }
  FASTPATH_RETURN_IF_ERROR(CheckUtf8(*parsed, &tree, source_name));
  FASTPATH_RETURN_IF_ERROR(CheckDuplicateMapKeys(*parsed, &tree, source_name));

  inference::ModelConfig config;
  std::string wire;
  if (!parsed->SerializeToString(&wire) || !config.ParseFromString(wire)) {
    return Internal(std::string(source_name) + ": parsed config could not be converted");
  }
  if (details != nullptr) {
    const pb::FieldDescriptor* mbs = shadow.config->FindFieldByName("max_batch_size");
    details->max_batch_size_set = mbs != nullptr && parsed->GetReflection()->HasField(*parsed, mbs);
  }
  return config;
}

}  // namespace fastpath::config
