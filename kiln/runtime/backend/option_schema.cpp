#include <kiln/runtime/backend/option_schema.h>

#include <algorithm>
#include <numeric>

namespace kiln::runtime {

std::string_view to_string(OptionType type) {
  switch (type) {
    case OptionType::Bool: return "bool";
    case OptionType::Int: return "int";
    case OptionType::String: return "string";
  }
  return "invalid";
}

namespace {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), size_t{0});
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      size_t substitute = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      row[j] = std::min({above + 1, row[j - 1] + 1, substitute});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string join_quoted(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    out += "'" + items[i] + "'";
  }
  return out;
}

std::string prefix(std::string_view backend_id, std::string_view key) {
  return "load backend '" + std::string(backend_id) + "': option '" + std::string(key) + "'";
}

Status check_value(std::string_view backend_id, const OptionSpec& spec,
                   const BackendOption& option) {
  OptionType given = option.value.index() == 0   ? OptionType::Bool
                     : option.value.index() == 1 ? OptionType::Int
                                                 : OptionType::String;
  if (given != spec.type) {
    return Status(Error::InvalidArgument,
                  prefix(backend_id, option.key) + " has " + std::string(to_string(given)) +
                      " value " + option_value_string(option) + " (expected " +
                      std::string(to_string(spec.type)) + ")");
  }
  if (spec.type == OptionType::String && !spec.choices.empty()) {
    const auto& value = std::get<std::string>(option.value);
    if (std::find(spec.choices.begin(), spec.choices.end(), value) == spec.choices.end()) {
      std::string hint;
      if (auto near = closest_match(value, spec.choices)) hint = "; did you mean '" + *near + "'?";
      return Status(Error::InvalidArgument, prefix(backend_id, option.key) + " has value " +
                                                option_value_string(option) + " (expected one of " +
                                                join_quoted(spec.choices) + ")" + hint);
    }
  }
  if (spec.type == OptionType::Int) {
    int64_t value = std::get<int64_t>(option.value);
    if (value < spec.min || value > spec.max) {
      std::string range = spec.max == INT64_MAX ? ">= " + std::to_string(spec.min)
                                                : std::to_string(spec.min) + ".." +
                                                      std::to_string(spec.max);
      return Status(Error::InvalidArgument, prefix(backend_id, option.key) + " has value " +
                                                std::to_string(value) + " (expected " + range +
                                                ")");
    }
  }
  return Status();
}

}  // namespace

std::optional<std::string> closest_match(std::string_view word,
                                         Span<const std::string> candidates,
                                         size_t max_distance) {
  std::optional<std::string> best;
  size_t best_distance = max_distance + 1;
  for (const auto& candidate : candidates) {
    size_t distance = edit_distance(word, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  return best;
}

Status validate_options(std::string_view backend_id, Span<const OptionSpec> specs,
                        Span<const BackendOption> options) {
  std::vector<std::string> keys;
  for (const auto& spec : specs) keys.push_back(spec.key);
  for (const auto& option : options) {
    auto spec = std::find_if(specs.begin(), specs.end(),
                             [&](const OptionSpec& s) { return s.key == option.key; });
    if (spec == specs.end()) {
      std::string accepted = keys.empty() ? "no options" : "one of " + join_quoted(keys);
      std::string hint;
      if (auto near = closest_match(option.key, keys)) hint = "; did you mean '" + *near + "'?";
      return Status(Error::InvalidArgument, prefix(backend_id, option.key) + " with value " +
                                                option_value_string(option) +
                                                " is unknown (expected " + accepted + ")" + hint);
    }
    KILN_RETURN_IF_ERROR(check_value(backend_id, *spec, option));
  }
  return Status();
}

}  // namespace kiln::runtime
