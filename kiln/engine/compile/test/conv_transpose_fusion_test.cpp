// A ConvTranspose anchors a fusion like a Conv: a bias Add along its channels and the activations
// after it become its bias and post-ops (on the upsampling matrix product and on oneDNN's
// deconvolution alike); a residual Add stays a step of its own. Results match the reference
// interpreter with fusion on and off.
#include <kiln/engine/compile/test/test_models.h>

namespace kiln::engine {
namespace {

using namespace test_models;  // NOLINT(google-build-using-namespace): test helpers

// x [1, 16, 10, 10] → ConvTranspose(8, 2x2, strides 2) → Add [1, 8, 1, 1] → Relu → y;
// u [1, 8, 5, 5] → ConvTranspose(8, 3x3, group 2, strides 2, pads 1, bias) → Sigmoid → z;
// v [1, 8, 5, 5] → ConvTranspose(8, 2x2, strides 2) → Add r [1, 8, 10, 10] → q.
ir::Model conv_transpose_model() {
  ModelBuilder b(47);
  int x = b.input("x", {1, 16, 10, 10});
  int u = b.input("u", {1, 8, 5, 5});
  int v = b.input("v", {1, 8, 5, 5});
  int r = b.input("r", {1, 8, 10, 10});
  int w1 = b.weight("w1", {16, 8, 2, 2}, 0.3f);
  int shift = b.weight("shift", {1, 8, 1, 1}, 0.5f);
  int w2 = b.weight("w2", {8, 4, 3, 3}, 0.3f);
  int b2 = b.weight("b2", {8}, 0.5f);
  int w3 = b.weight("w3", {8, 8, 2, 2}, 0.3f);
  std::vector<ir::Dim> up = {1, 8, 20, 20}, odd = {1, 8, 9, 9}, even = {1, 8, 10, 10};
  int t1 = b.value("t1", up), s1 = b.value("s1", up), y = b.value("y", up);
  int t2 = b.value("t2", odd), z = b.value("z", odd);
  int t3 = b.value("t3", even), q = b.value("q", even);
  const std::vector<ir::Attribute> upsample = {ints("kernel_shape", {2, 2}),
                                               ints("strides", {2, 2})};
  b.node("ConvTranspose", {x, w1}, {t1}, upsample);
  b.node("Add", {t1, shift}, {s1});
  b.node("Relu", {s1}, {y});
  b.node("ConvTranspose", {u, w2, b2}, {t2},
         {ints("kernel_shape", {3, 3}), ints("strides", {2, 2}), ints("pads", {1, 1, 1, 1}),
          int_attr("group", 2)});
  b.node("Sigmoid", {t2}, {z});
  b.node("ConvTranspose", {v, w3}, {t3}, upsample);
  b.node("Add", {t3, r}, {q});
  b.output(y);
  b.output(z);
  b.output(q);
  return b.build();
}

TEST(Specialize, ConvTransposeFusesItsBiasAndActivationsButNoResidual) {
  const ir::Model model = conv_transpose_model();
  const std::vector<std::vector<int64_t>> sizes = {
      {1, 16, 10, 10}, {1, 8, 5, 5}, {1, 8, 5, 5}, {1, 8, 10, 10}};
  auto fused = check_against_reference(model, sizes, /*fuse=*/true);
  ASSERT_NE(fused, nullptr);
  const auto& placement = fused->placement();
  ASSERT_EQ(placement.size(), 4u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(placement[i].op, "ConvTranspose");
    EXPECT_EQ(placement[i].device, "cpu:onednn");
  }
  EXPECT_THAT(placement[0].fused, ::testing::ElementsAre("Add_1 (Add)", "Relu_2 (Relu)"));
  EXPECT_THAT(placement[1].fused, ::testing::ElementsAre("Sigmoid_4 (Sigmoid)"));
  EXPECT_TRUE(placement[2].fused.empty());
  EXPECT_EQ(placement[3].op, "Add");

  auto unfused = check_against_reference(model, sizes, /*fuse=*/false);
  ASSERT_NE(unfused, nullptr);
  EXPECT_EQ(unfused->placement().size(), 7u);
  std::vector<Buffer> inputs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    inputs.push_back(random_input(ScalarType::Float32, sizes[i], 60 + static_cast<uint32_t>(i)));
  }
  auto a = output_buffers(*fused), b = output_buffers(*unfused);
  ASSERT_TRUE(run(*fused, inputs, a).ok());
  ASSERT_TRUE(run(*unfused, inputs, b).ok());
  for (size_t i = 0; i < a.size(); ++i) expect_close(a[i].tensor, b[i].tensor);
}

}  // namespace
}  // namespace kiln::engine
