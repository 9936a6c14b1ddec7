// The memory plan of a function: a plan whose values need more memory than the machine has is
// refused when it is built (naming the input shapes and the bytes), instead of allocating
// pages a first run could not write; nor is a plan made for a model whose values do not flow
// forward.
#include <kiln/engine/compile/test/test_models.h>

#include <unistd.h>

namespace kiln::engine {
namespace {

using namespace test_models;  // NOLINT(google-build-using-namespace): test helpers

// x [1, n] → Relu → Relu → y (n symbolic): the first Relu's result is planned in the arena.
ir::Model relu_chain_model() {
  ModelBuilder b(71);
  int x = b.input("x", {1, ir::Dim::symbol("n")});
  int r = b.value("r", {1, ir::Dim::symbol("n")}), y = b.value("y", {1, ir::Dim::symbol("n")});
  b.node("Relu", {x}, {r});
  b.node("Relu", {r}, {y});
  b.output(y);
  return b.build();
}

TEST(PlanMemory, AnArenaLargerThanTheMachinesMemoryIsRefusedNamingShapesAndBytes) {
  const auto physical = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  ASSERT_GT(physical, 0);
  const ir::Model model = relu_chain_model();
  // Twice the machine's memory in floats for r alone.
  const int64_t n = physical / 2;
  auto f = compile::specialize(model, "main", {{1, n}}, cpu_only());
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Error::MemoryAllocationFailed);
  EXPECT_THAT(f.status().message(), HasSubstr("specialize function 'main'"));
  EXPECT_THAT(f.status().message(), HasSubstr("[1, " + std::to_string(n) + "]"));
  EXPECT_THAT(f.status().message(), HasSubstr("more than this machine's memory"));
  // The same function at a size that fits plans and runs.
  auto small = check_against_reference(model, {{1, 1000}}, CompileOptions{});
  EXPECT_NE(small, nullptr);
}

TEST(PlanMemory, ACallersLimitOnTheArenaIsKept) {
  const ir::Model model = relu_chain_model();
  auto unlimited = compile::specialize(model, "main", {{1, 1000}}, cpu_only());
  ASSERT_TRUE(unlimited.ok()) << unlimited.status().message();
  const uint64_t needed = (*unlimited)->arena_bytes();
  ASSERT_GT(needed, 4000u);
  CompileOptions compile;
  compile.max_arena_bytes = needed;  // exactly enough
  EXPECT_TRUE(compile::specialize(model, "main", {{1, 1000}}, cpu_only(), compile).ok());
  compile.max_arena_bytes = needed - 1;
  auto f = compile::specialize(model, "main", {{1, 1000}}, cpu_only(), compile);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Error::MemoryAllocationFailed);
  EXPECT_THAT(f.status().message(), HasSubstr("[1, 1000]"));
  EXPECT_THAT(f.status().message(),
              HasSubstr("more than max_arena_bytes (" + std::to_string(needed - 1) + " bytes"));
}

// A value too large for the machine is refused before an op is made for it (oneDNN sizes an
// op's scratch memory by its shapes and allocates it when the op is made), whatever the op:
// here a LayerNormalization over rows no memory holds, and a shape whose bytes overflow.
TEST(PlanMemory, AValueLargerThanMemoryIsRefusedBeforeItsOpIsMade) {
  for (int64_t rows : {int64_t{1} << 40, int64_t{1} << 61}) {
    ModelBuilder b(72);
    int x = b.input("x", {ir::Dim::symbol("n"), 8});
    int scale = b.weight("scale", {8});
    int y = b.value("y", {ir::Dim::symbol("n"), 8});
    b.node("LayerNormalization", {x, scale}, {y}, {{"axis", int64_t{-1}}});
    b.output(y);
    const ir::Model model = b.build();
    auto f = compile::specialize(model, "main", {{rows, 8}}, cpu_only());
    ASSERT_FALSE(f.ok());
    EXPECT_EQ(f.status().code(), Error::MemoryAllocationFailed);
    EXPECT_THAT(f.status().message(),
                HasSubstr("value 'x' of shape [" + std::to_string(rows) + ", 8] for inputs"));
    EXPECT_THAT(f.status().message(),
                HasSubstr(rows < (int64_t{1} << 60) ? "needs 35184372088832 bytes"
                                                    : "needs more bytes than 64 bits count"));
  }
}

// A value whose size depends on data takes run-time storage up to the caller's limit (else the
// machine's memory): a larger one fails its step, naming the value, its shape and the bytes,
// and allocates nothing; the function then runs again at a size that fits. Both kinds of
// storage: a per-shape plan's Dynamic value (a Range's length given at run time) and a
// shape-generic plan's pool.
TEST(PlanMemory, RunTimeStorageOfDataDependentValuesIsKeptUnderTheLimit) {
  ModelBuilder b(9);
  int limit = b.input("limit", {});
  int start = b.weight_of("start", {}, {0.0f});
  int delta = b.weight_of("delta", {}, {1.0f});
  int r = b.unknown("r"), y = b.unknown("y");
  b.node("Range", {start, limit, delta}, {r});
  b.node("Relu", {r}, {y});
  b.output(y);
  const ir::Model range = b.build();
  CompileOptions compile;
  compile.max_arena_bytes = 64 << 10;
  auto f = compile::specialize(range, "main", {{}}, cpu_only(), compile);
  ASSERT_TRUE(f.ok()) << f.status().message();
  for (float length : {1000.0f, 100000.0f, 2000.0f}) {
    std::vector<Buffer> inputs(1);
    inputs[0].tensor = Tensor(ScalarType::Float32, {}, &length);
    auto outputs = output_buffers(**f);
    Status st = run(**f, inputs, outputs);
    if (length > 16000) {
      ASSERT_FALSE(st.ok());
      EXPECT_EQ(st.code(), Error::MemoryAllocationFailed);
      EXPECT_THAT(st.message(), HasSubstr("value 'r' of shape [100000]"));
      EXPECT_THAT(st.message(), HasSubstr("over the limit of 65536 bytes"));
    } else {
      ASSERT_TRUE(st.ok()) << st.message();
      EXPECT_EQ(outputs[0].tensor.numel(), static_cast<int64_t>(length));
    }
  }
  const ir::Model chain = relu_chain_model();
  compile.max_arena_bytes = 1 << 20;
  auto generic = compile::specialize_generic(chain, "main", cpu_only(), compile);
  ASSERT_TRUE(generic.ok()) << generic.status().message();
  for (int64_t n : {1000, 1 << 19, 3000}) {
    std::vector<Buffer> inputs;  // moved in: a copy's tensor would point at the temporary
    inputs.push_back(random_input(ScalarType::Float32, {1, n}, 5));
    std::vector<Buffer> outputs(1);
    outputs[0].bytes.resize(static_cast<size_t>(n) * 4);
    outputs[0].tensor = Tensor(ScalarType::Float32, {1, n}, outputs[0].bytes.data());
    Status st = run(**generic, inputs, outputs);
    if (n > 100000) {
      ASSERT_FALSE(st.ok());
      EXPECT_EQ(st.code(), Error::MemoryAllocationFailed);
      EXPECT_THAT(st.message(), HasSubstr("value 'r' of shape [1, 524288]"));
      EXPECT_THAT(st.message(), HasSubstr("over the limit of 1048576 bytes"));
    } else {
      EXPECT_TRUE(st.ok()) << st.message();
    }
  }
}

// A model made in memory is checked as a package is: a node reading a value nothing has
// written is refused, naming it, instead of leaving the plan a slot with no tensor.
TEST(PlanMemory, AModelWhoseNodeReadsAnUnwrittenValueIsRefused) {
  ir::Model model = relu_chain_model();
  std::swap(model.functions[0].nodes[0], model.functions[0].nodes[1]);
  auto f = compile::specialize(model, "main", {{1, 8}}, cpu_only());
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Error::InvalidArgument);
  EXPECT_THAT(f.status().message(), HasSubstr("specialize function 'main'"));
  EXPECT_THAT(f.status().message(),
              HasSubstr("input 0 reads value 1 'r' before anything writes it"));
  EXPECT_FALSE(compile::specialize_generic(model, "main", cpu_only()).ok());
  EXPECT_FALSE(ModelLoader::load(model, cpu_only()).ok());
}

}  // namespace
}  // namespace kiln::engine
