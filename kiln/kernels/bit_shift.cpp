#include <kiln/kernels/elementwise.h>
#include <kiln/kernels/kernels.h>

#include <array>
#include <string>
#include <type_traits>

namespace kiln::kernels {

using runtime::EValue;
using runtime::ScalarType;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "BitShift";
// ONNX allows u8, u16, u32 and u64; the runtime has no dtype for the wider three.
constexpr std::array<ScalarType, 1> kShiftDtypes = {ScalarType::UInt8};

Status check_direction(const std::string& direction) {
  if (direction == "LEFT" || direction == "RIGHT") return Status();
  return internal::invalid_argument(
      kOp, "attribute 'direction' is '" + direction + "' (expected 'LEFT' or 'RIGHT')");
}

Status bit_shift_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                        Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  auto direction = attributes.get_string("direction", "");
  if (!direction.ok()) return direction.status().with_context(internal::action(kOp));
  KILN_RETURN_IF_ERROR(check_direction(*direction));
  const internal::BinaryOp op{kOp, kShiftDtypes, false, nullptr};
  KILN_ASSIGN_OR_RETURN(internal::BinaryArgs args,
                        internal::prepare_binary(op, context, inputs, outputs));
  return bit_shift(*args.a, *args.b, *direction == "LEFT", *args.out);
}

const runtime::KernelRegistration kRegisterBitShift("BitShift", bit_shift_kernel);

// x << y or x >> y for unsigned x; shifting by the bit width or more gives 0 (C++ leaves it
// undefined).
template <typename T>
T shift(T x, T y, bool left) {
  if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T>) {
    if (y >= sizeof(T) * 8) return T{0};
    return static_cast<T>(left ? x << y : x >> y);
  } else {
    return x;  // never instantiated at run time: the dtype is checked to be unsigned first
  }
}

}  // namespace

Status bit_shift(const Tensor& x, const Tensor& y, bool left, Tensor& out) {
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x.dtype(), kShiftDtypes));
  return internal::binary_map<DtypeGroup::Numeric>(
      kOp, x, y, out, x.dtype(), [left](auto a, auto b) { return shift(a, b, left); });
}

}  // namespace kiln::kernels
