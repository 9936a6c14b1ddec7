#pragma once

#include <kiln/runtime/core/tensor.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace kiln::runtime {

/// The kind of value an EValue holds. Stored in program files: never renumber.
enum class Tag : uint8_t {
  None = 0,
  Bool = 1,
  Int = 2,
  Double = 3,
  String = 4,
  IntList = 5,
  DoubleList = 6,
  Tensor = 7,
};

std::string_view to_string(Tag tag);

/// A tagged value passed between instructions of a method: none, bool, int, double, string,
/// int list, double list or tensor. Accessors assume the tag (check `is_*` first); a
/// mismatch is a programming error caught by an assertion in debug builds.
/// Thread-safety: a value type; not synchronized.
class EValue {
 public:
  EValue() = default;
  EValue(bool value) : value_(value) {}                      // NOLINT
  EValue(int64_t value) : value_(value) {}                   // NOLINT
  EValue(int value) : value_(static_cast<int64_t>(value)) {} // NOLINT
  EValue(double value) : value_(value) {}                    // NOLINT
  EValue(std::string value) : value_(std::move(value)) {}    // NOLINT
  EValue(const char* value) : value_(std::string(value)) {}  // NOLINT
  EValue(std::vector<int64_t> value) : value_(std::move(value)) {}  // NOLINT
  EValue(std::vector<double> value) : value_(std::move(value)) {}   // NOLINT
  EValue(Tensor value) : value_(std::move(value)) {}         // NOLINT

  Tag tag() const { return static_cast<Tag>(value_.index()); }
  bool is_none() const { return tag() == Tag::None; }
  bool is_bool() const { return tag() == Tag::Bool; }
  bool is_int() const { return tag() == Tag::Int; }
  bool is_double() const { return tag() == Tag::Double; }
  bool is_string() const { return tag() == Tag::String; }
  bool is_int_list() const { return tag() == Tag::IntList; }
  bool is_double_list() const { return tag() == Tag::DoubleList; }
  bool is_tensor() const { return tag() == Tag::Tensor; }

  bool to_bool() const { return std::get<bool>(value_); }
  int64_t to_int() const { return std::get<int64_t>(value_); }
  double to_double() const { return std::get<double>(value_); }
  const std::string& to_string() const { return std::get<std::string>(value_); }
  const std::vector<int64_t>& to_int_list() const { return std::get<std::vector<int64_t>>(value_); }
  const std::vector<double>& to_double_list() const {
    return std::get<std::vector<double>>(value_);
  }
  const Tensor& to_tensor() const { return std::get<Tensor>(value_); }
  Tensor& to_tensor() { return std::get<Tensor>(value_); }

 private:
  std::variant<std::monostate, bool, int64_t, double, std::string, std::vector<int64_t>,
               std::vector<double>, Tensor>
      value_;
};

}  // namespace kiln::runtime
