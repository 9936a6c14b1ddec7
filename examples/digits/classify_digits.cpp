// kiln_classify_digits PROGRAM.kiln IMAGES.npy [LABELS.npy]: runs the exported digit
// classifier (examples/digits) through the Module API on a batch of 8x8 images and prints each
// predicted digit with its probability, and the label when LABELS.npy is given. Also prints
// how long loading the method took, so that a first (cold) and a second (warm) process can be
// compared. Exit status 0 when every prediction equals its label (or no labels are given).

#include <kiln/backends/kiln/kiln_backend.h>
#include <kiln/extension/module/module.h>
#include <kiln/extension/module/tensor_ptr.h>
#include <tools/kiln/npy.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

namespace {

int fail(const std::string& what, const kiln::runtime::Status& status) {
  std::cerr << "kiln_classify_digits: " << what << ": " << status << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using kiln::runtime::ScalarType;
  if (argc != 3 && argc != 4) {
    std::cerr << "usage: kiln_classify_digits PROGRAM.kiln IMAGES.npy [LABELS.npy]\n";
    return 2;
  }
  auto images = kiln::tools::read_npy(argv[2]);
  if (!images.ok()) return fail("read images", images.status());
  if (images->dtype != ScalarType::Float32 || images->shape.size() != 4) {
    std::cerr << "kiln_classify_digits: " << argv[2]
              << ": expected f32 images of shape [N, 1, 8, 8]\n";
    return 1;
  }
  std::vector<int64_t> labels;
  if (argc == 4) {
    auto file = kiln::tools::read_npy(argv[3]);
    if (!file.ok()) return fail("read labels", file.status());
    if (file->dtype != ScalarType::Int64 || file->numel() != images->shape[0]) {
      std::cerr << "kiln_classify_digits: " << argv[3] << ": expected " << images->shape[0]
                << " i64 labels\n";
      return 1;
    }
    labels.resize(static_cast<size_t>(file->numel()));
    std::memcpy(labels.data(), file->data.data(), file->data.size());
  }

  kiln::extension::Module module(argv[1]);
  const auto before = kiln::backends::kiln_load_counters();
  auto start = std::chrono::steady_clock::now();
  auto loaded = module.load_method("forward");
  auto load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                           start).count();
  if (!loaded.ok()) return fail("load", loaded);
  // A KilnBackend delegate specializes the model on a cold load and stores it in the cache
  // ($KILN_CACHE_DIR); a warm load maps it from there.
  const auto after = kiln::backends::kiln_load_counters();
  const char* cache = after.cache_misses != before.cache_misses ? "miss (specialized, stored)"
                      : after.cache_hits != before.cache_hits   ? "hit (mapped from the cache)"
                                                                : "off";
  std::cout << "load (program + method): " << std::fixed << std::setprecision(2) << load_ms
            << " ms, cache " << cache << "\n";
  for (size_t i = after.recent_warnings.size() -
                  std::min<size_t>(after.recent_warnings.size(), after.warnings - before.warnings);
       i < after.recent_warnings.size(); ++i) {
    std::cerr << "warning: " << after.recent_warnings[i] << "\n";
  }

  std::vector<float> pixels(static_cast<size_t>(images->numel()));
  std::memcpy(pixels.data(), images->data.data(), images->data.size());
  auto x = kiln::extension::make_tensor_ptr(images->shape, std::move(pixels));
  if (!x.ok()) return fail("input", x.status());
  start = std::chrono::steady_clock::now();
  auto outputs = module.forward({kiln::runtime::EValue(**x)});
  auto run_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                          start).count();
  if (!outputs.ok()) return fail("run", outputs.status());
  const kiln::runtime::Tensor& probs = (*outputs)[0].to_tensor();
  if (probs.dtype() != ScalarType::Float32 || probs.dim() != 2 ||
      probs.size(0) != images->shape[0]) {
    std::cerr << "kiln_classify_digits: output 0 is not f32 [N, classes]\n";
    return 1;
  }
  std::cout << "run (" << probs.size(0) << " images): " << run_ms << " ms\n";
  int correct = 0;
  for (int64_t n = 0; n < probs.size(0); ++n) {
    const float* row = probs.data_ptr<float>() + n * probs.size(1);
    int64_t best = 0;
    for (int64_t c = 1; c < probs.size(1); ++c) {
      if (row[c] > row[best]) best = c;
    }
    std::cout << "image " << n << ": predicted " << best << " (p = " << std::setprecision(3)
              << row[best] << ")";
    if (!labels.empty()) {
      bool right = labels[static_cast<size_t>(n)] == best;
      correct += right ? 1 : 0;
      std::cout << ", label " << labels[static_cast<size_t>(n)] << (right ? "" : "  <-- wrong");
    }
    std::cout << "\n";
  }
  if (!labels.empty()) {
    std::cout << correct << " of " << probs.size(0) << " predictions equal their labels\n";
    return correct == probs.size(0) ? 0 : 1;
  }
  return 0;
}
