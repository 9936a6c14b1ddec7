#pragma once

// Running an imported model on the reference kernels, for the importer's rewrite tests.
#include <kiln/exporter/export.h>
#include <kiln/exporter/writer/program_writer.h>
#include <kiln/runtime/core/data_loader.h>
#include <kiln/runtime/executor/method.h>
#include <kiln/runtime/executor/program.h>

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace kiln::exporter::test {

/// Output 0 of function `forward` of `model`, lowered to a portable program, for the f32 input 0
/// `x` of `sizes`; empty (with a test failure) when it does not run.
inline std::vector<float> run_portable(const engine::ir::Model& model,
                                       const std::vector<int64_t>& sizes, std::vector<float> x) {
  ProgramSpec spec;
  runtime::Status lowered = lower_to_portable(model, "forward", "forward", {}, spec);
  EXPECT_TRUE(lowered.ok()) << lowered;
  auto bytes = write_program(spec);
  EXPECT_TRUE(bytes.ok());
  if (!lowered.ok() || !bytes.ok()) return {};
  auto program = runtime::Program::load(
      std::make_shared<runtime::BufferDataLoader>(bytes->data(), bytes->size()));
  EXPECT_TRUE(program.ok()) << program.status();
  if (!program.ok()) return {};
  auto method = (*program)->load_method("forward");
  EXPECT_TRUE(method.ok()) << method.status();
  if (!method.ok()) return {};
  runtime::Tensor input(runtime::ScalarType::Float32, sizes, x.data());
  EXPECT_TRUE((*method)->set_input(0, runtime::EValue(input)).ok());
  runtime::Status ran = (*method)->execute();
  EXPECT_TRUE(ran.ok()) << ran;
  if (!ran.ok()) return {};
  const runtime::Tensor& y = (*method)->get_output(0).to_tensor();
  return std::vector<float>(y.data_ptr<float>(), y.data_ptr<float>() + y.numel());
}

/// The ops of the model's first function, in order.
inline std::vector<std::string> op_names(const engine::ir::Model& model) {
  std::vector<std::string> out;
  for (const auto& node : model.functions[0].nodes) out.push_back(node.op);
  return out;
}

}  // namespace kiln::exporter::test
