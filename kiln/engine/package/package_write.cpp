#include <kiln/engine/package/model_check.h>
#include <kiln/engine/package/package_format.h>

#include <kiln/engine/ir/xxh3.h>

#include <algorithm>
#include <map>

namespace kiln::engine::package {

namespace format {

void encode_header(const PackageHeader& header, uint8_t* bytes) {
  std::memset(bytes, 0, kPackageHeaderSize);
  std::memcpy(bytes + kMagicAt, kPackageMagic, sizeof(kPackageMagic));
  store(bytes, kVersionAt, header.format_version);
  store(bytes, kFlatbufferOffsetAt, header.flatbuffer_offset);
  store(bytes, kFlatbufferSizeAt, header.flatbuffer_size);
  store(bytes, kWeightsOffsetAt, header.weights_offset);
  store(bytes, kWeightsSizeAt, header.weights_size);
  store(bytes, kContentHashAt, header.content_hash);
}

const uint8_t* content_hash_field(const schema::Package* root) {
  // Generated tables derive privately from flatbuffers::Table, which has no other members.
  return reinterpret_cast<const flatbuffers::Table*>(root)->GetAddressOf(
      schema::Package::VT_CONTENT_HASH);
}

uint64_t hash_package(runtime::Span<const uint8_t> flatbuffer, const uint8_t* hash_field) {
  static constexpr uint8_t kZeros[sizeof(uint64_t)] = {};
  ir::Xxh3Stream hash;
  size_t before = static_cast<size_t>(hash_field - flatbuffer.data());
  hash.update(flatbuffer.data(), before);
  hash.update(kZeros, sizeof(kZeros));
  size_t after = before + sizeof(kZeros);
  hash.update(flatbuffer.data() + after, flatbuffer.size() - after);
  return hash.digest();
}

}  // namespace format

namespace {

namespace fb = flatbuffers;
namespace s = schema;

class Encoder {
 public:
  explicit Encoder(fb::FlatBufferBuilder& builder) : b_(builder) {}

  fb::Offset<s::Dim> dim(const ir::Dim& dim) {
    std::vector<fb::Offset<s::DimTerm>> terms;
    for (const ir::Dim::Term& t : dim.terms()) {
      s::DimAtom atom = s::DimAtom::Symbol;
      fb::Offset<fb::String> symbol;
      fb::Offset<s::Dim> left, right;
      uint32_t anonymous = 0;
      if (t.op != 0) {
        atom = t.op == '*' ? s::DimAtom::Product : s::DimAtom::Quotient;
        left = this->dim(t.left);
        right = this->dim(t.right);
      } else if (t.is_anonymous()) {
        // Renumbered from first use so that the bytes do not depend on the process's counter.
        atom = s::DimAtom::Anonymous;
        anonymous = anonymous_.emplace(t.key, anonymous_.size()).first->second;
      } else {
        symbol = b_.CreateString(t.key);
      }
      terms.push_back(s::CreateDimTerm(b_, t.coefficient, atom, symbol, anonymous, left, right));
    }
    return s::CreateDim(b_, dim.constant(), terms.empty() ? 0 : b_.CreateVector(terms));
  }

  fb::Offset<s::Attribute> attribute(const ir::Attribute& a) {
    auto name = b_.CreateString(a.name);
    s::AttributeValue type = s::AttributeValue::NONE;
    fb::Offset<void> value;
    if (const auto* i = std::get_if<int64_t>(&a.value)) {
      type = s::AttributeValue::IntAttr;
      value = s::CreateIntAttr(b_, *i).Union();
    } else if (const auto* d = std::get_if<double>(&a.value)) {
      type = s::AttributeValue::FloatAttr;
      value = s::CreateFloatAttr(b_, *d).Union();
    } else if (const auto* str = std::get_if<std::string>(&a.value)) {
      type = s::AttributeValue::StringAttr;
      value = s::CreateStringAttr(b_, b_.CreateString(*str)).Union();
    } else if (const auto* is = std::get_if<std::vector<int64_t>>(&a.value)) {
      type = s::AttributeValue::IntsAttr;
      value = s::CreateIntsAttr(b_, b_.CreateVector(*is)).Union();
    } else if (const auto* ds = std::get_if<std::vector<double>>(&a.value)) {
      type = s::AttributeValue::FloatsAttr;
      value = s::CreateFloatsAttr(b_, b_.CreateVector(*ds)).Union();
    } else if (const auto* ss = std::get_if<std::vector<std::string>>(&a.value)) {
      type = s::AttributeValue::StringsAttr;
      value = s::CreateStringsAttr(b_, b_.CreateVectorOfStrings(*ss)).Union();
    } else {
      type = s::AttributeValue::WeightRefAttr;
      value = s::CreateWeightRefAttr(b_, std::get<ir::WeightRef>(a.value).weight).Union();
    }
    return s::CreateAttribute(b_, name, type, value);
  }

  fb::Offset<s::Node> node(const ir::Node& n) {
    std::vector<fb::Offset<s::Attribute>> attributes;
    for (const auto& a : n.attributes) attributes.push_back(attribute(a));
    std::vector<fb::Offset<s::Region>> regions;
    for (const auto& r : n.regions) {
      std::vector<fb::Offset<s::Node>> nodes;
      for (const auto& inner : r.nodes) nodes.push_back(node(inner));
      regions.push_back(s::CreateRegion(b_, b_.CreateVector(nodes), b_.CreateVector(r.outputs)));
    }
    return s::CreateNode(b_, b_.CreateString(n.name), b_.CreateString(n.op),
                         b_.CreateString(n.domain), b_.CreateVector(n.inputs),
                         b_.CreateVector(n.outputs), b_.CreateVector(attributes),
                         b_.CreateVector(regions));
  }

  fb::Offset<s::Function> function(const ir::Graph& g) {
    std::vector<fb::Offset<s::Value>> values;
    for (const ir::Value& v : g.values) {
      std::vector<fb::Offset<s::Dim>> shape;
      for (const ir::Dim& d : v.type.shape) shape.push_back(dim(d));
      auto type = s::CreateTensorType(b_, static_cast<int8_t>(v.type.dtype), v.type.rank_known,
                                      b_.CreateVector(shape));
      values.push_back(s::CreateValue(b_, b_.CreateString(v.name), type, v.weight));
    }
    std::vector<fb::Offset<s::Node>> nodes;
    for (const ir::Node& n : g.nodes) nodes.push_back(node(n));
    return s::CreateFunction(b_, b_.CreateString(g.name), b_.CreateVector(values),
                             b_.CreateVector(nodes), b_.CreateVector(g.inputs),
                             b_.CreateVector(g.outputs));
  }

 private:
  fb::FlatBufferBuilder& b_;
  std::map<std::string, uint32_t> anonymous_;
};

}  // namespace

runtime::Result<std::vector<uint8_t>> write_package(const ir::Model& model) {
  KILN_RETURN_IF_ERROR(check_model(model, runtime::Error::InvalidArgument, "write package"));
  for (size_t i = 0; i < model.weights.size(); ++i) {
    const ir::Weight& w = model.weights[i];
    uint64_t expected = *weight_byte_count(w.dtype, w.sizes);
    if (w.data.size() != expected) {
      return runtime::Status(runtime::Error::InvalidArgument,
                             "write package: weight " + std::to_string(i) + " '" + w.name +
                                 "': has " + std::to_string(w.data.size()) + " bytes (expected " +
                                 std::to_string(expected) + " for " +
                                 std::string(runtime::to_string(w.dtype)) + " sizes)");
    }
  }
  // Smallest first: the weights read as they are (biases, scales, shape constants) end up next
  // to each other, away from the large ones a warm load takes packed from the compiled artifact
  // and never reads; the kernel maps a file in blocks of many pages, so reading a small weight
  // next to a large one would make the large one resident too.
  std::vector<size_t> order(model.weights.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return model.weights[a].data.size() < model.weights[b].data.size();
  });
  std::vector<uint64_t> offsets(model.weights.size());
  uint64_t segment_end = 0;
  for (size_t i : order) {
    offsets[i] = segment_end;
    segment_end =
        format::align_up(segment_end + model.weights[i].data.size(), kPackageWeightAlignment);
  }

  fb::FlatBufferBuilder builder(4096);
  Encoder encoder(builder);
  std::vector<fb::Offset<s::Function>> functions;
  for (const ir::Graph& g : model.functions) functions.push_back(encoder.function(g));
  std::vector<fb::Offset<s::Weight>> weights;
  for (size_t i = 0; i < model.weights.size(); ++i) {
    const ir::Weight& w = model.weights[i];
    weights.push_back(s::CreateWeight(builder, builder.CreateString(w.name),
                                      static_cast<int8_t>(w.dtype), builder.CreateVector(w.sizes),
                                      offsets[i], w.data.size(), ir::hash_weight(w)));
  }
  // A non-default placeholder so that the field is present and can be set in place below.
  auto root = s::CreatePackage(builder, kPackageFormatVersion, builder.CreateVector(functions),
                               builder.CreateVector(weights), ~uint64_t{0});
  builder.Finish(root, s::PackageIdentifier());

  PackageHeader header;
  header.format_version = kPackageFormatVersion;
  header.flatbuffer_offset = kPackageHeaderSize;
  header.flatbuffer_size = builder.GetSize();
  header.weights_offset =
      format::align_up(header.flatbuffer_offset + header.flatbuffer_size, kPackageWeightAlignment);
  header.weights_size = segment_end;
  std::vector<uint8_t> bytes(header.weights_offset + header.weights_size, 0);
  std::memcpy(bytes.data() + header.flatbuffer_offset, builder.GetBufferPointer(),
              builder.GetSize());
  for (size_t i = 0; i < model.weights.size(); ++i) {
    const auto& data = model.weights[i].data;
    if (!data.empty()) {
      std::memcpy(bytes.data() + header.weights_offset + offsets[i], data.data(), data.size());
    }
  }

  uint8_t* flatbuffer = bytes.data() + header.flatbuffer_offset;
  auto* package = s::GetMutablePackage(flatbuffer);
  header.content_hash = format::hash_package({flatbuffer, header.flatbuffer_size},
                                             format::content_hash_field(package));
  package->mutate_content_hash(header.content_hash);
  format::encode_header(header, bytes.data());
  return bytes;
}

runtime::Result<uint64_t> package_hash(const ir::Model& model) {
  KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, write_package(model));
  return format::load<uint64_t>(bytes.data(), format::kContentHashAt);
}

}  // namespace kiln::engine::package
