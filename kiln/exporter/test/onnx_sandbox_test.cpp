#include <kiln/exporter/onnx/onnx_importer.h>
#include <kiln/exporter/onnx/onnx_sandbox.h>
#include <kiln/exporter/test/onnx_model_builder.h>

#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>
#include <csignal>
#include <string>

namespace kiln::exporter {
namespace {

using runtime::Error;
using runtime::Result;
using runtime::Status;

TEST(OnnxSandbox, ReturnsTheChildsBytes) {
  auto result =
      run_in_child("step", []() -> Result<std::string> { return std::string("abc\0def", 7); });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(*result, std::string("abc\0def", 7));
}

TEST(OnnxSandbox, PassesTheChildsErrorThrough) {
  auto result = run_in_child(
      "step", []() -> Result<std::string> { return Status(Error::NotSupported, "no such thing"); });
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error(), Error::NotSupported);
  EXPECT_EQ(result.status().message(), "no such thing");
}

TEST(OnnxSandbox, ACrashIsAnErrorForTheModel) {
  auto result = run_in_child("import model 'm.onnx'", []() -> Result<std::string> {
    std::raise(SIGSEGV);
    return std::string("unreachable");
  });
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error(), Error::InvalidProgram);
  EXPECT_NE(result.status().message().find("import model 'm.onnx': ONNX crashed on this model "
                                           "(signal 11"),
            std::string::npos)
      << result.status();
}

TEST(OnnxSandbox, AHangIsKilledAfterTheTimeout) {
  auto result = run_in_child(
      "step",
      []() -> Result<std::string> {
        ::sleep(30);
        return std::string();
      },
      /*timeout_s=*/1);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("timed out on this model after 1 s"), std::string::npos)
      << result.status();
}

// The child keeps none of the caller's descriptors but 0-2 and its result pipe: one that never
// ends must not hold a pipe its caller's caller waits on (a conformance worker's, whose runner
// waited forever for a worker killed at its time limit while the ONNX step it started hung).
TEST(OnnxSandbox, TheChildClosesTheCallersDescriptors) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  auto result = run_in_child("step", [&]() -> Result<std::string> {
    const bool read_end = ::fcntl(fds[0], F_GETFD) != -1;
    const bool write_end = ::fcntl(fds[1], F_GETFD) != -1;
    return std::string(read_end || write_end ? "open" : "closed");
  });
  ::close(fds[0]);
  ::close(fds[1]);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(*result, "closed");
}

// Found by the importer fuzzer: ONNX 1.12's STFT shape inference dereferences the dims of a
// signal of rank 0. The export now fails with an error for the model.
TEST(OnnxSandbox, OnnxShapeInferenceCrashFailsTheImport) {
  test::OnnxModelBuilder b(17);
  b.input("signal", onnx::TensorProto::FLOAT, {}).input("step", onnx::TensorProto::INT64, {});
  b.input("length", onnx::TensorProto::INT64, {}).output("y", onnx::TensorProto::FLOAT, {});
  b.node("STFT", {"signal", "step", "", "length"}, {"y"});
  auto model = import_onnx(b.bytes(), "stft.onnx");
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.error(), Error::InvalidProgram);
  EXPECT_NE(model.status().message().find("import model 'stft.onnx'"), std::string::npos)
      << model.status();
}

}  // namespace
}  // namespace kiln::exporter
