#include <kiln/engine/package/model_check.h>
#include <kiln/engine/package/package_format.h>
#include <kiln/runtime/core/aligned_buffer.h>

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

namespace kiln::engine::package {

namespace {

namespace fb = flatbuffers;
namespace s = schema;
using runtime::Error;
using runtime::Result;
using runtime::Status;

// Bounds the verifier's work and the decoder's recursion (regions, dim expressions) on
// hostile input; far beyond what real models need.
constexpr fb::uoffset_t kMaxDepth = 64;
constexpr fb::uoffset_t kMaxTables = 1000000;

Status invalid(const std::string& where, const std::string& problem) {
  return Status(Error::InvalidProgram, "read package: " + where + ": " + problem);
}

std::string str(const fb::String* s) { return s == nullptr ? std::string() : s->str(); }

template <typename T>
std::vector<T> list(const fb::Vector<T>* v) {
  return v == nullptr ? std::vector<T>() : std::vector<T>(v->begin(), v->end());
}

template <typename T>
std::vector<const T*> list(const fb::Vector<fb::Offset<T>>* v) {
  return v == nullptr ? std::vector<const T*>() : std::vector<const T*>(v->begin(), v->end());
}

// The verifier checks the alignment of a vector's length, not of 8-byte elements.
template <typename T>
bool aligned(const fb::Vector<T>* v) {
  return v == nullptr || v->size() == 0 || reinterpret_cast<uintptr_t>(v->data()) % alignof(T) == 0;
}

bool fits(uint64_t offset, uint64_t size, uint64_t limit) {
  return offset <= limit && size <= limit - offset;
}

Result<PackageHeader> decode_header(runtime::Span<const uint8_t> bytes) {
  const std::string where = "header";
  if (bytes.size() < kPackageHeaderSize) {
    return invalid(where, "file is " + std::to_string(bytes.size()) + " bytes (expected at least " +
                              std::to_string(kPackageHeaderSize) + ")");
  }
  const uint8_t* p = bytes.data();
  if (std::memcmp(p + format::kMagicAt, kPackageMagic, sizeof(kPackageMagic)) != 0) {
    return invalid(where, "magic is not \"KLNP\" (not a kiln model package)");
  }
  PackageHeader h;
  h.format_version = format::load<uint32_t>(p, format::kVersionAt);
  h.flatbuffer_offset = format::load<uint64_t>(p, format::kFlatbufferOffsetAt);
  h.flatbuffer_size = format::load<uint64_t>(p, format::kFlatbufferSizeAt);
  h.weights_offset = format::load<uint64_t>(p, format::kWeightsOffsetAt);
  h.weights_size = format::load<uint64_t>(p, format::kWeightsSizeAt);
  h.content_hash = format::load<uint64_t>(p, format::kContentHashAt);
  if (h.format_version != kPackageFormatVersion) {
    return invalid(where, "format version " + std::to_string(h.format_version) + " (expected " +
                              std::to_string(kPackageFormatVersion) + ")");
  }
  for (size_t at = format::kReservedAt; at < kPackageHeaderSize; ++at) {
    if (p[at] != 0) {
      return invalid(where, "reserved byte " + std::to_string(at) + " is " + std::to_string(p[at]) +
                                " (expected 0)");
    }
  }
  if (h.flatbuffer_offset != kPackageHeaderSize) {
    return invalid(where, "flatbuffer offset " + std::to_string(h.flatbuffer_offset) +
                              " (expected " + std::to_string(kPackageHeaderSize) + ")");
  }
  if (h.flatbuffer_size == 0 || h.flatbuffer_size >= FLATBUFFERS_MAX_BUFFER_SIZE ||
      !fits(h.flatbuffer_offset, h.flatbuffer_size, bytes.size())) {
    return invalid(where, "flatbuffer size " + std::to_string(h.flatbuffer_size) +
                              " does not fit the file of " + std::to_string(bytes.size()) +
                              " bytes");
  }
  uint64_t weights_offset =
      format::align_up(h.flatbuffer_offset + h.flatbuffer_size, kPackageWeightAlignment);
  if (h.weights_offset != weights_offset) {
    return invalid(where, "weight segment offset " + std::to_string(h.weights_offset) +
                              " (expected " + std::to_string(weights_offset) + ")");
  }
  if (h.weights_offset > bytes.size() || h.weights_size != bytes.size() - h.weights_offset) {
    return invalid(where, "weight segment of " + std::to_string(h.weights_size) +
                              " bytes at offset " + std::to_string(h.weights_offset) +
                              " does not end the file of " + std::to_string(bytes.size()) +
                              " bytes");
  }
  for (uint64_t at = h.flatbuffer_offset + h.flatbuffer_size; at < h.weights_offset; ++at) {
    if (p[at] != 0) return invalid(where, "padding byte " + std::to_string(at) + " is not 0");
  }
  return h;
}

class Decoder {
 public:
  Result<ir::Dim> dim(const std::string& where, const s::Dim* d) {
    ir::Dim result(d->constant());
    std::set<std::string> keys;
    for (const s::DimTerm* t : list(d->terms())) {
      KILN_ASSIGN_OR_RETURN(ir::Dim atom, dim_atom(where, t));
      std::vector<ir::Dim::Term> terms = atom.terms();
      // Atoms are single terms with distinct keys, so the sum below cannot overflow.
      if (terms.size() != 1 || atom.constant() != 0 || terms[0].coefficient != 1) {
        return invalid(where, "dim term " + atom.to_string() + " is not an atom");
      }
      if (!keys.insert(terms[0].key).second) {
        return invalid(where, "dim term " + atom.to_string() + " appears twice");
      }
      if (t->coefficient() == 0) {
        return invalid(where, "dim term " + atom.to_string() + " has coefficient 0");
      }
      result = result + atom * ir::Dim(t->coefficient());
    }
    return result;
  }

  // Decodes `n` into `node` (in place: a node is large to move).
  Status node(const std::string& outer, const s::Node* n, ir::Node& node) {
    node.name = str(n->name());
    node.op = str(n->op());
    node.domain = str(n->domain());
    // Messages name the node; the text is made only when needed (most nodes never need it).
    std::string where_text;
    auto where = [&]() -> const std::string& {
      if (where_text.empty()) where_text = outer + " node '" + node.name + "'";
      return where_text;
    };
    if (node.op.empty()) return invalid(where(), "has no op");
    node.inputs = list(n->inputs());
    node.outputs = list(n->outputs());
    if (n->attributes() != nullptr) {
      node.attributes.reserve(n->attributes()->size());
      for (const s::Attribute* a : *n->attributes()) {
        KILN_ASSIGN_OR_RETURN(ir::Attribute attribute, this->attribute(where, a));
        node.attributes.push_back(std::move(attribute));
      }
    }
    for (const s::Region* r : list(n->regions())) {
      ir::Region region;
      std::string inner = where() + " region " + std::to_string(node.regions.size());
      for (const s::Node* child : list(r->nodes())) {
        KILN_RETURN_IF_ERROR(this->node(inner, child, region.nodes.emplace_back()));
      }
      region.outputs = list(r->outputs());
      node.regions.push_back(std::move(region));
    }
    return Status();
  }

  Result<ir::Graph> function(size_t index, const s::Function* f) {
    ir::Graph g;
    g.name = str(f->name());
    std::string where = "function " + std::to_string(index) + " '" + g.name + "'";
    // Reserved up front: growing would copy every value and node decoded so far (their moves
    // are not noexcept), which made decoding a package of many functions slow.
    g.values.reserve(f->values() != nullptr ? f->values()->size() : 0);
    g.nodes.reserve(f->nodes() != nullptr ? f->nodes()->size() : 0);
    for (const s::Value* v : list(f->values())) {
      ir::Value value;
      value.name = str(v->name());
      value.weight = v->weight();
      auto at = [&] { return where + " value '" + value.name + "'"; };
      const s::TensorType* type = v->type();
      if (type == nullptr) return invalid(at(), "has no type");
      if (!runtime::is_valid_scalar_type(type->dtype())) {
        return invalid(at(), "dtype " + std::to_string(type->dtype()) + " (expected 0.." +
                                 std::to_string(runtime::kNumScalarTypes - 1) + ")");
      }
      value.type.dtype = static_cast<runtime::ScalarType>(type->dtype());
      value.type.rank_known = type->rank_known();
      if (type->shape() != nullptr) {
        value.type.shape.reserve(type->shape()->size());
        for (const s::Dim* d : *type->shape()) {
          if (d->terms() == nullptr || d->terms()->size() == 0) {
            value.type.shape.push_back(static_dim(d->constant()));
            continue;
          }
          // Functions of one package (e.g. enumerated shapes) repeat the same symbolic dims:
          // decode each once.
          dim_key_.clear();  // reused: most keys are found, and then need no allocation
          dim_key(d, dim_key_);
          auto known = dims_.find(dim_key_);
          if (known == dims_.end()) {
            KILN_ASSIGN_OR_RETURN(ir::Dim decoded, dim(at(), d));
            known = dims_.emplace(dim_key_, std::move(decoded)).first;
          }
          value.type.shape.push_back(known->second);
        }
      }
      g.values.push_back(std::move(value));
    }
    for (const s::Node* n : list(f->nodes())) {
      KILN_RETURN_IF_ERROR(node(where, n, g.nodes.emplace_back()));
    }
    g.inputs = list(f->inputs());
    g.outputs = list(f->outputs());
    return g;
  }

 private:
  Result<ir::Dim> dim_atom(const std::string& where, const s::DimTerm* t) {
    switch (t->atom()) {
      case s::DimAtom::Symbol: {
        std::string name = str(t->symbol());
        if (name.empty() || name[0] == '?') {
          return invalid(where, "dim symbol '" + name + "' (expected a name not starting with ?)");
        }
        return ir::Dim::symbol(name);
      }
      case s::DimAtom::Anonymous: {
        auto it = anonymous_.find(t->anonymous());
        if (it == anonymous_.end())
          it = anonymous_.emplace(t->anonymous(), ir::Dim::symbol("")).first;
        return it->second;
      }
      case s::DimAtom::Product:
      case s::DimAtom::Quotient: {
        bool product = t->atom() == s::DimAtom::Product;
        if (t->left() == nullptr || t->right() == nullptr) {
          return invalid(where, std::string("dim ") + (product ? "product" : "quotient") +
                                    " lacks an operand");
        }
        KILN_ASSIGN_OR_RETURN(ir::Dim left, dim(where, t->left()));
        KILN_ASSIGN_OR_RETURN(ir::Dim right, dim(where, t->right()));
        // Only operands that the IR cannot simplify form an atom; others (which could also
        // overflow when folded) were never written by a writer.
        bool simplifies = product ? left.is_static() || right.is_static()
                                  : right.is_static() && (right.value() == 1 ||
                                                          (left.is_static() && right.value() != 0));
        if (simplifies) {
          return invalid(where, "dim (" + left.to_string() + (product ? " * " : " / ") +
                                    right.to_string() + ") is not in simplified form");
        }
        return product ? left * right : left / right;
      }
    }
    return invalid(
        where, "dim term kind " + std::to_string(static_cast<int>(t->atom())) + " (expected 0..3)");
  }

  // `where()` names the node, for messages.
  template <typename Where>
  Result<ir::Attribute> attribute(const Where& where, const s::Attribute* a) {
    ir::Attribute out;
    out.name = str(a->name());
    auto at = [&] { return where() + " attribute '" + out.name + "'"; };
    if (a->name() == nullptr || out.name.empty()) return invalid(where(), "attribute has no name");
    auto absent = [&] { return invalid(at(), "has no value"); };
    switch (a->value_type()) {
      case s::AttributeValue::IntAttr:
        if (a->value_as_IntAttr() == nullptr) return absent();
        out.value = a->value_as_IntAttr()->value();
        return out;
      case s::AttributeValue::FloatAttr:
        if (a->value_as_FloatAttr() == nullptr) return absent();
        out.value = a->value_as_FloatAttr()->value();
        return out;
      case s::AttributeValue::StringAttr:
        if (a->value_as_StringAttr() == nullptr) return absent();
        out.value = str(a->value_as_StringAttr()->value());
        return out;
      case s::AttributeValue::IntsAttr: {
        const auto* v = a->value_as_IntsAttr();
        if (v == nullptr) return absent();
        if (!aligned(v->values())) return invalid(at(), "ints are misaligned");
        out.value = list(v->values());
        return out;
      }
      case s::AttributeValue::FloatsAttr: {
        const auto* v = a->value_as_FloatsAttr();
        if (v == nullptr) return absent();
        if (!aligned(v->values())) return invalid(at(), "floats are misaligned");
        out.value = list(v->values());
        return out;
      }
      case s::AttributeValue::StringsAttr: {
        const auto* v = a->value_as_StringsAttr();
        if (v == nullptr) return absent();
        std::vector<std::string> strings;
        for (const fb::String* item : list(v->values())) strings.push_back(str(item));
        out.value = std::move(strings);
        return out;
      }
      case s::AttributeValue::WeightRefAttr:
        if (a->value_as_WeightRefAttr() == nullptr) return absent();
        out.value = ir::WeightRef{a->value_as_WeightRefAttr()->weight()};
        return out;
      default:
        return invalid(at(), "value type " + std::to_string(static_cast<int>(a->value_type())) +
                                 " (expected 1..7)");
    }
  }

  // Appends to `key` every field of `d` that decoding reads: equal keys decode to equal dims.
  static void dim_key(const s::Dim* d, std::string& key) {
    auto append = [&key](auto field) {
      key.append(reinterpret_cast<const char*>(&field), sizeof(field));
    };
    append(d->constant());
    append(static_cast<uint32_t>(d->terms() != nullptr ? d->terms()->size() : 0));
    for (const s::DimTerm* t : list(d->terms())) {
      append(t->coefficient());
      append(static_cast<uint8_t>(t->atom()));
      append(t->anonymous());
      append(static_cast<uint32_t>(t->symbol() != nullptr ? t->symbol()->size() : 0));
      if (t->symbol() != nullptr) key.append(t->symbol()->data(), t->symbol()->size());
      for (const s::Dim* operand : {t->left(), t->right()}) {
        append(static_cast<uint8_t>(operand != nullptr));
        if (operand != nullptr) dim_key(operand, key);
      }
    }
  }

  // A Dim holds its expression on the heap and is immutable, so equal sizes share one.
  const ir::Dim& static_dim(int64_t value) {
    auto it = static_dims_.find(value);
    if (it == static_dims_.end()) it = static_dims_.emplace(value, ir::Dim(value)).first;
    return it->second;
  }

  std::map<uint32_t, ir::Dim> anonymous_;
  std::unordered_map<int64_t, ir::Dim> static_dims_;
  std::unordered_map<std::string, ir::Dim> dims_;  // by `dim_key`
  std::string dim_key_;
};

Status decode_weights(const s::Package& package, runtime::Span<const uint8_t> segment,
                      ir::Model& model, std::vector<runtime::Span<const uint8_t>>& data) {
  for (const s::Weight* w : list(package.weights())) {
    ir::Weight weight;
    weight.name = str(w->name());
    std::string where = "weight " + std::to_string(model.weights.size()) + " '" + weight.name + "'";
    if (!runtime::is_valid_scalar_type(w->dtype())) {
      return invalid(where, "dtype " + std::to_string(w->dtype()) + " (expected 0.." +
                                std::to_string(runtime::kNumScalarTypes - 1) + ")");
    }
    weight.dtype = static_cast<runtime::ScalarType>(w->dtype());
    if (!aligned(w->sizes())) return invalid(where, "sizes are misaligned");
    weight.sizes = list(w->sizes());
    auto expected = weight_byte_count(weight.dtype, weight.sizes);
    if (!expected) return invalid(where, "sizes have a negative size or more than 2^64 bytes");
    if (w->size() != *expected) {
      return invalid(where, "size " + std::to_string(w->size()) + " bytes (expected " +
                                std::to_string(*expected) + " for its dtype and sizes)");
    }
    if (w->offset() % kPackageWeightAlignment != 0) {
      return invalid(where, "offset " + std::to_string(w->offset()) + " (expected a multiple of " +
                                std::to_string(kPackageWeightAlignment) + ")");
    }
    if (!fits(w->offset(), w->size(), segment.size())) {
      return invalid(where, std::to_string(w->size()) + " bytes at offset " +
                                std::to_string(w->offset()) + " end past the weight segment (" +
                                std::to_string(segment.size()) + " bytes)");
    }
    weight.content_hash = w->content_hash();
    data.push_back(segment.subspan(w->offset(), w->size()));
    model.weights.push_back(std::move(weight));
  }
  return Status();
}

// Bytes of the weight segment outside every weight must be zero, so that the package hash
// (over the flatbuffer and, through it, each weight's hash) covers every byte.
Status check_segment_gaps(const ir::Model& model, runtime::Span<const uint8_t> segment,
                          const std::vector<runtime::Span<const uint8_t>>& data) {
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& d : data) {
    uint64_t begin = static_cast<uint64_t>(d.data() - segment.data());
    ranges.emplace_back(begin, begin + d.size());
  }
  std::sort(ranges.begin(), ranges.end());
  uint64_t at = 0;
  auto check_until = [&](uint64_t end) -> Status {
    for (; at < end; ++at) {
      if (segment[at] != 0) {
        return invalid("weight segment", "byte " + std::to_string(at) +
                                             " outside every weight is not 0 (expected zero "
                                             "padding; " +
                                             std::to_string(model.weights.size()) + " weights)");
      }
    }
    return Status();
  };
  for (const auto& [begin, end] : ranges) {
    KILN_RETURN_IF_ERROR(check_until(begin));
    at = std::max(at, end);
  }
  return check_until(segment.size());
}

}  // namespace

Status PackageView::verify_weight(size_t index) const {
  if (index >= weight_data_.size()) {
    return Status(Error::InvalidArgument, "verify weight " + std::to_string(index) +
                                              ": the package has " +
                                              std::to_string(weight_data_.size()) + " weights");
  }
  std::atomic<uint8_t>& state = weight_state_[index];
  uint8_t known = state.load(std::memory_order_acquire);
  const ir::Weight& w = model_.weights[index];
  // Racing first calls both hash; they agree.
  uint64_t actual = known == 1 ? w.content_hash
                               : ir::hash_weight(w.dtype, w.sizes, weight_data_[index]);
  if (actual != w.content_hash) {
    state.store(2, std::memory_order_release);
    return invalid("weight " + std::to_string(index) + " '" + w.name + "'",
                   "content hash " + std::to_string(w.content_hash) +
                       " does not match its bytes (" + std::to_string(actual) + ")");
  }
  if (known != 1) state.store(1, std::memory_order_release);
  return Status();
}

Result<PackageView> PackageView::open(runtime::Span<const uint8_t> bytes, WeightCheck check) {
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(uint64_t) != 0) {
    return Status(Error::InvalidArgument,
                  "read package: bytes start at an address that is not 8-byte aligned");
  }
  PackageView view;
  KILN_ASSIGN_OR_RETURN(view.header_, decode_header(bytes));
  auto flatbuffer = bytes.subspan(view.header_.flatbuffer_offset, view.header_.flatbuffer_size);
  auto segment = bytes.subspan(view.header_.weights_offset, view.header_.weights_size);
  fb::Verifier verifier(flatbuffer.data(), flatbuffer.size(), kMaxDepth, kMaxTables);
  if (!s::VerifyPackageBuffer(verifier)) {
    return invalid("flatbuffer", "fails verification (corrupt or not a model package)");
  }
  const s::Package* package = s::GetPackage(flatbuffer.data());
  if (package->format_version() != view.header_.format_version) {
    return invalid("flatbuffer", "format version " + std::to_string(package->format_version()) +
                                     " (expected " + std::to_string(view.header_.format_version) +
                                     ", as in the header)");
  }
  const uint8_t* hash_field = format::content_hash_field(package);
  if (hash_field == nullptr) return invalid("flatbuffer", "content hash is absent");
  if (package->content_hash() != view.header_.content_hash) {
    return invalid("flatbuffer", "content hash " + std::to_string(package->content_hash()) +
                                     " (expected " + std::to_string(view.header_.content_hash) +
                                     ", as in the header)");
  }

  KILN_RETURN_IF_ERROR(decode_weights(*package, segment, view.model_, view.weight_data_));
  Decoder decoder;
  for (const s::Function* f : list(package->functions())) {
    KILN_ASSIGN_OR_RETURN(ir::Graph g, decoder.function(view.model_.functions.size(), f));
    view.model_.functions.push_back(std::move(g));
  }
  KILN_RETURN_IF_ERROR(check_model(view.model_, Error::InvalidProgram, "read package"));

  size_t num_weights = view.model_.weights.size();
  view.weight_state_.reset(new std::atomic<uint8_t>[num_weights]);
  for (size_t i = 0; i < num_weights; ++i) view.weight_state_[i].store(0);
  if (check == WeightCheck::OnOpen) {
    for (size_t i = 0; i < num_weights; ++i) KILN_RETURN_IF_ERROR(view.verify_weight(i));
  }
  KILN_RETURN_IF_ERROR(check_segment_gaps(view.model_, segment, view.weight_data_));
  uint64_t actual = format::hash_package(flatbuffer, hash_field);
  if (actual != view.header_.content_hash) {
    return invalid("package", "content hash " + std::to_string(view.header_.content_hash) +
                                  " does not match the bytes (" + std::to_string(actual) + ")");
  }
  return view;
}

Result<ir::Model> read_package(runtime::Span<const uint8_t> bytes) {
  runtime::AlignedBuffer copy;
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(uint64_t) != 0) {
    KILN_ASSIGN_OR_RETURN(copy, runtime::allocate_aligned(bytes.size()));
    std::memcpy(copy.get(), bytes.data(), bytes.size());
    bytes = {copy.get(), bytes.size()};
  }
  KILN_ASSIGN_OR_RETURN(PackageView view, PackageView::open(bytes));
  ir::Model model = view.model();
  for (size_t i = 0; i < model.weights.size(); ++i) {
    auto data = view.weight_data(i);
    model.weights[i].data.assign(data.begin(), data.end());
  }
  return model;
}

}  // namespace kiln::engine::package
