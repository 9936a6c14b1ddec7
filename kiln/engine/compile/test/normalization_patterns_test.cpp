// The normalization patterns (passes/normalization_patterns.h) compiled: the rewritten model runs
// on oneDNN's layer normalization, kiln's row loops (RMS and instance normalization) and a Conv
// with its normalization folded and Relu fused, with the results of the graph as written on the
// reference interpreter.
#include <kiln/engine/compile/test/test_models.h>
#include <kiln/engine/passes/pattern_rewrites.h>
#include <kiln/engine/passes/rank_completion.h>

namespace kiln::engine {
namespace {

using namespace test_models;  // NOLINT(google-build-using-namespace): test helpers

// x [2, 5, 16] → layer norm spelled out (ReduceMean, Sub, Pow, ReduceMean with axes as an
// input, Add, Sqrt, Div, Mul, Add) → y; image [1, 8, 10, 10] → Conv(+b) → BatchNormalization → Relu
// → z.
ir::Model decomposed_model() {
  ModelBuilder b(21);
  int x = b.input("x", {2, 5, 16});
  int image = b.input("image", {1, 8, 10, 10});
  int two = b.weight_of("two", {}, {2.0f});
  int eps = b.weight_of("eps", {}, {1e-5f});
  int gamma = b.weight("gamma", {16});
  int beta = b.weight("beta", {16});
  std::vector<ir::Dim> full = {2, 5, 16}, reduced = {2, 5, 1};
  int mean = b.value("mean", reduced), d = b.value("d", full), sq = b.value("sq", full);
  int var = b.value("var", reduced), ve = b.value("ve", reduced), sd = b.value("sd", reduced);
  int n = b.value("n", full), g = b.value("g", full), y = b.value("y", full);
  std::vector<ir::Attribute> last = {ints("axes", {-1}), int_attr("keepdims", 1)};
  b.node("ReduceMean", {x}, {mean}, last);
  b.node("Sub", {x, mean}, {d});
  b.node("Pow", {d, two}, {sq});
  // The second mean takes its axes as an input, as from opset 18.
  b.node("ReduceMean", {sq, b.int_weight("axes", {2})}, {var}, {int_attr("keepdims", 1)});
  b.node("Add", {var, eps}, {ve});
  b.node("Sqrt", {ve}, {sd});
  b.node("Div", {d, sd}, {n});
  b.node("Mul", {n, gamma}, {g});
  b.node("Add", {g, beta}, {y});
  b.output(y);

  int w = b.weight("w", {8, 8, 3, 3}, 0.2f);
  int bias = b.weight("bias", {8});
  int scale = b.weight_of("scale", {8}, {0.5f, 0.8f, 1.1f, 1.4f, 1.7f, 2.0f, 0.6f, 0.9f});
  int shift = b.weight("shift", {8});
  int running_mean = b.weight("running_mean", {8});
  int running_var =
      b.weight_of("running_var", {8}, {0.2f, 0.5f, 1.0f, 2.0f, 0.3f, 0.7f, 1.5f, 3.f});
  std::vector<ir::Dim> shape = {1, 8, 10, 10};
  int c = b.value("c", shape), normed = b.value("normed", shape), z = b.value("z", shape);
  b.node("Conv", {image, w, bias}, {c}, {ints("pads", {1, 1, 1, 1}), ints("kernel_shape", {3, 3})});
  b.node("BatchNormalization", {c, scale, shift, running_mean, running_var}, {normed},
         {ir::Attribute{"epsilon", 1e-3}});
  b.node("Relu", {normed}, {z});
  b.output(z);
  return b.build();
}

TEST(NormalizationPatterns, RewrittenModelRunsOnOneDnnWithTheResultsOfTheGraphAsWritten) {
  const ir::Model original = decomposed_model();
  ir::Model rewritten = original;
  EXPECT_EQ(passes::rewrite_patterns(rewritten, rewritten.functions[0]), 2u);
  const std::vector<std::vector<int64_t>> sizes = {{2, 5, 16}, {1, 8, 10, 10}};
  CompileOptions onednn_only;
  onednn_only.small_ops_own_loops = false;  // oneDNN even for work this small
  auto compiled = compile::specialize(rewritten, "main", sizes, cpu_only(), onednn_only);
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  std::map<std::string, const PlacementEntry*> where;
  for (const auto& entry : (*compiled)->placement()) where[entry.op] = &entry;
  EXPECT_EQ(where.size(), 2u);  // LayerNormalization, and the Conv with its Relu
  ASSERT_TRUE(where.count("LayerNormalization") && where.count("Conv"));
  EXPECT_EQ(where["LayerNormalization"]->device, "cpu:onednn");
  EXPECT_EQ(where["Conv"]->device, "cpu:onednn");
  EXPECT_THAT(where["Conv"]->fused, ::testing::ElementsAre(::testing::HasSubstr("Relu")));

  std::vector<Buffer> inputs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    inputs.push_back(random_input(ScalarType::Float32, sizes[i], 40 + static_cast<uint32_t>(i)));
  }
  std::vector<const Tensor*> in;
  for (auto& buffer : inputs) in.push_back(&buffer.tensor);
  std::vector<Buffer> expected = interpret(original, in);
  std::vector<Buffer> outputs = output_buffers(**compiled);
  ASSERT_TRUE(run(**compiled, inputs, outputs).ok());
  ASSERT_EQ(outputs.size(), expected.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    expect_close(outputs[i].tensor, expected[i].tensor, 1e-4, 1e-5);
  }
}

// x [1, seq, 40] → RMS norm spelled out as Llama's export writes it (Pow, ReduceMean, Add,
// Sqrt, Reciprocal, Mul by x, Mul by the weight) → + x = y: the residual stream reads x too.
ir::Model rms_decomposed_model() {
  ModelBuilder b(23);
  const ir::Dim seq = ir::Dim::symbol("seq");
  const std::vector<ir::Dim> full = {1, seq, 40}, reduced = {1, seq, 1};
  int x = b.input("x", full);
  int two = b.weight_of("two", {}, {2.0f});
  int eps = b.weight_of("eps", {}, {1e-6f});
  int weight = b.weight("weight", {40}, 1.5f);
  int sq = b.value("sq", full), ms = b.value("ms", reduced), ve = b.value("ve", reduced);
  int rms = b.value("rms", reduced), r = b.value("r", reduced), n = b.value("n", full);
  int g = b.value("g", full), y = b.value("y", full);
  b.node("Pow", {x, two}, {sq});
  b.node("ReduceMean", {sq}, {ms}, {ints("axes", {-1}), int_attr("keepdims", 1)});
  b.node("Add", {ms, eps}, {ve});
  b.node("Sqrt", {ve}, {rms});
  b.node("Reciprocal", {rms}, {r});
  b.node("Mul", {x, r}, {n});
  b.node("Mul", {weight, n}, {g});
  b.node("Add", {g, x}, {y});
  b.output(y);
  return b.build();
}

// Static plans (one per shape) and the shape-generic plan both run the rewritten
// RMSNormalization on kiln's row loops, on one and two threads, with the results of the graph
// as written on the reference interpreter.
TEST(NormalizationPatterns, RmsNormRunsOnKilnRowsInStaticAndGenericPlans) {
  const ir::Model original = rms_decomposed_model();
  ir::Model rewritten = original;
  // Pow(x, 2) becomes Mul(x, x), then the norm one op.
  EXPECT_EQ(passes::rewrite_patterns(rewritten, rewritten.functions[0]), 2u);
  ASSERT_EQ(rewritten.functions[0].nodes.size(), 2u);
  EXPECT_EQ(rewritten.functions[0].nodes[0].op, "RMSNormalization");
  for (int threads : {1, 2}) {
    CompileOptions options;
    options.num_threads = threads;
    auto generic = compile::specialize_generic(rewritten, "main", cpu_only(), options);
    ASSERT_TRUE(generic.ok()) << generic.status().to_string();
    for (int64_t seq : {3, 600}) {
      SCOPED_TRACE("threads " + std::to_string(threads) + " seq " + std::to_string(seq));
      auto fixed = compile::specialize(rewritten, "main", {{1, seq, 40}}, cpu_only(), options);
      ASSERT_TRUE(fixed.ok()) << fixed.status().to_string();
      std::vector<Buffer> inputs;
      inputs.push_back(random_input(ScalarType::Float32, {1, seq, 40}, 60));
      std::vector<Buffer> expected = interpret(original, {&inputs[0].tensor});
      for (compile::CompiledFunction* f : {fixed->get(), generic->get()}) {
        bool on_rows = false;
        for (const auto& entry : f->placement()) {
          if (entry.op != "RMSNormalization") continue;
          EXPECT_EQ(entry.device, "cpu:kiln") << entry.detail;
          EXPECT_THAT(entry.detail, ::testing::HasSubstr("RMS normalization"));
          on_rows = true;
        }
        EXPECT_TRUE(on_rows);
        std::vector<Buffer> outputs = output_buffers(*f);
        ASSERT_TRUE(run(*f, inputs, outputs).ok());
        expect_close(outputs[0].tensor, expected[0].tensor, 1e-4, 1e-5);
      }
    }
  }
}

// x [2, 6, h, 20] → an instance normalization spelled out (ReduceMean over [2, 3], Sub, Mul,
// ReduceMean, Add, Sqrt, Div, Mul by [6, 1, 1], Add of [1, 6, 1, 1]) → y.
ir::Model instance_decomposed_model() {
  ModelBuilder b(29);
  const ir::Dim h = ir::Dim::symbol("h");
  const std::vector<ir::Dim> full = {2, 6, h, 20}, reduced = {2, 6, 1, 1};
  int x = b.input("x", full);
  int eps = b.weight_of("eps", {}, {1e-4f});
  int gamma = b.weight("gamma", {6, 1, 1}, 1.5f), beta = b.weight("beta", {1, 6, 1, 1});
  int mean = b.value("mean", reduced), d = b.value("d", full), sq = b.value("sq", full);
  int var = b.value("var", reduced), ve = b.value("ve", reduced), sd = b.value("sd", reduced);
  int n = b.value("n", full), g = b.value("g", full), y = b.value("y", full);
  const std::vector<ir::Attribute> spatial = {ints("axes", {2, 3}), int_attr("keepdims", 1)};
  b.node("ReduceMean", {x}, {mean}, spatial);
  b.node("Sub", {x, mean}, {d});
  b.node("Mul", {d, d}, {sq});
  b.node("ReduceMean", {sq}, {var}, spatial);
  b.node("Add", {var, eps}, {ve});
  b.node("Sqrt", {ve}, {sd});
  b.node("Div", {d, sd}, {n});
  b.node("Mul", {n, gamma}, {g});
  b.node("Add", {beta, g}, {y});
  b.output(y);
  return b.build();
}

// The rewritten InstanceNormalization runs on kiln's row loops in static plans and in the
// shape-generic one, on one and two threads, with the results of the graph as written.
TEST(NormalizationPatterns, InstanceNormRunsOnKilnRowsInStaticAndGenericPlans) {
  const ir::Model original = instance_decomposed_model();
  ir::Model rewritten = original;
  EXPECT_EQ(passes::rewrite_patterns(rewritten, rewritten.functions[0]), 1u);
  ASSERT_EQ(rewritten.functions[0].nodes.size(), 1u);
  EXPECT_EQ(rewritten.functions[0].nodes[0].op, "InstanceNormalization");
  for (int threads : {1, 2}) {
    CompileOptions options;
    options.num_threads = threads;
    auto generic = compile::specialize_generic(rewritten, "main", cpu_only(), options);
    ASSERT_TRUE(generic.ok()) << generic.status().to_string();
    for (int64_t h : {3, 300}) {
      SCOPED_TRACE("threads " + std::to_string(threads) + " h " + std::to_string(h));
      auto fixed = compile::specialize(rewritten, "main", {{2, 6, h, 20}}, cpu_only(), options);
      ASSERT_TRUE(fixed.ok()) << fixed.status().to_string();
      std::vector<Buffer> inputs;
      inputs.push_back(random_input(ScalarType::Float32, {2, 6, h, 20}, 70));
      std::vector<Buffer> expected = interpret(original, {&inputs[0].tensor});
      for (compile::CompiledFunction* f : {fixed->get(), generic->get()}) {
        ASSERT_EQ(f->placement().size(), 1u);
        EXPECT_EQ(f->placement()[0].device, "cpu:kiln") << f->placement()[0].detail;
        EXPECT_THAT(f->placement()[0].detail, ::testing::HasSubstr("instance normalization"));
        std::vector<Buffer> outputs = output_buffers(*f);
        ASSERT_TRUE(run(*f, inputs, outputs).ok());
        expect_close(outputs[0].tensor, expected[0].tensor, 1e-4, 1e-5);
      }
    }
  }
}

// PyTorch's GroupNorm export: x [N, 8, H, W] reshaped into 4 groups, instance-normalized (a
// scale and bias per group), reshaped back by Shape(x) and given a per-channel Mul and Add.
ir::Model group_decomposed_model() {
  ModelBuilder b;
  int x = b.input("x", {ir::Dim::symbol("N"), 8, ir::Dim::symbol("H"), 20});
  int r = b.unknown("r"), i = b.unknown("i"), n = b.unknown("n");
  int shape = b.unknown("shape", ScalarType::Int64);
  int g = b.unknown("g"), y = b.unknown("y");
  b.node("Reshape", {x, b.int_weight("split", {0, 4, -1})}, {r});
  b.node("InstanceNormalization", {r, b.weight("s", {4}), b.weight("b", {4})}, {i},
         {ir::Attribute{"epsilon", 1e-3}});
  b.node("Shape", {x}, {shape});
  b.node("Reshape", {i, shape}, {n});
  b.node("Mul", {n, b.weight("gamma", {8, 1, 1})}, {g});
  b.node("Add", {g, b.weight("beta", {8, 1, 1})}, {y});
  b.output(y);
  return b.build();
}

// The rewritten GroupNormalization runs on kiln's row loops in static plans and in the
// shape-generic one, on one and two threads, with the results of the graph as written.
TEST(NormalizationPatterns, GroupNormRunsOnKilnRowsInStaticAndGenericPlans) {
  const ir::Model original = group_decomposed_model();
  ir::Model rewritten = original;
  passes::complete_ranks(rewritten, rewritten.functions[0]);
  EXPECT_EQ(passes::rewrite_patterns(rewritten, rewritten.functions[0]), 1u);
  ASSERT_EQ(rewritten.functions[0].nodes.size(), 1u);
  EXPECT_EQ(rewritten.functions[0].nodes[0].op, "GroupNormalization");
  for (int threads : {1, 2}) {
    CompileOptions options;
    options.num_threads = threads;
    auto generic = compile::specialize_generic(rewritten, "main", cpu_only(), options);
    ASSERT_TRUE(generic.ok()) << generic.status().to_string();
    for (const std::vector<int64_t>& sizes :
         std::vector<std::vector<int64_t>>{{2, 8, 3, 20}, {1, 8, 300, 20}}) {
      SCOPED_TRACE("threads " + std::to_string(threads) + " " + runtime::shape_to_string(sizes));
      auto fixed = compile::specialize(rewritten, "main", {sizes}, cpu_only(), options);
      ASSERT_TRUE(fixed.ok()) << fixed.status().to_string();
      std::vector<Buffer> inputs;
      inputs.push_back(random_input(ScalarType::Float32, sizes, 71));
      std::vector<Buffer> expected = interpret(original, {&inputs[0].tensor});
      for (compile::CompiledFunction* f : {fixed->get(), generic->get()}) {
        ASSERT_EQ(f->placement().size(), 1u);
        EXPECT_EQ(f->placement()[0].device, "cpu:kiln") << f->placement()[0].detail;
        EXPECT_THAT(f->placement()[0].detail, ::testing::HasSubstr("group normalization"));
        std::vector<Buffer> outputs = output_buffers(*f);
        ASSERT_TRUE(run(*f, inputs, outputs).ok());
        expect_close(outputs[0].tensor, expected[0].tensor, 1e-4, 1e-5);
      }
    }
  }
}

}  // namespace
}  // namespace kiln::engine
