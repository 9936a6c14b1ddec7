#include <kiln/engine/ir/graph.h>

#include <kiln/engine/ir/xxh3.h>

namespace kiln::engine::ir {

bool TensorType::is_static() const {
  if (!rank_known) return false;
  for (const auto& d : shape) {
    if (!d.is_static()) return false;
  }
  return true;
}

std::optional<std::vector<int64_t>> TensorType::static_sizes() const {
  if (!is_static()) return std::nullopt;
  std::vector<int64_t> sizes;
  for (const auto& d : shape) sizes.push_back(d.value());
  return sizes;
}

std::string TensorType::to_string() const {
  std::string out(runtime::to_string(dtype));
  if (!rank_known) return out + "[?]";
  out += "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + shape[i].to_string();
  return out + "]";
}

const Attribute* Node::attribute(std::string_view name) const {
  for (const auto& a : attributes) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

int Graph::find_value(std::string_view name) const {
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

int Graph::add_value(Value value) {
  values.push_back(std::move(value));
  return static_cast<int>(values.size()) - 1;
}

uint64_t hash_weight(runtime::ScalarType dtype, runtime::Span<const int64_t> sizes,
                     runtime::Span<const uint8_t> data) {
  // XXH3 runs at memory speed: a package's reader hashes every weight, so this is load time.
  Xxh3Stream hash;
  auto code = static_cast<uint8_t>(dtype);
  hash.update(&code, 1);
  hash.update(sizes.data(), sizes.size() * sizeof(int64_t));
  hash.update(data.data(), data.size());
  return hash.digest();
}

uint64_t hash_weight(const Weight& weight) {
  return hash_weight(weight.dtype, weight.sizes, weight.data);
}

int Model::add_weight(Weight weight) {
  weight.content_hash = hash_weight(weight);
  for (size_t i = 0; i < weights.size(); ++i) {
    const Weight& w = weights[i];
    if (w.content_hash == weight.content_hash && w.dtype == weight.dtype &&
        w.sizes == weight.sizes && w.data == weight.data) {
      return static_cast<int>(i);
    }
  }
  weights.push_back(std::move(weight));
  return static_cast<int>(weights.size()) - 1;
}

const Graph* Model::find_function(std::string_view name) const {
  for (const auto& f : functions) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

}  // namespace kiln::engine::ir

namespace kiln::engine::ir {

std::optional<runtime::EValue> scalar_attribute(const AttributeValue& value) {
  if (const auto* i = std::get_if<int64_t>(&value)) return runtime::EValue(*i);
  if (const auto* d = std::get_if<double>(&value)) return runtime::EValue(*d);
  if (const auto* s = std::get_if<std::string>(&value)) return runtime::EValue(*s);
  if (const auto* is = std::get_if<std::vector<int64_t>>(&value)) return runtime::EValue(*is);
  if (const auto* ds = std::get_if<std::vector<double>>(&value)) return runtime::EValue(*ds);
  if (const auto* ss = std::get_if<std::vector<std::string>>(&value)) {
    std::string joined;
    for (size_t i = 0; i < ss->size(); ++i) joined += (i ? "," : "") + (*ss)[i];
    return runtime::EValue(joined);
  }
  return std::nullopt;
}

}  // namespace kiln::engine::ir
