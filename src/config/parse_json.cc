// ParseModelConfigJson: a load request's "config" parameter (JSON, protobuf's mapping of
// ModelConfig, as Triton's load API takes it) -> inference::ModelConfig.
//
// protobuf's JSON parser does the conversion, but it lets through what config.pbtxt's
// parser refuses (parse.cc): a field written twice keeps its last value silently (also
// as "max_batch_size" and "maxBatchSize"), and an enum written as a number outside the
// enum is kept. So the document is first walked against the schema, which refuses those
// and names an unsupported field the way config.pbtxt's errors do.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <algorithm>
#include <set>
#include <string>

#include "fastpath/config/model_config.h"

namespace fastpath::config {
namespace {

namespace pb = google::protobuf;

constexpr size_t kMaxConfigJsonBytes = 4 << 20;  // as config.pbtxt's bound

// An integer map key as protobuf reads it ("01" and "+1" are 1); unchanged if not one.
std::string CanonicalInteger(const std::string& key) {
  std::string_view digits = key;
  const bool negative = !digits.empty() && digits.front() == '-';
  if (!digits.empty() && (digits.front() == '-' || digits.front() == '+')) digits.remove_prefix(1);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos) {
    return key;
  }
  const size_t first = std::min(digits.find_first_not_of('0'), digits.size() - 1);
  digits.remove_prefix(first);
  return (negative && digits != "0" ? "-" : "") + std::string(digits);
}

const pb::FieldDescriptor* FindField(const pb::Descriptor* message, std::string_view key) {
  for (int i = 0; i < message->field_count(); ++i) {
    const pb::FieldDescriptor* field = message->field(i);
    if (field->name() == key || field->json_name() == key) return field;
  }
  return nullptr;
}

std::string Supported(const pb::Descriptor* message) {
  std::string out;
  for (int i = 0; i < message->field_count(); ++i) {
    out += (i ? ", " : "") + message->field(i)->name();
  }
  return out;
}

Status CheckValue(const rapidjson::Value& value, const pb::FieldDescriptor* field,
                  const std::string& path, std::string_view source);

// `object` against `message`: every key a field of it, none twice, and the same below.
// What is not the expected JSON type is left to protobuf's parser, which says so.
Status CheckMessage(const rapidjson::Value& object, const pb::Descriptor* message,
                    const std::string& path, std::string_view source,
                    std::set<const pb::FieldDescriptor*>* seen) {
  if (!object.IsObject()) return Status::Ok();
  for (const auto& member : object.GetObject()) {
    const std::string key(member.name.GetString(), member.name.GetStringLength());
    const pb::FieldDescriptor* field = FindField(message, key);
    if (field == nullptr) {
      return InvalidArgument(std::string(source) + ": unsupported field '" + path + key + "' in " +
                             message->name() + " (fastpath supports: " + Supported(message) + ")");
    }
    if (!seen->insert(field).second) {
      return InvalidArgument(std::string(source) + ": field '" + path + field->name() +
                             "' is written twice");
    }
    if (member.value.IsNull()) continue;
    const std::string at = path + field->name();
    if (field->is_map()) {
      if (!member.value.IsObject()) continue;
      const pb::FieldDescriptor* value_field = field->message_type()->map_value();
      const bool integer_keys =
          field->message_type()->map_key()->cpp_type() != pb::FieldDescriptor::CPPTYPE_STRING &&
          field->message_type()->map_key()->cpp_type() != pb::FieldDescriptor::CPPTYPE_BOOL;
      std::set<std::string> keys;
      for (const auto& entry : member.value.GetObject()) {
        const std::string map_key(entry.name.GetString(), entry.name.GetStringLength());
        // "1" and "01" are one integer key; what is not an integer protobuf refuses.
        if (!keys.insert(integer_keys ? CanonicalInteger(map_key) : map_key).second) {
          return InvalidArgument(std::string(source) + ": key '" + map_key +
                                 "' appears twice in '" + at + "'");
        }
        FASTPATH_RETURN_IF_ERROR(
            CheckValue(entry.value, value_field, at + "['" + map_key + "']", source));
      }
    } else if (field->is_repeated() && member.value.IsArray()) {
      int i = 0;
      for (const auto& element : member.value.GetArray()) {
        // protobuf's parser flattens a list in a list, which would take its elements past
        // this walk; no config needs one.
        if (element.IsArray()) {
          return InvalidArgument(std::string(source) + ": '" + at + "[" + std::to_string(i) +
                                 "]' is a list in a list");
        }
        FASTPATH_RETURN_IF_ERROR(
            CheckValue(element, field, at + "[" + std::to_string(i++) + "]", source));
      }
    } else {
      FASTPATH_RETURN_IF_ERROR(CheckValue(member.value, field, at, source));
    }
  }
  return Status::Ok();
}

// One value of `field` (an element, for a repeated one).
Status CheckValue(const rapidjson::Value& value, const pb::FieldDescriptor* field,
                  const std::string& path, std::string_view source) {
  if (field->type() == pb::FieldDescriptor::TYPE_MESSAGE) {
    std::set<const pb::FieldDescriptor*> seen;
    return CheckMessage(value, field->message_type(), path + ".", source, &seen);
  }
  if (field->type() == pb::FieldDescriptor::TYPE_ENUM && value.IsNumber()) {
    const pb::EnumDescriptor* type = field->enum_type();
    if (!value.IsInt() || type->FindValueByNumber(value.GetInt()) == nullptr) {
      std::string names;
      for (int i = 0; i < type->value_count(); ++i) {
        names += (i ? ", " : "") + type->value(i)->name();
      }
      return InvalidArgument(std::string(source) + ": '" + path + "' is not a " + type->name() +
                             " (one of " + names + ")");
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<inference::ModelConfig> ParseModelConfigJson(std::string_view json,
                                                      std::string_view source_name,
                                                      ParseDetails* details) {
  const std::string source(source_name);
  if (json.size() > kMaxConfigJsonBytes) {
    return InvalidArgument(source + ": " + std::to_string(json.size()) +
                           " bytes is more than a config may hold (" +
                           std::to_string(kMaxConfigJsonBytes) + ")");
  }
  rapidjson::Document doc;
  // Iterative: a deeply nested document cannot overflow the stack (rapidjson's recursive
  // parser does at a depth that fits well within the size bound).
  doc.Parse<rapidjson::kParseValidateEncodingFlag | rapidjson::kParseIterativeFlag>(json.data(),
                                                                                    json.size());
  if (doc.HasParseError()) {
    return InvalidArgument(source +
                           ": not JSON: " + rapidjson::GetParseError_En(doc.GetParseError()) +
                           " (at byte " + std::to_string(doc.GetErrorOffset()) + ")");
  }
  if (!doc.IsObject()) return InvalidArgument(source + ": not a JSON object");
  const pb::Descriptor* schema = inference::ModelConfig::descriptor();
  std::set<const pb::FieldDescriptor*> seen;
  FASTPATH_RETURN_IF_ERROR(CheckMessage(doc, schema, "", source, &seen));

  inference::ModelConfig config;
  pb::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  if (auto status = pb::util::JsonStringToMessage(std::string(json), &config, options);
      !status.ok()) {
    // protobuf starts its message with the field's path, or with ": " when there is none.
    std::string_view message(status.message().data(), status.message().size());
    if (message.substr(0, 2) == ": ") message.remove_prefix(2);
    return InvalidArgument(source + ": " + std::string(message));
  }
  if (details != nullptr) {
    // Written, under either of its names (null reads as absent, as protobuf takes it).
    const pb::FieldDescriptor* max_batch_size = schema->FindFieldByName("max_batch_size");
    details->max_batch_size_set = false;
    for (const auto& member : doc.GetObject()) {
      const std::string_view key(member.name.GetString(), member.name.GetStringLength());
      if (FindField(schema, key) == max_batch_size && !member.value.IsNull()) {
        details->max_batch_size_set = true;
      }
    }
  }
  return config;
}

}  // namespace fastpath::config
