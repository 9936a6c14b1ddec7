#pragma once

#include <kiln/runtime/core/evalue.h>
#include <kiln/runtime/core/scalar_type.h>
#include <kiln/runtime/core/tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln::exporter {

/// A program to write, field for field what `program.fbs` stores. Indices refer to
/// `MethodSpec::values` and `ProgramSpec::segments`; `write_program` checks them.
struct TensorSpec {
  runtime::ScalarType dtype = runtime::ScalarType::Float32;
  std::vector<int64_t> sizes;  ///< Upper bounds for Bounded tensors.
  runtime::ShapeDynamism dynamism = runtime::ShapeDynamism::Static;
  std::vector<std::string> dim_names;  ///< Empty, or one per dim ("" for concrete).
  int constant_segment = -1;
  uint64_t constant_offset = 0;
  int arena = -1;
  uint64_t arena_offset = 0;
};

struct ValueSpec {
  bool is_tensor = true;
  TensorSpec tensor;
  runtime::EValue scalar;  ///< When not a tensor: none, bool, int, double, string or lists.
};

struct InstructionSpec {
  enum class Kind { Kernel, Delegate, JumpFalse, Move };
  Kind kind = Kind::Kernel;
  bool is_delegate = false;  ///< Same as kind == Delegate (kept for builders that set it).
  std::string op;      ///< KernelCall: the operator.
  int delegate = -1;   ///< DelegateCall: index into MethodSpec::delegates.
  int destination = -1;  ///< JumpFalse: the instruction index to continue at when false.
  std::vector<int> inputs;   ///< -1: absent optional input (KernelCall only). JumpFalse: the
                             ///< condition; Move: the source.
  std::vector<int> outputs;  ///< Move: the destination.
  std::vector<std::pair<std::string, int>> attributes;  ///< name → value index.
};

struct DelegateSpec {
  std::string id;
  std::string backend_id;
  std::vector<uint8_t> processed;
  int processed_segment = -1;
  std::vector<std::pair<std::string, std::vector<uint8_t>>> compile_specs;
};

struct MethodSpec {
  std::string name;
  std::vector<ValueSpec> values;
  std::vector<int> inputs;
  std::vector<int> outputs;
  std::vector<std::string> input_names;
  std::vector<std::string> output_names;
  std::vector<InstructionSpec> instructions;
  std::vector<DelegateSpec> delegates;
  std::vector<uint64_t> arena_sizes;
};

struct ProgramSpec {
  std::vector<MethodSpec> methods;
  std::vector<std::vector<uint8_t>> segments;
  std::vector<std::pair<std::string, int>> named_data;  ///< key → segment.
  uint32_t segment_alignment = 4096;
};

}  // namespace kiln::exporter
