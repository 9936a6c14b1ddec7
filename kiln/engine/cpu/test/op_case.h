#pragma once

// Test support for the oneDNN op tests: seeded tensors, an op description over owned inputs
// (`Case`), the reference post-ops and a tolerance check.

#include <kiln/engine/cpu/cpu_op.h>
#include <kiln/kernels/kernels.h>
#include <kiln/kernels/test/tensor_helpers.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::engine::cpu::test_support {

using kernels::test_helpers::OwnedTensor;

inline OwnedTensor random_tensor(std::vector<int64_t> sizes, uint32_t seed, double lo = -1.0,
                                 double hi = 1.0) {
  int64_t numel = kernels::test_helpers::numel_of(sizes);
  return OwnedTensor::of(std::move(sizes), kernels::test_helpers::random_values<float>(
                                               static_cast<size_t>(numel), seed, lo, hi));
}

inline OwnedTensor zeros(std::vector<int64_t> sizes) {
  return OwnedTensor::zeros(runtime::ScalarType::Float32, std::move(sizes));
}

/// Fails (naming up to 5 elements) unless shapes are equal and every element is within
/// 1e-5 + 1e-4 * |expected|.
inline void expect_near(const OwnedTensor& actual, const OwnedTensor& expected) {
  auto sizes = [](const OwnedTensor& t) {
    return std::vector<int64_t>(t.tensor().sizes().begin(), t.tensor().sizes().end());
  };
  ASSERT_EQ(sizes(actual), sizes(expected));
  std::vector<float> a = actual.values<float>(), e = expected.values<float>();
  int failures = 0;
  for (size_t i = 0; i < a.size() && failures < 5; ++i) {
    double tolerance = 1e-5 + 1e-4 * std::fabs(e[i]);
    if (!(std::fabs(a[i] - e[i]) <= tolerance)) {
      ADD_FAILURE() << "element " << i << ": " << a[i] << " (expected " << e[i] << ")";
      ++failures;
    }
  }
}

inline ir::Attribute ints(std::string name, std::vector<int64_t> values) {
  return ir::Attribute{std::move(name), std::move(values)};
}
inline ir::Attribute int_attr(std::string name, int64_t value) {
  return ir::Attribute{std::move(name), value};
}
inline ir::Attribute float_attr(std::string name, double value) {
  return ir::Attribute{std::move(name), value};
}
inline ir::Attribute str(std::string name, std::string value) {
  return ir::Attribute{std::move(name), std::move(value)};
}

/// An op description over owned inputs, each present or absent, constant or not.
struct Case {
  OpDesc desc;
  std::vector<std::optional<OwnedTensor>> inputs;
  std::vector<bool> constant_flags;
  std::string description;  ///< `CpuOp::describe()` of the last op run.

  Case(std::string op, std::vector<ir::Attribute> attributes) {
    desc.op = std::move(op);
    desc.attributes = std::move(attributes);
    desc.num_threads = 1;
    desc.small_ops_own_loops = false;  // these cases test the oneDNN ops, at small sizes
  }
  void add(OwnedTensor tensor, bool constant) {
    const runtime::Tensor& t = tensor.tensor();
    desc.inputs.push_back(
        TensorDesc{t.dtype(), std::vector<int64_t>(t.sizes().begin(), t.sizes().end())});
    desc.inputs_present.push_back(true);
    inputs.emplace_back(std::move(tensor));
    constant_flags.push_back(constant);
  }
  void add_absent() {
    desc.inputs.push_back(TensorDesc{runtime::ScalarType::Float32, {}});
    desc.inputs_present.push_back(false);
    inputs.emplace_back();
    constant_flags.push_back(false);
  }
  const runtime::Tensor& at(size_t i) const { return inputs[i]->tensor(); }
  /// The op `factory` makes of it (CpuOp::create, or one kind of kiln's loops alone), its
  /// constants bound.
  runtime::Result<std::unique_ptr<CpuOp>> create_with(
      runtime::Result<std::unique_ptr<CpuOp>> (*factory)(const OpDesc&)) {
    desc.constants.clear();
    for (size_t i = 0; i < inputs.size(); ++i) {
      desc.constants.push_back(constant_flags[i] && inputs[i] ? &inputs[i]->tensor() : nullptr);
    }
    return factory(desc);
  }
  runtime::Result<std::unique_ptr<CpuOp>> create() { return create_with(&CpuOp::create); }
  /// The run-time inputs: constant and absent ones null (a run must not read constants).
  std::vector<const runtime::Tensor*> run_inputs() const {
    std::vector<const runtime::Tensor*> in;
    for (size_t i = 0; i < inputs.size(); ++i) {
      in.push_back(constant_flags[i] || !inputs[i] ? nullptr : &inputs[i]->tensor());
    }
    return in;
  }
  /// Runs a created op twice (the second run reuses every buffer of the first); constant
  /// inputs are passed as null: the run must not read them.
  OwnedTensor run(CpuOp& op) {
    OwnedTensor out = zeros(op.outputs()[0].sizes);
    std::vector<const runtime::Tensor*> in = run_inputs();
    runtime::Tensor* out_ptr = &out.tensor();
    for (int i = 0; i < 2; ++i) {
      runtime::Status status = op.run(in, runtime::Span<runtime::Tensor*>(&out_ptr, 1));
      EXPECT_TRUE(status.ok()) << status;
    }
    description = op.describe();
    return out;
  }
  /// Finishes a created op and places its scratch memory (`CpuOp::use_scratchpad`: oneDNN's
  /// scratchpad and the buffers of its layout conversions) in storage of the caller's, which
  /// is filled with NaN bytes before each of two runs, as another step of a compiled function
  /// may leave it; returns the output. `placed` is set to the bytes placed.
  OwnedTensor run_in_spoiled_scratch(CpuOp& op, uint64_t& placed) {
    EXPECT_TRUE(op.finish().ok());
    placed = op.scratchpad_bytes();
    std::vector<uint8_t> storage(placed + 64);
    auto* data = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64;
    if (placed > 0) op.use_scratchpad(data);
    OwnedTensor out = zeros(op.outputs()[0].sizes);
    std::vector<const runtime::Tensor*> in = run_inputs();
    runtime::Tensor* out_ptr = &out.tensor();
    for (int i = 0; i < 2; ++i) {
      std::fill(storage.begin(), storage.end(), uint8_t{0xff});
      runtime::Status status = op.run(in, runtime::Span<runtime::Tensor*>(&out_ptr, 1));
      EXPECT_TRUE(status.ok()) << status;
    }
    return out;
  }
  /// Creates the op and runs it (see `run(CpuOp&)`); returns the output.
  OwnedTensor run() {
    auto op = create();
    EXPECT_TRUE(op.ok()) << op.status();
    if (!op.ok()) return zeros({0});
    return run(**op);
  }
};

/// Applies post-ops to `out` in place, reading residuals from `residuals` in order.
inline void apply_post_ops(const std::vector<PostOp>& post_ops,
                           const std::vector<const runtime::Tensor*>& residuals, OwnedTensor& out) {
  float* y = out.tensor().mutable_data_ptr<float>();
  size_t next = 0;
  for (const PostOp& p : post_ops) {
    const float* r =
        p.kind == PostOpKind::AddResidual ? residuals[next++]->data_ptr<float>() : nullptr;
    for (int64_t i = 0; i < out.tensor().numel(); ++i) {
      double v = y[i];
      switch (p.kind) {
        case PostOpKind::Relu:
          v = std::max(v, 0.0);
          break;
        case PostOpKind::Clip:
          v = std::min(std::max(v, double{p.alpha}), double{p.beta});
          break;
        case PostOpKind::Sigmoid:
          v = 1.0 / (1.0 + std::exp(-v));
          break;
        case PostOpKind::Tanh:
          v = std::tanh(v);
          break;
        case PostOpKind::Gelu:
          v = p.alpha == 1.0f
                  ? 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)))
                  : 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
          break;
        case PostOpKind::AddResidual:
          v += r[i];
          break;
        case PostOpKind::Linear:
          v = double{p.alpha} * v + double{p.beta};
          break;
        case PostOpKind::Swish:
          v = v / (1.0 + std::exp(-v));
          break;
      }
      y[i] = static_cast<float>(v);
    }
  }
}

/// Gives `c` the post-ops `post_ops`, adding a residual input of the output's `sizes` (seeded
/// from `seed`, which advances) for each AddResidual, and applies them to `expected`.
inline void add_post_ops(Case& c, const std::vector<PostOp>& post_ops,
                         const std::vector<int64_t>& sizes, uint32_t& seed, OwnedTensor& expected) {
  std::vector<const runtime::Tensor*> residuals;
  for (const PostOp& p : post_ops) {
    if (p.kind != PostOpKind::AddResidual) continue;
    c.add(random_tensor(sizes, seed++), false);
    residuals.push_back(&c.inputs.back()->tensor());
  }
  apply_post_ops(post_ops, residuals, expected);
  c.desc.post_ops = post_ops;
}

/// Runs `c` (a Conv whose X, W and, with `bias`, B are added) with `post_ops` and checks it
/// against the reference convolution with `options` followed by the same post-ops. A first
/// post-op AddResidual adds the residual input (seeded from `seed`, which advances).
inline void expect_conv_like_reference(Case& c, const kernels::ConvOptions& options, bool bias,
                                       const std::vector<PostOp>& post_ops, uint32_t& seed) {
  auto shape = kernels::conv_shape(c.desc.inputs[0].sizes, c.desc.inputs[1].sizes, options);
  ASSERT_TRUE(shape.ok()) << shape.status();
  OwnedTensor expected = zeros(*shape);
  ASSERT_TRUE(
      kernels::conv(c.at(0), c.at(1), bias ? &c.at(2) : nullptr, options, expected.tensor()).ok());
  std::vector<const runtime::Tensor*> residuals;
  if (!post_ops.empty() && post_ops[0].kind == PostOpKind::AddResidual) {
    c.add(random_tensor(*shape, seed++), false);
    residuals.push_back(&c.inputs.back()->tensor());
  }
  apply_post_ops(post_ops, residuals, expected);
  c.desc.post_ops = post_ops;
  expect_near(c.run(), expected);
}

inline std::string post_ops_name(const std::vector<PostOp>& post_ops) {
  std::string name;
  for (const PostOp& p : post_ops) name += "+" + std::to_string(static_cast<int>(p.kind));
  return name;
}

/// `t` with its last two axes swapped (B from the B^T an op is given, or back).
inline OwnedTensor swap_last_two(const runtime::Tensor& t) {
  std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end());
  const size_t rank = sizes.size();
  const int64_t rows = sizes[rank - 2], cols = sizes[rank - 1];
  std::swap(sizes[rank - 2], sizes[rank - 1]);
  OwnedTensor out = zeros(sizes);
  const float* from = t.data_ptr<float>();
  float* to = out.tensor().mutable_data_ptr<float>();
  const int64_t batch = rows * cols == 0 ? 0 : t.numel() / (rows * cols);
  for (int64_t m = 0; m < batch; ++m) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        to[(m * cols + c) * rows + r] = from[(m * rows + r) * cols + c];
      }
    }
  }
  return out;
}

}  // namespace kiln::engine::cpu::test_support
