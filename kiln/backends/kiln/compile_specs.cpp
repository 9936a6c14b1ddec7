#include <kiln/backends/kiln/compile_specs.h>

#include <kiln/engine/cache/model_cache.h>
#include <kiln/engine/loader/model_loader.h>
#include <kiln/runtime/backend/option_schema.h>

#include <cstdio>
#include <vector>

namespace kiln::backends {

using runtime::Error;
using runtime::Result;
using runtime::Status;

namespace {

// A spec value for messages: printable ASCII as is, other bytes as \xNN, at most 64 bytes.
std::string printable(const std::vector<uint8_t>& value) {
  std::string out;
  for (size_t i = 0; i < value.size() && i < 64; ++i) {
    const uint8_t c = value[i];
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      out += escaped;
    }
  }
  if (value.size() > 64) out += "... (" + std::to_string(value.size()) + " bytes)";
  return out;
}

Status bad_spec(const std::string& key, const std::string& problem) {
  return Status(Error::InvalidArgument, "compile spec '" + key + "' " + problem);
}

}  // namespace

Result<KilnCompileSpecs> parse_compile_specs(runtime::Span<const runtime::CompileSpec> specs) {
  const std::vector<std::string> known = {std::string(kExpectFrequentReshapesSpec),
                                          std::string(kAotArtifactSpec)};
  KilnCompileSpecs parsed;
  std::vector<std::string> seen;
  for (const runtime::CompileSpec& spec : specs) {
    for (const std::string& key : seen) {
      if (key == spec.key) return bad_spec(spec.key, "is given twice (expected at most once)");
    }
    seen.push_back(spec.key);
    const std::string value(spec.value.begin(), spec.value.end());
    if (spec.key == kExpectFrequentReshapesSpec) {
      if (value != "true" && value != "false") {
        return bad_spec(spec.key,
                        "has value '" + printable(spec.value) + "' (expected 'true' or 'false')");
      }
      parsed.expect_frequent_reshapes = value == "true";
    } else if (spec.key == kAotArtifactSpec) {
      if (value.empty()) return bad_spec(spec.key, "is empty (expected a named-data key)");
      parsed.aot_artifact = value;
    } else {
      auto hint = runtime::closest_match(spec.key, known);
      return bad_spec(spec.key,
                      "is unknown (expected one of 'expect_frequent_reshapes', "
                      "'aot_artifact')" +
                          (hint ? "; did you mean '" + *hint + "'?" : std::string()));
    }
  }
  return parsed;
}

AotInstallResult install_aot_artifact(const std::string& name,
                                      runtime::Span<const uint8_t> artifact,
                                      const engine::package::PackageView& package,
                                      const engine::specialization::SpecializationOptions& options,
                                      const engine::compile::CompileOptions& compile,
                                      const std::string& cache_dir) {
  const std::string not_used = "embedded compiled artifact '" + name + "' not used: ";
  const std::string compiling = " (the model is compiled instead)";
  if (cache_dir.empty()) {
    return {false, not_used + "cache_dir is empty (no persistence to install it into)" + compiling};
  }
  auto key = engine::ModelLoader::cache_key(package, options, compile);
  if (!key.ok()) return {false, not_used + key.status().message() + compiling};
  engine::cache::ModelCache cache(cache_dir);
  if (cache.contains(*key)) return {};
  Status stored = cache.store_entry(*key, artifact);
  if (!stored.ok()) {
    return {false, not_used + stored.message() + "; this load needs specialization '" +
                       key->specialization + "', engine '" + key->engine_version +
                       "' and CPU features '" + key->cpu_features + "'" + compiling};
  }
  if (cache.stats().stores == 0) {
    auto warnings = cache.warnings();
    return {false,
            not_used +
                (warnings.empty() ? std::string("the cache did not store it") : warnings.back()) +
                compiling};
  }
  return {true, ""};
}

}  // namespace kiln::backends
