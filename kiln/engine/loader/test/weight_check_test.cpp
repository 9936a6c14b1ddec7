// Weights checked on first use: a package opened with WeightCheck::OnFirstUse is verified as it
// is read, so a warm load that takes every packed weight from the artifact never reads the
// package's copies, while every weight that is read is still checked against its hash.
#include <kiln/engine/cache/model_cache.h>
#include <kiln/engine/compile/test/test_models.h>
#include <kiln/engine/loader/background_stores.h>
#include <kiln/engine/loader/test/loader_test_util.h>
#include <kiln/engine/package/package.h>
#include <kiln/runtime/core/aligned_buffer.h>

#include <cstring>
#include <filesystem>

namespace kiln::engine {
namespace {

using namespace test_models;  // NOLINT(google-build-using-namespace): test helpers
using loader_test::TempDir;

const std::vector<int64_t> kSizes = {1, 8, 10, 10};

// The bytes of a package in 64-byte aligned memory, as a mapping would give them.
struct PackageBytes {
  explicit PackageBytes(const ir::Model& model) {
    auto bytes = package::write_package(model);
    EXPECT_TRUE(bytes.ok()) << bytes.status().to_string();
    size = bytes.ok() ? bytes->size() : 0;
    buffer = *runtime::allocate_aligned(size);
    if (size > 0) std::memcpy(buffer.get(), bytes->data(), size);
  }
  runtime::Span<const uint8_t> span() const { return {buffer.get(), size}; }
  // Flips a byte in the middle of weight `name` (its hash in the flatbuffer is left as it was).
  void corrupt(const std::string& name) {
    auto view = package::PackageView::open(span(), package::WeightCheck::OnFirstUse);
    ASSERT_TRUE(view.ok());
    for (size_t i = 0; i < view->num_weights(); ++i) {
      if (view->model().weights[i].name != name) continue;
      auto data = view->weight_data(i);
      buffer.get()[data.data() - buffer.get() + data.size() / 2] ^= 0x40;
      return;
    }
    FAIL() << "no weight " << name;
  }
  runtime::AlignedBuffer buffer;
  size_t size = 0;
};

runtime::Result<Buffer> run(LoadedModel& model) {
  KILN_ASSIGN_OR_RETURN(Session session, model.bind("main", {kSizes}));
  Buffer input = random_input(ScalarType::Float32, kSizes, 7);
  Buffer output;
  output.bytes.resize(8 * 10 * 10 * sizeof(float));
  output.tensor = Tensor(ScalarType::Float32, kSizes, output.bytes.data());
  std::vector<const Tensor*> in = {&input.tensor};
  std::vector<Tensor*> out = {&output.tensor};
  KILN_RETURN_IF_ERROR(session.run(in, out));
  return output;
}

runtime::Result<std::shared_ptr<LoadedModel>> load(const package::PackageView& view,
                                                   cache::ModelCache* cache) {
  return ModelLoader::load(view, cpu_only(), cache, compile::CompileOptions{});
}

TEST(WeightCheck, OnFirstUseChecksEachWeightWhenAsked) {
  PackageBytes bytes(conv_residual_model());
  bytes.corrupt("w1");
  auto eager = package::PackageView::open(bytes.span());
  ASSERT_FALSE(eager.ok());
  EXPECT_EQ(eager.error(), Error::InvalidProgram);
  EXPECT_THAT(eager.status().message(), HasSubstr("'w1'"));

  auto lazy = package::PackageView::open(bytes.span(), package::WeightCheck::OnFirstUse);
  ASSERT_TRUE(lazy.ok()) << lazy.status().to_string();
  for (size_t i = 0; i < lazy->num_weights(); ++i) {
    Status status = lazy->verify_weight(i);
    if (lazy->model().weights[i].name == "w1") {
      EXPECT_EQ(status.code(), Error::InvalidProgram);
      EXPECT_THAT(status.message(), HasSubstr("weight " + std::to_string(i) + " 'w1'"));
      EXPECT_THAT(status.message(), HasSubstr("does not match its bytes"));
      EXPECT_EQ(lazy->verify_weight(i).code(), Error::InvalidProgram);  // and stays so
    } else {
      EXPECT_TRUE(status.ok()) << status.to_string();
    }
  }
  EXPECT_EQ(lazy->verify_weight(lazy->num_weights()).code(), Error::InvalidArgument);
}

// The packed weights come from the artifact: the corrupt copy in the package is never read, and
// the results are those of the intact model.
TEST(WeightCheck, AWarmLoadNeverReadsWeightsItTakesPacked) {
  TempDir dir("packed");
  cache::ModelCache cache(dir.path.string());
  PackageBytes good(conv_residual_model());
  auto good_view = package::PackageView::open(good.span(), package::WeightCheck::OnFirstUse);
  ASSERT_TRUE(good_view.ok());
  auto cold = load(*good_view, &cache);
  ASSERT_TRUE(cold.ok()) << cold.status().to_string();
  EXPECT_EQ((*cold)->load_report().cache, "miss");
  auto expected = run(**cold);
  ASSERT_TRUE(expected.ok()) << expected.status().to_string();

  PackageBytes bad(conv_residual_model());
  bad.corrupt("w1");
  bad.corrupt("w2");
  auto bad_view = package::PackageView::open(bad.span(), package::WeightCheck::OnFirstUse);
  ASSERT_TRUE(bad_view.ok());
  auto warm = load(*bad_view, &cache);
  ASSERT_TRUE(warm.ok()) << warm.status().to_string();
  EXPECT_EQ((*warm)->load_report().cache, "hit");
  auto actual = run(**warm);
  ASSERT_TRUE(actual.ok()) << actual.status().to_string();
  EXPECT_EQ(std::memcmp(actual->bytes.data(), expected->bytes.data(), actual->bytes.size()), 0);
  EXPECT_EQ((*warm)->packed_constants().num_packed(), 0u);

  // Without the artifact the weights are packed from the package: the corruption is found.
  TempDir empty("packed_cold");
  cache::ModelCache fresh(empty.path.string());
  auto uncached = load(*bad_view, &fresh);
  ASSERT_FALSE(uncached.ok());
  EXPECT_EQ(uncached.error(), Error::InvalidProgram);
  EXPECT_THAT(uncached.status().message(), HasSubstr("does not match its bytes"));
  auto entries = fresh.list();
  ASSERT_TRUE(entries.ok());
  EXPECT_TRUE(entries->empty());
}

// A weight the function reads as it is (a bias the reference Add or a fused op reads) is checked
// when the function is built, also on a warm load.
TEST(WeightCheck, AWeightReadDirectlyIsCheckedWhenTheFunctionIsBuilt) {
  TempDir dir("read");
  cache::ModelCache cache(dir.path.string());
  PackageBytes good(conv_residual_model());
  auto good_view = package::PackageView::open(good.span(), package::WeightCheck::OnFirstUse);
  ASSERT_TRUE(good_view.ok());
  ASSERT_TRUE(load(*good_view, &cache).ok());

  PackageBytes bad(conv_residual_model());
  bad.corrupt("b1");
  auto bad_view = package::PackageView::open(bad.span(), package::WeightCheck::OnFirstUse);
  ASSERT_TRUE(bad_view.ok());
  auto warm = load(*bad_view, &cache);
  ASSERT_TRUE(warm.ok()) << warm.status().to_string();
  EXPECT_EQ((*warm)->load_report().cache, "hit");  // the function is built on first use
  auto actual = run(**warm);
  ASSERT_FALSE(actual.ok());
  EXPECT_EQ(actual.error(), Error::InvalidProgram);
  EXPECT_THAT(actual.status().message(), HasSubstr("'b1'"));
}

// X [5, 1, 8] -> `op` (LSTM or GRU, hidden 16, weights w, r, b) -> Y [5, 1, 1, 16].
ir::Model recurrent_model(const std::string& op) {
  const int64_t gates = op == "LSTM" ? 4 : 3, hidden = 16;
  ModelBuilder b(11);
  int x = b.input("x", {5, 1, 8});
  int w = b.weight("w", {1, gates * hidden, 8}, 0.3f);
  int r = b.weight("r", {1, gates * hidden, hidden}, 0.3f);
  int bias = b.weight("b", {1, 2 * gates * hidden}, 0.1f);
  int y = b.value("y", {5, 1, 1, hidden});
  b.node(op, {x, w, r, bias}, {y}, {int_attr("hidden_size", hidden)});
  b.output(y);
  return b.build();
}

runtime::Result<Buffer> run_recurrent(LoadedModel& model) {
  const std::vector<int64_t> sizes = {5, 1, 8};
  KILN_ASSIGN_OR_RETURN(Session session, model.bind("main", {sizes}));
  Buffer input = random_input(ScalarType::Float32, sizes, 5);
  Buffer output;
  output.bytes.resize(5 * 16 * sizeof(float));
  output.tensor = Tensor(ScalarType::Float32, {5, 1, 1, 16}, output.bytes.data());
  std::vector<const Tensor*> in = {&input.tensor};
  std::vector<Tensor*> out = {&output.tensor};
  KILN_RETURN_IF_ERROR(session.run(in, out));
  return output;
}

// A recurrent cell's W and R are only packed (kiln's LSTM loops for a small batch, oneDNN's
// GRU): a warm load takes them from the artifact and never reads the package's copies, a cold
// one checks them before packing; the bias, read as it is, is checked on every build.
TEST(WeightCheck, RecurrentWeightsAreCheckedWhenPackedAndTheBiasWhenRead) {
  for (const std::string op : {"LSTM", "GRU"}) {
    SCOPED_TRACE(op);
    TempDir dir("recurrent_" + op);
    cache::ModelCache cache(dir.path.string());
    PackageBytes good(recurrent_model(op));
    auto good_view = package::PackageView::open(good.span(), package::WeightCheck::OnFirstUse);
    ASSERT_TRUE(good_view.ok());
    auto cold = load(*good_view, &cache);
    ASSERT_TRUE(cold.ok()) << cold.status().to_string();
    auto expected = run_recurrent(**cold);
    ASSERT_TRUE(expected.ok()) << expected.status().to_string();
    wait_for_background_stores();

    PackageBytes packed_only(recurrent_model(op));
    packed_only.corrupt("w");
    packed_only.corrupt("r");
    auto packed_view =
        package::PackageView::open(packed_only.span(), package::WeightCheck::OnFirstUse);
    ASSERT_TRUE(packed_view.ok());
    auto warm = load(*packed_view, &cache);
    ASSERT_TRUE(warm.ok()) << warm.status().to_string();
    EXPECT_EQ((*warm)->load_report().cache, "hit");
    auto actual = run_recurrent(**warm);
    ASSERT_TRUE(actual.ok()) << actual.status().to_string();
    EXPECT_EQ(std::memcmp(actual->bytes.data(), expected->bytes.data(), actual->bytes.size()), 0);
    EXPECT_EQ((*warm)->packed_constants().num_packed(), 0u);

    TempDir empty("recurrent_cold_" + op);
    cache::ModelCache fresh(empty.path.string());
    auto uncached = load(*packed_view, &fresh);
    ASSERT_FALSE(uncached.ok());
    EXPECT_EQ(uncached.error(), Error::InvalidProgram);
    EXPECT_THAT(uncached.status().message(), HasSubstr("does not match its bytes"));

    PackageBytes read(recurrent_model(op));
    read.corrupt("b");
    auto read_view = package::PackageView::open(read.span(), package::WeightCheck::OnFirstUse);
    ASSERT_TRUE(read_view.ok());
    auto warm_bad_bias = load(*read_view, &cache);
    ASSERT_TRUE(warm_bad_bias.ok()) << warm_bad_bias.status().to_string();
    auto failed = run_recurrent(**warm_bad_bias);
    ASSERT_FALSE(failed.ok());
    EXPECT_EQ(failed.error(), Error::InvalidProgram);
    EXPECT_THAT(failed.status().message(), HasSubstr("'b'"));
  }
}

}  // namespace
}  // namespace kiln::engine
