#include <kiln/exporter/export.h>
#include <kiln/exporter/onnx/onnx_importer.h>
#include <kiln/exporter/test/onnx_model_builder.h>
#include <kiln/exporter/writer/program_writer.h>
#include <kiln/runtime/core/data_loader.h>
#include <kiln/runtime/executor/method.h>
#include <kiln/runtime/executor/program.h>

#include <gtest/gtest.h>

namespace kiln::exporter {
namespace {

using runtime::Error;
using runtime::EValue;
using runtime::ScalarType;
using runtime::Tensor;
using test::OnnxModelBuilder;
constexpr int kF32 = onnx::TensorProto::FLOAT;
constexpr int kI64 = onnx::TensorProto::INT64;

runtime::Result<std::shared_ptr<runtime::Program>> export_and_load(const std::string& onnx_bytes,
                                                                   ExportOptions options = {}) {
  KILN_ASSIGN_OR_RETURN(auto model, import_onnx(onnx_bytes, "test.onnx"));
  ProgramSpec spec;
  KILN_RETURN_IF_ERROR(lower_to_portable(model, "forward", "forward", options, spec));
  KILN_ASSIGN_OR_RETURN(auto bytes, write_program(spec));
  auto owned = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  return runtime::Program::load(
      std::make_shared<runtime::BufferDataLoader>(owned->data(), owned->size(), owned));
}

std::vector<float> run_f32(runtime::Program& program, std::vector<int64_t> sizes,
                           std::vector<float> x) {
  auto method = program.load_method("forward");
  EXPECT_TRUE(method.ok()) << method.status();
  if (!method.ok()) return {};
  EXPECT_TRUE((*method)->set_input(0, EValue(Tensor(ScalarType::Float32, sizes, x.data()))).ok());
  auto status = (*method)->execute();
  EXPECT_TRUE(status.ok()) << status;
  const Tensor& y = (*method)->get_output(0).to_tensor();
  return std::vector<float>(y.data_ptr<float>(), y.data_ptr<float>() + y.numel());
}

TEST(OnnxImport, InitializersAndNodesRunWithReferenceKernels) {
  OnnxModelBuilder b;
  b.input("x", kF32, {1, 3}).output("y", kF32, {1, 3}).initializer_f32("w", {1, 3}, {1, -5, 2});
  b.node("Add", {"x", "w"}, {"s"});
  b.node("Relu", {"s"}, {"y"});
  auto program = export_and_load(b.bytes());
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(run_f32(**program, {1, 3}, {1, 2, 3}), (std::vector<float>{2, 0, 5}));
  auto meta = (*program)->method_meta("forward");
  EXPECT_EQ(meta->inputs[0].name, "x");
  EXPECT_EQ(meta->outputs[0].name, "y");
}

TEST(OnnxImport, ShapeArithmeticIsFoldedAway) {
  OnnxModelBuilder b;
  b.input("x", kF32, {2, 3}).output("y", kF32, {3, 2}).initializer_i64("two", {1}, {2});
  b.node("Shape", {"x"}, {"shape"});           // [2, 3], folded: x is static
  b.node("Div", {"shape", "two"}, {"half"});   // [1, 1], folded: constant inputs
  b.node("Mul", {"half", "two"}, {"even"});    // [2, 2]
  b.node("Sub", {"shape", "even"}, {"delta"}); // [0, 1]
  b.initializer_i64("target", {2}, {3, 2});
  b.node("Mul", {"target", "delta"}, {"masked"});  // [0, 2]: 0 copies the input dim
  b.node("Add", {"masked", "target"}, {"new_shape"});  // [3, 4]
  b.node("Sub", {"new_shape", "delta"}, {"final_shape"});  // [3, 3]
  b.initializer_i64("fix", {2}, {0, -1});
  b.node("Add", {"final_shape", "fix"}, {"shape_32"});  // [3, 2]
  b.node("Reshape", {"x", "shape_32"}, {"y"});
  auto model = import_onnx(b.bytes(), "test.onnx");
  ASSERT_TRUE(model.ok()) << model.status();
  const auto& graph = model->functions[0];
  ASSERT_EQ(graph.nodes.size(), 1u);
  EXPECT_EQ(graph.nodes[0].op, "Reshape");
  auto program = export_and_load(b.bytes());
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(run_f32(**program, {2, 3}, {1, 2, 3, 4, 5, 6}),
            (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST(OnnxImport, SymbolicDimsStayDynamicAndRunAtAnySize) {
  OnnxModelBuilder b;
  b.input("x", kF32, {1, 0}, {"", "seq"}).output("y", kF32, {1, 0}, {"", "seq"});
  b.node("Relu", {"x"}, {"y"});
  auto program = export_and_load(b.bytes());
  ASSERT_TRUE(program.ok()) << program.status();
  auto meta = (*program)->method_meta("forward");
  EXPECT_EQ(meta->inputs[0].dim_names, (std::vector<std::string>{"", "seq"}));
  EXPECT_EQ(meta->inputs[0].dynamism, runtime::ShapeDynamism::Unbounded);
  EXPECT_EQ(run_f32(**program, {1, 2}, {-1, 1}), (std::vector<float>{0, 1}));
  EXPECT_EQ(run_f32(**program, {1, 4}, {-1, 1, -2, 2}), (std::vector<float>{0, 1, 0, 2}));
}

TEST(OnnxImport, BoundPlansDynamicInputStatically) {
  OnnxModelBuilder b;
  b.input("x", kF32, {1, 0}, {"", "seq"}).output("y", kF32, {1, 0}, {"", "seq"});
  b.node("Relu", {"x"}, {"y"});
  ExportOptions options;
  options.bounds.push_back(DimBound{"forward", "x", 1, 8});
  auto program = export_and_load(b.bytes(), options);
  ASSERT_TRUE(program.ok()) << program.status();
  auto meta = (*program)->method_meta("forward");
  EXPECT_EQ(meta->inputs[0].dynamism, runtime::ShapeDynamism::Bounded);
  EXPECT_EQ(meta->inputs[0].sizes, (std::vector<int64_t>{1, 8}));
  auto method = std::move((*program)->load_method("forward").get());
  std::vector<float> big(9);
  auto status = method->set_input(0, EValue(Tensor(ScalarType::Float32, {1, 9}, big.data())));
  EXPECT_NE(status.message().find("exceeds the bound 8"), std::string::npos) << status;
  options.bounds[0].input = "nope";
  auto bad = export_and_load(b.bytes(), options);
  EXPECT_EQ(bad.error(), Error::InvalidArgument);
  EXPECT_NE(bad.status().message().find("'nope'"), std::string::npos);
}

// NonZero's output size depends on the data: shape inference leaves that dimension unknown, so
// the value is unbounded and the executor grows (and reuses) its storage per call.
TEST(OnnxImport, DataDependentNonZeroOutputIsUnboundedAndFollowsTheData) {
  OnnxModelBuilder b;
  b.input("x", kF32, {2, 3}).output("y", kI64, {0, 2}, {"count", ""});
  b.node("NonZero", {"x"}, {"nz"});
  b.node("Transpose", {"nz"}, {"y"});
  auto program = export_and_load(b.bytes());
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ((*program)->method_meta("forward")->outputs[0].dynamism,
            runtime::ShapeDynamism::Unbounded);
  auto method = std::move((*program)->load_method("forward").get());
  auto run = [&](std::vector<float> x) {
    EXPECT_TRUE(method->set_input(0, EValue(Tensor(ScalarType::Float32, {2, 3}, x.data()))).ok());
    auto status = method->execute();
    EXPECT_TRUE(status.ok()) << status;
    const Tensor& y = method->get_output(0).to_tensor();
    EXPECT_EQ(y.size(1), 2);
    return std::vector<int64_t>(y.data_ptr<int64_t>(), y.data_ptr<int64_t>() + y.numel());
  };
  EXPECT_EQ(run({0, 1, 0, 0, 0, 2}), (std::vector<int64_t>{0, 1, 1, 2}));
  EXPECT_EQ(run({1, 1, 1, 1, 0, 1}), (std::vector<int64_t>{0, 0, 0, 1, 0, 2, 1, 0, 1, 2}));
  EXPECT_EQ(run({0, 0, 0, 0, 0, 0}), (std::vector<int64_t>{}));
}

TEST(OnnxImport, CorruptProtobufIsRejected) {
  OnnxModelBuilder b;
  b.input("x", kF32, {1}).output("y", kF32, {1});
  b.node("Relu", {"x"}, {"y"});
  std::string bytes = b.bytes();
  auto truncated = import_onnx(bytes.substr(0, bytes.size() / 2), "cut.onnx");
  EXPECT_EQ(truncated.error(), Error::InvalidProgram);
  EXPECT_NE(truncated.status().message().find("'cut.onnx'"), std::string::npos);
  auto garbage = import_onnx(std::string(100, '\xff'), "garbage.onnx");
  EXPECT_EQ(garbage.error(), Error::InvalidProgram);
  auto missing = import_onnx_file("/nonexistent/model.onnx");
  EXPECT_EQ(missing.error(), Error::AccessFailed);
}

TEST(OnnxImport, UnknownOperatorAndDomainNameTheNode) {
  OnnxModelBuilder b;
  b.input("x", kF32, {1}).output("y", kF32, {1});
  auto& n = b.node("Relu", {"x"}, {"y"}, "my_node");
  n.set_domain("com.example");
  auto model = import_onnx(b.bytes(), "m.onnx");
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("my_node"), std::string::npos) << model.status();

  OnnxModelBuilder unknown;
  unknown.input("x", kF32, {1}).output("y", kF32, {1});
  unknown.node("NoSuchOp", {"x"}, {"y"}, "odd");
  auto result = import_onnx(unknown.bytes(), "m.onnx");
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("NoSuchOp"), std::string::npos) << result.status();
}

TEST(OnnxImport, UndefinedInputAndWrongAttributeTypeAreRejected) {
  OnnxModelBuilder b;
  b.input("x", kF32, {1}).output("y", kF32, {1});
  b.node("Add", {"x", "w_missing"}, {"y"}, "adder");
  auto model = import_onnx(b.bytes(), "m.onnx");
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("w_missing"), std::string::npos) << model.status();

  OnnxModelBuilder attr;
  attr.input("x", kF32, {2, 2}).output("y", kF32, {2, 2});
  auto& softmax = attr.node("Softmax", {"x"}, {"y"}, "sm");
  auto* a = softmax.add_attribute();
  a->set_name("axis");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s("last");
  auto bad = import_onnx(attr.bytes(), "m.onnx");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("axis"), std::string::npos) << bad.status();
}

TEST(OnnxImport, IfWithAConstantConditionIsInlined) {
  OnnxModelBuilder b;
  b.input("x", kF32, {2}).output("y", kF32, {2});
  auto* cond = b.model().mutable_graph()->add_initializer();
  cond->set_name("cond");
  cond->set_data_type(onnx::TensorProto::BOOL);
  cond->add_int32_data(0);
  auto& n = b.node("If", {"cond"}, {"y"}, "branch");
  for (const char* name : {"then_branch", "else_branch"}) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::GRAPH);
    auto* g = a->mutable_g();
    g->set_name(name);
    auto* node = g->add_node();
    node->set_op_type(std::string(name) == "then_branch" ? "Relu" : "Neg");
    node->add_input("x");
    node->add_output(std::string(name) + "_out");
    auto* out = g->add_output();
    out->set_name(std::string(name) + "_out");
    out->mutable_type()->mutable_tensor_type()->set_elem_type(kF32);
    out->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(2);
  }
  auto model = import_onnx(b.bytes(), "m.onnx");
  ASSERT_TRUE(model.ok()) << model.status();
  bool has_neg = false;
  for (const auto& node : model->functions[0].nodes) {
    EXPECT_NE(node.op, "If");
    has_neg |= node.op == "Neg";
  }
  EXPECT_TRUE(has_neg);
}

}  // namespace
}  // namespace kiln::exporter
