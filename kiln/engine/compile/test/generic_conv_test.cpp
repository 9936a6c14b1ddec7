// Shape-generic plans of Conv networks (ShapedOp): one plan runs every image size on kiln's
// loops made for each shape, values handed over in nChw16c between them, matching the reference
// interpreter; what the loops do not take runs on the reference kernels.
#include <kiln/engine/compile/test/test_models.h>
#include <kiln/engine/cpu/cpu_op.h>

#include <gmock/gmock.h>

namespace kiln::engine {
namespace {

using namespace test_models;  // NOLINT(google-build-using-namespace): test helpers
using ::testing::ElementsAre;
using ::testing::HasSubstr;

/// x [1, 3, H, W] → Conv 3x3 + bias + Relu (an image Conv) → Conv 3x3 16 → 16 + Relu (Winograd)
/// = r1; r1 → MaxPool 2x2 → Conv 1x1 → Resize x2 = u; r1 → Conv 1x1 = l; s = u + l; t = s +
/// GlobalAveragePool(s) (a broadcast, on the run-time element-wise loops); Concat(t, l) →
/// ConvTranspose 2x2 stride 2 = y [1, 8, 2H, 2W]. H and W even.
ir::Model pyramid_model() {
  ModelBuilder b(31);
  ir::Dim h = ir::Dim::symbol("H"), w = ir::Dim::symbol("W");
  ir::Dim any = ir::Dim::symbol("");
  int x = b.input("x", {1, 3, h, w});
  int w0 = b.weight("w0", {16, 3, 3, 3});
  int b0 = b.weight("b0", {1, 16, 1, 1});
  int w1 = b.weight("w1", {16, 16, 3, 3}, 0.2f);
  int w2 = b.weight("w2", {32, 16, 1, 1}, 0.3f);
  int w3 = b.weight("w3", {32, 16, 1, 1}, 0.3f);
  int wt = b.weight("wt", {64, 8, 2, 2}, 0.2f);
  int scales = b.weight_of("scales", {4}, {1.0f, 1.0f, 2.0f, 2.0f});
  int c0 = b.value("c0", {1, 16, h, w}), a0 = b.value("a0", {1, 16, h, w});
  int r0 = b.value("r0", {1, 16, h, w}), c1 = b.value("c1", {1, 16, h, w});
  int r1 = b.value("r1", {1, 16, h, w});
  int p = b.value("p", {1, 16, any, any}), c2 = b.value("c2", {1, 32, any, any});
  int u = b.value("u", {1, 32, any, any}), l = b.value("l", {1, 32, h, w});
  int s = b.value("s", {1, 32, h, w}), g = b.value("g", {1, 32, 1, 1});
  int t = b.value("t", {1, 32, h, w}), cat = b.value("cat", {1, 64, h, w});
  int y = b.value("y", {1, 8, any, any});
  std::vector<ir::Attribute> conv3 = {ints("pads", {1, 1, 1, 1}), ints("kernel_shape", {3, 3})};
  b.node("Conv", {x, w0}, {c0}, conv3);
  b.node("Add", {c0, b0}, {a0});
  b.node("Relu", {a0}, {r0});
  b.node("Conv", {r0, w1}, {c1}, conv3);
  b.node("Relu", {c1}, {r1});
  b.node("MaxPool", {r1}, {p}, {ints("kernel_shape", {2, 2}), ints("strides", {2, 2})});
  b.node("Conv", {p, w2}, {c2}, {ints("kernel_shape", {1, 1})});
  b.node("Resize", {c2, -1, scales}, {u});
  b.node("Conv", {r1, w3}, {l}, {ints("kernel_shape", {1, 1})});
  b.node("Add", {u, l}, {s});
  b.node("GlobalAveragePool", {s}, {g});
  b.node("Add", {s, g}, {t});
  b.node("Concat", {t, l}, {cat}, {int_attr("axis", 1)});
  b.node("ConvTranspose", {cat, wt}, {y}, {ints("kernel_shape", {2, 2}), ints("strides", {2, 2})});
  b.output(y);
  return b.build();
}

TEST(GenericConvPlan, OnePlanRunsEveryImageSizeLikeTheReference) {
  if (!cpu::own_vector_loops()) GTEST_SKIP() << "kiln's loops do not run on this CPU";
  ir::Model model = pyramid_model();
  auto compiled = compile::specialize_generic(model, "main", cpu_only());
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  compile::CompiledFunction& f = **compiled;
  ASSERT_TRUE(f.is_generic());

  std::map<std::string, const compile::PlacementEntry*> steps;
  for (const auto& entry : f.placement()) steps[entry.node] = &entry;
  ASSERT_TRUE(steps.count("Conv_0"));
  EXPECT_EQ(steps["Conv_0"]->device, "cpu:kiln");
  EXPECT_THAT(steps["Conv_0"]->detail, HasSubstr("ops made for each input shape"));
  EXPECT_THAT(steps["Conv_0"]->fused, ElementsAre("Add_1 (Add)", "Relu_2 (Relu)"));
  ASSERT_TRUE(steps.count("Conv_3"));
  EXPECT_THAT(steps["Conv_3"]->detail, HasSubstr("Winograd"));
  EXPECT_THAT(steps["Conv_3"]->fused, ElementsAre("Relu_4 (Relu)"));
  for (const char* node : {"MaxPool_5", "Resize_7", "Add_9", "Concat_12", "ConvTranspose_13"}) {
    ASSERT_TRUE(steps.count(node)) << node;
    EXPECT_THAT(steps[node]->detail, HasSubstr("ops made for each input shape")) << node;
  }
  EXPECT_EQ(steps["GlobalAveragePool_10"]->device, "cpu:reference");
  // An Add of values no Conv, pool, Resize or Concat made: the run-time element-wise loops.
  ASSERT_TRUE(steps.count("Add_11"));
  EXPECT_THAT(steps["Add_11"]->detail, HasSubstr("run-time shapes"));

  uint32_t seed = 1;
  for (std::vector<int64_t> hw : std::vector<std::vector<int64_t>>{
           {16, 16}, {24, 10}, {2, 6}, {16, 16}, {40, 34}, {24, 10}}) {
    SCOPED_TRACE("image " + std::to_string(hw[0]) + " x " + std::to_string(hw[1]));
    std::vector<Buffer> inputs;
    inputs.push_back(random_input(ScalarType::Float32, {1, 3, hw[0], hw[1]}, seed++));
    std::vector<Buffer> outputs = output_buffers(f);
    Status status = run(f, inputs, outputs);
    ASSERT_TRUE(status.ok()) << status.to_string();
    std::vector<Buffer> expected = interpret(model, {&inputs[0].tensor});
    expect_close(outputs[0].tensor, expected[0].tensor, 1e-4, 5e-5);
  }
}

TEST(GenericConvPlan, FusionOffGivesTheSameResults) {
  if (!cpu::own_vector_loops()) GTEST_SKIP() << "kiln's loops do not run on this CPU";
  ir::Model model = pyramid_model();
  CompileOptions unfused;
  unfused.fuse = false;
  auto fused = compile::specialize_generic(model, "main", cpu_only());
  auto plain = compile::specialize_generic(model, "main", cpu_only(), unfused);
  ASSERT_TRUE(fused.ok() && plain.ok());
  std::vector<Buffer> inputs;
  inputs.push_back(random_input(ScalarType::Float32, {1, 3, 12, 20}, 7));
  std::vector<Buffer> a = output_buffers(**fused), b = output_buffers(**plain);
  ASSERT_TRUE(run(**fused, inputs, a).ok());
  ASSERT_TRUE(run(**plain, inputs, b).ok());
  expect_close(a[0].tensor, b[0].tensor, 1e-4, 5e-5);
}

TEST(GenericConvPlan, AnImageTheModelRejectsIsAnErrorNamingTheShapes) {
  if (!cpu::own_vector_loops()) GTEST_SKIP() << "kiln's loops do not run on this CPU";
  ir::Model model = pyramid_model();
  auto compiled = compile::specialize_generic(model, "main", cpu_only());
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  // An odd height: the pooled and resized branch is one row short of the other, so the Add
  // cannot broadcast them.
  std::vector<Buffer> inputs;
  inputs.push_back(random_input(ScalarType::Float32, {1, 3, 9, 8}, 3));
  std::vector<Buffer> outputs = output_buffers(**compiled);
  Status status = run(**compiled, inputs, outputs);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("Add_9"));
  EXPECT_THAT(status.message(), HasSubstr("[1, 32, 8, 8]"));
  EXPECT_THAT(status.message(), HasSubstr("[1, 32, 9, 8]"));
  // The plan still runs a good size afterwards.
  inputs[0] = random_input(ScalarType::Float32, {1, 3, 8, 8}, 4);
  ASSERT_TRUE(run(**compiled, inputs, outputs).ok());
  std::vector<Buffer> expected = interpret(model, {&inputs[0].tensor});
  expect_close(outputs[0].tensor, expected[0].tensor, 1e-4, 5e-5);
}

// The call's shapes fit no op: the reference kernel says why.
TEST(GenericConvPlan, AnInputOfOtherChannelsThanTheWeightsIsAnErrorNamingBoth) {
  if (!cpu::own_vector_loops()) GTEST_SKIP() << "kiln's loops do not run on this CPU";
  ModelBuilder b(5);
  ir::Dim c = ir::Dim::symbol("c"), h = ir::Dim::symbol("h");
  int x = b.input("x", {1, c, h, h});
  int w = b.weight("w", {16, 16, 3, 3});
  int y = b.value("y", {1, 16, ir::Dim::symbol(""), ir::Dim::symbol("")});
  b.node("Conv", {x, w}, {y}, {ints("kernel_shape", {3, 3})});
  b.output(y);
  ir::Model model = b.build();
  auto compiled = compile::specialize_generic(model, "main", cpu_only());
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  std::vector<Buffer> inputs;
  inputs.push_back(random_input(ScalarType::Float32, {1, 8, 10, 10}, 1));
  std::vector<Buffer> outputs = output_buffers(**compiled);
  Status status = run(**compiled, inputs, outputs);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), Error::InvalidArgument) << status.to_string();
  EXPECT_THAT(status.message(), HasSubstr("Conv_0"));
  EXPECT_THAT(status.message(), HasSubstr("[1, 8, 10, 10]"));
  EXPECT_THAT(status.message(), HasSubstr("[16, 16, 3, 3]"));
  // Its own channels run.
  inputs[0] = random_input(ScalarType::Float32, {1, 16, 10, 10}, 2);
  ASSERT_TRUE(run(**compiled, inputs, outputs).ok());
  std::vector<Buffer> expected = interpret(model, {&inputs[0].tensor});
  expect_close(outputs[0].tensor, expected[0].tensor, 1e-4, 5e-5);
}

// A fused Conv (bias, Relu) over images down to its kernel's size matches the reference; an
// image smaller than the kernel is an error naming the node and the shape, and the plan runs on.
TEST(GenericConvPlan, AFusedConvRunsEveryImageItsKernelFits) {
  if (!cpu::own_vector_loops()) GTEST_SKIP() << "kiln's loops do not run on this CPU";
  ModelBuilder b(6);
  ir::Dim h = ir::Dim::symbol("h"), any = ir::Dim::symbol("");
  int x = b.input("x", {1, 16, h, h});
  int w = b.weight("w", {16, 16, 3, 3}, 0.2f);
  int bias = b.weight("bias", {1, 16, 1, 1});
  int c = b.value("c", {1, 16, any, any}), a = b.value("a", {1, 16, any, any});
  int y = b.value("y", {1, 16, any, any});
  b.node("Conv", {x, w}, {c}, {ints("kernel_shape", {3, 3})});
  b.node("Add", {c, bias}, {a});
  b.node("Relu", {a}, {y});
  b.output(y);
  ir::Model model = b.build();
  auto compiled = compile::specialize_generic(model, "main", cpu_only());
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  ASSERT_EQ((*compiled)->placement().size(), 1u);
  EXPECT_THAT((*compiled)->placement()[0].fused, ElementsAre("Add_1 (Add)", "Relu_2 (Relu)"));
  for (int64_t size : {9, 3, 2, 4}) {
    SCOPED_TRACE("image " + std::to_string(size));
    std::vector<Buffer> inputs;
    inputs.push_back(random_input(ScalarType::Float32, {1, 16, size, size}, 8));
    std::vector<Buffer> outputs = output_buffers(**compiled);
    Status status = run(**compiled, inputs, outputs);
    if (size == 2) {
      EXPECT_EQ(status.code(), Error::InvalidArgument) << status.to_string();
      EXPECT_THAT(status.message(), HasSubstr("Conv_0"));
      EXPECT_THAT(status.message(), HasSubstr("[1, 16, 2, 2]"));
      continue;
    }
    ASSERT_TRUE(status.ok()) << status.to_string();
    std::vector<Buffer> expected = interpret(model, {&inputs[0].tensor});
    expect_close(outputs[0].tensor, expected[0].tensor, 1e-4, 5e-5);
  }
}

// A residual the model declares of the Conv's shape is fused; where a call's residual turns out
// to broadcast instead (a package's types are not trusted), the op refuses it and the Conv, the
// Add and the Relu run on their reference kernels, with the intermediate values in run-time
// storage: the same results.
TEST(GenericConvPlan, AResidualThatBroadcastsAtRunTimeRunsOnTheReferenceKernels) {
  if (!cpu::own_vector_loops()) GTEST_SKIP() << "kiln's loops do not run on this CPU";
  ModelBuilder b(9);
  ir::Dim h = ir::Dim::symbol("h");
  int x = b.input("x", {1, 16, h, h});
  int w = b.weight("w", {16, 16, 3, 3}, 0.2f);
  int axes = b.int_weight("axes", {2, 3});
  int m = b.value("m", {1, 16, h, h});  // declared so, computed [1, 16, 1, 1]
  int c = b.value("c", {1, 16, h, h}), s = b.value("s", {1, 16, h, h});
  int y = b.value("y", {1, 16, h, h});
  b.node("ReduceMean", {x, axes}, {m});
  b.node("Conv", {x, w}, {c}, {ints("kernel_shape", {3, 3}), ints("pads", {1, 1, 1, 1})});
  b.node("Add", {c, m}, {s});
  b.node("Relu", {s}, {y});
  b.output(y);
  ir::Model model = b.build();
  auto compiled = compile::specialize_generic(model, "main", cpu_only());
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  const compile::PlacementEntry* conv = nullptr;
  for (const auto& entry : (*compiled)->placement()) {
    if (entry.node == "Conv_1") conv = &entry;
  }
  ASSERT_NE(conv, nullptr);
  EXPECT_THAT(conv->fused, ElementsAre("Add_2 (Add)", "Relu_3 (Relu)"));
  for (int64_t size : {6, 11}) {
    SCOPED_TRACE("image " + std::to_string(size));
    std::vector<Buffer> inputs;
    inputs.push_back(random_input(ScalarType::Float32, {1, 16, size, size}, 10));
    std::vector<Buffer> outputs = output_buffers(**compiled);
    Status status = run(**compiled, inputs, outputs);
    ASSERT_TRUE(status.ok()) << status.to_string();
    std::vector<Buffer> expected = interpret(model, {&inputs[0].tensor});
    expect_close(outputs[0].tensor, expected[0].tensor, 1e-4, 5e-5);
  }
}

}  // namespace
}  // namespace kiln::engine
