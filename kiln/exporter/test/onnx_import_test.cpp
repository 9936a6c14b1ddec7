#include <kiln/exporter/export.h>
#include <kiln/exporter/onnx/onnx_importer.h>
#include <kiln/exporter/test/onnx_model_builder.h>
#include <kiln/exporter/writer/program_writer.h>
#include <kiln/runtime/core/data_loader.h>
#include <kiln/runtime/executor/method.h>
#include <kiln/runtime/executor/program.h>

#include <gtest/gtest.h>

#include <cmath>

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

// A branch graph applying `op` to outer value `input` (or, with op "", returning it as is).
void set_branch(onnx::NodeProto& n, const std::string& name, const std::string& op,
                const std::string& input) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  auto* g = a->mutable_g();
  g->set_name(n.name() + "_" + name);
  std::string result = input;
  if (!op.empty()) {
    result = n.name() + "_" + name + "_out";
    auto* node = g->add_node();
    node->set_op_type(op);
    node->add_input(input);
    node->add_output(result);
  }
  auto* out = g->add_output();
  out->set_name(result);
  out->mutable_type()->mutable_tensor_type()->set_elem_type(kF32);
  out->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(2);
}

std::vector<float> run_if(runtime::Program& program, bool c1, bool c2) {
  auto method = program.load_method("forward");
  EXPECT_TRUE(method.ok()) << method.status();
  if (!method.ok()) return {};
  std::vector<float> x = {-1.5f, 2.0f};
  uint8_t conditions[2] = {c1, c2};
  EXPECT_TRUE((*method)->set_input(0, EValue(Tensor(ScalarType::Float32, {2}, x.data()))).ok());
  EXPECT_TRUE((*method)->set_input(1, EValue(Tensor(ScalarType::Bool, {}, &conditions[0]))).ok());
  EXPECT_TRUE((*method)->set_input(2, EValue(Tensor(ScalarType::Bool, {}, &conditions[1]))).ok());
  auto status = (*method)->execute();
  EXPECT_TRUE(status.ok()) << status;
  const Tensor& y = (*method)->get_output(0).to_tensor();
  return std::vector<float>(y.data_ptr<float>(), y.data_ptr<float>() + y.numel());
}

TEST(OnnxImport, IfWithARunTimeConditionRunsTheBranchTaken) {
  // y = c1 ? relu(x) : (c2 ? x : neg(x)) + x: nested Ifs, a branch returning an outer value,
  // and a value computed before the If read inside and after it.
  OnnxModelBuilder b;
  b.input("x", kF32, {2}).input("c1", onnx::TensorProto::BOOL, {})
      .input("c2", onnx::TensorProto::BOOL, {}).output("y", kF32, {2});
  auto& outer = b.node("If", {"c1"}, {"chosen"}, "outer");
  set_branch(outer, "then_branch", "Relu", "x");
  auto* else_attr = outer.add_attribute();
  else_attr->set_name("else_branch");
  else_attr->set_type(onnx::AttributeProto::GRAPH);
  auto* else_graph = else_attr->mutable_g();
  else_graph->set_name("outer_else");
  auto* inner = else_graph->add_node();
  inner->set_op_type("If");
  inner->set_name("inner");
  inner->add_input("c2");
  inner->add_output("inner_out");
  set_branch(*inner, "then_branch", "", "x");
  set_branch(*inner, "else_branch", "Neg", "x");
  auto* else_out = else_graph->add_output();
  else_out->set_name("inner_out");
  else_out->mutable_type()->mutable_tensor_type()->set_elem_type(kF32);
  else_out->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(2);
  b.node("Add", {"chosen", "x"}, {"y"});
  auto program = export_and_load(b.bytes());
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(run_if(**program, true, false), (std::vector<float>{-1.5f, 4.0f}));
  EXPECT_EQ(run_if(**program, false, true), (std::vector<float>{-3.0f, 4.0f}));
  EXPECT_EQ(run_if(**program, false, false), (std::vector<float>{0.0f, 0.0f}));
}

TEST(OnnxImport, IfBranchWithTheWrongNumberOfOutputsIsRejected) {
  OnnxModelBuilder b;
  b.input("x", kF32, {2}).input("c", onnx::TensorProto::BOOL, {}).output("y", kF32, {2});
  auto& n = b.node("If", {"c"}, {"y"}, "branch");
  set_branch(n, "then_branch", "Relu", "x");
  set_branch(n, "else_branch", "Neg", "x");
  n.mutable_attribute(1)->mutable_g()->add_output()->CopyFrom(n.attribute(1).g().output(0));
  auto model = import_onnx(b.bytes(), "m.onnx");
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("outputs"), std::string::npos) << model.status();
}

// An optional output with an empty name (GRU's Y here) gets a scratch tensor, and a STRINGS
// attribute reaches the kernel as one comma-joined string.
TEST(OnnxImport, EmptyOptionalOutputNameAndStringListAttributeRun) {
  OnnxModelBuilder b(14);
  b.input("x", kF32, {2, 1, 1}).output("y_h", kF32, {1, 1, 1});
  b.initializer_f32("w", {1, 3, 1}, {1, 1, 1}).initializer_f32("r", {1, 3, 1}, {0, 0, 0});
  auto& n = b.node("GRU", {"x", "w", "r"}, {"", "y_h"});
  OnnxModelBuilder::int_attribute(n, "hidden_size", 1);
  auto* a = n.add_attribute();
  a->set_name("activations");
  a->set_type(onnx::AttributeProto::STRINGS);
  a->add_strings("Sigmoid");
  a->add_strings("Tanh");
  auto program = export_and_load(b.bytes());
  ASSERT_TRUE(program.ok()) << program.status();
  // R = 0: z = sigmoid(x), the candidate is tanh(x), and H = (1 - z) * tanh(x) + z * H_prev.
  auto s = [](double v) { return 1 / (1 + std::exp(-v)); };
  const double h1 = (1 - s(1)) * std::tanh(1.0);
  const double h2 = (1 - s(2)) * std::tanh(2.0) + s(2) * h1;
  auto y_h = run_f32(**program, {2, 1, 1}, {1, 2});
  ASSERT_EQ(y_h.size(), 1u);
  EXPECT_NEAR(y_h[0], h2, 1e-6);
}

TEST(OnnxImport, RoiAlignBeforeOpset16SpellsOutItsCoordinates) {
  for (int64_t opset : {13, 16}) {
    OnnxModelBuilder b(opset);
    b.input("x", kF32, {1, 1, 4, 4}).input("rois", kF32, {1, 4}).input("batch", kI64, {1});
    b.output("y", kF32, {1, 1, 1, 1});
    b.node("RoiAlign", {"x", "rois", "batch"}, {"y"});
    auto model = import_onnx(b.bytes(), "test.onnx");
    ASSERT_TRUE(model.ok()) << model.status();
    std::string coordinates = "(absent)";
    for (const auto& a : model->functions[0].nodes[0].attributes) {
      if (a.name == "coordinate_transformation_mode") coordinates = std::get<std::string>(a.value);
    }
    EXPECT_EQ(coordinates, opset < 16 ? "output_half_pixel" : "(absent)") << "opset " << opset;
  }
}

// Resize with run-time sizes and NonMaxSuppression have outputs whose sizes depend on input
// values: the exporter leaves them unbounded and the kernels resize them on every call.
TEST(OnnxImport, DataDependentOutputSizesAreResizedAtRunTime) {
  OnnxModelBuilder b;
  b.input("x", kF32, {1, 1, 2, 2}).input("sizes", kI64, {4});
  b.output("y", kF32, {1, 1, 0, 0}, {"", "", "h", "w"});
  b.node("Resize", {"x", "", "", "sizes"}, {"y"});
  auto program = export_and_load(b.bytes());
  ASSERT_TRUE(program.ok()) << program.status();
  auto method = std::move((*program)->load_method("forward").get());
  std::vector<float> x = {1, 2, 3, 4};
  for (int64_t n : {3, 6}) {
    std::vector<int64_t> sizes = {1, 1, n, n};
    ASSERT_TRUE(method->set_input(0, EValue(Tensor(ScalarType::Float32, {1, 1, 2, 2}, x.data())))
                    .ok());
    ASSERT_TRUE(method->set_input(1, EValue(Tensor(ScalarType::Int64, {4}, sizes.data()))).ok());
    auto status = method->execute();
    ASSERT_TRUE(status.ok()) << status;
    const Tensor& y = method->get_output(0).to_tensor();
    EXPECT_EQ(std::vector<int64_t>(y.sizes().begin(), y.sizes().end()), sizes);
    EXPECT_EQ(y.data_ptr<float>()[0], 1);
    EXPECT_EQ(y.data_ptr<float>()[y.numel() - 1], 4);
  }

  OnnxModelBuilder nms;
  nms.input("boxes", kF32, {1, 3, 4}).input("scores", kF32, {1, 1, 3});
  nms.input("max", kI64, {1}).output("selected", kI64, {0, 3}, {"n", ""});
  nms.node("NonMaxSuppression", {"boxes", "scores", "max"}, {"selected"});
  auto nms_program = export_and_load(nms.bytes());
  ASSERT_TRUE(nms_program.ok()) << nms_program.status();
  auto nms_method = std::move((*nms_program)->load_method("forward").get());
  std::vector<float> boxes = {0, 0, 1, 1, 0, 2, 1, 3, 0, 4, 1, 5};  // disjoint
  std::vector<float> scores = {0.5f, 0.9f, 0.7f};
  for (int64_t max : {2, 3, 0}) {
    ASSERT_TRUE(
        nms_method->set_input(0, EValue(Tensor(ScalarType::Float32, {1, 3, 4}, boxes.data())))
            .ok());
    ASSERT_TRUE(
        nms_method->set_input(1, EValue(Tensor(ScalarType::Float32, {1, 1, 3}, scores.data())))
            .ok());
    ASSERT_TRUE(nms_method->set_input(2, EValue(Tensor(ScalarType::Int64, {1}, &max))).ok());
    auto status = nms_method->execute();
    ASSERT_TRUE(status.ok()) << status;
    const Tensor& selected = nms_method->get_output(0).to_tensor();
    ASSERT_EQ(selected.size(0), max) << "max " << max;
    const int64_t expected_boxes[] = {1, 2, 0};  // by decreasing score
    for (int64_t i = 0; i < max; ++i) {
      EXPECT_EQ(selected.data_ptr<int64_t>()[i * 3 + 2], expected_boxes[i]);
    }
  }
}

// An unnamed output in the middle gets the dtype the operator's schema gives it (Unique's
// `indices` is i64, not the f32 of its input), so the kernel can write it.
TEST(OnnxImport, UnnamedOutputsTakeTheirDtypeFromTheSchema) {
  OnnxModelBuilder b;
  b.input("x", kF32, {5}).output("inverse", kI64, {5});
  b.node("Unique", {"x"}, {"y", "", "inverse"});
  auto model = import_onnx(b.bytes(), "m.onnx");
  ASSERT_TRUE(model.ok()) << model.status();
  const auto& graph = model->functions[0];
  ASSERT_EQ(graph.nodes.size(), 1u);
  ASSERT_EQ(graph.nodes[0].outputs.size(), 3u);
  ASSERT_GE(graph.nodes[0].outputs[1], 0);
  EXPECT_EQ(graph.values[graph.nodes[0].outputs[1]].type.dtype, ScalarType::Int64);
  auto program = export_and_load(b.bytes());
  ASSERT_TRUE(program.ok()) << program.status();
  auto method = (*program)->load_method("forward");
  ASSERT_TRUE(method.ok()) << method.status();
  std::vector<float> x = {3, 1, 3, 2, 1};
  ASSERT_TRUE((*method)->set_input(0, EValue(Tensor(ScalarType::Float32, {5}, x.data()))).ok());
  auto status = (*method)->execute();
  ASSERT_TRUE(status.ok()) << status;
  const Tensor& inverse = (*method)->get_output(0).to_tensor();
  ASSERT_EQ(inverse.numel(), 5);
  EXPECT_EQ(std::vector<int64_t>(inverse.data_ptr<int64_t>(), inverse.data_ptr<int64_t>() + 5),
            (std::vector<int64_t>{2, 0, 2, 1, 0}));
}

// Shapes that contradict each other (a [2, 3] + [4, 5] Add, a MatMul whose inner dims differ)
// fail the export with the node and operator named, before anything is written.
TEST(OnnxImport, ShapeContradictionNamesTheNodeAndOperator) {
  OnnxModelBuilder add;
  add.input("a", kF32, {2, 3}).input("b", kF32, {4, 5}).output("y", kF32, {2, 3});
  add.node("Add", {"a", "b"}, {"y"}, "bad_add");
  auto model = import_onnx(add.bytes(), "m.onnx");
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.error(), Error::InvalidProgram);
  EXPECT_NE(model.status().message().find("bad_add"), std::string::npos) << model.status();
  EXPECT_NE(model.status().message().find("Add"), std::string::npos) << model.status();

  OnnxModelBuilder matmul;
  matmul.input("a", kF32, {2, 3}).input("b", kF32, {4, 5}).output("y", kF32, {2, 5});
  matmul.node("MatMul", {"a", "b"}, {"y"}, "bad_matmul");
  auto second = import_onnx(matmul.bytes(), "m.onnx");
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("bad_matmul"), std::string::npos) << second.status();
}

// Found by the importer fuzzer: ONNX's version converter crashed on an old-opset model whose
// graph output no node produces (the checker lets that through), and a rank-18 tensor was
// written into a program the runtime then refused to load.
TEST(OnnxImport, FuzzerFindingsAreRejectedAtExport) {
  OnnxModelBuilder undefined_output(9);
  undefined_output.input("x", kF32, {1}).output("y", kF32, {1});
  undefined_output.node("Relu", {"x"}, {"z"});
  auto model = import_onnx(undefined_output.bytes(), "m.onnx");
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.error(), Error::InvalidProgram);
  EXPECT_NE(model.status().message().find("output 'y' is produced by no node"), std::string::npos)
      << model.status();

  OnnxModelBuilder deep;
  std::vector<int64_t> dims(18, 1);
  deep.input("x", kF32, dims).output("y", kF32, dims);
  deep.node("Relu", {"x"}, {"y"});
  auto exported = export_and_load(deep.bytes());
  ASSERT_FALSE(exported.ok());
  EXPECT_EQ(exported.error(), Error::NotSupported);
  EXPECT_NE(exported.status().message().find("rank 18"), std::string::npos) << exported.status();
}

}  // namespace
}  // namespace kiln::exporter
