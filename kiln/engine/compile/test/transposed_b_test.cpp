// A Transpose of a computed value that swaps its last two axes, read only by a MatMul as B
// (attention's K^T), is not a step of its own: oneDNN's MatMul reads the Transpose's input as B
// transposed in place. Results against the reference interpreter, with fusion on and off, and
// the Transposes that stay steps.
#include <kiln/engine/compile/test/test_models.h>
#include <kiln/engine/cpu/cpu_op.h>

namespace kiln::engine {
namespace {

using namespace test_models;  // NOLINT(google-build-using-namespace): test helpers
using ::testing::HasSubstr;

std::vector<ir::Dim> dims(const std::vector<int64_t>& sizes) {
  return std::vector<ir::Dim>(sizes.begin(), sizes.end());
}

// Whether any step of `f` is a Transpose, and how many steps read a Transpose's input as B.
std::pair<bool, int> transposes(const compile::CompiledFunction& f) {
  bool step = false;
  int read = 0;
  for (const auto& entry : f.placement()) {
    step = step || entry.op == "Transpose";
    for (const std::string& name : entry.fused) {
      read += name.find("(Transpose) (B read transposed)") != std::string::npos;
    }
  }
  return {step, read};
}

// A decoder step's attention scores: this step's key appended to the past ones (the result a
// function output, as a model's present key), transposed, and multiplied by the query.
TEST(TransposedB, AttentionKeysAreReadTransposedByTheMatMul) {
  ModelBuilder b(71);
  int q = b.input("q", {1, 4, 1, 32});
  int past = b.input("past", {1, 4, 8, 32});
  int now = b.input("now", {1, 4, 1, 32});
  int present = b.value("present", {1, 4, 9, 32});
  int keys_t = b.value("keys_t", {1, 4, 32, 9});
  int scores = b.value("scores", {1, 4, 1, 9});
  int probs = b.value("probs", {1, 4, 1, 9});
  b.node("Concat", {past, now}, {present}, {int_attr("axis", 2)});
  b.node("Transpose", {present}, {keys_t}, {ints("perm", {0, 1, 3, 2})});
  b.node("MatMul", {q, keys_t}, {scores});
  b.node("Softmax", {scores}, {probs}, {int_attr("axis", -1)});
  b.output(probs);
  b.output(present);
  const ir::Model model = b.build();
  const std::vector<std::vector<int64_t>> sizes = {{1, 4, 1, 32}, {1, 4, 8, 32}, {1, 4, 1, 32}};
  for (bool fuse : {true, false}) {
    SCOPED_TRACE(fuse ? "fusion on" : "fusion off");
    auto f = check_against_reference(model, sizes, fuse);
    ASSERT_NE(f, nullptr);
    const auto [step, read] = transposes(*f);
    EXPECT_EQ(step, !fuse);
    EXPECT_EQ(read, fuse ? 1 : 0);
  }
}

// Other shapes that fold: a 2-D Transpose without perm (the default reverses the axes), a batch
// of keys broadcast over the queries' batch, and a MatMul whose result fuses a scale and Relu.
TEST(TransposedB, FoldsForAnyRankBroadcastAndFusedPostOps) {
  struct Variant {
    std::vector<int64_t> a, source;
    bool perm;
    bool post_ops;
  };
  const std::vector<Variant> variants = {
      {{5, 6}, {7, 6}, false, false},
      {{2, 3, 4, 16}, {1, 3, 5, 16}, true, false},
      {{3, 8, 16}, {3, 12, 16}, true, true},
  };
  uint32_t seed = 80;
  for (const Variant& v : variants) {
    SCOPED_TRACE(runtime::shape_to_string(v.a) + " x transpose of " +
                 runtime::shape_to_string(v.source));
    ModelBuilder b(seed++);
    const size_t rank = v.source.size();
    std::vector<int64_t> t = v.source;
    std::swap(t[rank - 1], t[rank - 2]);
    std::vector<int64_t> out = v.a;
    for (size_t i = 0; i + 2 < out.size(); ++i) out[i] = std::max(v.a[i], v.source[i]);
    out.back() = t.back();
    int a = b.input("a", dims(v.a));
    int x = b.input("x", dims(v.source));
    int rx = b.value("rx", dims(v.source));  // computed, as in a model
    int xt = b.value("xt", dims(t));
    int y = b.value("y", dims(out));
    b.node("Relu", {x}, {rx});
    std::vector<ir::Attribute> perm;
    if (v.perm) {
      std::vector<int64_t> p(rank);
      for (size_t i = 0; i < rank; ++i) p[i] = static_cast<int64_t>(i);
      std::swap(p[rank - 1], p[rank - 2]);
      perm.push_back(ints("perm", p));
    }
    b.node("Transpose", {rx}, {xt}, perm);
    b.node("MatMul", {a, xt}, {y});
    int result = y;
    if (v.post_ops) {
      int half = b.weight_of("half", {}, {0.5f});
      int scaled = b.value("scaled", dims(out));
      result = b.value("relu", dims(out));
      b.node("Mul", {y, half}, {scaled});
      b.node("Relu", {scaled}, {result});
    }
    b.output(result);
    auto f = check_against_reference(b.build(), {v.a, v.source}, true);
    ASSERT_NE(f, nullptr);
    const auto [step, read] = transposes(*f);
    EXPECT_FALSE(step);
    EXPECT_EQ(read, 1);
  }
}

// Transposes that stay steps: their result also a function output, read by another op too, read
// as A, or moving other axes than the last two.
TEST(TransposedB, OtherTransposesStaySteps) {
  enum class Case { Output, TwoReaders, ReadAsA, OtherAxes };
  uint32_t seed = 90;
  for (Case c : {Case::Output, Case::TwoReaders, Case::ReadAsA, Case::OtherAxes}) {
    SCOPED_TRACE(static_cast<int>(c));
    ModelBuilder b(seed++);
    int a = b.input("a", {2, 4, 6});
    int x = b.input("x", {2, 4, 6});
    int rx = b.value("rx", {2, 4, 6});
    b.node("Relu", {x}, {rx});
    const bool other = c == Case::OtherAxes;
    int xt = b.value("xt", other ? std::vector<ir::Dim>{4, 2, 6} : std::vector<ir::Dim>{2, 6, 4});
    b.node("Transpose", {rx}, {xt},
           {ints("perm", other ? std::vector<int64_t>{1, 0, 2} : std::vector<int64_t>{0, 2, 1})});
    int y = b.value("y", other ? std::vector<ir::Dim>{4, 2, 2} : std::vector<ir::Dim>{2, 4, 4});
    if (c == Case::ReadAsA) {
      int w = b.input("w", {2, 4, 4});
      y = b.value("ya", {2, 6, 4});
      b.node("MatMul", {xt, w}, {y});
    } else if (other) {
      int w = b.input("w", {4, 6, 2});
      b.node("MatMul", {xt, w}, {y});
    } else {
      b.node("MatMul", {a, xt}, {y});
    }
    b.output(y);
    if (c == Case::Output) b.output(xt);
    if (c == Case::TwoReaders) {
      int z = b.value("z", {2, 6, 4});
      b.node("Relu", {xt}, {z});
      b.output(z);
    }
    std::vector<std::vector<int64_t>> sizes = {{2, 4, 6}, {2, 4, 6}};
    if (c == Case::ReadAsA) sizes.push_back({2, 4, 4});
    if (other) sizes.push_back({4, 6, 2});
    auto f = check_against_reference(b.build(), sizes, true);
    ASSERT_NE(f, nullptr);
    const auto [step, read] = transposes(*f);
    EXPECT_TRUE(step);
    EXPECT_EQ(read, 0);
  }
}

// A shape-generic plan (a decoder step at any past length) folds the keys' Transpose too:
// kiln's run-time MatMul reads the present keys as B transposed (a few rows: in place; more:
// packed from them), and takes the scores' scale (a Mul by a constant scalar) with it. Results
// at several past lengths and query counts against the reference.
TEST(TransposedB, AGenericPlanReadsTheKeysTransposed) {
  for (bool scaled : {false, true}) {
    SCOPED_TRACE(scaled ? "scaled" : "not scaled");
    ModelBuilder b(72);
    ir::Dim rows = ir::Dim::symbol("rows"), past = ir::Dim::symbol("past");
    ir::Dim total = ir::Dim::symbol("total");
    int q = b.input("q", {1, 4, rows, 32});
    int old_keys = b.input("past", {1, 4, past, 32});
    int now = b.input("now", {1, 4, rows, 32});
    int present = b.value("present", {1, 4, total, 32});
    int keys_t = b.value("keys_t", {1, 4, 32, total});
    int scores = b.value("scores", {1, 4, rows, total});
    b.node("Concat", {old_keys, now}, {present}, {int_attr("axis", 2)});
    b.node("Transpose", {present}, {keys_t}, {ints("perm", {0, 1, 3, 2})});
    b.node("MatMul", {q, keys_t}, {scores});
    if (scaled) {
      int scale = b.weight_of("scale", {}, {0.17677669f});  // 1 / sqrt(32)
      int out = b.value("scaled", {1, 4, rows, total});
      b.node("Mul", {scores, scale}, {out});
      scores = out;
    }
    b.output(scores);
    const ir::Model model = b.build();
    auto compiled = compile::specialize_generic(model, "main", cpu_only());
    ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
    const auto [step, read] = transposes(**compiled);
    const bool own_loops = cpu::avx512_own_runtime_gemm() || cpu::avx2_own_gemm();
    EXPECT_EQ(step, !own_loops);  // oneDNN's run-time matmul keeps the Transpose a step
    EXPECT_EQ(read, own_loops ? 1 : 0);
    for (const auto& entry : (*compiled)->placement()) {
      EXPECT_NE(entry.op, "Mul") << "the scale is a step of its own";
    }
    uint32_t seed = 5;
    for (const auto& [n, p] :
         std::vector<std::pair<int64_t, int64_t>>{{1, 8}, {1, 40}, {3, 17}, {20, 9}}) {
      SCOPED_TRACE("rows " + std::to_string(n) + " past " + std::to_string(p));
      std::vector<Buffer> inputs;
      for (const std::vector<int64_t>& sizes :
           std::vector<std::vector<int64_t>>{{1, 4, n, 32}, {1, 4, p, 32}, {1, 4, n, 32}}) {
        inputs.push_back(random_input(ScalarType::Float32, sizes, seed++));
      }
      std::vector<const Tensor*> in;
      for (auto& input : inputs) in.push_back(&input.tensor);
      std::vector<Buffer> expected = interpret(model, in);
      std::vector<Buffer> outputs = output_buffers(**compiled);
      Status status = run(**compiled, inputs, outputs);
      ASSERT_TRUE(status.ok()) << status.to_string();
      expect_close(outputs[0].tensor, expected[0].tensor);
    }
  }
}

}  // namespace
}  // namespace kiln::engine
