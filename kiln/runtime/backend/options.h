#pragma once

#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/span.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

namespace kiln::runtime {

/// One load-time option for a backend: a key and a bool, int or string value. Both the key and
/// a string value are owned copies, so nothing the caller passed must outlive the option.
struct BackendOption {
  std::string key;
  std::variant<bool, int64_t, std::string> value;

  friend bool operator==(const BackendOption&, const BackendOption&) = default;
};

/// "bool", "int" or "string".
std::string_view option_type_name(const BackendOption& option);
/// The value as text: "true", "4", "\"prefer_gpu\"".
std::string option_value_string(const BackendOption& option);

/// A list of options for one backend, filled with `set_option` and handed to a
/// LoadBackendOptionsMap through `view()`. `N` is the capacity (kept for source compatibility
/// with fixed-size peers); setting more than `N` distinct keys fails. Setting a key again
/// replaces its value. Keys and string values are copied. Thread-safety: not synchronized.
template <size_t N>
class BackendOptions {
 public:
  Status set_option(std::string_view key, bool value) { return set(key, value); }
  Status set_option(std::string_view key, const char* value) {
    return set(key, std::string(value));
  }
  Status set_option(std::string_view key, std::string_view value) {
    return set(key, std::string(value));
  }
  Status set_option(std::string_view key, const std::string& value) { return set(key, value); }
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  Status set_option(std::string_view key, T value) {
    return set(key, static_cast<int64_t>(value));
  }

  /// The options set so far, valid until the next `set_option` or the object's destruction.
  Span<const BackendOption> view() const { return options_; }
  size_t size() const { return options_.size(); }

 private:
  Status set(std::string_view key, std::variant<bool, int64_t, std::string> value) {
    if (key.empty()) {
      return Status(Error::InvalidArgument, "set option: key is empty (expected a name)");
    }
    for (auto& option : options_) {
      if (option.key == key) {
        option.value = std::move(value);
        return Status();
      }
    }
    if (options_.size() >= N) {
      return Status(Error::InvalidArgument, "set option '" + std::string(key) + "': " +
                                                std::to_string(N) + " options already set " +
                                                "(expected at most the capacity " +
                                                std::to_string(N) + ")");
    }
    options_.push_back(BackendOption{std::string(key), std::move(value)});
    return Status();
  }

  std::vector<BackendOption> options_;
};

namespace detail {
template <typename T>
struct OptionTypeName;
template <> struct OptionTypeName<bool> { static constexpr std::string_view value = "bool"; };
template <> struct OptionTypeName<int64_t> { static constexpr std::string_view value = "int"; };
template <> struct OptionTypeName<std::string> {
  static constexpr std::string_view value = "string";
};
}  // namespace detail

/// Reads option `key` as `T` (bool, int64_t or std::string): an empty optional when absent,
/// the value when present with type T, InvalidType naming the key and both types otherwise.
template <typename T>
Result<std::optional<T>> get_option(Span<const BackendOption> options, std::string_view key) {
  for (const auto& option : options) {
    if (option.key != key) continue;
    if (const T* value = std::get_if<T>(&option.value)) return std::optional<T>(*value);
    return Status(Error::InvalidType, "read option '" + std::string(key) + "': value " +
                                          option_value_string(option) + " is a " +
                                          std::string(option_type_name(option)) + " (expected " +
                                          std::string(detail::OptionTypeName<T>::value) + ")");
  }
  return std::optional<T>();
}

}  // namespace kiln::runtime
