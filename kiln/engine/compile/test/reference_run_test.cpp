// The reference run (compile::run_reference): results, what it reports per node, its limits
// and its errors.

#include <kiln/engine/compile/test/test_models.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kiln::engine {
namespace {

using namespace test_models;  // NOLINT(google-build-using-namespace): test helpers

// x [2, 3] -> MatMul(W [3, 4]) -> Relu -> y
ir::Model matmul_relu_model() {
  ModelBuilder b(5);
  int x = b.input("x", {2, 3});
  int w = b.weight_of("w", {3, 4}, {1, -1, 2, 0, 0, 1, -2, 1, 1, 1, 1, -1});
  int m = b.value("m", {2, 4});
  int y = b.value("y", {2, 4});
  b.node("MatMul", {x, w}, {m});
  b.node("Relu", {m}, {y});
  b.output(y);
  return b.build();
}

TEST(ReferenceRun, RunsTheNodesInOrderAndReportsEachOutput) {
  ir::Model model = matmul_relu_model();
  std::vector<float> x = {1, 2, 3, -1, 0, 1};
  Tensor input(ScalarType::Float32, {2, 3}, x.data());
  std::vector<const Tensor*> inputs = {&input};
  std::vector<std::string> seen;
  auto run = compile::run_reference(model, "main", inputs, {}, {},
                                    [&](const ir::Node& node, const Tensor& t) {
                                      seen.push_back(node.op + runtime::shape_to_string(t.sizes()));
                                    });
  ASSERT_TRUE(run.ok()) << run.status().to_string();
  EXPECT_EQ(seen, (std::vector<std::string>{"MatMul[2, 4]", "Relu[2, 4]"}));
  ASSERT_EQ(run->size(), 1u);
  compile::ReferenceValue& y = (*run)[0];
  EXPECT_EQ(y.sizes, (std::vector<int64_t>{2, 4}));
  // Row 0: [1 2 3] x W = [1+0+3, -1+2+3, 2-4+3, 0+2-3] = [4, 4, 1, -1] -> Relu [4, 4, 1, 0].
  // Row 1: [-1 0 1] x W = [-1+1, 1+1, -2+1, 0-1] = [0, 2, -1, -1] -> Relu [0, 2, 0, 0].
  const float* out = y.tensor().data_ptr<float>();
  EXPECT_EQ(std::vector<float>(out, out + 8), (std::vector<float>{4, 4, 1, 0, 0, 2, 0, 0}));
}

TEST(ReferenceRun, ReadsWeightsFromTheBytesGivenForThem) {
  ir::Model model = matmul_relu_model();
  std::vector<float> ones(12, 1.0f);
  std::vector<runtime::Span<const uint8_t>> data = {
      {reinterpret_cast<const uint8_t*>(ones.data()), ones.size() * sizeof(float)}};
  model.weights[0].data.clear();  // as a package view's model holds them
  std::vector<float> x = {1, 2, 3, -1, 0, 1};
  Tensor input(ScalarType::Float32, {2, 3}, x.data());
  std::vector<const Tensor*> inputs = {&input};
  auto run = compile::run_reference(model, "main", inputs, {}, data);
  ASSERT_TRUE(run.ok()) << run.status().to_string();
  const float* out = (*run)[0].tensor().data_ptr<float>();
  EXPECT_EQ(std::vector<float>(out, out + 8), (std::vector<float>{6, 6, 6, 6, 0, 0, 0, 0}));
}

TEST(ReferenceRun, StopsAtItsMemoryAndWorkLimitsNamingTheNode) {
  ir::Model model = matmul_relu_model();
  std::vector<float> x(6, 1.0f);
  Tensor input(ScalarType::Float32, {2, 3}, x.data());
  std::vector<const Tensor*> inputs = {&input};
  compile::ReferenceLimits memory;
  memory.max_bytes = 40;  // MatMul's 32 (+1) bytes fit, Relu's do not beside them
  auto run = compile::run_reference(model, "main", inputs, memory);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.error(), runtime::Error::MemoryAllocationFailed);
  EXPECT_NE(run.status().message().find("node 'Relu_1' (Relu)"), std::string::npos)
      << run.status().message();
  EXPECT_NE(run.status().message().find("[2, 4]"), std::string::npos);

  compile::ReferenceLimits work;
  work.max_flops = 47;  // the MatMul does 2 x 2 x 3 x 4 = 48
  run = compile::run_reference(model, "main", inputs, work);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.error(), runtime::Error::OutOfResources);
  EXPECT_NE(run.status().message().find("node 'MatMul_0' (MatMul)"), std::string::npos)
      << run.status().message();
  work.max_flops = 48;
  EXPECT_TRUE(compile::run_reference(model, "main", inputs, work).ok());
}

TEST(ReferenceRun, RefusesUnknownFunctionsWrongInputCountsAndOpsWithoutKernels) {
  ir::Model model = matmul_relu_model();
  std::vector<float> x(6, 1.0f);
  Tensor input(ScalarType::Float32, {2, 3}, x.data());
  std::vector<const Tensor*> inputs = {&input};
  EXPECT_EQ(compile::run_reference(model, "other", inputs).error(), runtime::Error::NotFound);
  std::vector<const Tensor*> two = {&input, &input};
  auto run = compile::run_reference(model, "main", two);
  EXPECT_EQ(run.error(), runtime::Error::InvalidArgument);
  EXPECT_NE(run.status().message().find("takes 1 inputs, got 2"), std::string::npos);
  model.functions[0].nodes[1].op = "NoSuchOp";
  run = compile::run_reference(model, "main", inputs);
  EXPECT_EQ(run.error(), runtime::Error::OperatorMissing);
  EXPECT_NE(run.status().message().find("NoSuchOp"), std::string::npos);
}

}  // namespace
}  // namespace kiln::engine
