#include <tests/program_corpus.h>

#include <kiln/runtime/core/scalar_type.h>
#include <kiln/runtime/executor/program.h>
#include <kiln/runtime/schema/program_generated.h>
#include <kiln/testing/program_builder.h>

#include <cstdint>
#include <limits>
#include <utility>

namespace kiln::tests {
namespace {

using runtime::EValue;
using runtime::ShapeDynamism;
using testing::BOOL;
using testing::F32;
using testing::I32;
using testing::I64;
using testing::ProgramBuilder;

constexpr uint64_t kSaturated = std::numeric_limits<uint64_t>::max();

uint64_t saturating_add(uint64_t a, uint64_t b) { return a > kSaturated - b ? kSaturated : a + b; }

uint64_t saturating_mul(uint64_t a, uint64_t b) {
  return (a != 0 && b > kSaturated / a) ? kSaturated : a * b;
}

std::vector<uint8_t> text_bytes(const std::string& text) {
  return std::vector<uint8_t>(text.begin(), text.end());
}

std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = scale * static_cast<float>(i % 7) - 1.0f;
  return values;
}

ProgramBuilder relu() {
  ProgramBuilder b;
  b.segment_alignment(64);
  b.input("x", F32, {1, 8}).node("Relu", {"x"}, {"y"}).output("y");
  return b;
}

ProgramBuilder mlp_constants() {
  ProgramBuilder b;
  b.input("x", F32, {2, 4})
      .constant_f32("w1", {4, 8}, ramp(32, 0.25f))
      .constant_f32("b1", {8}, ramp(8, 0.5f))
      .constant_f32("w2", {8, 3}, ramp(24, 0.125f))
      .tensor("h0", F32, {2, 8})
      .tensor("h", F32, {2, 8})
      .tensor("r", F32, {2, 8})
      .tensor("y", F32, {2, 3})
      .node("MatMul", {"x", "w1"}, {"h0"})
      .node("Add", {"h0", "b1"}, {"h"})
      .node("Relu", {"h"}, {"r"})
      .node("MatMul", {"r", "w2"}, {"y"})
      .output("y");
  return b;
}

ProgramBuilder two_methods() {
  ProgramBuilder b;
  b.segment_alignment(64);
  b.method("forward").input("x", F32, {4}).node("Relu", {"x"}, {"y"}).output("y");
  b.method("prefill")
      .input("ids", I64, {1, 16})
      .constant_f32("table", {32, 4}, ramp(128, 0.1f))
      .tensor("emb", F32, {1, 16, 4})
      .node("Gather", {"table", "ids"}, {"emb"}, {{"axis", EValue(int64_t{0})}})
      .output("emb");
  b.method("decode")
      .input("a", F32, {2, 2})
      .input("b", F32, {2, 2})
      .node("Add", {"a", "b"}, {"c"})
      .node("Mul", {"c", "a"}, {"d"})
      .output("d")
      .output("c");
  return b;
}

ProgramBuilder inline_delegate() {
  ProgramBuilder b;
  b.input("x", F32, {1, 3, 4, 4})
      .tensor("y", F32, {1, 3, 4, 4})
      .delegate(kCorpusStubBackend, text_bytes("{\"function\": \"main\"}"), {"x"}, {"y"},
                {{"compute_unit", text_bytes("cpu_only")}, {"num_threads", {2, 0, 0, 0}}})
      .output("y");
  return b;
}

ProgramBuilder segment_delegate_named_data() {
  ProgramBuilder b;
  std::string manifest =
      "{\"model\": \"package_0\", \"input_names\": [\"x\"], \"output_names\": [\"y\"], "
      "\"function\": \"forward_0\"}";
  std::vector<uint8_t> package(512);
  for (size_t i = 0; i < package.size(); ++i) package[i] = static_cast<uint8_t>(i * 31 + 7);
  b.named_data("package_0", package)
      .named_data("package_0.meta", text_bytes("{\"hash\": \"0123456789abcdef\"}"))
      .input("x", F32, {2, 8})
      .tensor("y", F32, {2, 8})
      .delegate_segment(kCorpusStubBackend, text_bytes(manifest), {"x"}, {"y"})
      .output("y");
  return b;
}

ProgramBuilder bounded_inputs() {
  ProgramBuilder b;
  b.segment_alignment(64);
  b.input("tokens", F32, {1, 128, 16}, ShapeDynamism::Bounded, {"", "seq", ""})
      .input("mask", BOOL, {1, 128}, ShapeDynamism::Bounded, {"", "seq"})
      .tensor("y", F32, {1, 128, 16}, ShapeDynamism::Bounded)
      .node("Relu", {"tokens"}, {"y"})
      .output("y");
  return b;
}

ProgramBuilder unbounded_input() {
  ProgramBuilder b;
  b.segment_alignment(64);
  b.input("x", F32, {1, 4}, ShapeDynamism::Unbounded, {"batch", ""})
      .tensor("y", F32, {1, 4}, ShapeDynamism::Unbounded)
      .node("Sigmoid", {"x"}, {"y"})
      .output("y");
  return b;
}

ProgramBuilder scalars_and_attributes() {
  ProgramBuilder b;
  b.segment_alignment(64);
  b.input("x", F32, {3, 5})
      .scalar_input("axis", EValue(int64_t{1}))
      .scalar_input("keepdims", EValue(true))
      .scalar_input("epsilon", EValue(1e-5))
      .tensor("y", F32, {3, 5})
      .node("Softmax", {"x"}, {"y"},
            {{"axis", EValue(int64_t{-1})},
             {"perm", EValue(std::vector<int64_t>{1, 0})},
             {"scales", EValue(std::vector<double>{0.5, 2.0})},
             {"mode", EValue("linear")}})
      .tensor("z", F32, {3, 5})
      .node("Flatten", {"y"}, {"z"}, {{"axis", EValue(int64_t{1})}})
      .output("z");
  return b;
}

ProgramBuilder dtypes() {
  ProgramBuilder b;
  b.segment_alignment(64);
  b.input("i", I64, {6})
      .input("j", I32, {6})
      .input("m", BOOL, {6})
      .tensor("k", I64, {6})
      .tensor("w", I32, {6})
      .node("Neg", {"i"}, {"k"})
      .node("Where", {"m", "j", "j"}, {"w"})
      .node("Cast", {"w"}, {"c"}, {{"to", EValue(int64_t{1})}})
      .output("k")
      .output("c");
  return b;
}

ProgramBuilder mixed_small_alignment() {
  ProgramBuilder b;
  b.segment_alignment(64);
  b.method("forward")
      .input("x", F32, {1, 16})
      .constant_f32("scale", {1, 16}, ramp(16, 0.3f))
      .tensor("a", F32, {1, 16})
      .tensor("b", F32, {1, 16})
      .tensor("d", F32, {1, 16})
      .node("Mul", {"x", "scale"}, {"a"})
      .delegate(kCorpusStubBackend, text_bytes("{\"function\": \"part_0\"}"), {"a"}, {"b"})
      .node("Relu", {"b"}, {"c"})
      .delegate_segment(kCorpusStubBackend, text_bytes("{\"function\": \"part_1\"}"), {"c"}, {"d"})
      .output("d");
  b.method("aux").input("u", F32, {2}).output("u");
  return b;
}

}  // namespace

runtime::Result<std::vector<CorpusProgram>> make_program_corpus() {
  const std::pair<const char*, ProgramBuilder (*)()> makers[] = {
      {"relu", relu},
      {"mlp_constants", mlp_constants},
      {"two_methods", two_methods},
      {"inline_delegate", inline_delegate},
      {"segment_delegate_named_data", segment_delegate_named_data},
      {"bounded_inputs", bounded_inputs},
      {"unbounded_input", unbounded_input},
      {"scalars_and_attributes", scalars_and_attributes},
      {"dtypes", dtypes},
      {"mixed_small_alignment", mixed_small_alignment},
  };
  std::vector<CorpusProgram> corpus;
  for (const auto& [name, make] : makers) {
    auto bytes = make().build();
    if (!bytes.ok()) {
      return bytes.status().with_context(std::string("build corpus program '") + name + "'");
    }
    corpus.push_back({name, std::move(bytes).get()});
  }
  return corpus;
}

uint64_t load_memory_bytes(const runtime::Program& program, std::string_view method) {
  const schema::Program* root = program.flatbuffer();
  if (root == nullptr || root->methods() == nullptr) return 0;
  for (const schema::Method* m : *root->methods()) {
    if (m == nullptr || m->name() == nullptr || m->name()->string_view() != method) continue;
    uint64_t total = 0;
    if (m->arena_sizes() != nullptr) {
      for (uint64_t size : *m->arena_sizes()) total = saturating_add(total, size);
    }
    if (m->values() == nullptr) return total;
    for (const schema::Value* value : *m->values()) {
      const schema::TensorValue* t = value == nullptr ? nullptr : value->kind_as_TensorValue();
      if (t == nullptr || t->arena() >= 0 || t->constant_segment() >= 0) continue;
      uint64_t nbytes = 1;
      if (t->sizes() != nullptr) {
        for (int64_t size : *t->sizes()) {
          nbytes = saturating_mul(nbytes, size < 0 ? kSaturated : static_cast<uint64_t>(size));
        }
      }
      const int dtype = t->dtype();
      const uint64_t element = runtime::is_valid_scalar_type(dtype)
                                   ? runtime::element_size(static_cast<runtime::ScalarType>(dtype))
                                   : 8;
      total = saturating_add(total, saturating_mul(nbytes, element));
    }
    return total;
  }
  return 0;
}

}  // namespace kiln::tests
