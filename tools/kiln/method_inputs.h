#pragma once

#include <kiln/extension/module/module.h>
#include <kiln/extension/module/tensor_ptr.h>
#include <kiln/runtime/core/evalue.h>
#include <kiln/runtime/core/result.h>
#include <kiln/runtime/executor/method.h>
#include <kiln/runtime/executor/method_meta.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::tools {

/// The method a command works on: `requested` when not empty, else "forward" when the program
/// has it, else the program's only method. Loads the program if needed.
/// Errors: those of `Module::method_names`; InvalidArgument listing the methods when the
/// program has several and none is "forward". An unknown `requested` name is reported later,
/// by `Module::method_meta` (NotFound naming it and the methods present).
runtime::Result<std::string> choose_method(extension::Module& module, const std::string& requested);

/// One method input prepared for a run.
struct MethodInput {
  /// The input's name, as in the method's TensorMeta.
  std::string name;
  /// The tensor, or null for a non-tensor input (which keeps the value the program stores).
  extension::TensorPtr tensor;
  /// Where the data came from: "from FILE" or "random (seed N)"; empty for a non-tensor input.
  std::string source;
};

/// Prepares every input of `meta`, in method order: the inputs named by `input_args`
/// (`NAME=FILE.npy`, the `--input` flags) are read from their `.npy` files; every other tensor
/// input gets random data from `random_tensor` with a generator seeded by `seed` (inputs drawn
/// in method order, so the same seed gives the same data).
/// Errors: InvalidArgument for a malformed argument, an input given twice or a file whose dtype
/// is not the input's (with a NumPy `astype` hint); NotFound for a name the method does not
/// have (listing its inputs); the errors of `read_npy` (naming the file).
runtime::Result<std::vector<MethodInput>> prepare_inputs(const runtime::MethodMeta& meta,
                                                         const std::vector<std::string>& input_args,
                                                         uint64_t seed);

/// The EValues to pass to `Module::execute`: each prepared tensor, or for a non-tensor input
/// the value `method` holds for it. `inputs` must come from `prepare_inputs` for this method;
/// the EValues alias its tensors, which must outlive them.
std::vector<runtime::EValue> input_values(const std::vector<MethodInput>& inputs,
                                          const runtime::Method& method);

}  // namespace kiln::tools
