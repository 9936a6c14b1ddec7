#pragma once

// Helpers shared by the loader's tests: a temporary cache directory, a bound function checked
// against the reference interpreter, and an entry whose payload no longer matches its checksum.

#include <kiln/engine/cache/model_cache.h>
#include <kiln/engine/compile/test/test_models.h>
#include <kiln/engine/loader/background_stores.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace kiln::engine::loader_test {

/// A fresh directory `kiln_loader_<name>` under the test temp dir; removed at the end, once
/// the stores running in the background have finished.
struct TempDir {
  explicit TempDir(const std::string& name)
      : path(std::filesystem::path(::testing::TempDir()) / ("kiln_loader_" + name)) {
    std::filesystem::remove_all(path);
  }
  ~TempDir() {
    wait_for_background_stores();
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::filesystem::path path;
};

/// Binds `main` of `model` to one input of `sizes`, runs it on seeded data and checks it
/// against the reference interpreter.
inline void expect_binds_like_reference(LoadedModel& loaded, const ir::Model& model,
                                        const std::vector<int64_t>& sizes, uint32_t seed = 9) {
  auto session = loaded.bind("main", {sizes});
  ASSERT_TRUE(session.ok()) << session.status().to_string();
  std::vector<test_models::Buffer> inputs;
  inputs.push_back(test_models::random_input(runtime::ScalarType::Float32, sizes, seed));
  std::vector<const runtime::Tensor*> in = {&inputs[0].tensor};
  auto expected = test_models::interpret(model, in);
  auto outputs = test_models::output_buffers(**session->function());
  std::vector<runtime::Tensor*> out = {&outputs[0].tensor};
  ASSERT_TRUE(session->run(in, out).ok());
  test_models::expect_close(outputs[0].tensor, expected[0].tensor);
}

/// Flips a byte in the packed weights near the end of `entry`'s file: every field but the
/// payload checksum still reads.
inline void flip_payload_byte(const cache::CacheEntryInfo& entry) {
  std::fstream file(entry.path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekg(static_cast<std::streamoff>(entry.size_bytes - 5));
  char byte = 0;
  file.get(byte);
  file.seekp(static_cast<std::streamoff>(entry.size_bytes - 5));
  file.put(static_cast<char>(byte ^ 0x10));
}

}  // namespace kiln::engine::loader_test
