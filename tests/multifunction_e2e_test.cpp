// End to end (issue: KilnBackend and delegated export): a static `forward` (the trained digit
// classifier) and an enumerated `prefill` (a transformer block with a data-dependent If, so a
// graph break) exported into one multifunction program; loaded with sharing off and on, cold and
// warm; 100 calls compared with the reference kernels (the portable export of each model).
#include <kiln/backends/kiln/kiln_backend.h>
#include <kiln/backends/kiln/kiln_backend_options.h>
#include <kiln/backends/kiln/shared_models.h>
#include <kiln/engine/loader/background_stores.h>
#include <kiln/exporter/export.h>
#include <kiln/exporter/test/onnx_model_builder.h>
#include <kiln/extension/module/module.h>
#include <kiln/extension/module/tensor_ptr.h>
#include <tools/kiln/npy.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

namespace kiln {
namespace {

namespace fs = std::filesystem;
using exporter::test::OnnxModelBuilder;
using ::testing::HasSubstr;

const std::string kDigits = std::string(KILN_SOURCE_DIR) + "/examples/digits/";
constexpr int64_t kVocab = 50, kWidth = 32, kHidden = 64;

std::vector<float> seeded(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> out(n);
  for (float& v : out) v = normal(rng);
  return out;
}

// ids i64 [1, seq] → logits f32 [1, seq, vocab]: embedding, layer norm, single-head attention
// with a residual, then a data-dependent If (scale the stream by 0.5 when its maximum is
// positive, else by 2), then a layer-normed MLP with a residual and the LM head.
std::string transformer_model() {
  OnnxModelBuilder b(17);
  b.input("ids", onnx::TensorProto::INT64, {1, 0}, {"", "seq"});
  b.output("logits", onnx::TensorProto::FLOAT, {1, 0, kVocab}, {"", "seq", ""});
  uint32_t seed = 1;
  auto weight = [&](const std::string& name, std::vector<int64_t> dims, float scale) {
    size_t n = 1;
    for (int64_t d : dims) n *= static_cast<size_t>(d);
    b.initializer_f32(name, dims, seeded(n, seed++, scale));
  };
  weight("wte", {kVocab, kWidth}, 1.0f);
  for (const char* w : {"wq", "wk", "wv", "wo"}) weight(w, {kWidth, kWidth}, 0.2f);
  weight("w1", {kWidth, kHidden}, 0.2f);
  weight("b1", {kHidden}, 0.1f);
  weight("w2", {kHidden, kWidth}, 0.2f);
  weight("head", {kWidth, kVocab}, 0.2f);
  b.initializer_f32("gamma", {kWidth}, std::vector<float>(kWidth, 1.0f));
  b.initializer_f32("beta", {kWidth}, std::vector<float>(kWidth, 0.0f));
  b.initializer_f32("scale", {}, {1.0f / std::sqrt(static_cast<float>(kWidth))});
  b.initializer_f32("zero", {}, {0.0f});
  b.initializer_f32("half", {}, {0.5f});
  b.initializer_f32("two", {}, {2.0f});
  b.node("Gather", {"wte", "ids"}, {"emb"}, "embed");
  b.node("LayerNormalization", {"emb", "gamma", "beta"}, {"h"}, "ln1");
  b.node("MatMul", {"h", "wq"}, {"q"}, "q");
  b.node("MatMul", {"h", "wk"}, {"k"}, "k");
  b.node("MatMul", {"h", "wv"}, {"v"}, "v");
  auto& kt = b.node("Transpose", {"k"}, {"kt"}, "kt");
  auto* perm = kt.add_attribute();
  perm->set_name("perm");
  perm->set_type(onnx::AttributeProto::INTS);
  for (int64_t p : {0, 2, 1}) perm->add_ints(p);
  b.node("MatMul", {"q", "kt"}, {"scores"}, "scores");
  b.node("Mul", {"scores", "scale"}, {"scaled"}, "scaled");
  auto& softmax = b.node("Softmax", {"scaled"}, {"probs"}, "softmax");
  OnnxModelBuilder::int_attribute(softmax, "axis", -1);
  b.node("MatMul", {"probs", "v"}, {"ctx"}, "ctx");
  b.node("MatMul", {"ctx", "wo"}, {"attn"}, "attn");
  b.node("Add", {"emb", "attn"}, {"a"}, "residual1");
  auto& peak = b.node("ReduceMax", {"a"}, {"peak"}, "peak");
  OnnxModelBuilder::int_attribute(peak, "keepdims", 0);
  b.node("Greater", {"peak", "zero"}, {"positive"}, "positive");
  auto& choose = b.node("If", {"positive"}, {"a2"}, "rescale");
  OnnxModelBuilder::graph_attribute(choose, "then_branch",
                                    OnnxModelBuilder::one_node_graph("damp", "Mul", {"a", "half"},
                                                                     "damp_out", {1, 0, kWidth},
                                                                     {"", "seq", ""}));
  OnnxModelBuilder::graph_attribute(choose, "else_branch",
                                    OnnxModelBuilder::one_node_graph("boost", "Mul", {"a", "two"},
                                                                     "boost_out", {1, 0, kWidth},
                                                                     {"", "seq", ""}));
  b.node("LayerNormalization", {"a2", "gamma", "beta"}, {"h2"}, "ln2");
  b.node("MatMul", {"h2", "w1"}, {"up"}, "up");
  b.node("Add", {"up", "b1"}, {"up_b"}, "up_bias");
  b.node("Relu", {"up_b"}, {"act"}, "act");
  b.node("MatMul", {"act", "w2"}, {"down"}, "down");
  b.node("Add", {"a2", "down"}, {"out"}, "residual2");
  b.node("MatMul", {"out", "head"}, {"logits"}, "lm_head");
  return b.bytes();
}

class MultifunctionEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / "kiln_multifunction_e2e";
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "prefill.onnx", std::ios::binary) << transformer_model();
  }
  void TearDown() override {
    engine::wait_for_background_stores();  // a miss writes its entries in the background
    fs::remove_all(dir_);
  }

  std::string write(const std::vector<uint8_t>& bytes, const std::string& name) {
    fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
    return p.string();
  }

  fs::path dir_;
};

// One call: a method and its input.
struct Call {
  std::string method;
  extension::TensorPtr input;
};

std::vector<Call> make_calls(const tools::NpyArray& images) {
  std::vector<Call> calls;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> token(0, kVocab - 1);
  const auto* pixels = reinterpret_cast<const float*>(images.data.data());
  const int64_t image = images.shape[1] * images.shape[2] * images.shape[3];
  for (int i = 0; i < 100; ++i) {
    if (i % 4 == 0) {
      int64_t batch = i % 8 == 0 ? 1 : 10;
      std::vector<float> x(pixels, pixels + batch * image);
      calls.push_back({"forward", *extension::make_tensor_ptr(
                                      {batch, images.shape[1], images.shape[2], images.shape[3]},
                                      std::move(x))});
      continue;
    }
    int64_t seq = std::array<int64_t, 3>{4, 8, 16}[static_cast<size_t>(i % 3)];
    std::vector<int64_t> ids(static_cast<size_t>(seq));
    for (int64_t& id : ids) id = token(rng);
    calls.push_back({"prefill", *extension::make_tensor_ptr({1, seq}, std::move(ids))});
  }
  return calls;
}

std::vector<float> run(extension::Module& module, const Call& call) {
  auto outputs = module.execute(call.method, {runtime::EValue(*call.input)});
  EXPECT_TRUE(outputs.ok()) << call.method << ": " << outputs.status().to_string();
  if (!outputs.ok()) return {};
  const runtime::Tensor& t = (*outputs)[0].to_tensor();
  return std::vector<float>(t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
}

bool close(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size() || got.empty()) return false;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::fabs(got[i] - want[i]) > 1e-5f + 1e-4f * std::fabs(want[i])) return false;
  }
  return true;
}

TEST_F(MultifunctionEndToEnd, StaticForwardAndEnumeratedPrefillWithAGraphBreak) {
  auto images = tools::read_npy(kDigits + "test_images.npy");
  ASSERT_TRUE(images.ok()) << images.status().to_string();
  const std::string prefill_onnx = (dir_ / "prefill.onnx").string();

  exporter::ExportOptions options;
  options.multifunction = true;
  for (const char* flag : {"forward:x:0=1,10", "prefill:ids:1=4,8,16"}) {
    options.enumerations.push_back(*exporter::parse_enumeration(flag));
  }
  auto bytes = exporter::export_program(
      {{"forward", kDigits + "digits.onnx", {}, {}, {}}, {"prefill", prefill_onnx, {}, {}, {}}},
      options);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  std::string program = write(*bytes, "multi.kiln");
  auto meta = extension::Module(program).method_meta("prefill");
  ASSERT_TRUE(meta.ok());
  ASSERT_EQ(meta->delegates.size(), 2u);  // prefill_0 and prefill_1, around the If

  // The reference: each model exported alone onto the reference kernels.
  exporter::ExportOptions portable;
  portable.backend = "portable";
  auto digits_ref = exporter::export_onnx_file(kDigits + "digits.onnx", portable);
  auto prefill_ref = exporter::export_onnx_file(prefill_onnx, portable);
  ASSERT_TRUE(digits_ref.ok() && prefill_ref.ok());
  extension::Module forward_reference(write(*digits_ref, "forward_ref.kiln"));
  extension::Module prefill_reference(write(*prefill_ref, "prefill_ref.kiln"));
  std::vector<Call> calls = make_calls(*images);
  std::vector<std::vector<float>> expected;
  for (const Call& call : calls) {
    expected.push_back(run(call.method == "forward" ? forward_reference : prefill_reference,
                           Call{"forward", call.input}));
  }

  for (bool share : {false, true}) {
    const std::string cache = (dir_ / (share ? "cache_shared" : "cache_own")).string();
    for (const char* load : {"cold", "warm"}) {
      SCOPED_TRACE(std::string(share ? "sharing on, " : "sharing off, ") + load + " load");
      engine::wait_for_background_stores();  // the cold load's entries are written
      backends::KilnLoadCounters before = backends::kiln_load_counters();
      backends::SharedModelCounters shared_before =
          backends::SharedModelRegistry::instance().counters();
      runtime::LoadBackendOptionsMap map;
      ASSERT_TRUE(map.set_options(backends::KilnBackendOptions()
                                      .setShareMultifunctionModel(share)
                                      .setCacheDirectory(cache))
                      .ok());
      extension::Module module(program);
      ASSERT_TRUE(module.load(map).ok());
      ASSERT_TRUE(module.load_method("forward").ok());
      ASSERT_TRUE(module.load_method("prefill").ok());
      backends::KilnLoadCounters after = backends::kiln_load_counters();
      backends::SharedModelCounters shared_after =
          backends::SharedModelRegistry::instance().counters();
      if (std::string(load) == "cold") {
        EXPECT_GE(after.cache_misses, before.cache_misses + 1);
      } else {
        EXPECT_EQ(after.cache_misses, before.cache_misses);
        EXPECT_GE(after.cache_hits, before.cache_hits + 1);
      }
      // Three delegates (forward_0, prefill_0, prefill_1) over one package: with sharing, one
      // load and two shared hits.
      EXPECT_EQ(shared_after.loads_started - shared_before.loads_started, share ? 1u : 0u);
      EXPECT_EQ(shared_after.shared_hits - shared_before.shared_hits, share ? 2u : 0u);

      int matched = 0;
      for (size_t i = 0; i < calls.size(); ++i) {
        matched += close(run(module, calls[i]), expected[i]) ? 1 : 0;
      }
      EXPECT_EQ(matched, 100);

      auto unlisted = extension::make_tensor_ptr({1, 5}, std::vector<int64_t>(5, 1));
      auto rejected = module.execute("prefill", {runtime::EValue(**unlisted)});
      ASSERT_FALSE(rejected.ok());
      EXPECT_EQ(rejected.error(), runtime::Error::InvalidArgument);
      EXPECT_THAT(rejected.status().message(), HasSubstr("[1, 5]"));
    }
  }
}

}  // namespace
}  // namespace kiln
