#include <kiln/runtime/core/evalue.h>

namespace kiln::runtime {

std::string_view to_string(Tag tag) {
  switch (tag) {
    case Tag::None: return "none";
    case Tag::Bool: return "bool";
    case Tag::Int: return "int";
    case Tag::Double: return "double";
    case Tag::String: return "string";
    case Tag::IntList: return "int list";
    case Tag::DoubleList: return "double list";
    case Tag::Tensor: return "tensor";
  }
  return "invalid";
}

}  // namespace kiln::runtime
