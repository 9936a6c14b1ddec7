#pragma once

#include <kiln/runtime/backend/options.h>
#include <kiln/runtime/backend/options_map.h>
#include <kiln/runtime/core/result.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::tools {

/// One `--option BACKEND.KEY=VALUE` argument, parsed.
struct OptionArg {
  std::string backend_id;
  runtime::BackendOption option;
};

/// Parses `BACKEND.KEY=VALUE`. The backend id ends at the first '.', the key at the first '='.
/// The value is typed: `true` / `false` → bool, an optionally signed decimal integer that fits
/// in int64 → int, anything else (including an empty value) → string.
/// Errors: InvalidArgument quoting the argument when the '.' or '=' is missing or the backend
/// id or key is empty.
runtime::Result<OptionArg> parse_option_arg(std::string_view text);

/// Parses every `--option` argument into one map (backend id → options, in argument order).
/// Errors: those of `parse_option_arg`; InvalidArgument when a key is given twice for one
/// backend.
runtime::Result<runtime::LoadBackendOptionsMap> parse_option_args(
    const std::vector<std::string>& args);

/// Parses `NAME=VALUE` (used by `--input NAME=FILE.npy`); the name ends at the first '='.
/// Errors: InvalidArgument quoting the argument and naming `flag` when the '=' is missing or
/// either side is empty.
runtime::Result<std::pair<std::string, std::string>> parse_name_value(std::string_view text,
                                                                      std::string_view flag);

}  // namespace kiln::tools
