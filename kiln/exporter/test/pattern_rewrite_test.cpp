// engine::passes::rewrite_patterns through the importer: erf GELU in each order exporters write
// it becomes one Gelu, a division by a constant scalar a multiplication, a square by Pow a
// product; results are unchanged.
#include <kiln/exporter/onnx/onnx_importer.h>
#include <kiln/exporter/test/onnx_model_builder.h>
#include <kiln/exporter/test/portable_run.h>

#include <gtest/gtest.h>

#include <cmath>

namespace kiln::exporter {
namespace {

using test::OnnxModelBuilder;
constexpr int kF32 = onnx::TensorProto::FLOAT;

std::vector<float> run_model(const engine::ir::Model& model, std::vector<float> x) {
  return test::run_portable(model, {2, 3}, std::move(x));
}

std::vector<std::string> ops(const engine::ir::Model& model) { return test::op_names(model); }

enum class Order { TimesXThenHalf, HalfThenTimesX, HalfXFirst };

// y = gelu(x) + 1 (the Add keeps the pattern's result off the graph output), written as
// x / sqrt(2) (or x * (1 / sqrt(2)) when `multiply`) → Erf → + 1 → the two products in `order`.
std::string gelu_model(Order order, bool multiply) {
  OnnxModelBuilder b;
  b.input("x", kF32, {2, 3}).output("y", kF32, {2, 3});
  b.initializer_f32("root2", {}, {multiply ? static_cast<float>(1.0 / std::sqrt(2.0))
                                           : static_cast<float>(std::sqrt(2.0))});
  b.initializer_f32("one", {}, {1.0f});
  b.initializer_f32("half", {}, {0.5f});
  b.node(multiply ? "Mul" : "Div", {"x", "root2"}, {"scaled"});
  b.node("Erf", {"scaled"}, {"e"});
  b.node("Add", {"one", "e"}, {"one_plus"});
  if (order == Order::TimesXThenHalf) {
    b.node("Mul", {"x", "one_plus"}, {"p"});
    b.node("Mul", {"p", "half"}, {"g"});
  } else if (order == Order::HalfThenTimesX) {
    b.node("Mul", {"one_plus", "half"}, {"p"});
    b.node("Mul", {"x", "p"}, {"g"});
  } else {
    b.node("Mul", {"half", "x"}, {"p"});
    b.node("Mul", {"p", "one_plus"}, {"g"});
  }
  b.node("Add", {"g", "one"}, {"y"});
  return b.bytes();
}

TEST(PatternRewrites, ErfGeluInEachOrderBecomesOneGeluWithTheSameResults) {
  const std::vector<float> x = {-3.0f, -1.0f, -0.25f, 0.0f, 0.5f, 2.5f};
  for (Order order : {Order::TimesXThenHalf, Order::HalfThenTimesX, Order::HalfXFirst}) {
    for (bool multiply : {false, true}) {
      SCOPED_TRACE(std::to_string(static_cast<int>(order)) + (multiply ? " mul" : " div"));
      std::string bytes = gelu_model(order, multiply);
      auto rewritten = import_onnx(bytes, "gelu.onnx");
      ImportOptions plain;
      plain.rewrite_patterns = false;
      auto original = import_onnx(bytes, "gelu.onnx", plain);
      ASSERT_TRUE(rewritten.ok() && original.ok());
      EXPECT_EQ(ops(*rewritten), (std::vector<std::string>{"Gelu", "Add"}));
      EXPECT_EQ(ops(*original).size(), 6u);
      std::vector<float> a = run_model(*rewritten, x), b = run_model(*original, x);
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_NEAR(a[i], b[i], 1e-6 + 1e-5 * std::fabs(b[i])) << i;
      }
    }
  }
}

TEST(PatternRewrites, APatternWhosePiecesAreReadElsewhereIsLeftAlone) {
  OnnxModelBuilder b;
  b.input("x", kF32, {2, 3}).output("y", kF32, {2, 3}).output("e", kF32, {2, 3});
  b.initializer_f32("root2", {}, {static_cast<float>(std::sqrt(2.0))});
  b.initializer_f32("one", {}, {1.0f});
  b.initializer_f32("half", {}, {0.5f});
  b.node("Div", {"x", "root2"}, {"scaled"});
  b.node("Erf", {"scaled"}, {"e"});  // also a graph output
  b.node("Add", {"e", "one"}, {"one_plus"});
  b.node("Mul", {"x", "one_plus"}, {"p"});
  b.node("Mul", {"p", "half"}, {"y"});
  auto model = import_onnx(b.bytes(), "gelu.onnx");
  ASSERT_TRUE(model.ok());
  // Only the division by a constant changes (into a multiplication by its reciprocal).
  EXPECT_EQ(ops(*model), (std::vector<std::string>{"Mul", "Erf", "Add", "Mul", "Mul"}));
}

TEST(PatternRewrites, DivisionByAConstantScalarBecomesAMultiplication) {
  OnnxModelBuilder b;
  b.input("x", kF32, {2, 3}).output("y", kF32, {2, 3});
  b.initializer_f32("eight", {1}, {8.0f});
  b.initializer_f32("zero", {}, {0.0f});
  b.node("Div", {"x", "eight"}, {"d"});
  b.node("Div", {"d", "zero"}, {"y"});  // by zero: left as a division (inf/nan semantics)
  auto model = import_onnx(b.bytes(), "div.onnx");
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(ops(*model), (std::vector<std::string>{"Mul", "Div"}));
  std::vector<float> y = run_model(*model, {8, 16, -4, 0, 1, 2});
  EXPECT_EQ(y[0], INFINITY);
  EXPECT_EQ(y[2], -INFINITY);
}

TEST(PatternRewrites, SquareByPowBecomesAMultiplication) {
  OnnxModelBuilder b;
  b.input("x", kF32, {2, 3}).output("y", kF32, {2, 3});
  b.initializer_f32("two", {}, {2.0f});
  b.initializer_f32("three", {}, {3.0f});
  b.node("Pow", {"x", "two"}, {"s"});
  b.node("Pow", {"s", "three"}, {"y"});  // another exponent: left as a power
  auto model = import_onnx(b.bytes(), "pow.onnx");
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(ops(*model), (std::vector<std::string>{"Mul", "Pow"}));
  const std::vector<float> x = {1.5f, -2.0f, 0.0f, -0.25f, 3.0f, 1e-20f};
  std::vector<float> y = run_model(*model, x);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(y[i], std::pow(std::pow(x[i], 2.0f), 3.0f)) << "x = " << x[i];
  }
}

}  // namespace
}  // namespace kiln::exporter
