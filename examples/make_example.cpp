// kiln_make_example OUTDIR: writes the bundled example, a small classifier MLP, as
// OUTDIR/mlp.kiln with an input OUTDIR/x.npy, so `kiln run OUTDIR/mlp.kiln --input
// x=OUTDIR/x.npy` has something to run before any exporter is involved.
//
//   x f32 [1, 16] → MatMul W1 [16, 32] → Add b1 [32] → Relu
//                 → MatMul W2 [32, 4]  → Add b2 [4]  → Softmax → probs f32 [1, 4]
//
// The weights come from a fixed integer generator, so every build writes the same bytes.

#include <kiln/testing/program_builder.h>
#include <tools/kiln/npy.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

namespace {

using kiln::testing::F32;
using kiln::testing::ProgramBuilder;

constexpr int64_t kIn = 16;
constexpr int64_t kHidden = 32;
constexpr int64_t kClasses = 4;

// A 64-bit LCG (Knuth's MMIX constants) mapped to [-scale, scale): unlike <random>'s
// distributions it gives the same numbers with every standard library.
class Weights {
 public:
  explicit Weights(uint64_t seed) : state_(seed) {}
  std::vector<float> next(size_t count, float scale) {
    std::vector<float> out(count);
    for (float& v : out) {
      state_ = state_ * 6364136223846793005ULL + 1442695040888963407ULL;
      const double unit = static_cast<double>(state_ >> 11) / 9007199254740992.0;  // [0, 1)
      v = static_cast<float>((unit * 2.0 - 1.0) * scale);
    }
    return out;
  }

 private:
  uint64_t state_;
};

ProgramBuilder mlp() {
  Weights weights(2024);
  // Larger than the usual 1/sqrt(fan_in) so the example's answer is clear-cut.
  const float scale1 = 3.0f / std::sqrt(static_cast<float>(kIn));
  const float scale2 = 3.0f / std::sqrt(static_cast<float>(kHidden));
  ProgramBuilder builder;
  builder.input("x", F32, {1, kIn})
      .constant_f32("W1", {kIn, kHidden}, weights.next(kIn * kHidden, scale1))
      .constant_f32("b1", {kHidden}, weights.next(kHidden, 0.1f))
      .constant_f32("W2", {kHidden, kClasses}, weights.next(kHidden * kClasses, scale2))
      .constant_f32("b2", {kClasses}, weights.next(kClasses, 0.1f))
      .tensor("h1", F32, {1, kHidden})
      .tensor("a1", F32, {1, kHidden})
      .tensor("r1", F32, {1, kHidden})
      .tensor("h2", F32, {1, kClasses})
      .tensor("logits", F32, {1, kClasses})
      .tensor("probs", F32, {1, kClasses})
      .node("MatMul", {"x", "W1"}, {"h1"})
      .node("Add", {"h1", "b1"}, {"a1"})
      .node("Relu", {"a1"}, {"r1"})
      .node("MatMul", {"r1", "W2"}, {"h2"})
      .node("Add", {"h2", "b2"}, {"logits"})
      .node("Softmax", {"logits"}, {"probs"}, {{"axis", kiln::runtime::EValue(int64_t{-1})}})
      .output("probs");
  return builder;
}

std::vector<uint8_t> input_bytes() {
  std::vector<float> x(kIn);
  for (int64_t i = 0; i < kIn; ++i) x[i] = static_cast<float>(std::sin(0.5 * (i + 1)));
  std::vector<uint8_t> bytes(x.size() * sizeof(float));
  std::memcpy(bytes.data(), x.data(), bytes.size());
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::cerr << "usage: kiln_make_example OUTDIR\n"
                 "  writes OUTDIR/mlp.kiln (a small classifier MLP) and OUTDIR/x.npy (its "
                 "input)\n";
    return argc == 2 ? 0 : 1;
  }
  const std::filesystem::path dir = argv[1];
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    std::cerr << "kiln_make_example: error: create directory '" << dir.string()
              << "': " << ec.message() << "\n";
    return 1;
  }

  const std::string program = (dir / "mlp.kiln").string();
  const std::string input = (dir / "x.npy").string();
  auto status = mlp().build_to_file(program);
  if (!status.ok()) {
    std::cerr << "kiln_make_example: error: " << status.message() << "\n";
    return 1;
  }
  const std::vector<int64_t> shape = {1, kIn};
  status = kiln::tools::write_npy(input, kiln::runtime::ScalarType::Float32, shape, input_bytes());
  if (!status.ok()) {
    std::cerr << "kiln_make_example: error: " << status.message() << "\n";
    return 1;
  }
  std::cout << "wrote " << program << "\n"
            << "wrote " << input << "\n"
            << "next:  kiln run " << program << " --input x=" << input << "\n";
  return 0;
}
