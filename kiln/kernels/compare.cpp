// Comparisons (Equal, Greater, Less, GreaterOrEqual, LessOrEqual) and logical ops (And, Or,
// Xor): broadcast binary ops with a bool output.

#include <kiln/kernels/elementwise.h>
#include <kiln/kernels/kernels.h>

#include <array>

namespace kiln::kernels {

using runtime::EValue;
using runtime::ScalarType;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

// Every dtype but bool: the ordered comparisons are not defined on bool in ONNX.
constexpr std::array<ScalarType, 9> kOrderedDtypes = {
    ScalarType::Float32,  ScalarType::Float64, ScalarType::Float16,
    ScalarType::BFloat16, ScalarType::Int8,    ScalarType::UInt8,
    ScalarType::Int16,    ScalarType::Int32,   ScalarType::Int64};

// Compares loaded values (f16 and bf16 as float), so every dtype compares by value.
template <typename Compare>
struct CompareFn {
  template <typename T>
  bool operator()(T a, T b) const {
    return Compare{}(load(a), load(b));
  }
};

struct EqualTo {
  template <typename C>
  bool operator()(C a, C b) const {
    return a == b;
  }
};
struct GreaterThan {
  template <typename C>
  bool operator()(C a, C b) const {
    return a > b;
  }
};
struct LessThan {
  template <typename C>
  bool operator()(C a, C b) const {
    return a < b;
  }
};
struct GreaterEqual {
  template <typename C>
  bool operator()(C a, C b) const {
    return a >= b;
  }
};
struct LessEqual {
  template <typename C>
  bool operator()(C a, C b) const {
    return a <= b;
  }
};

template <typename Compare>
Status compare(std::string_view op, Span<const ScalarType> dtypes, const Tensor& a, const Tensor& b,
               Tensor& out) {
  KILN_RETURN_IF_ERROR(check_dtype(op, "input 0", a.dtype(), dtypes));
  return internal::binary_map<DtypeGroup::All>(op, a, b, out, ScalarType::Bool,
                                               CompareFn<Compare>{});
}

template <typename Logic>
Status logical(std::string_view op, const Tensor& a, const Tensor& b, Tensor& out, Logic logic) {
  KILN_RETURN_IF_ERROR(check_dtype(op, "input 0", a.dtype(), kBoolDtypes));
  return internal::binary_map<DtypeGroup::All>(
      op, a, b, out, ScalarType::Bool, [&](auto x, auto y) -> bool {
        return logic(static_cast<bool>(load(x)), static_cast<bool>(load(y)));
      });
}

template <const internal::BinaryOp& kSpec>
Status binary_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                     Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  return internal::run_binary_op_kernel(kSpec, context, inputs, outputs);
}

constexpr internal::BinaryOp kEqual{"Equal", kAllDtypes, true, equal};
constexpr internal::BinaryOp kGreater{"Greater", kOrderedDtypes, true, greater};
constexpr internal::BinaryOp kLess{"Less", kOrderedDtypes, true, less};
constexpr internal::BinaryOp kGreaterOrEqual{"GreaterOrEqual", kOrderedDtypes, true,
                                             greater_or_equal};
constexpr internal::BinaryOp kLessOrEqual{"LessOrEqual", kOrderedDtypes, true, less_or_equal};
constexpr internal::BinaryOp kAnd{"And", kBoolDtypes, true, logical_and};
constexpr internal::BinaryOp kOr{"Or", kBoolDtypes, true, logical_or};
constexpr internal::BinaryOp kXor{"Xor", kBoolDtypes, true, logical_xor};

const runtime::KernelRegistration kRegisterEqual("Equal", binary_kernel<kEqual>);
const runtime::KernelRegistration kRegisterGreater("Greater", binary_kernel<kGreater>);
const runtime::KernelRegistration kRegisterLess("Less", binary_kernel<kLess>);
const runtime::KernelRegistration kRegisterGreaterOrEqual("GreaterOrEqual",
                                                          binary_kernel<kGreaterOrEqual>);
const runtime::KernelRegistration kRegisterLessOrEqual("LessOrEqual", binary_kernel<kLessOrEqual>);
const runtime::KernelRegistration kRegisterAnd("And", binary_kernel<kAnd>);
const runtime::KernelRegistration kRegisterOr("Or", binary_kernel<kOr>);
const runtime::KernelRegistration kRegisterXor("Xor", binary_kernel<kXor>);

}  // namespace

Status equal(const Tensor& a, const Tensor& b, Tensor& out) {
  return compare<EqualTo>("Equal", kAllDtypes, a, b, out);
}
Status greater(const Tensor& a, const Tensor& b, Tensor& out) {
  return compare<GreaterThan>("Greater", kOrderedDtypes, a, b, out);
}
Status less(const Tensor& a, const Tensor& b, Tensor& out) {
  return compare<LessThan>("Less", kOrderedDtypes, a, b, out);
}
Status greater_or_equal(const Tensor& a, const Tensor& b, Tensor& out) {
  return compare<GreaterEqual>("GreaterOrEqual", kOrderedDtypes, a, b, out);
}
Status less_or_equal(const Tensor& a, const Tensor& b, Tensor& out) {
  return compare<LessEqual>("LessOrEqual", kOrderedDtypes, a, b, out);
}
Status logical_and(const Tensor& a, const Tensor& b, Tensor& out) {
  return logical("And", a, b, out, [](bool x, bool y) { return x && y; });
}
Status logical_or(const Tensor& a, const Tensor& b, Tensor& out) {
  return logical("Or", a, b, out, [](bool x, bool y) { return x || y; });
}
Status logical_xor(const Tensor& a, const Tensor& b, Tensor& out) {
  return logical("Xor", a, b, out, [](bool x, bool y) { return x != y; });
}

}  // namespace kiln::kernels
