#pragma once

#include <kiln/runtime/backend/options.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::runtime {

enum class OptionType : uint8_t { Bool, Int, String };

std::string_view to_string(OptionType type);

/// One option a backend accepts: its key, type, and the values allowed. Backends document each
/// option's effect, trade-off, when it applies and its default in their own headers; `help`
/// is a one-line summary shown by tools.
struct OptionSpec {
  std::string key;
  OptionType type = OptionType::Bool;
  std::string help;
  /// For String options: the accepted values; empty means any string.
  std::vector<std::string> choices;
  /// For Int options: the accepted inclusive range.
  int64_t min = INT64_MIN;
  int64_t max = INT64_MAX;
};

/// Checks `options` against `specs` for backend `backend_id`. Errors (InvalidArgument), each
/// naming the backend, the key, the value given and what is accepted:
///   unknown key (with "did you mean 'x'?" when a key is one or two edits away),
///   wrong type, a string not among `choices`, an int outside [min, max].
Status validate_options(std::string_view backend_id, Span<const OptionSpec> specs,
                        Span<const BackendOption> options);

/// The candidate closest to `word` by edit distance when it is at most `max_distance` edits
/// away (ties: the first), else nothing. Used for did-you-mean hints.
std::optional<std::string> closest_match(std::string_view word,
                                         Span<const std::string> candidates,
                                         size_t max_distance = 2);

}  // namespace kiln::runtime
