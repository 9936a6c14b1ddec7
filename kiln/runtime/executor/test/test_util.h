#pragma once

#include <kiln/runtime/core/data_loader.h>
#include <kiln/runtime/core/evalue.h>
#include <kiln/runtime/executor/program.h>
#include <kiln/testing/program_builder.h>

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace kiln::runtime::test {

/// Loads a program from bytes owned by the returned program.
inline Result<std::shared_ptr<Program>> load_bytes(std::vector<uint8_t> bytes) {
  auto owned = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  auto loader = std::make_shared<BufferDataLoader>(owned->data(), owned->size(), owned);
  return Program::load(loader);
}

inline std::shared_ptr<Program> load_or_die(const testing::ProgramBuilder& builder) {
  auto bytes = builder.build();
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  auto program = load_bytes(std::move(bytes).get());
  EXPECT_TRUE(program.ok()) << program.status();
  return program.ok() ? *program : nullptr;
}

/// An f32 tensor of `sizes` over `data` (not copied).
inline EValue f32(std::vector<int64_t> sizes, std::vector<float>& data) {
  return EValue(Tensor(ScalarType::Float32, std::move(sizes), data.data()));
}

/// The values of an f32 tensor.
inline std::vector<float> values_of(const EValue& v) {
  const Tensor& t = v.to_tensor();
  return std::vector<float>(t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
}

}  // namespace kiln::runtime::test
