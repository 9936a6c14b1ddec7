#pragma once

#include <kiln/runtime/core/evalue.h>
#include <kiln/runtime/core/scalar_type.h>
#include <kiln/runtime/core/tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::runtime {

/// Describes one input or output of a method.
struct TensorMeta {
  std::string name;
  Tag tag = Tag::Tensor;          ///< Non-tensor inputs (ints, bools…) have other tags.
  ScalarType dtype = ScalarType::Float32;
  std::vector<int64_t> sizes;     ///< Planned sizes; the upper bounds for Bounded tensors.
  std::vector<std::string> dim_names;  ///< Per dim: symbol such as "seq", or "" if concrete.
  ShapeDynamism dynamism = ShapeDynamism::Static;
};

/// One delegate of a method, as stored in the program.
struct DelegateMeta {
  std::string id;
  std::string backend_id;
  size_t processed_size = 0;
};

/// What a method takes and returns, readable without loading the method.
struct MethodMeta {
  std::string name;
  std::vector<TensorMeta> inputs;
  std::vector<TensorMeta> outputs;
  std::vector<DelegateMeta> delegates;
  std::vector<std::string> kernel_ops;   ///< Op of each KernelCall, in order.
  size_t num_instructions = 0;
  std::vector<uint64_t> arena_sizes;     ///< Planned-memory bytes per arena.

  size_t num_inputs() const { return inputs.size(); }
  size_t num_outputs() const { return outputs.size(); }
  uint64_t planned_bytes() const;
};

}  // namespace kiln::runtime
