// Splits run on kiln's row copies (cpu/split_op.cpp): results equal to the reference
// interpreter's along every kind of axis, with the pieces given by a `split` input or equal,
// an empty piece, an integer tensor, and a split large enough to copy on two threads.
#include <kiln/engine/compile/test/test_models.h>
#include <kiln/engine/cpu/cpu_op.h>

namespace kiln::engine {
namespace {

using namespace test_models;  // NOLINT(google-build-using-namespace): test helpers
using ::testing::HasSubstr;

struct SplitCase {
  std::vector<int64_t> x;
  int64_t axis;
  std::vector<int64_t> split;  ///< Empty: as many equal pieces as `pieces`.
  int pieces;
  ScalarType dtype;
};

TEST(Split, RowCopiesMatchTheReference) {
  const std::vector<SplitCase> cases = {
      {{4, 6, 12}, -1, {3, 5, 4}, 3, ScalarType::Float32},           // the last axis
      {{6, 40}, 0, {2, 4}, 2, ScalarType::Float32},                  // the first: whole rows
      {{2, 9, 5}, 1, {}, 3, ScalarType::Float32},                    // equal pieces, no split
      {{3, 12}, 1, {0, 12}, 2, ScalarType::Float32},                 // an empty piece
      {{5, 8}, -1, {6, 2}, 2, ScalarType::Int64},                    // integers
      {{1, 128, 1536}, 2, {512, 512, 512}, 3, ScalarType::Float32},  // a transformer's Q, K, V
  };
  for (const SplitCase& c : cases) {
    for (int threads : {1, 2}) {
      SCOPED_TRACE(runtime::shape_to_string(c.x) + " axis " + std::to_string(c.axis) + " threads " +
                   std::to_string(threads));
      ModelBuilder b(31);
      int x = b.input("x", std::vector<ir::Dim>(c.x.begin(), c.x.end()), c.dtype);
      const size_t axis =
          static_cast<size_t>(c.axis < 0 ? c.axis + static_cast<int64_t>(c.x.size()) : c.axis);
      std::vector<int> outs;
      for (int p = 0; p < c.pieces; ++p) {
        std::vector<int64_t> piece = c.x;
        piece[axis] = c.split.empty() ? c.x[axis] / c.pieces : c.split[static_cast<size_t>(p)];
        outs.push_back(b.value("y" + std::to_string(p),
                               std::vector<ir::Dim>(piece.begin(), piece.end()), c.dtype));
      }
      std::vector<int> inputs = {x};
      if (!c.split.empty()) inputs.push_back(b.int_weight("split", c.split));
      b.node("Split", inputs, outs, {int_attr("axis", c.axis)});
      for (int y : outs) b.output(y);
      CompileOptions options;
      options.num_threads = threads;
      auto f = check_against_reference(b.build(), {c.x}, options);
      ASSERT_NE(f, nullptr);
      ASSERT_EQ(f->placement().size(), 1u);
      EXPECT_EQ(f->placement()[0].device, "cpu:kiln");
      EXPECT_THAT(f->placement()[0].detail, HasSubstr("kiln Split"));
    }
  }
}

}  // namespace
}  // namespace kiln::engine
