// Activation arenas shared by plans that run one at a time (CompileOptions::arena_pool).
#include <kiln/engine/compile/arena_pool.h>
#include <kiln/engine/compile/function_plan.h>
#include <kiln/engine/compile/test/test_models.h>

#include <gmock/gmock.h>

#include <cstring>
#include <thread>

namespace kiln::engine::compile {
namespace {

using namespace test_models;  // NOLINT(google-build-using-namespace): test helpers

TEST(ArenaPool, ReusesTheSmallestFreeArenaThatHoldsElseGrowsTheLargestFreeOne) {
  ArenaPool pool;
  uint8_t* small = nullptr;
  uint8_t* large = nullptr;
  {
    auto a = pool.take(1000);
    auto b = pool.take(5000);  // `a` is taken: a second arena
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_NE(a->base(), b->base());
    small = a->base();
    large = b->base();
    EXPECT_EQ(pool.num_arenas(), 2u);
    EXPECT_EQ(pool.bytes(), 6000u);
  }
  {
    auto c = pool.take(900);  // both free: the smaller one holds it
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->base(), small);
    auto d = pool.take(4000);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->base(), large);
  }
  {
    auto e = pool.take(9000);  // none holds it: the largest free one grows
    ASSERT_TRUE(e.ok());
    EXPECT_EQ(pool.num_arenas(), 2u);
    EXPECT_EQ(pool.bytes(), 10000u);
    auto f = pool.take(800);
    ASSERT_TRUE(f.ok());
    EXPECT_NE(f->base(), e->base());
  }
}

TEST(ArenaPool, CountsItsArenasAsLiveActivations) {
  const uint64_t before = live_activation_bytes();
  {
    ArenaPool pool;
    { auto a = pool.take(4096); }
    EXPECT_EQ(live_activation_bytes(), before + 4096);
    { auto b = pool.take(8192); }  // grown in place of the first
    EXPECT_EQ(live_activation_bytes(), before + 8192);
  }
  EXPECT_EQ(live_activation_bytes(), before);
}

TEST(ArenaPool, ThreadsTakingAtOnceHoldArenasOfTheirOwn) {
  ArenaPool pool;
  std::vector<std::thread> threads;
  std::atomic<int> overlaps{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        auto lease = pool.take(static_cast<uint64_t>(64 * (1 + (t + i) % 5)));
        ASSERT_TRUE(lease.ok());
        // Marks the arena as this thread's; another holder would overwrite it.
        volatile uint8_t* base = lease->base();
        base[0] = static_cast<uint8_t>(t);
        std::this_thread::yield();
        if (base[0] != static_cast<uint8_t>(t)) overlaps.fetch_add(1);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_LE(pool.num_arenas(), 4u);
}

// Plans of many shapes (and functions) take their arenas from one pool: run one after another
// in any order, each places its values in the arena anew and matches the reference; the pool
// keeps one arena, as large as the largest plan's.
TEST(ArenaPool, PlansOfManyShapesShareOneArenaAndRunLikeTheReference) {
  const ir::Model model = conv_residual_model(ir::Dim::symbol("n"));
  for (bool own_loops : {true, false}) {
    SCOPED_TRACE(own_loops ? "kiln's loops where they apply" : "oneDNN only");
    CompileOptions options;
    options.small_ops_own_loops = own_loops;
    options.arena_pool = std::make_shared<ArenaPool>();
    std::vector<std::unique_ptr<CompiledFunction>> plans;
    uint64_t largest = 0;
    for (int64_t n : {2, 5, 1}) {
      plans.push_back(check_against_reference(model, {{n, 8, 10, 10}}, options));
      ASSERT_NE(plans.back(), nullptr);
      largest = std::max(largest, plans.back()->arena_bytes());
    }
    EXPECT_EQ(options.arena_pool->num_arenas(), 1u);
    EXPECT_EQ(options.arena_pool->bytes(), largest + 1);
    for (int round = 0; round < 2; ++round) {
      for (size_t k : {size_t{2}, size_t{0}, size_t{1}, size_t{0}}) {
        CompiledFunction& f = *plans[k];
        std::vector<Buffer> inputs;
        inputs.push_back(random_input(ScalarType::Float32, f.input_sizes(0),
                                      static_cast<uint32_t>(7 + k + round)));
        std::vector<const Tensor*> in = {&inputs[0].tensor};
        const std::vector<Buffer> expected = interpret(model, in);
        std::vector<Buffer> outputs = output_buffers(f);
        ASSERT_TRUE(run(f, inputs, outputs).ok());
        expect_close(outputs[0].tensor, expected[0].tensor);
      }
    }
    EXPECT_EQ(options.arena_pool->num_arenas(), 1u);
  }
}

// A Conv's scratch memory lies in the arena too (oneDNN only): placed anew with the values.
// The arena of the first run is freed (grown for another taker) before the second: a step
// left pointing there would write freed memory (which the sanitizer build reports).
TEST(ArenaPool, StepScratchMovesWithTheArena) {
  const ir::Model model = conv_residual_model(ir::Dim::symbol("n"));
  CompileOptions options;
  options.small_ops_own_loops = false;
  options.arena_pool = std::make_shared<ArenaPool>();
  auto small = check_against_reference(model, {{1, 8, 10, 10}}, options);
  ASSERT_NE(small, nullptr);
  ASSERT_GT(small->scratchpad_bytes(), 0u);
  {
    // Another run takes the first arena, grown (its old memory freed): the next run of
    // `small` takes a second one.
    auto held = options.arena_pool->take(options.arena_pool->bytes() + (1 << 16));
    ASSERT_TRUE(held.ok());
    std::vector<Buffer> inputs;
    inputs.push_back(random_input(ScalarType::Float32, {1, 8, 10, 10}, 3));
    std::vector<const Tensor*> in = {&inputs[0].tensor};
    const std::vector<Buffer> expected = interpret(model, in);
    std::vector<Buffer> outputs = output_buffers(*small);
    ASSERT_TRUE(run(*small, inputs, outputs).ok());
    expect_close(outputs[0].tensor, expected[0].tensor);
    EXPECT_EQ(options.arena_pool->num_arenas(), 2u);
  }
}

// A shape-generic plan's storage: pieces carved in turn (each mapping the fresh pages it reaches
// into), given back and reused, kept over `reset`; earlier pieces keep their bytes.
TEST(DynamicPool, PiecesKeepTheirBytesAsLaterOnesMapFreshPages) {
  DynamicPool pool;
  std::vector<DynamicPool::Piece> pieces;
  for (size_t i = 0; i < 40; ++i) {
    auto piece = pool.take(1000 + i * 70001);  // 1 KB to 2.7 MB: past one 8 MiB chunk
    ASSERT_TRUE(piece.ok());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(piece->data) % 64, 0u);
    std::memset(piece->data, static_cast<int>(i + 1), piece->bytes);
    pieces.push_back(*piece);
  }
  for (size_t i = 0; i < pieces.size(); ++i) {
    const DynamicPool::Piece& p = pieces[i];
    ASSERT_EQ(p.data[0], i + 1) << "piece " << i;
    ASSERT_EQ(p.data[p.bytes - 1], i + 1) << "piece " << i;
    for (size_t k = i + 1; k < pieces.size(); ++k) {
      const DynamicPool::Piece& q = pieces[k];
      EXPECT_TRUE(p.data + p.bytes <= q.data || q.data + q.bytes <= p.data) << i << ", " << k;
    }
  }
  const size_t chunks = pool.num_chunks();
  EXPECT_GT(chunks, 1u);
  pool.give_back(pieces[5]);
  auto reused = pool.take(pieces[5].bytes - 100);  // the smallest given-back piece that fits
  ASSERT_TRUE(reused.ok());
  EXPECT_EQ(reused->data, pieces[5].data);
  pool.reset();
  auto first = pool.take(10);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->data, pieces[0].data);  // the same chunks, from the start
  EXPECT_EQ(pool.num_chunks(), chunks);
}

// A limit refuses a chunk beyond it, allocating nothing, and names the bytes.
TEST(DynamicPool, ATakePastTheLimitFailsNamingTheBytes) {
  DynamicPool pool;
  pool.set_limit(size_t{1} << 20);
  auto fits = pool.take(size_t{1} << 19);
  ASSERT_TRUE(fits.ok());
  auto over = pool.take(size_t{3} << 20);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), runtime::Error::MemoryAllocationFailed);
  EXPECT_THAT(over.status().message(), ::testing::HasSubstr("over the limit of 1048576"));
  EXPECT_EQ(pool.num_chunks(), 1u);
}

}  // namespace
}  // namespace kiln::engine::compile
