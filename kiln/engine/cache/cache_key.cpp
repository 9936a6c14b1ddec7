#include <kiln/engine/cache/cache_key.h>

#include <kiln/engine/ir/xxh3.h>

namespace kiln::engine::cache {
namespace {

// Bumped if the encoding below ever changes, so old and new encodings never meet.
constexpr char kKeyFormat[] = "kiln-cache-key/1";

enum class Field : char {
  ModelHash = 'M',
  Functions = 'F',
  InputShapes = 'S',
  Specialization = 'P',
  EngineVersion = 'E',
  CpuFeatures = 'C',
};

void put_u64(std::string& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

void put_string(std::string& out, const std::string& text) {
  put_u64(out, text.size());
  out += text;
}

void put_field(std::string& out, Field field) { out.push_back(static_cast<char>(field)); }

}  // namespace

std::string CacheKey::encoded() const {
  std::string out(kKeyFormat, sizeof(kKeyFormat));  // keeps the terminating NUL as separator
  put_field(out, Field::ModelHash);
  put_u64(out, model_hash);
  put_field(out, Field::Functions);
  put_u64(out, functions.size());
  for (const std::string& function : functions) put_string(out, function);
  put_field(out, Field::InputShapes);
  put_u64(out, input_shapes.size());
  for (const auto& function_shapes : input_shapes) {
    put_u64(out, function_shapes.size());
    for (const auto& shape : function_shapes) {
      put_u64(out, shape.size());
      for (int64_t dim : shape) put_u64(out, static_cast<uint64_t>(dim));
    }
  }
  put_field(out, Field::Specialization);
  put_string(out, specialization);
  put_field(out, Field::EngineVersion);
  put_string(out, engine_version);
  put_field(out, Field::CpuFeatures);
  put_string(out, cpu_features);
  return out;
}

uint64_t CacheKey::hash() const {
  const std::string bytes = encoded();
  return checksum64(bytes.data(), bytes.size());
}

std::string CacheKey::hex() const { return to_hex(hash()); }

uint64_t checksum64(const void* data, size_t size) { return ir::xxh3_64(data, size); }

std::string to_hex(uint64_t value) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text(16, '0');
  for (int i = 15; i >= 0; --i) {
    text[i] = kDigits[value & 0xf];
    value >>= 4;
  }
  return text;
}

}  // namespace kiln::engine::cache
