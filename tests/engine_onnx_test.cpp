// The engine end to end on a real ONNX model: import, load with ModelLoader, bind, run.
#include <kiln/engine/loader/model_loader.h>
#include <kiln/exporter/onnx/onnx_importer.h>
#include <tools/kiln/npy.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

namespace kiln {
namespace {

using runtime::ScalarType;
using runtime::Tensor;

const std::string kDigits = std::string(KILN_SOURCE_DIR) + "/examples/digits/";

TEST(EngineOnnx, DigitsClassifierMatchesPyTorch) {
  auto model = exporter::import_onnx_file(kDigits + "digits.onnx");
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  auto images = tools::read_npy(kDigits + "test_images.npy");
  auto labels = tools::read_npy(kDigits + "test_labels.npy");
  auto expected = tools::read_npy(kDigits + "expected_probs.npy");
  ASSERT_TRUE(images.ok() && labels.ok() && expected.ok());

  engine::specialization::SpecializationOptions options;
  auto loaded = engine::ModelLoader::load(*model, options);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  const std::string function = (*loaded)->function_names().at(0);
  auto session = (*loaded)->bind(function, {images->shape});
  ASSERT_TRUE(session.ok()) << session.status().to_string();

  Tensor x(ScalarType::Float32, images->shape, images->data.data());
  std::vector<float> probs(static_cast<size_t>(images->shape[0]) * 10);
  Tensor y(ScalarType::Float32, {images->shape[0], 10}, probs.data());
  std::vector<const Tensor*> in = {&x};
  std::vector<Tensor*> out = {&y};
  for (int repeat = 0; repeat < 2; ++repeat) {
    auto status = session->run(in, out);
    ASSERT_TRUE(status.ok()) << status.to_string();
  }
  EXPECT_EQ((*session->function())->num_dynamic_allocations(), 0u);

  const auto* want = reinterpret_cast<const float*>(expected->data.data());
  const auto* label = reinterpret_cast<const int64_t*>(labels->data.data());
  int correct = 0;
  for (int64_t n = 0; n < images->shape[0]; ++n) {
    int best = 0;
    for (int c = 0; c < 10; ++c) {
      EXPECT_NEAR(probs[n * 10 + c], want[n * 10 + c], 1e-5 + 1e-4 * std::fabs(want[n * 10 + c]));
      if (probs[n * 10 + c] > probs[n * 10 + best]) best = c;
    }
    correct += best == label[n];
  }
  EXPECT_EQ(correct, images->shape[0]);

  // The Convs on optimized kernels (oneDNN's or kiln's loops), not the reference ones.
  bool conv_optimized = false;
  for (const auto& entry : (*session->function())->placement()) {
    conv_optimized |=
        entry.op == "Conv" && (entry.device == "cpu:onednn" || entry.device == "cpu:kiln");
  }
  EXPECT_TRUE(conv_optimized);
}

}  // namespace
}  // namespace kiln
