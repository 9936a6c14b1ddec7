#include <kiln/engine/package/model_package_generated.h>
#include <kiln/engine/package/package.h>
#include <kiln/engine/package/package_format.h>
#include <kiln/runtime/core/aligned_buffer.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <random>

namespace kiln::engine::package {
namespace {

using ir::Dim;
using runtime::Error;
using runtime::ScalarType;
using ::testing::HasSubstr;
namespace s = schema;

ir::Weight make_weight(const std::string& name, ScalarType dtype, std::vector<int64_t> sizes,
                       uint8_t seed) {
  ir::Weight w;
  w.name = name;
  w.dtype = dtype;
  w.sizes = std::move(sizes);
  size_t numel = 1;
  for (int64_t size : w.sizes) numel *= static_cast<size_t>(size);
  w.data.resize(numel * runtime::element_size(dtype));
  for (size_t i = 0; i < w.data.size(); ++i) w.data[i] = static_cast<uint8_t>(seed + i * 7);
  return w;
}

int add(ir::Graph& g, const std::string& name, ScalarType dtype, std::vector<Dim> shape,
        int weight = -1) {
  ir::Value v;
  v.name = name;
  v.type.dtype = dtype;
  v.type.shape = std::move(shape);
  v.weight = weight;
  return g.add_value(std::move(v));
}

// Two functions sharing weights, symbolic and derived dims, every attribute kind and an If.
ir::Model make_model() {
  ir::Model m;
  int w0 = m.add_weight(make_weight("proj", ScalarType::Float32, {8, 4}, 1));
  int w1 = m.add_weight(make_weight("table", ScalarType::Int64, {3}, 2));
  Dim seq = Dim::symbol("seq"), width = Dim::symbol("W"), unknown = Dim::symbol("");

  ir::Graph prefill;
  prefill.name = "prefill";
  int x = add(prefill, "x", ScalarType::Float32, {1, seq, width});
  int proj = add(prefill, "proj", ScalarType::Float32, {8, 4}, w0);
  int y = add(prefill, "y", ScalarType::Float32, {seq - 1, width / 8, seq * width, unknown});
  int z = add(prefill, "z", ScalarType::Float32, {2 * seq + 3, unknown, Dim::symbol("")});
  ir::Value opaque;
  opaque.name = "opaque";
  opaque.type.rank_known = false;
  int o = prefill.add_value(opaque);
  ir::Node mm{"mm", "MatMul", "", {x, proj, -1}, {y}, {}, {}};
  mm.attributes = {{"i", int64_t{-3}},
                   {"f", 0.25},
                   {"s", std::string("relu")},
                   {"is", std::vector<int64_t>{1, -2, 3}},
                   {"fs", std::vector<double>{0.5, -1.5}},
                   {"ss", std::vector<std::string>{"a", "", "c"}},
                   {"t", ir::WeightRef{w1}}};
  prefill.nodes.push_back(mm);
  prefill.nodes.push_back({"custom", "Gelu", "com.example", {y}, {z, o}, {}, {}});
  prefill.inputs = {x};
  prefill.outputs = {z, o};

  ir::Graph decode;
  decode.name = "decode";
  int cond = add(decode, "cond", ScalarType::Bool, {});
  int a = add(decode, "a", ScalarType::Float32, {seq});
  int p = add(decode, "proj", ScalarType::Float32, {8, 4}, w0);
  int t = add(decode, "then_out", ScalarType::Float32, {seq});
  int e = add(decode, "else_out", ScalarType::Float32, {seq});
  int r = add(decode, "r", ScalarType::Float32, {seq});
  ir::Node branch{"if", "If", "", {cond}, {r}, {}, {}};
  ir::Region then_region{{{"relu", "Relu", "", {a}, {t}, {}, {}}}, {t}};
  ir::Region else_region{{{"neg", "Neg", "", {p}, {e}, {{"alpha", 1.0}}, {}}}, {e}};
  branch.regions = {then_region, else_region};
  decode.nodes.push_back(branch);
  decode.inputs = {cond, a};
  decode.outputs = {r};
  m.functions = {prefill, decode};
  return m;
}

std::vector<uint8_t> write(const ir::Model& m) {
  auto bytes = write_package(m);
  EXPECT_TRUE(bytes.ok()) << bytes.status().message();
  return bytes.ok() ? *bytes : std::vector<uint8_t>();
}

void expect_invalid(const std::vector<uint8_t>& bytes, const std::string& substring) {
  auto model = read_package(bytes);
  ASSERT_FALSE(model.ok()) << "expected an error containing: " << substring;
  EXPECT_EQ(model.error(), Error::InvalidProgram) << model.status().message();
  EXPECT_NE(model.status().message().find(substring), std::string::npos)
      << model.status().message();
}

// Applies `change` to the flatbuffer of a fresh package (the hash is then stale, but every
// structural check runs before the hash check, so the message names the field).
void expect_mutation_rejected(const std::function<bool(s::Package*)>& change,
                              const std::string& substring) {
  auto bytes = write(make_model());
  ASSERT_TRUE(change(s::GetMutablePackage(bytes.data() + kPackageHeaderSize)));
  expect_invalid(bytes, substring);
}

TEST(ModelPackage, RoundTripKeepsFunctionsWeightsDimsAndRegions) {
  ir::Model original = make_model();
  auto bytes = write(original);
  auto read = read_package(bytes);
  ASSERT_TRUE(read.ok()) << read.status().message();
  const ir::Model& m = *read;
  ASSERT_EQ(m.weights.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(m.weights[i].name, original.weights[i].name);
    EXPECT_EQ(m.weights[i].dtype, original.weights[i].dtype);
    EXPECT_EQ(m.weights[i].sizes, original.weights[i].sizes);
    EXPECT_EQ(m.weights[i].data, original.weights[i].data);
    EXPECT_EQ(m.weights[i].content_hash, ir::hash_weight(original.weights[i]));
  }
  ASSERT_EQ(m.functions.size(), 2u);
  const ir::Graph& prefill = *m.find_function("prefill");
  Dim seq = Dim::symbol("seq"), width = Dim::symbol("W");
  const auto& y = prefill.values[prefill.find_value("y")].type.shape;
  EXPECT_EQ(y[0], seq - 1);
  EXPECT_EQ(y[1], width / 8);
  EXPECT_EQ(y[2], seq * width);
  EXPECT_EQ(y[1].to_string(), "W / 8");
  const auto& z = prefill.values[prefill.find_value("z")].type.shape;
  EXPECT_EQ(z[0], 2 * seq + 3);
  // The same anonymous unknown stays the same; distinct ones stay distinct.
  EXPECT_EQ(y[3], z[1]);
  EXPECT_NE(z[1], z[2]);
  EXPECT_FALSE(prefill.values[prefill.find_value("opaque")].type.rank_known);
  EXPECT_EQ(prefill.values[prefill.find_value("proj")].weight, 0);
  const ir::Node& mm = prefill.nodes[0];
  EXPECT_EQ(mm.inputs, (std::vector<int>{0, 1, -1}));
  ASSERT_EQ(mm.attributes.size(), 7u);
  for (size_t i = 0; i < 7; ++i) {
    EXPECT_EQ(mm.attributes[i].name, original.functions[0].nodes[0].attributes[i].name);
    EXPECT_EQ(mm.attributes[i].value, original.functions[0].nodes[0].attributes[i].value);
  }
  EXPECT_EQ(prefill.nodes[1].domain, "com.example");
  const ir::Graph& decode = *m.find_function("decode");
  ASSERT_EQ(decode.nodes[0].regions.size(), 2u);
  EXPECT_EQ(decode.nodes[0].regions[0].nodes[0].op, "Relu");
  EXPECT_EQ(decode.nodes[0].regions[1].nodes[0].attributes[0].name, "alpha");
  EXPECT_EQ(decode.nodes[0].regions[1].outputs, std::vector<int>{4});
  EXPECT_EQ(decode.values[decode.find_value("proj")].weight, 0);
  // Writing what was read gives the same bytes: nothing was lost or reordered.
  EXPECT_EQ(write(m), bytes);
}

TEST(ModelPackage, ViewPointsIntoAlignedWeightSegment) {
  auto bytes = write(make_model());
  runtime::AlignedBuffer mapped = *runtime::allocate_aligned(bytes.size());
  std::memcpy(mapped.get(), bytes.data(), bytes.size());
  auto view = PackageView::open({mapped.get(), bytes.size()});
  ASSERT_TRUE(view.ok()) << view.status().message();
  ASSERT_EQ(view->num_weights(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    auto data = view->weight_data(i);
    EXPECT_GE(data.data(), mapped.get());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(data.data()) % kPackageWeightAlignment, 0u);
    EXPECT_TRUE(view->model().weights[i].data.empty());
    EXPECT_TRUE(std::equal(data.begin(), data.end(), make_model().weights[i].data.begin()));
  }
  EXPECT_EQ(view->content_hash(), *package_hash(make_model()));
  auto misaligned = PackageView::open({mapped.get() + 1, bytes.size() - 1});
  EXPECT_EQ(misaligned.error(), Error::InvalidArgument);
  // read_package copies when the bytes are misaligned.
  std::vector<uint8_t> shifted(bytes.size() + 1);
  std::memcpy(shifted.data() + 1, bytes.data(), bytes.size());
  EXPECT_TRUE(read_package({shifted.data() + 1, bytes.size()}).ok());
}

TEST(ModelPackage, SegmentHoldsTheSmallestWeightsFirst) {
  ir::Model m = make_model();  // proj (128 bytes), table (24 bytes)
  m.add_weight(make_weight("big", ScalarType::Float32, {1024}, 3));
  m.add_weight(make_weight("tiny", ScalarType::Float32, {2}, 4));
  m.add_weight(make_weight("tiny_too", ScalarType::Float32, {2}, 5));
  auto bytes = write(m);
  runtime::AlignedBuffer mapped = *runtime::allocate_aligned(bytes.size());
  std::memcpy(mapped.get(), bytes.data(), bytes.size());
  auto view = PackageView::open({mapped.get(), bytes.size()});
  ASSERT_TRUE(view.ok()) << view.status().message();
  std::vector<std::pair<const uint8_t*, std::string>> placed;
  for (size_t i = 0; i < view->num_weights(); ++i) {
    placed.emplace_back(view->weight_data(i).data(), view->model().weights[i].name);
  }
  std::sort(placed.begin(), placed.end());
  std::vector<std::string> names;
  for (const auto& [at, name] : placed) names.push_back(name);
  // By size, ties in table order.
  EXPECT_EQ(names, (std::vector<std::string>{"tiny", "tiny_too", "table", "proj", "big"}));
}

TEST(ModelPackage, IdenticalWeightsAreStoredOnce) {
  ir::Model m = make_model();
  EXPECT_EQ(m.add_weight(make_weight("copy_of_proj", ScalarType::Float32, {8, 4}, 1)), 0);
  std::vector<uint8_t> big(4096);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 31 + 5);
  ir::Weight w{"big", ScalarType::UInt8, {4096}, big, 0};
  int first = m.add_weight(w);
  w.name = "big_again";
  EXPECT_EQ(m.add_weight(w), first);
  auto bytes = write(m);
  auto it = std::search(bytes.begin(), bytes.end(), big.begin(), big.end());
  ASSERT_NE(it, bytes.end());
  EXPECT_EQ(std::search(it + 1, bytes.end(), big.begin(), big.end()), bytes.end());
  EXPECT_LT(bytes.size(), 2 * big.size());
}

TEST(ModelPackage, HashChangesWithAnyWeightByteOrAttributeOnly) {
  uint64_t base = *package_hash(make_model());
  EXPECT_EQ(*package_hash(make_model()), base);  // fresh anonymous symbols: same hash
  auto bytes = write(make_model());
  EXPECT_EQ(format::load<uint64_t>(bytes.data(), format::kContentHashAt), base);
  EXPECT_EQ(*package_hash(*read_package(bytes)), base);
  ir::Model original = make_model();
  for (size_t w = 0; w < original.weights.size(); ++w) {
    for (size_t i = 0; i < original.weights[w].data.size(); ++i) {
      ir::Model m = original;
      m.weights[w].data[i] ^= 0x10;
      EXPECT_NE(*package_hash(m), base) << "weight " << w << " byte " << i;
    }
  }
  ir::Model changed = original;
  changed.functions[0].nodes[0].attributes[0].value = int64_t{-4};
  EXPECT_NE(*package_hash(changed), base);
  changed = original;
  changed.functions[0].nodes[0].attributes[1].value = 0.250001;
  EXPECT_NE(*package_hash(changed), base);
  changed = original;
  changed.functions[1].nodes[0].regions[1].nodes[0].attributes[0].value = 2.0;
  EXPECT_NE(*package_hash(changed), base);
  changed = original;
  changed.functions[0].values[2].type.shape[0] = Dim::symbol("seq") - 2;
  EXPECT_NE(*package_hash(changed), base);
}

TEST(ModelPackage, WriteRejectsInconsistentModels) {
  ir::Model m = make_model();
  m.functions[0].nodes[0].inputs[0] = 42;
  auto bytes = write_package(m);
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(bytes.error(), Error::InvalidArgument);
  EXPECT_NE(bytes.status().message().find("input 0 is 42"), std::string::npos);
  m = make_model();
  m.weights[0].data.pop_back();
  EXPECT_NE(write_package(m).status().message().find("has 127 bytes (expected 128"),
            std::string::npos);
}

// Values flow forward: a node reads function inputs, weights and earlier nodes' outputs (in a
// region, also its earlier nodes'), each value is written once, and every output is written.
// The writer and the reader both check it (a package is rewritten in place for the reader).
TEST(ModelPackage, RejectsValuesReadBeforeWrittenOrWrittenTwice) {
  auto write_error = [](const ir::Model& m) { return write_package(m).status().message(); };
  ir::Model m = make_model();
  std::swap(m.functions[0].nodes[0], m.functions[0].nodes[1]);  // Gelu reads y before MatMul
  EXPECT_THAT(write_error(m), HasSubstr("node 'custom' (Gelu): input 0 reads value 2 'y' before "
                                        "anything writes it"));
  m = make_model();
  m.functions[0].nodes[1].outputs[0] = 0;  // the Gelu writes the input x
  EXPECT_THAT(write_error(m), HasSubstr("output 0 writes value 0 'x', which is already written"));
  m = make_model();
  m.functions[0].nodes[1].outputs[0] = 1;  // ... or the weight
  EXPECT_THAT(write_error(m), HasSubstr("output 0 writes value 1 'proj', which is already"));
  m = make_model();
  m.functions[0].nodes.pop_back();  // z and opaque: written by nothing
  EXPECT_THAT(write_error(m), HasSubstr("function 'prefill': output 0 is value 3 'z', which "
                                        "nothing writes"));
  m = make_model();
  m.functions[1].nodes[0].regions[0].nodes.clear();  // then_out: written by nothing
  EXPECT_THAT(write_error(m), HasSubstr("region 0: output 0 is value 3 'then_out', which nothing "
                                        "writes"));
  m = make_model();
  m.functions[1].nodes[0].regions[1].nodes[0].inputs[0] = 3;  // else reads then's value
  EXPECT_THAT(write_error(m), HasSubstr("region 1 node 'neg' (Neg): input 0 reads value 3 "
                                        "'then_out' before anything writes it"));
  // The reader: the MatMul made to read its own output.
  expect_mutation_rejected(
      [](s::Package* p) {
        auto* mm =
            p->mutable_functions()->GetMutableObject(0)->mutable_nodes()->GetMutableObject(0);
        mm->mutable_inputs()->Mutate(0, 2);
        return true;
      },
      "input 0 reads value 2 'y' before anything writes it");
}

TEST(ModelPackage, RejectsTruncationAtEveryLength) {
  auto bytes = write(make_model());
  for (size_t length = 0; length < bytes.size(); ++length) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + length);
    auto model = read_package(cut);
    ASSERT_FALSE(model.ok()) << "length " << length;
    EXPECT_EQ(model.error(), Error::InvalidProgram);
  }
  expect_invalid({bytes.begin(), bytes.begin() + 10}, "file is 10 bytes (expected at least 64)");
  expect_invalid({bytes.begin(), bytes.end() - 1}, "does not end the file");
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  expect_invalid(longer, "does not end the file");
}

TEST(ModelPackage, RejectsBadHeaderFields) {
  auto bytes = write(make_model());
  auto with = [&](size_t at, uint64_t value, size_t width) {
    auto copy = bytes;
    std::memcpy(copy.data() + at, &value, width);
    return copy;
  };
  auto bad_magic = bytes;
  bad_magic[0] = 'X';
  expect_invalid(bad_magic, "magic is not");
  expect_invalid(with(format::kVersionAt, 1, 4), "format version 1 (expected 2)");
  expect_invalid(with(format::kFlatbufferOffsetAt, 72, 8), "flatbuffer offset 72");
  expect_invalid(with(format::kFlatbufferSizeAt, 1u << 30, 8), "flatbuffer size 1073741824");
  expect_invalid(with(format::kWeightsOffsetAt, 1u << 20, 8), "weight segment offset 1048576");
  expect_invalid(with(format::kContentHashAt, 12345, 8), "(expected 12345, as in the header)");
  expect_invalid(with(format::kReservedAt + 3, 1, 1), "reserved byte 51 is 1");
  auto garbage = bytes;
  std::memset(garbage.data() + kPackageHeaderSize, 0xAB, 16);
  expect_invalid(garbage, "fails verification");
}

TEST(ModelPackage, RejectsOutOfRangeFieldsNamingThem) {
  // Weight 0 ('proj', 128 bytes) follows the smaller weight 1 in the segment: its offset is
  // stored (not the default 0), so it can be changed in place.
  expect_mutation_rejected(
      [](s::Package* p) {
        return p->mutable_weights()->GetMutableObject(0)->mutate_offset(1u << 30);
      },
      "end past the weight segment");
  expect_mutation_rejected(
      [](s::Package* p) { return p->mutable_weights()->GetMutableObject(0)->mutate_offset(136); },
      "offset 136 (expected a multiple of 64)");
  expect_mutation_rejected(
      [](s::Package* p) { return p->mutable_weights()->GetMutableObject(0)->mutate_size(64); },
      "size 64 bytes (expected 128");
  expect_mutation_rejected(
      [](s::Package* p) { return p->mutable_weights()->GetMutableObject(1)->mutate_dtype(42); },
      "weight 1 'table': dtype 42");
  expect_mutation_rejected(
      [](s::Package* p) {
        return p->mutable_weights()->GetMutableObject(0)->mutate_content_hash(7);
      },
      "content hash 7 does not match its bytes");
  expect_mutation_rejected([](s::Package* p) { return p->mutate_format_version(9); },
                           "format version 9");
  auto prefill = [](s::Package* p) { return p->mutable_functions()->GetMutableObject(0); };
  auto decode = [](s::Package* p) { return p->mutable_functions()->GetMutableObject(1); };
  expect_mutation_rejected(
      [&](s::Package* p) {
        prefill(p)->mutable_nodes()->GetMutableObject(0)->mutable_inputs()->Mutate(1, 99);
        return true;
      },
      "node 'mm' (MatMul): input 1 is 99 (expected -1 or 0..4)");
  expect_mutation_rejected(
      [&](s::Package* p) {
        prefill(p)->mutable_nodes()->GetMutableObject(0)->mutable_outputs()->Mutate(0, -1);
        return true;
      },
      "output 0 is -1");
  expect_mutation_rejected(
      [&](s::Package* p) {
        prefill(p)->mutable_inputs()->Mutate(0, 1000);
        return true;
      },
      "function 'prefill': input 0 is 1000");
  expect_mutation_rejected(
      [&](s::Package* p) {
        return prefill(p)->mutable_values()->GetMutableObject(1)->mutate_weight(17);
      },
      "value 1 'proj': weight is 17 (expected -1 or 0..1)");
  expect_mutation_rejected(
      [&](s::Package* p) {
        auto* attribute = prefill(p)
                              ->mutable_nodes()
                              ->GetMutableObject(0)
                              ->mutable_attributes()
                              ->GetMutableObject(6);
        return static_cast<s::WeightRefAttr*>(attribute->mutable_value())->mutate_weight(5);
      },
      "attribute 't' weight is 5");
  expect_mutation_rejected(
      [&](s::Package* p) {
        auto* type = decode(p)->mutable_values()->GetMutableObject(0)->mutable_type();
        return type->mutate_dtype(-3);
      },
      "value 'cond': dtype -3");
  expect_mutation_rejected(
      [&](s::Package* p) {
        auto* shape =
            prefill(p)->mutable_values()->GetMutableObject(2)->mutable_type()->mutable_shape();
        return shape->GetMutableObject(1)->mutable_terms()->GetMutableObject(0)->mutate_atom(
            static_cast<s::DimAtom>(9));
      },
      "dim term kind 9");
  expect_mutation_rejected(
      [&](s::Package* p) {
        auto* shape =
            prefill(p)->mutable_values()->GetMutableObject(3)->mutable_type()->mutable_shape();
        return shape->GetMutableObject(0)->mutable_terms()->GetMutableObject(0)->mutate_coefficient(
            0);
      },
      "has coefficient 0");
  expect_mutation_rejected(
      [&](s::Package* p) {
        auto* attribute = prefill(p)
                              ->mutable_nodes()
                              ->GetMutableObject(0)
                              ->mutable_attributes()
                              ->GetMutableObject(0);
        auto* type = const_cast<uint8_t*>(
            reinterpret_cast<const flatbuffers::Table*>(attribute)->GetAddressOf(
                s::Attribute::VT_VALUE_TYPE));
        *type = 99;
        return true;
      },
      "attribute 'i': value type 99");
  expect_mutation_rejected(
      [&](s::Package* p) {
        auto* region =
            decode(p)->mutable_nodes()->GetMutableObject(0)->mutable_regions()->GetMutableObject(1);
        region->mutable_outputs()->Mutate(0, 6);
        return true;
      },
      "node 'if' (If) region 1: output 0 is 6 (expected 0..5)");
  expect_mutation_rejected(
      [&](s::Package* p) {
        auto* region =
            decode(p)->mutable_nodes()->GetMutableObject(0)->mutable_regions()->GetMutableObject(0);
        region->mutable_nodes()->GetMutableObject(0)->mutable_inputs()->Mutate(0, -2);
        return true;
      },
      "node 'relu' (Relu): input 0 is -2");
}

TEST(ModelPackage, BitFlipsAnywhereAreRejectedOrReadAsValidModel) {
  auto bytes = write(make_model());
  size_t accepted = 0;
  // Every bit of the header, one bit (rotating) of every later byte: fast enough under ASan.
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      if (i >= kPackageHeaderSize && bit != static_cast<int>(i % 8)) continue;
      auto copy = bytes;
      copy[i] ^= static_cast<uint8_t>(1u << bit);
      auto model = read_package(copy);
      if (model.ok()) {
        ++accepted;
        EXPECT_TRUE(write_package(*model).ok()) << "byte " << i << " bit " << bit;
      } else {
        EXPECT_EQ(model.error(), Error::InvalidProgram) << model.status().message();
      }
    }
  }
  // Every byte is covered by a header check or the content hash.
  EXPECT_EQ(accepted, 0u);
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    auto copy = bytes;
    for (int k = 0; k < 4; ++k) copy[rng() % copy.size()] = static_cast<uint8_t>(rng());
    auto model = read_package(copy);
    if (model.ok()) {
      EXPECT_TRUE(write_package(*model).ok());
    }
  }
}

}  // namespace
}  // namespace kiln::engine::package
