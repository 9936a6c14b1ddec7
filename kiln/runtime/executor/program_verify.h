#pragma once

#include <kiln/runtime/core/status.h>
#include <kiln/runtime/executor/file_format.h>
#include <kiln/runtime/schema/program_generated.h>

namespace kiln::runtime {

/// The most dimensions a tensor of a program may have.
inline constexpr size_t kMaxTensorRank = 16;

/// Checks every index, offset, size and enum of a flatbuffer-verified program against itself
/// and the header, so that loading and running can trust them. Errors: InvalidProgram naming
/// the method, the value or instruction index and the problem.
Status verify_program_contents(const schema::Program& program, const FileHeader& header);

/// Byte size of a verified tensor value at its planned (upper-bound) sizes.
size_t tensor_value_nbytes(const schema::TensorValue& tensor);

}  // namespace kiln::runtime
