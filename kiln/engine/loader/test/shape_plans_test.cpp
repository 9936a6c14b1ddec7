// Per-shape plans of functions of symbolic inputs without expect_frequent_reshapes: a function
// with a shape-generic plan gets one for its first shape, then runs each new shape's first call
// on that plan and gives a plan of its own to shapes run twice, kShapePlansBeforeGeneric in all;
// one without keeps kShapePlansKept, then drops the plan of its least recently used shape.
#include <kiln/engine/cache/model_cache.h>
#include <kiln/engine/compile/test/test_models.h>
#include <kiln/engine/cpu/cpu_op.h>
#include <kiln/engine/loader/background_stores.h>
#include <kiln/engine/loader/bound_function.h>
#include <kiln/engine/loader/test/loader_test_util.h>

#include <gmock/gmock.h>

#include <set>
#include <thread>

namespace kiln::engine {
namespace {

using namespace test_models;  // NOLINT(google-build-using-namespace): test helpers
using loader_test::expect_binds_like_reference;
using loader_test::TempDir;

// x [n, 8] -> MatMul(W [8, 4]) -> `activation`: with Relu (fused into the MatMul), a function
// that has a shape-generic plan running on kiln's loops; with Erf, one whose generic plan would
// run the Erf on its reference kernel.
ir::Model matmul_model(const char* activation = "Relu") {
  ModelBuilder b(5);
  ir::Dim n = ir::Dim::symbol("n");
  int x = b.input("x", {n, 8});
  int w = b.weight("w", {8, 4});
  int mm = b.value("mm", {n, 4});
  int y = b.value("y", {n, 4});
  b.node("MatMul", {x, w}, {mm});
  b.node(activation, {mm}, {y});
  b.output(y);
  return b.build();
}

// The shapes (first input's) of every built function of `loaded`; {} for a generic plan.
std::set<std::vector<int64_t>> built_shapes(const LoadedModel& loaded) {
  std::set<std::vector<int64_t>> shapes;
  for (const FunctionPlacement& function : loaded.placement()) {
    shapes.insert(function.input_sizes.empty() ? std::vector<int64_t>{} : function.input_sizes[0]);
  }
  return shapes;
}

// Runs `main` bound to a batch of `batch` against the reference interpreter.
void expect_runs_like_reference(LoadedModel& loaded, const ir::Model& model, int64_t batch) {
  expect_binds_like_reference(loaded, model, {batch, 8, 10, 10}, 7);
}

const compile::CompiledFunction* function_of(LoadedModel& loaded,
                                             const std::vector<int64_t>& sizes) {
  auto session = loaded.bind("main", {sizes});
  EXPECT_TRUE(session.ok()) << session.status().to_string();
  if (!session.ok()) return nullptr;
  auto function = session->function();
  EXPECT_TRUE(function.ok()) << function.status().to_string();
  return function.ok() ? *function : nullptr;
}

TEST(ShapePlans, NewShapesBeyondTheKeptOnesRunOnTheGenericPlan) {
  static_assert(kShapePlansBeforeGeneric == 4, "the shapes below assume four plans first");
  const ir::Model model = matmul_model();
  auto loaded = ModelLoader::load(model, cpu_only());
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  // (The helper asks each session for its function: a second shape's plan is built then, not
  // at its second run; the generic plan was built at that shape's bind.)
  for (int64_t n : {1, 2, 3, 4}) expect_binds_like_reference(**loaded, model, {n, 8}, 3);
  EXPECT_EQ((*loaded)->num_built(), 5u);
  const compile::CompiledFunction* first = function_of(**loaded, {1, 8});
  ASSERT_NE(first, nullptr);
  EXPECT_FALSE(first->is_generic());

  // Shapes 5 and 40 share the generic plan; the four per-shape plans stay.
  for (int64_t n : {5, 40, 5}) expect_binds_like_reference(**loaded, model, {n, 8}, 4);
  EXPECT_EQ((*loaded)->num_built(), 5u);
  const compile::CompiledFunction* fifth = function_of(**loaded, {5, 8});
  ASSERT_NE(fifth, nullptr);
  EXPECT_TRUE(fifth->is_generic());
  EXPECT_EQ(function_of(**loaded, {40, 8}), fifth);
  EXPECT_EQ(function_of(**loaded, {1, 8}), first);  // an early shape keeps its own plan
  EXPECT_EQ(built_shapes(**loaded),
            (std::set<std::vector<int64_t>>{{}, {1, 8}, {2, 8}, {3, 8}, {4, 8}}));

  // A shape the input types refuse is still refused, naming the input.
  auto wrong = (*loaded)->bind("main", {{6, 7}});
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error(), runtime::Error::InvalidArgument);
  EXPECT_THAT(wrong.status().message(), ::testing::HasSubstr("input 'x' has shape [6, 7]"));
}

// Runs `session` (bound to `sizes`) once on seeded data against the reference interpreter,
// without asking it for its function (which would build the session's own plan).
void expect_runs_like_reference(Session& session, const ir::Model& model,
                                const std::vector<int64_t>& sizes, uint32_t seed) {
  std::vector<Buffer> inputs;
  inputs.push_back(random_input(runtime::ScalarType::Float32, sizes, seed));
  std::vector<const runtime::Tensor*> in = {&inputs[0].tensor};
  auto expected = interpret(model, in);
  std::vector<float> storage(expected[0].tensor.numel(), -1.0f);
  const auto sizes_out = expected[0].tensor.sizes();
  runtime::Tensor output(runtime::ScalarType::Float32,
                         std::vector<int64_t>(sizes_out.begin(), sizes_out.end()), storage.data());
  std::vector<runtime::Tensor*> out = {&output};
  ASSERT_TRUE(session.run(in, out).ok());
  expect_close(output, expected[0].tensor);
}

// A shape's first call runs on the generic plan; its second gets a plan of its own, while the
// function has fewer than kShapePlansBeforeGeneric. A decoder's loop (a new shape every call)
// builds no per-shape plan after its first.
TEST(ShapePlans, ANewShapeRunsOnTheGenericPlanUntilItsSecondRun) {
  const ir::Model model = matmul_model();
  auto loaded = ModelLoader::load(model, cpu_only());
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  auto bind = [&](int64_t n) {
    auto session = (*loaded)->bind("main", {{n, 8}});
    EXPECT_TRUE(session.ok()) << session.status().to_string();
    return std::move(session).get();
  };
  Session first = bind(1);  // the function's first shape: its own plan, built at bind
  EXPECT_TRUE(first.is_built());
  expect_runs_like_reference(first, model, {1, 8}, 1);
  EXPECT_EQ(built_shapes(**loaded), (std::set<std::vector<int64_t>>{{1, 8}}));

  Session second = bind(2);  // builds the generic plan, for its first run
  EXPECT_FALSE(second.is_built());
  EXPECT_EQ(built_shapes(**loaded), (std::set<std::vector<int64_t>>{{}, {1, 8}}));
  expect_runs_like_reference(second, model, {2, 8}, 2);
  EXPECT_FALSE(second.is_built());
  EXPECT_EQ((*loaded)->num_built(), 2u);
  expect_runs_like_reference(second, model, {2, 8}, 3);  // the second run: its own plan
  EXPECT_TRUE(second.is_built());
  EXPECT_EQ(built_shapes(**loaded), (std::set<std::vector<int64_t>>{{}, {1, 8}, {2, 8}}));

  // A decoder's loop: every call a new shape, each run once; nothing more is built.
  for (int64_t n = 10; n < 40; ++n) {
    Session step = bind(n);
    expect_runs_like_reference(step, model, {n, 8}, static_cast<uint32_t>(n));
  }
  EXPECT_EQ((*loaded)->num_built(), 3u);

  // Shapes run again get plans until the function has four; the one run again after them stays
  // on the generic plan (bound before: deferred, then settled).
  std::vector<Session> again;
  for (int64_t n : {3, 4, 5}) {
    again.push_back(bind(n));
    expect_runs_like_reference(again.back(), model, {n, 8}, 4);
  }
  for (size_t i = 0; i < again.size(); ++i) {
    const int64_t n = static_cast<int64_t>(i) + 3;
    for (uint32_t seed = 5; seed < 7; ++seed) {
      expect_runs_like_reference(again[i], model, {n, 8}, seed);
    }
    EXPECT_EQ(again[i].is_built(), n != 5) << n;
    auto function = again[i].function();
    ASSERT_TRUE(function.ok());
    EXPECT_EQ((*function)->is_generic(), n == 5) << n;
  }
  EXPECT_EQ((*loaded)->num_built(), kShapePlansBeforeGeneric + 1);
  // A new shape now binds the generic plan itself.
  Session later = bind(50);
  auto function = later.function();
  ASSERT_TRUE(function.ok());
  EXPECT_TRUE((*function)->is_generic());

  // A shape the input types refuse is refused at bind, naming the input, and leaves no entry.
  const size_t bound = (*loaded)->num_bound();
  for (int64_t n = 6; n < 10; ++n) {
    auto wrong = (*loaded)->bind("main", {{n, 7}});
    ASSERT_FALSE(wrong.ok());
    EXPECT_EQ(wrong.error(), runtime::Error::InvalidArgument);
    EXPECT_THAT(wrong.status().message(),
                ::testing::HasSubstr("input 'x' has shape [" + std::to_string(n) + ", 7]"));
  }
  EXPECT_EQ((*loaded)->num_bound(), bound);
}

// A weight is packed once for every plan of its function: a per-shape plan of many rows
// (oneDNN's blocked matmul), the shape-generic plan (kiln's loops over the same blocked layout)
// and a per-shape plan of one row (kiln's streaming loops over it again). On a CPU without
// AVX-512 the per-shape plans of many rows pack oneDNN's other layout.
TEST(ShapePlans, PerShapeAndGenericPlansShareOnePackingOfAWeight) {
  if (!cpu::cpu_has_avx512()) GTEST_SKIP() << "oneDNN's blocked matmul packs B on AVX-512 only";
  ModelBuilder b(17);
  ir::Dim n = ir::Dim::symbol("n");
  int x = b.input("x", {n, 512});
  int w = b.weight("w", {512, 1024});  // 2 MiB: a row streams it
  int mm = b.value("mm", {n, 1024});
  int y = b.value("y", {n, 1024});
  b.node("MatMul", {x, w}, {mm});
  b.node("Relu", {mm}, {y});
  b.output(y);
  const ir::Model model = b.build();
  auto loaded = ModelLoader::load(model, cpu_only());
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  expect_binds_like_reference(**loaded, model, {128, 512}, 1);
  EXPECT_EQ((*loaded)->packed_constants().num_packed(), 1u);
  auto session = (*loaded)->bind("main", {{1, 512}});  // deferred: the generic plan first
  ASSERT_TRUE(session.ok()) << session.status().to_string();
  for (uint32_t seed = 2; seed < 4; ++seed)
    expect_runs_like_reference(*session, model, {1, 512}, seed);
  EXPECT_TRUE(session->is_built());
  EXPECT_EQ(built_shapes(**loaded), (std::set<std::vector<int64_t>>{{}, {1, 512}, {128, 512}}));
  EXPECT_EQ((*loaded)->packed_constants().num_packed(), 1u);
  EXPECT_EQ((*loaded)->packed_constants().num_reused(), 2u);
}

// A session run by several threads at once through its first and second runs: the shape gets
// one plan, and every result matches the reference.
TEST(ShapePlans, ConcurrentRunsOfADeferredSession) {
  compile::CompileOptions one_thread;
  one_thread.num_threads = 1;
  const ir::Model model = matmul_model();
  auto loaded = ModelLoader::load(model, cpu_only(), nullptr, one_thread);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  ASSERT_TRUE((*loaded)->bind("main", {{1, 8}}).ok());
  auto session = (*loaded)->bind("main", {{7, 8}});
  ASSERT_TRUE(session.ok()) << session.status().to_string();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Session mine = *session;
      for (int i = 0; i < 5; ++i) {
        expect_runs_like_reference(mine, model, {7, 8}, static_cast<uint32_t>(t * 5 + i));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_TRUE(session->is_built());
  EXPECT_EQ(built_shapes(**loaded), (std::set<std::vector<int64_t>>{{}, {1, 8}, {7, 8}}));
}

// The batches `first` to `last` of conv_residual_model's input, as built_shapes lists them.
std::set<std::vector<int64_t>> batches(int64_t first, int64_t last) {
  std::set<std::vector<int64_t>> shapes;
  for (int64_t n = first; n <= last; ++n) shapes.insert({n, 8, 10, 10});
  return shapes;
}

// A generic plan that would leave floating-point work on a reference kernel is not switched
// to: the function keeps a plan per shape, as a function without a generic plan does.
TEST(ShapePlans, AGenericPlanSlowerThanPerShapePlansIsNotSwitchedTo) {
  const ir::Model model = matmul_model("Erf");
  auto generic = compile::specialize_generic(model, "main", cpu_only());
  ASSERT_TRUE(generic.ok()) << generic.status().to_string();
  EXPECT_FALSE(loader_detail::generic_plan_runs_fast(**generic, model.functions[0]));
  auto fast = compile::specialize_generic(matmul_model(), "main", cpu_only());
  ASSERT_TRUE(fast.ok()) << fast.status().to_string();
  EXPECT_TRUE(loader_detail::generic_plan_runs_fast(**fast, matmul_model().functions[0]));

  auto loaded = ModelLoader::load(model, cpu_only());
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  for (int round = 0; round < 2; ++round) {
    for (int64_t n = 1; n <= 6; ++n) {
      expect_binds_like_reference(**loaded, model, {n, 8}, static_cast<uint32_t>(n + round));
    }
  }
  std::set<std::vector<int64_t>> expected;
  for (int64_t n = 1; n <= 6; ++n) expected.insert({n, 8});
  EXPECT_EQ(built_shapes(**loaded), expected);  // no generic plan among them
}

TEST(ShapePlans, AFunctionWithoutAGenericPlanDropsItsLeastRecentlyUsedShape) {
  const ir::Model model = conv_residual_model(ir::Dim::symbol("n"));
  const auto kept = static_cast<int64_t>(kShapePlansKept);
  auto loaded = ModelLoader::load(model, cpu_only());
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  for (int64_t n = 1; n <= kept; ++n) expect_runs_like_reference(**loaded, model, n);
  // Every shape but 2 used again after it: shape 2 is now the least recently used.
  auto held = (*loaded)->bind("main", {{2, 8, 10, 10}});  // a session keeps its plan alive
  ASSERT_TRUE(held.ok());
  expect_runs_like_reference(**loaded, model, 1);
  for (int64_t n = 3; n <= kept; ++n) expect_runs_like_reference(**loaded, model, n);
  expect_runs_like_reference(**loaded, model, kept + 1);
  std::set<std::vector<int64_t>> expected_shapes = batches(3, kept + 1);
  expected_shapes.insert({1, 8, 10, 10});
  EXPECT_EQ(built_shapes(**loaded), expected_shapes);
  EXPECT_EQ((*loaded)->num_built(), kShapePlansKept);

  // The session bound before shape 2 was dropped still runs on its plan.
  std::vector<Buffer> inputs;
  inputs.push_back(random_input(runtime::ScalarType::Float32, {2, 8, 10, 10}, 21));
  std::vector<const runtime::Tensor*> in = {&inputs[0].tensor};
  auto expected = interpret(model, in);
  auto outputs = output_buffers(**held->function());
  std::vector<runtime::Tensor*> out = {&outputs[0].tensor};
  ASSERT_TRUE(held->run(in, out).ok());
  expect_close(outputs[0].tensor, expected[0].tensor);

  // Binding shape 2 again builds it again (and drops shape 1, now the oldest), from the
  // weights packed for it the first time.
  const uint64_t packed = (*loaded)->packed_constants().num_packed();
  expect_runs_like_reference(**loaded, model, 2);
  EXPECT_EQ((*loaded)->packed_constants().num_packed(), packed);
  EXPECT_EQ(built_shapes(**loaded), batches(2, kept + 1));
}

// The per-shape plans a model keeps run in one arena (the model's pool), as large as the
// largest plan's, instead of one each: an OCR detector fed images of 8 sizes grew to 138 MB
// with one arena per plan, 71 MB with the pool.
TEST(ShapePlans, PerShapePlansRunInOneArena) {
  const ir::Model model = conv_residual_model(ir::Dim::symbol("n"));
  const uint64_t before = compile::live_activation_bytes();
  {
    auto loaded = ModelLoader::load(model, cpu_only());
    ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
    uint64_t largest = 0, sum = 0;
    for (int64_t n : {3, 1, 6, 2, 1, 6}) {
      expect_runs_like_reference(**loaded, model, n);
      const compile::CompiledFunction* f = function_of(**loaded, {n, 8, 10, 10});
      ASSERT_NE(f, nullptr);
      largest = std::max(largest, f->arena_bytes());
      sum += f->arena_bytes();
    }
    EXPECT_EQ((*loaded)->num_built(), 4u);
    EXPECT_EQ(compile::live_activation_bytes() - before, largest + 1);
    EXPECT_LT(largest + 1, sum);
  }
  EXPECT_EQ(compile::live_activation_bytes(), before);
}

TEST(ShapePlans, AFunctionStoresTheArtifactsOfItsFirstShapesOnly) {
  const ir::Model model = conv_residual_model(ir::Dim::symbol("n"));
  TempDir dir("shape_plans_stores");
  {
    cache::ModelCache cache(dir.path.string());
    auto loaded = ModelLoader::load(model, cpu_only(), &cache);
    ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
    for (int64_t n = 1; n <= 7; ++n) expect_runs_like_reference(**loaded, model, n);
    EXPECT_EQ((*loaded)->shape_cache_stores(), kShapePlansBeforeGeneric);
    wait_for_background_stores();
  }
  cache::ModelCache cache(dir.path.string());
  auto entries = cache.list();
  ASSERT_TRUE(entries.ok());
  EXPECT_EQ(entries->size(), kShapePlansBeforeGeneric);
  // A later process adopts the entries of those shapes and stores no more.
  auto warm = ModelLoader::load(model, cpu_only(), &cache);
  ASSERT_TRUE(warm.ok()) << warm.status().to_string();
  for (int64_t n = 1; n <= 2; ++n) expect_runs_like_reference(**warm, model, n);
  EXPECT_EQ((*warm)->shape_cache_hits(), 2u);
  EXPECT_EQ((*warm)->shape_cache_stores(), 0u);
}

// A shape-generic plan has a cache entry of its own (no shapes in its key): the next process
// adopts its packed weights instead of packing them, whether the plan came from
// expect_frequent_reshapes or from the default's fifth shape.
TEST(ShapePlans, AGenericPlanIsStoredAndAWarmProcessAdoptsItsWeights) {
  const ir::Model model = matmul_model();
  SpecializationOptions reshapes = cpu_only();
  reshapes.expect_frequent_reshapes = true;
  TempDir dir("generic_entry");
  {
    cache::ModelCache cache(dir.path.string());
    auto cold = ModelLoader::load(model, reshapes, &cache);
    ASSERT_TRUE(cold.ok()) << cold.status().to_string();
    ASSERT_TRUE((*cold)->prepare("main").ok());
    EXPECT_EQ((*cold)->shape_cache_stores(), 1u);
    EXPECT_EQ((*cold)->packed_constants().num_packed(), 1u);
    wait_for_background_stores();
  }
  {
    cache::ModelCache cache(dir.path.string());
    auto warm = ModelLoader::load(model, reshapes, &cache);
    ASSERT_TRUE(warm.ok()) << warm.status().to_string();
    ASSERT_TRUE((*warm)->prepare("main").ok());
    EXPECT_EQ((*warm)->shape_cache_hits(), 1u);
    EXPECT_EQ((*warm)->shape_cache_stores(), 0u);
    EXPECT_EQ((*warm)->packed_constants().num_packed(), 0u);  // adopted
    for (int64_t n : {3, 40}) expect_binds_like_reference(**warm, model, {n, 8}, 5);
  }
  {
    // A corrupt generic entry: found out, nothing of it used, the plan packed and stored again.
    cache::ModelCache cache(dir.path.string());
    auto entries = cache.list();
    ASSERT_TRUE(entries.ok() && entries->size() == 1u);
    loader_test::flip_payload_byte(entries->front());
    auto warm = ModelLoader::load(model, reshapes, &cache);
    ASSERT_TRUE(warm.ok()) << warm.status().to_string();
    ASSERT_TRUE((*warm)->prepare("main").ok());
    EXPECT_EQ((*warm)->shape_cache_hits(), 0u);
    EXPECT_EQ((*warm)->shape_cache_stores(), 1u);
    EXPECT_EQ((*warm)->packed_constants().num_packed(), 1u);
    for (int64_t n : {3, 40}) expect_binds_like_reference(**warm, model, {n, 8}, 5);
    wait_for_background_stores();
  }
  // Default options: four per-shape entries, then the generic plan's.
  cache::ModelCache cache(dir.path.string());
  auto loaded = ModelLoader::load(model, cpu_only(), &cache);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  for (int64_t n = 1; n <= 6; ++n) expect_binds_like_reference(**loaded, model, {n, 8}, 6);
  EXPECT_EQ((*loaded)->shape_cache_stores(), kShapePlansBeforeGeneric + 1);
}

// Threads binding and running more shapes than the model keeps plans for, at once: plans are
// let go while other threads still run them (their sessions keep them alive), the generic
// plan is built once for all, and every result matches the reference.
TEST(ShapePlans, ConcurrentBindsAndRunsOfManyShapes) {
  compile::CompileOptions one_thread;  // oneDNN's own threads are not what this test checks
  one_thread.num_threads = 1;
  const ir::Model conv = conv_residual_model(ir::Dim::symbol("n"));
  const ir::Model matmul = matmul_model();
  for (const ir::Model* model : {&conv, &matmul}) {
    const bool is_conv = model == &conv;
    SCOPED_TRACE(is_conv ? "conv" : "matmul");
    auto loaded = ModelLoader::load(*model, cpu_only(), nullptr, one_thread);
    ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 6; ++i) {
          // 20 batches: more than either function keeps plans for.
          const int64_t n = 1 + (t * 5 + i) % 20;
          if (is_conv) {
            expect_runs_like_reference(**loaded, *model, n);
          } else {
            expect_binds_like_reference(**loaded, *model, {n, 8}, static_cast<uint32_t>(t + i));
          }
          (void)(*loaded)->placement();  // reading while others build and let go
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    EXPECT_LE((*loaded)->num_built(), is_conv ? kShapePlansKept : kShapePlansBeforeGeneric + 1);
  }
}

}  // namespace
}  // namespace kiln::engine
