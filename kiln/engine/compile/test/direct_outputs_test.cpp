// Outputs the steps write straight into the caller's tensors (CompiledFunction::run,
// writes_output_directly): which outputs are written so, results equal to the reference
// interpreter's, and the copy kept where writing directly would be wrong: a caller's output
// over an input's bytes, an output listed twice, an input passed through, a failed run.
#include <kiln/engine/compile/test/test_models.h>

namespace kiln::engine {
namespace {

using namespace test_models;  // NOLINT(google-build-using-namespace): test helpers

// x [1, 16, 6, 6] → Conv 3x3 (16) a, Conv 1x1 (16) b → Concat(a, b) = y; Relu(a) = r; the
// outputs y, r, r again and x itself.
ir::Model outputs_model() {
  ModelBuilder b(61);
  int x = b.input("x", {1, 16, 6, 6});
  int w1 = b.weight("w1", {16, 16, 3, 3}, 0.2f), w2 = b.weight("w2", {16, 16, 1, 1}, 0.2f);
  int a = b.value("a", {1, 16, 6, 6}), c = b.value("c", {1, 16, 6, 6});
  int y = b.value("y", {1, 32, 6, 6}), r = b.value("r", {1, 16, 6, 6});
  b.node("Conv", {x, w1}, {a}, {ints("pads", {1, 1, 1, 1}), ints("kernel_shape", {3, 3})});
  b.node("Conv", {x, w2}, {c}, {ints("kernel_shape", {1, 1})});
  b.node("Concat", {a, c}, {y}, {int_attr("axis", 1)});
  b.node("Relu", {a}, {r});
  b.output(y);
  b.output(r);
  b.output(r);
  b.output(x);
  return b.build();
}

TEST(DirectOutputs, ComputedOutputsListedOnceAreWrittenInPlace) {
  auto f = check_against_reference(outputs_model(), {{1, 16, 6, 6}}, CompileOptions{});
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(f->num_outputs(), 4u);
  EXPECT_TRUE(f->writes_output_directly(0));   // the Concat's result, its pieces placed in it
  EXPECT_FALSE(f->writes_output_directly(1));  // r, listed twice: copied into both
  EXPECT_FALSE(f->writes_output_directly(2));
  EXPECT_FALSE(f->writes_output_directly(3));  // the input itself
  // Twice over the same output tensors: nothing the first run left changes the second.
  std::vector<Buffer> inputs;
  inputs.push_back(random_input(ScalarType::Float32, {1, 16, 6, 6}, 7));
  auto first = output_buffers(*f), second = output_buffers(*f);
  ASSERT_TRUE(run(*f, inputs, first).ok());
  ASSERT_TRUE(run(*f, inputs, second).ok());
  for (size_t i = 0; i < first.size(); ++i) expect_close(second[i].tensor, first[i].tensor);
}

TEST(DirectOutputs, ShapeGenericPlansCopyTheirOutputs) {
  auto f = compile::specialize_generic(conv_residual_model(ir::Dim::symbol("n")), "main",
                                       cpu_only(), CompileOptions{});
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  for (size_t i = 0; i < (*f)->num_outputs(); ++i) EXPECT_FALSE((*f)->writes_output_directly(i));
}

// y = Transpose(x) of a square matrix, with the caller's output over the input's bytes: written
// directly, the transpose would overwrite values it has yet to read; the result must be the
// transpose of what the input held.
TEST(DirectOutputs, AnOutputOverTheInputsBytesIsCopied) {
  ModelBuilder b(62);
  int x = b.input("x", {1, 1, 24, 24});
  int y = b.value("y", {1, 1, 24, 24});
  b.node("Transpose", {x}, {y}, {ints("perm", {0, 1, 3, 2})});
  b.output(y);
  ir::Model model = b.build();
  auto f = check_against_reference(model, {{1, 1, 24, 24}}, CompileOptions{});
  ASSERT_NE(f, nullptr);
  ASSERT_TRUE(f->writes_output_directly(0));
  Buffer shared = random_input(ScalarType::Float32, {1, 1, 24, 24}, 9);
  std::vector<const Tensor*> in = {&shared.tensor};
  std::vector<Buffer> expected = interpret(model, in);
  Tensor out(ScalarType::Float32, {1, 1, 24, 24}, shared.bytes.data());
  std::vector<Tensor*> outs = {&out};
  ASSERT_TRUE(f->run(in, outs).ok());
  expect_close(out, expected[0].tensor);
}

// A run refused for a wrong output shape leaves the function as it was: its outputs' own
// storage back in place (the refused run's tensors are gone before the next run, which copies
// into a first output placed over the input's bytes), and the next run gives the reference's
// results.
TEST(DirectOutputs, ARefusedRunLeavesTheFunctionUsable) {
  auto f = check_against_reference(outputs_model(), {{1, 16, 6, 6}}, CompileOptions{});
  ASSERT_NE(f, nullptr);
  constexpr size_t kInputFloats = 16 * 6 * 6, kFirstFloats = 32 * 6 * 6;
  Buffer input = random_input(ScalarType::Float32, {1, 16, 6, 6}, 11);
  {
    std::vector<Buffer> inputs;
    inputs.push_back(input);
    std::vector<Buffer> bad = output_buffers(*f);
    bad[1].tensor = Tensor(ScalarType::Float32, {1, 16, 6, 5}, bad[1].bytes.data());
    Status status = run(*f, inputs, bad);
    EXPECT_EQ(status.code(), runtime::Error::InvalidArgument);
    EXPECT_NE(status.message().find("output 'r'"), std::string::npos) << status.message();
  }
  std::vector<float> shared(kInputFloats + kFirstFloats);
  std::memcpy(shared.data(), input.bytes.data(), kInputFloats * sizeof(float));
  Tensor x(ScalarType::Float32, {1, 16, 6, 6}, shared.data());
  std::vector<const Tensor*> in = {&x};
  std::vector<Buffer> expected = interpret(outputs_model(), in);
  std::vector<Buffer> good = output_buffers(*f);
  good[0].tensor = Tensor(ScalarType::Float32, {1, 32, 6, 6}, shared.data() + kInputFloats / 2);
  std::vector<Tensor*> out;
  for (Buffer& b : good) out.push_back(&b.tensor);
  ASSERT_TRUE(f->run(in, out).ok());
  for (size_t i = 0; i < good.size(); ++i) {
    if (i != 3) expect_close(good[i].tensor, expected[i].tensor);  // x: overwritten by y
  }
}

}  // namespace
}  // namespace kiln::engine
