// Cache entries of shapes bound after the load (functions of symbolic inputs): an entry's
// packed weights go into a store staged over the model's while its payload is checked (on a
// thread of its own when large), and reach the model's store only once the check passes.
#include <kiln/engine/cache/model_cache.h>
#include <kiln/engine/compile/test/test_models.h>
#include <kiln/engine/cpu/packed_constants.h>
#include <kiln/engine/loader/background_stores.h>
#include <kiln/engine/loader/test/loader_test_util.h>

#include <cstring>

namespace kiln::engine {
namespace {

using namespace test_models;  // NOLINT(google-build-using-namespace): test helpers
using loader_test::TempDir;

// x [n, 1024] x w [1024, 1100] -> y: one function of a symbolic batch whose entry (4.5 MB of
// packed weights) is over the size hashed on a thread of its own.
ir::Model large_matmul_model() {
  ModelBuilder b(7);
  int x = b.input("x", {ir::Dim::symbol("n"), 1024});
  int w = b.weight("w", {1024, 1100});
  int y = b.value("y", {ir::Dim::symbol("n"), 1100});
  b.node("MatMul", {x, w}, {y});
  b.output(y);
  return b.build();
}

struct Case {
  const char* name;
  ir::Model (*model)();
  std::vector<int64_t> sizes;
  bool large;
};

ir::Model small_conv_model() { return conv_residual_model(ir::Dim::symbol("n")); }

const Case kCases[] = {
    {"small", small_conv_model, {2, 8, 10, 10}, false},
    {"large", large_matmul_model, {2, 1024}, true},
};

void expect_runs_like_reference(LoadedModel& loaded, const ir::Model& model, const Case& c) {
  loader_test::expect_binds_like_reference(loaded, model, c.sizes, 3);
}

// Flips a payload byte of the only entry in `dir`.
void corrupt_the_entry(const std::string& dir) {
  cache::ModelCache cache(dir);
  auto entries = cache.list();
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 1u);
  loader_test::flip_payload_byte(entries->front());
}

TEST(ShapeEntry, AWarmShapeAdoptsTheEntryOnceItsPayloadPasses) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const ir::Model model = c.model();
    TempDir dir(std::string("warm_") + c.name);
    {
      cache::ModelCache cache(dir.path.string());
      auto cold = ModelLoader::load(model, cpu_only(), &cache);
      ASSERT_TRUE(cold.ok()) << cold.status().to_string();
      expect_runs_like_reference(**cold, model, c);
      EXPECT_EQ((*cold)->shape_cache_stores(), 1u);
      wait_for_background_stores();
    }
    cache::ModelCache cache(dir.path.string());
    auto entries = cache.list();
    ASSERT_TRUE(entries.ok() && entries->size() == 1u);
    EXPECT_EQ(entries->front().size_bytes > (uint64_t{4} << 20), c.large);
    auto warm = ModelLoader::load(model, cpu_only(), &cache);
    ASSERT_TRUE(warm.ok()) << warm.status().to_string();
    expect_runs_like_reference(**warm, model, c);
    EXPECT_EQ((*warm)->shape_cache_hits(), 1u);
    EXPECT_EQ((*warm)->shape_cache_stores(), 0u);
    const cpu::PackedConstants& packed = (*warm)->packed_constants();
    EXPECT_EQ(packed.num_packed(), 0u);  // every packing adopted, and counted in the model's
    EXPECT_GE(packed.num_adopted_used(), 1u);
    EXPECT_FALSE(packed.entries().empty());
    EXPECT_EQ(cache.stats().corrupt_entries, 0u);
  }
}

TEST(ShapeEntry, ACorruptPayloadIsRebuiltAndNothingOfItIsKept) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const ir::Model model = c.model();
    TempDir dir(std::string("corrupt_") + c.name);
    {
      cache::ModelCache cache(dir.path.string());
      auto cold = ModelLoader::load(model, cpu_only(), &cache);
      ASSERT_TRUE(cold.ok()) << cold.status().to_string();
      expect_runs_like_reference(**cold, model, c);
      wait_for_background_stores();
    }
    corrupt_the_entry(dir.path.string());
    {
      cache::ModelCache cache(dir.path.string());
      auto loaded = ModelLoader::load(model, cpu_only(), &cache);
      ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
      expect_runs_like_reference(**loaded, model, c);  // from the weights, not the entry
      EXPECT_EQ((*loaded)->shape_cache_hits(), 0u);
      EXPECT_EQ((*loaded)->shape_cache_stores(), 1u);  // replaced
      const cpu::PackedConstants& packed = (*loaded)->packed_constants();
      EXPECT_GE(packed.num_packed(), 1u);
      EXPECT_EQ(packed.num_adopted_used(), 0u);
      wait_for_background_stores();
    }
    cache::ModelCache cache(dir.path.string());
    auto entries = cache.list();
    ASSERT_TRUE(entries.ok());
    EXPECT_EQ(entries->size(), 1u);  // the rebuilt entry in place of the corrupt one
    auto again = ModelLoader::load(model, cpu_only(), &cache);
    ASSERT_TRUE(again.ok());
    expect_runs_like_reference(**again, model, c);
    EXPECT_EQ((*again)->shape_cache_hits(), 1u);
    EXPECT_EQ(cache.stats().corrupt_entries, 0u);
  }
}

// A staged store serves the base's packings, keeps its own (adopted or packed) out of the base
// until absorbed, and then hands over its packings and counters; the base keeps the staged
// store's storage alive.
TEST(ShapeEntry, AStagedStoreReachesItsBaseOnlyWhenAbsorbed) {
  auto base = std::make_shared<cpu::PackedConstants>();
  auto fill = [](uint8_t value) {
    return [value](uint8_t* data) {
      std::memset(data, value, 64);
      return Status();
    };
  };
  const cpu::PackKey in_base{1, "a"}, adopted{2, "b"}, packed_here{3, "c"};
  auto base_bytes = base->get(in_base, 64, fill(1));
  ASSERT_TRUE(base_bytes.ok());

  auto staged = std::make_shared<cpu::PackedConstants>(base.get());
  auto reused = staged->get(in_base, 64, fill(9));
  ASSERT_TRUE(reused.ok());
  EXPECT_EQ(*reused, *base_bytes);  // the base's, not packed again
  auto mismatch = staged->get(in_base, 128, fill(9));
  ASSERT_FALSE(mismatch.ok());
  EXPECT_EQ(mismatch.error(), Error::InvalidExternalData);

  alignas(64) static uint8_t artifact[64];
  std::memset(artifact, 2, sizeof(artifact));
  ASSERT_TRUE(staged->adopt(adopted, {artifact, 64}, nullptr).ok());
  ASSERT_TRUE(staged->get(adopted, 64, fill(9)).ok());
  auto own = staged->get(packed_here, 64, fill(3));
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(base->entries().size(), 1u);  // nothing staged has reached the base
  EXPECT_EQ(base->num_packed(), 1u);

  base->absorb(staged);
  const uint8_t* own_bytes = *own;
  staged.reset();  // the base keeps its storage
  EXPECT_EQ(base->entries().size(), 3u);
  EXPECT_EQ(base->num_packed(), 2u);
  EXPECT_EQ(base->num_reused(), 2u);
  EXPECT_EQ(base->num_adopted_used(), 1u);
  auto from_base = base->get(packed_here, 64, fill(9));
  ASSERT_TRUE(from_base.ok());
  EXPECT_EQ(*from_base, own_bytes);
  EXPECT_EQ(own_bytes[63], 3);
  auto adopted_from_base = base->get(adopted, 64, fill(9));
  ASSERT_TRUE(adopted_from_base.ok());
  EXPECT_EQ(*adopted_from_base, artifact);
  EXPECT_EQ(base->num_adopted_used(), 2u);
}

}  // namespace
}  // namespace kiln::engine
