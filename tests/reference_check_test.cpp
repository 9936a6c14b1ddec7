// The engine fuzzer's differential check (fuzz/reference_check.h): it agrees with a correct
// run, finds a wrong element or shape, and skips what is not well conditioned.

#include <fuzz/reference_check.h>

#include <kiln/engine/compile/test/test_models.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kiln::engine {
namespace {

using namespace test_models;  // NOLINT(google-build-using-namespace): test helpers
using fuzz::ReferenceVerdict;

// How small_model divides the MatMul's result, if at all.
enum class Divide { No, ByThree, ByATiny, ByItsInput };

// x [2, 8] -> MatMul(W [8, 4]) -> Add(b) -> Relu -> y, or with a Div after the MatMul: by a
// constant 3, a constant 1e-5, or the MatMul's own result.
ir::Model small_model(Divide divide = Divide::No) {
  ModelBuilder b(9);
  int x = b.input("x", {2, 8});
  int w = b.weight("w", {8, 4});
  int bias = b.weight("b", {4});
  int m = b.value("m", {2, 4}), a = b.value("a", {2, 4}), y = b.value("y", {2, 4});
  b.node("MatMul", {x, w}, {m});
  if (divide != Divide::No) {
    int by = divide == Divide::ByThree   ? b.weight_of("three", {1}, {3.0f})
             : divide == Divide::ByATiny ? b.weight_of("tiny", {1}, {1e-5f})
                                         : m;
    int d = b.value("d", {2, 4});
    b.node("Div", {m, by}, {d});
    m = d;
  }
  b.node("Add", {m, bias}, {a});
  b.node("Relu", {a}, {y});
  b.output(y);
  return b.build();
}

struct EngineRun {
  std::vector<Buffer> inputs, outputs;
  std::vector<const Tensor*> in;
  std::vector<Tensor*> out;
};

// The model specialized and run by the engine on seeded inputs scaled by `scale`.
EngineRun run_engine(const ir::Model& model, float scale = 1.0f) {
  EngineRun r;
  auto compiled = compile::specialize(model, "main", {{2, 8}}, cpu_only(), CompileOptions{});
  EXPECT_TRUE(compiled.ok()) << compiled.status().to_string();
  r.inputs.push_back(random_input(ScalarType::Float32, {2, 8}, 3));
  auto* x = r.inputs[0].tensor.mutable_data_ptr<float>();
  for (int i = 0; i < 16; ++i) x[i] *= scale;
  r.outputs = output_buffers(**compiled);
  EXPECT_TRUE(run(**compiled, r.inputs, r.outputs).ok());
  for (auto& b : r.inputs) r.in.push_back(&b.tensor);
  for (auto& b : r.outputs) r.out.push_back(&b.tensor);
  return r;
}

ReferenceVerdict check(const ir::Model& model, EngineRun& r, std::string& detail) {
  return fuzz::check_against_reference(model, model.functions[0], {}, r.in, r.out, detail);
}

TEST(ReferenceCheck, AgreesWithACorrectRunAndFindsAWrongElementOrShape) {
  ir::Model model = small_model();
  EngineRun r = run_engine(model);
  std::string detail;
  EXPECT_EQ(check(model, r, detail), ReferenceVerdict::Agree) << detail;

  float* y = r.out[0]->mutable_data_ptr<float>();
  y[5] += 0.01f + 0.01f * std::fabs(y[5]);
  EXPECT_EQ(check(model, r, detail), ReferenceVerdict::Disagree);
  EXPECT_NE(detail.find("output 0: element 5"), std::string::npos) << detail;

  y[5] -= 0.01f + 0.01f * std::fabs(y[5]);
  *r.out[0] = Tensor(ScalarType::Float32, {4, 2}, y);
  EXPECT_EQ(check(model, r, detail), ReferenceVerdict::Disagree);
  EXPECT_NE(detail.find("[4, 2]"), std::string::npos) << detail;
}

TEST(ReferenceCheck, SkipsOpsThatAmplifyRoundingAndValuesPastItsScale) {
  std::string detail;
  // A division by a constant of a safe magnitude is compared (and a wrong element found);
  // by a tiny constant, or by a computed value, it is not.
  ir::Model by_three = small_model(Divide::ByThree);
  EngineRun r = run_engine(by_three);
  EXPECT_EQ(check(by_three, r, detail), ReferenceVerdict::Agree) << detail;
  r.out[0]->mutable_data_ptr<float>()[3] += 0.5f;
  EXPECT_EQ(check(by_three, r, detail), ReferenceVerdict::Disagree);
  for (Divide divide : {Divide::ByATiny, Divide::ByItsInput}) {
    ir::Model divided = small_model(divide);
    EngineRun run = run_engine(divided);
    EXPECT_EQ(check(divided, run, detail), ReferenceVerdict::Skipped);
  }
  EXPECT_FALSE(fuzz::continuous_op("Div"));
  EXPECT_FALSE(fuzz::continuous_op("Greater"));
  EXPECT_TRUE(fuzz::continuous_op("Conv"));

  ir::Model model = small_model();
  EngineRun large = run_engine(model, 1e4f);
  EXPECT_EQ(check(model, large, detail), ReferenceVerdict::Skipped);
}

}  // namespace
}  // namespace kiln::engine
