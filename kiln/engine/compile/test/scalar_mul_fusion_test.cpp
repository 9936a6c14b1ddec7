// A Mul by a constant scalar after a MatMul or Conv (attention's 1/sqrt(d), once the importer has
// made its division a multiplication) is fused as a post-op: on oneDNN's kernels and on kiln's
// own loops, with the reference interpreter's results.
#include <kiln/engine/compile/test/test_models.h>

namespace kiln::engine {
namespace {

using namespace test_models;  // NOLINT(google-build-using-namespace): test helpers

// q [2, 8, 16] x k [2, 16, 8] → Mul(0.25) → Softmax; x [1, 4, 6, 6] → Conv(8) → Mul(1.5) → Relu;
// v [3, 16] x a constant [16, 8] → Mul(-2) (then the scalar on the left).
ir::Model scaled_model() {
  ModelBuilder b(31);
  int q = b.input("q", {2, 8, 16});
  int k = b.input("k", {2, 16, 8});
  int x = b.input("x", {1, 4, 6, 6});
  int v = b.input("v", {3, 16});
  int quarter = b.weight_of("quarter", {}, {0.25f});
  int one_and_half = b.weight_of("one_and_half", {1}, {1.5f});
  int minus_two = b.weight_of("minus_two", {}, {-2.0f});
  int w = b.weight("w", {8, 4, 3, 3}, 0.3f);
  int m = b.weight("m", {16, 8});
  int scores = b.value("scores", {2, 8, 8}), scaled = b.value("scaled", {2, 8, 8});
  int probs = b.value("probs", {2, 8, 8});
  std::vector<ir::Dim> image = {1, 8, 6, 6};
  int c = b.value("c", image), cs = b.value("cs", image), y = b.value("y", image);
  int p = b.value("p", {3, 8}), z = b.value("z", {3, 8});
  b.node("MatMul", {q, k}, {scores});
  b.node("Mul", {scores, quarter}, {scaled});
  b.node("Softmax", {scaled}, {probs}, {int_attr("axis", -1)});
  b.node("Conv", {x, w}, {c}, {ints("pads", {1, 1, 1, 1}), ints("kernel_shape", {3, 3})});
  b.node("Mul", {c, one_and_half}, {cs});
  b.node("Relu", {cs}, {y});
  b.node("MatMul", {v, m}, {p});
  b.node("Mul", {minus_two, p}, {z});
  b.output(probs);
  b.output(y);
  b.output(z);
  return b.build();
}

TEST(Specialize, MulByAConstantScalarIsFusedAsAPostOp) {
  const ir::Model model = scaled_model();
  const std::vector<std::vector<int64_t>> sizes = {{2, 8, 16}, {2, 16, 8}, {1, 4, 6, 6}, {3, 16}};
  CompileOptions onednn_only;
  onednn_only.small_ops_own_loops = false;
  for (const CompileOptions& options : {onednn_only, CompileOptions{}}) {
    SCOPED_TRACE(options.small_ops_own_loops ? "kiln's loops for small ops" : "oneDNN only");
    auto f = check_against_reference(model, sizes, options);
    ASSERT_NE(f, nullptr);
    int fused_muls = 0;
    for (const auto& entry : f->placement()) {
      EXPECT_NE(entry.op, "Mul") << "a Mul left as a step of its own";
      for (const std::string& name : entry.fused)
        fused_muls += name.find("(Mul)") != std::string::npos;
    }
    EXPECT_EQ(fused_muls, 3);
  }
}

}  // namespace
}  // namespace kiln::engine
