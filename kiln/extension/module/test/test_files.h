#pragma once

#include <kiln/engine/loader/background_stores.h>
#include <kiln/testing/program_builder.h>

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace kiln::extension::test {

/// A fresh directory under the system temp dir, removed with everything in it at destruction.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    // The pid keeps concurrent runs (e.g. two build trees) apart.
    std::string name = "kiln_module_test_" + std::to_string(::getpid()) + "_";
    if (info != nullptr) name += std::string(info->test_suite_name()) + "_" + info->name();
    for (char& c : name) {
      if (c == '/') c = '_';
    }
    path_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    engine::wait_for_background_stores();  // a KilnBackend cache miss writes in the background
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  /// `path()/name` as a string.
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

  /// Builds `builder` into `name` and returns the path; fails the test on a build error.
  std::string write(const kiln::testing::ProgramBuilder& builder, const std::string& name) const {
    std::string out = file(name);
    auto status = builder.build_to_file(out);
    EXPECT_TRUE(status.ok()) << status;
    return out;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace kiln::extension::test
