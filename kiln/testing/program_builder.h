#pragma once

#include <kiln/runtime/core/evalue.h>
#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/scalar_type.h>
#include <kiln/runtime/core/tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace kiln::testing {

using runtime::ScalarType;
using runtime::ShapeDynamism;

inline constexpr ScalarType F32 = ScalarType::Float32;
inline constexpr ScalarType I64 = ScalarType::Int64;
inline constexpr ScalarType I32 = ScalarType::Int32;
inline constexpr ScalarType BOOL = ScalarType::Bool;

/// Writes real .kiln programs in code, for tests, fuzz seeds and examples:
///
///   auto bytes = ProgramBuilder().input("x", F32, {1, 8})
///                    .node("Relu", {"x"}, {"y"})
///                    .output("y")
///                    .build();
///
/// Values are named. An undeclared node output takes the dtype and shape of the node's first
/// input; declare others with `tensor`. Calls apply to the current method ("forward" until
/// `method` names another). Every planned tensor gets its own slot in arena 0 (no reuse).
/// Errors (unknown value names, duplicates) are reported by `build`.
class ProgramBuilder {
 public:
  ProgramBuilder();

  /// Starts (or returns to) method `name`.
  ProgramBuilder& method(const std::string& name);

  /// A method input. `dynamism` Bounded makes `sizes` the upper bounds; Unbounded inputs get
  /// storage at run time. `dim_names` (optional) gives symbols per dim.
  ProgramBuilder& input(const std::string& name, ScalarType dtype, std::vector<int64_t> sizes,
                        ShapeDynamism dynamism = ShapeDynamism::Static,
                        std::vector<std::string> dim_names = {});
  /// A non-tensor method input (int, bool, double…) with a default value.
  ProgramBuilder& scalar_input(const std::string& name, runtime::EValue value);
  /// Declares an intermediate or output tensor.
  ProgramBuilder& tensor(const std::string& name, ScalarType dtype, std::vector<int64_t> sizes,
                         ShapeDynamism dynamism = ShapeDynamism::Static);
  /// A constant tensor stored in a segment; `data` holds its raw bytes.
  ProgramBuilder& constant(const std::string& name, ScalarType dtype, std::vector<int64_t> sizes,
                           std::vector<uint8_t> data);
  /// A constant f32 tensor.
  ProgramBuilder& constant_f32(const std::string& name, std::vector<int64_t> sizes,
                               const std::vector<float>& data);
  /// A KernelCall. An input named "" is an absent optional input.
  ProgramBuilder& node(const std::string& op, std::vector<std::string> inputs,
                       std::vector<std::string> outputs,
                       std::vector<std::pair<std::string, runtime::EValue>> attributes = {});
  /// A DelegateCall to a new delegate of `backend_id` with inline `processed` bytes.
  ProgramBuilder& delegate(const std::string& backend_id, std::vector<uint8_t> processed,
                           std::vector<std::string> inputs, std::vector<std::string> outputs,
                           std::vector<std::pair<std::string, std::vector<uint8_t>>>
                               compile_specs = {});
  /// Same, with the processed bytes stored in a segment instead of inline.
  ProgramBuilder& delegate_segment(const std::string& backend_id, std::vector<uint8_t> processed,
                                   std::vector<std::string> inputs,
                                   std::vector<std::string> outputs);
  /// Control flow: continue at `label` when `condition` is false (a JumpFalseCall). The label
  /// is placed later with `label`; build fails if it never is, or is placed before the jump.
  ProgramBuilder& jump_false(const std::string& condition, const std::string& label);
  /// Places `name` before the next instruction (or at the end of the method).
  ProgramBuilder& label(const std::string& name);
  /// A MoveCall copying tensor `source` into tensor `destination` (resizing it).
  ProgramBuilder& move(const std::string& source, const std::string& destination);
  /// Marks a value as a method output.
  ProgramBuilder& output(const std::string& name);
  /// Program-wide named data (one segment per key).
  ProgramBuilder& named_data(const std::string& key, std::vector<uint8_t> bytes);
  /// Segment alignment (default 4096).
  ProgramBuilder& segment_alignment(uint32_t alignment);

  /// The program file's bytes. Errors: InvalidArgument naming the method and value.
  runtime::Result<std::vector<uint8_t>> build() const;
  /// Builds and writes to `path`. Errors as `build`, or AccessFailed.
  runtime::Status build_to_file(const std::string& path) const;

  struct ValueDef {
    std::string name;
    runtime::EValue scalar;  // non-tensor values
    bool is_tensor = true;
    ScalarType dtype = ScalarType::Float32;
    std::vector<int64_t> sizes;
    std::vector<std::string> dim_names;
    ShapeDynamism dynamism = ShapeDynamism::Static;
    int constant_segment = -1;
    bool planned = true;
  };
  struct NodeDef {
    bool is_delegate = false;
    bool is_jump = false;
    bool is_move = false;
    std::string label;  // jump target
    std::string op;
    int delegate = -1;
    std::vector<std::string> inputs, outputs;
    std::vector<std::pair<std::string, runtime::EValue>> attributes;
  };
  struct DelegateDef {
    std::string id, backend_id;
    std::vector<uint8_t> processed;
    int processed_segment = -1;
    std::vector<std::pair<std::string, std::vector<uint8_t>>> compile_specs;
  };
  struct MethodDef {
    std::string name;
    std::vector<ValueDef> values;
    std::vector<std::string> inputs, outputs;
    std::vector<NodeDef> nodes;
    std::vector<DelegateDef> delegates;
    std::map<std::string, int> labels;  // name → instruction index
    std::string error;  // first definition error, reported by build()
  };

 private:
  MethodDef& current();
  ValueDef* find(MethodDef& m, const std::string& name);
  int add_segment(std::vector<uint8_t> bytes);

  std::vector<MethodDef> methods_;
  size_t current_ = 0;
  std::vector<std::vector<uint8_t>> segments_;
  std::vector<std::pair<std::string, int>> named_data_;
  uint32_t alignment_ = 4096;
};

/// Bytes of a float vector, for `constant`.
std::vector<uint8_t> to_bytes(const std::vector<float>& values);

}  // namespace kiln::testing
