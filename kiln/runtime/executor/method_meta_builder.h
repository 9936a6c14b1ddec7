#pragma once

#include <kiln/runtime/executor/method_meta.h>
#include <kiln/runtime/schema/program_generated.h>

namespace kiln::runtime {

/// The MethodMeta of a verified method (names default to "input_<i>" / "output_<i>").
MethodMeta make_method_meta(const schema::Method& method, const schema::Program& program);

}  // namespace kiln::runtime
