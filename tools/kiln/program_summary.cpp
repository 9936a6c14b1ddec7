#include <tools/kiln/program_summary.h>

#include <kiln/runtime/schema/program_generated.h>

#include <algorithm>
#include <filesystem>
#include <vector>

namespace kiln::tools {

using json = nlohmann::ordered_json;
using runtime::Program;
using runtime::Result;
using runtime::TensorMeta;

std::string shape_with_symbols(const TensorMeta& meta) {
  std::string out = "[";
  for (size_t d = 0; d < meta.sizes.size(); ++d) {
    if (d > 0) out += ", ";
    const std::string symbol = d < meta.dim_names.size() ? meta.dim_names[d] : "";
    const std::string size = std::to_string(meta.sizes[d]);
    if (symbol.empty()) {
      out += size;
    } else if (meta.dynamism == runtime::ShapeDynamism::Bounded) {
      out += symbol + "<=" + size;
    } else {
      out += symbol;
    }
  }
  return out + "]";
}

namespace {

// Delegate blobs larger than this are not parsed as a manifest.
constexpr size_t kMaxManifestBytes = 1 << 20;

json tensor_json(const TensorMeta& meta) {
  json j = {{"name", meta.name}, {"kind", std::string(runtime::to_string(meta.tag))}};
  if (meta.tag == runtime::Tag::Tensor) {
    j["dtype"] = std::string(runtime::to_string(meta.dtype));
    j["shape"] = meta.sizes;
    j["dim_names"] = meta.dim_names;
    j["shape_text"] = shape_with_symbols(meta);
    j["dynamism"] = std::string(runtime::to_string(meta.dynamism));
  }
  return j;
}

// The processed bytes of a delegate, if they look like a JSON manifest (KilnBackend's format);
// other backends' blobs are opaque and give null.
json manifest_of(const Program& program, const schema::Delegate& delegate) {
  const uint8_t* data = nullptr;
  size_t size = 0;
  if (delegate.processed_segment() >= 0) {
    auto segment = program.segment(static_cast<size_t>(delegate.processed_segment()));
    if (!segment.ok()) return nullptr;
    data = static_cast<const uint8_t*>((*segment)->data());
    size = (*segment)->size();
  } else if (delegate.processed() != nullptr) {
    data = delegate.processed()->data();
    size = delegate.processed()->size();
  }
  if (data == nullptr || size == 0 || size > kMaxManifestBytes || data[0] != '{') return nullptr;
  json manifest = json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (manifest.is_discarded() || !manifest.is_object()) return nullptr;
  return manifest;
}

json delegate_json(const Program& program, const runtime::DelegateMeta& meta,
                   const schema::Delegate* delegate) {
  json j = {
      {"id", meta.id}, {"backend_id", meta.backend_id}, {"processed_size", meta.processed_size}};
  if (delegate == nullptr) return j;
  const int segment = delegate->processed_segment();
  j["processed_in"] = segment >= 0 ? "segment " + std::to_string(segment) : "inline";
  if (delegate->compile_specs() != nullptr && delegate->compile_specs()->size() > 0) {
    json specs = json::object();
    for (const auto* spec : *delegate->compile_specs()) {
      if (spec->key() == nullptr) continue;
      std::string value;
      if (spec->value() != nullptr) value.assign(spec->value()->begin(), spec->value()->end());
      // Printable values as text, others by size.
      bool text = value.size() <= 256 && std::all_of(value.begin(), value.end(), [](char c) {
                    return c >= 0x20 && c < 0x7f;
                  });
      specs[spec->key()->str()] = text ? value : std::to_string(value.size()) + " bytes";
    }
    j["compile_specs"] = specs;
  }
  json manifest = manifest_of(program, *delegate);
  if (manifest.is_null()) return j;
  j["manifest"] = manifest;
  json functions = json::array();
  if (manifest.contains("enumerated_functions") && manifest["enumerated_functions"].is_array()) {
    for (const auto& entry : manifest["enumerated_functions"]) functions.push_back(entry);
  } else if (manifest.contains("function")) {
    functions.push_back({{"function", manifest["function"]}});
  }
  j["functions"] = functions;
  return j;
}

const schema::Method* find_method(const schema::Program* root, const std::string& name) {
  if (root == nullptr || root->methods() == nullptr) return nullptr;
  for (const auto* method : *root->methods()) {
    if (method->name() != nullptr && method->name()->str() == name) return method;
  }
  return nullptr;
}

Result<json> method_json(const Program& program, const std::string& name) {
  KILN_ASSIGN_OR_RETURN(auto meta, program.method_meta(name));
  json j = {{"name", meta.name}, {"inputs", json::array()}, {"outputs", json::array()}};
  for (const auto& input : meta.inputs) j["inputs"].push_back(tensor_json(input));
  for (const auto& output : meta.outputs) j["outputs"].push_back(tensor_json(output));
  const schema::Method* fb = find_method(program.flatbuffer(), name);
  j["delegates"] = json::array();
  for (size_t i = 0; i < meta.delegates.size(); ++i) {
    const schema::Delegate* delegate = nullptr;
    if (fb != nullptr && fb->delegates() != nullptr && i < fb->delegates()->size()) {
      delegate = fb->delegates()->Get(static_cast<flatbuffers::uoffset_t>(i));
    }
    j["delegates"].push_back(delegate_json(program, meta.delegates[i], delegate));
  }
  j["kernel_calls"] = meta.kernel_ops;
  j["num_instructions"] = meta.num_instructions;
  j["planned_memory"] = {{"arena_sizes", meta.arena_sizes}, {"total_bytes", meta.planned_bytes()}};
  return j;
}

// What each segment holds: "constants of 'forward'", "delegate 'forward_0' (KilnBackend)",
// "named data 'model'". A segment may serve several users.
std::vector<std::vector<std::string>> segment_users(const schema::Program& root) {
  const size_t count = root.segments() != nullptr ? root.segments()->size() : 0;
  std::vector<std::vector<std::string>> users(count);
  const auto add = [&](int64_t index, const std::string& user) {
    if (index < 0 || static_cast<size_t>(index) >= count) return;
    auto& list = users[static_cast<size_t>(index)];
    if (std::find(list.begin(), list.end(), user) == list.end()) list.push_back(user);
  };
  if (root.methods() != nullptr) {
    for (const auto* method : *root.methods()) {
      const std::string name = method->name() != nullptr ? method->name()->str() : "?";
      if (method->values() != nullptr) {
        for (const auto* value : *method->values()) {
          const auto* tensor = value->kind_as_TensorValue();
          if (tensor != nullptr) add(tensor->constant_segment(), "constants of '" + name + "'");
        }
      }
      if (method->delegates() != nullptr) {
        for (const auto* delegate : *method->delegates()) {
          add(delegate->processed_segment(),
              "delegate '" + (delegate->id() ? delegate->id()->str() : std::string("?")) + "' (" +
                  (delegate->backend_id() ? delegate->backend_id()->str() : "?") + ")");
        }
      }
    }
  }
  if (root.named_data() != nullptr) {
    for (const auto* entry : *root.named_data()) {
      add(entry->segment(), "named data '" + (entry->key() ? entry->key()->str() : "") + "'");
    }
  }
  return users;
}

}  // namespace

Result<json> program_summary(const std::string& path, const Program& program) {
  json doc = {{"program", path}, {"format_version", program.format_version()}};
  std::error_code ec;
  const auto file_size = std::filesystem::file_size(path, ec);
  if (!ec) doc["file_size"] = file_size;
  doc["methods"] = json::array();
  for (const auto& name : program.method_names()) {
    KILN_ASSIGN_OR_RETURN(json method, method_json(program, name));
    doc["methods"].push_back(std::move(method));
  }
  const schema::Program* root = program.flatbuffer();
  std::vector<uint64_t> segment_sizes;
  doc["segments"] = json::array();
  if (root != nullptr && root->segments() != nullptr) {
    const auto users = segment_users(*root);
    for (flatbuffers::uoffset_t i = 0; i < root->segments()->size(); ++i) {
      const auto* segment = root->segments()->Get(i);
      segment_sizes.push_back(segment->size());
      doc["segments"].push_back({{"index", i},
                                 {"offset", segment->offset()},
                                 {"size", segment->size()},
                                 {"used_by", users[i]}});
    }
  }
  doc["named_data"] = json::array();
  if (root != nullptr && root->named_data() != nullptr) {
    for (const auto* entry : *root->named_data()) {
      json item = {{"key", entry->key() ? entry->key()->str() : ""}, {"segment", entry->segment()}};
      if (entry->segment() < segment_sizes.size()) item["size"] = segment_sizes[entry->segment()];
      doc["named_data"].push_back(std::move(item));
    }
  }
  return doc;
}

}  // namespace kiln::tools
