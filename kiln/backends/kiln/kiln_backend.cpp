#include <kiln/backends/kiln/kiln_backend.h>

#include <kiln/backends/kiln/compile_specs.h>
#include <kiln/backends/kiln/dispatch.h>
#include <kiln/backends/kiln/manifest.h>
#include <kiln/backends/kiln/model_loader_factory.h>
#include <kiln/backends/kiln/shared_models.h>
#include <kiln/engine/cache/default_dir.h>
#include <kiln/engine/cache/model_cache.h>
#include <kiln/engine/loader/model_loader.h>
#include <kiln/engine/package/package.h>
#include <kiln/engine/specialization/specialization_options.h>
#include <kiln/runtime/backend/registry.h>
#include <kiln/runtime/core/aligned_buffer.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

namespace kiln::backends {

using runtime::Error;
using runtime::Result;
using runtime::ScalarType;
using runtime::Status;

namespace {

constexpr int64_t kMaxThreads = 1024;

// One delegate. Members are destroyed in reverse order: sessions and the loaded model (which
// reference the package's model and weights) go before the package view and its bytes. With
// share_multifunction_model the package moves into the SharedModel that `model` keeps alive
// (package_bytes, package_copy and package are then empty).
struct KilnDelegate {
  KilnBackendConfig config;
  Manifest manifest;
  runtime::FreeableBuffer package_bytes;
  runtime::AlignedBuffer package_copy;  // only when the named data is not 8-byte aligned
  std::unique_ptr<engine::package::PackageView> package;
  std::shared_ptr<engine::LoadedModel> model;
  ArgumentTypes types;
  std::string subject;  // "execute function 'main'", the start of execute's messages
  // The (function, shapes) pairs bound at init: the manifest's enumerated functions, or its
  // function when all its inputs are static. Empty: bind the function on demand per shape.
  std::vector<std::pair<std::string, Shapes>> to_bind;
  // The function when its inputs are symbolic (bound per shape on demand): with
  // expect_frequent_reshapes its shape-generic plan is built at init.
  std::string symbolic_function;

  std::mutex mutex;  // one execution at a time: sessions and the call's arguments
  SessionTable sessions;
  CallArguments call;
};

std::string where(const runtime::BackendInitContext& context) {
  return "init delegate '" + context.delegate_id() + "' of method '" + context.method_name() + "'";
}

// Defaults, then the compile specs (export-time defaults), then the load-time options.
Result<KilnBackendConfig> read_config(const runtime::BackendInitContext& context,
                                      const KilnCompileSpecs& specs) {
  KilnBackendConfig config;
  config.cache_dir = default_cache_dir();
  config.num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  config.expect_frequent_reshapes = specs.expect_frequent_reshapes.value_or(false);
  config.aot_artifact = specs.aot_artifact;
  KILN_ASSIGN_OR_RETURN(auto unit, context.get_option<std::string>(kComputeUnitKey));
  if (unit) config.compute_unit = *unit;
  KILN_ASSIGN_OR_RETURN(auto reshapes, context.get_option<bool>(kExpectFrequentReshapesKey));
  if (reshapes) config.expect_frequent_reshapes = *reshapes;
  KILN_ASSIGN_OR_RETURN(auto share, context.get_option<bool>(kShareMultifunctionModelKey));
  if (share) config.share_multifunction_model = *share;
  KILN_ASSIGN_OR_RETURN(auto cache_dir, context.get_option<std::string>(kCacheDirKey));
  if (cache_dir) config.cache_dir = *cache_dir;
  KILN_ASSIGN_OR_RETURN(auto threads, context.get_option<int64_t>(kNumThreadsKey));
  if (threads) config.num_threads = static_cast<int>(*threads);
  KILN_ASSIGN_OR_RETURN(auto winograd, context.get_option<bool>(kWinogradKey));
  if (winograd) config.winograd = *winograd;
  return config;
}

// The package bytes from named data, 8-byte aligned (PackageView reads the flatbuffer in place).
Status fetch_package(const runtime::BackendInitContext& context, KilnDelegate& delegate) {
  auto data = context.named_data().get_data(delegate.manifest.package);
  if (!data.ok()) {
    return Status(data.status().code(), "manifest field 'package': " + data.status().message());
  }
  delegate.package_bytes = std::move(data).get();
  const auto* bytes = static_cast<const uint8_t*>(delegate.package_bytes.data());
  size_t size = delegate.package_bytes.size();
  // A shared model may outlive this delegate: bytes without an owner are copied.
  bool borrowed = delegate.config.share_multifunction_model && !delegate.package_bytes.owner();
  if (reinterpret_cast<uintptr_t>(bytes) % 8 != 0 || borrowed) {
    KILN_ASSIGN_OR_RETURN(delegate.package_copy, runtime::allocate_aligned(size));
    std::memcpy(delegate.package_copy.get(), bytes, size);
    bytes = delegate.package_copy.get();
    delegate.package_bytes.free();
  }
  // Weights are checked when first read: a warm load takes the packed ones from the compiled
  // artifact and never touches the package's copies.
  auto view = engine::package::PackageView::open(runtime::Span<const uint8_t>(bytes, size),
                                                 engine::package::WeightCheck::OnFirstUse);
  if (!view.ok()) {
    return view.status().with_context("open model package '" + delegate.manifest.package + "'");
  }
  delegate.package = std::make_unique<engine::package::PackageView>(std::move(view).get());
  return Status();
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "'" : ", '") + name + "'";
  return "[" + out + "]";
}

Status check_names(const std::string& field, const std::vector<std::string>& given,
                   const std::vector<std::string>& expected, const std::string& function) {
  if (given == expected) return Status();
  return Status(Error::InvalidArgument, "manifest field '" + field + "' is " + join(given) +
                                            " (expected " + join(expected) + ", the " +
                                            (field == "input_names" ? "inputs" : "outputs") +
                                            " of function '" + function + "')");
}

// The graph of function `name`, which the manifest's `field` names. Errors: InvalidArgument when
// the package lacks it, listing the functions it holds.
Result<const engine::ir::Graph*> find_function(const KilnDelegate& delegate,
                                               const std::string& name, const std::string& field) {
  const engine::ir::Model& model = delegate.package->model();
  const engine::ir::Graph* graph = model.find_function(name);
  if (graph != nullptr) return graph;
  std::vector<std::string> names;
  for (const auto& g : model.functions) names.push_back(g.name);
  return Status(Error::InvalidArgument, "manifest field '" + field + "' is '" + name +
                                            "', which package '" + delegate.manifest.package +
                                            "' does not hold (functions: " + join(names) + ")");
}

// The argument types of `graph`, after checking its input and output names against the manifest.
Result<ArgumentTypes> types_of(const KilnDelegate& delegate, const engine::ir::Graph& graph) {
  ArgumentTypes types;
  for (int index : graph.inputs) {
    const auto& value = graph.values[static_cast<size_t>(index)];
    types.input_names.push_back(value.name);
    types.input_dtypes.push_back(value.type.dtype);
    types.input_ranks.push_back(value.type.rank_known ? std::optional(value.type.shape.size())
                                                      : std::nullopt);
  }
  for (int index : graph.outputs) {
    const auto& value = graph.values[static_cast<size_t>(index)];
    types.output_names.push_back(value.name);
    types.output_dtypes.push_back(value.type.dtype);
  }
  const Manifest& m = delegate.manifest;
  KILN_RETURN_IF_ERROR(check_names("input_names", m.input_names, types.input_names, graph.name));
  KILN_RETURN_IF_ERROR(check_names("output_names", m.output_names, types.output_names, graph.name));
  return types;
}

// Checks the manifest's function against the package and records the argument types.
Status check_function(KilnDelegate& delegate) {
  const std::string& name = delegate.manifest.function;
  KILN_ASSIGN_OR_RETURN(const engine::ir::Graph* graph, find_function(delegate, name, "function"));
  KILN_ASSIGN_OR_RETURN(delegate.types, types_of(delegate, *graph));
  delegate.subject = "execute function '" + name + "'";
  Shapes static_shapes;
  for (int index : graph->inputs) {
    auto sizes = graph->values[static_cast<size_t>(index)].type.static_sizes();
    if (!sizes) {
      delegate.sessions = SessionTable(/*closed=*/false);
      delegate.symbolic_function = name;
      return Status();
    }
    static_shapes.push_back(std::move(*sizes));
  }
  delegate.to_bind.emplace_back(name, std::move(static_shapes));
  return Status();
}

// Checks that `shapes` (listed for `graph` in the manifest's `field`) fit its input types: the
// rank when known and every static dim.
Status check_shapes(const engine::ir::Graph& graph, const Shapes& shapes,
                    const std::string& field) {
  for (size_t i = 0; i < graph.inputs.size(); ++i) {
    const auto& value = graph.values[static_cast<size_t>(graph.inputs[i])];
    const auto& type = value.type;
    bool fits = !type.rank_known || type.shape.size() == shapes[i].size();
    for (size_t d = 0; fits && type.rank_known && d < shapes[i].size(); ++d) {
      fits = !type.shape[d].is_static() || type.shape[d].value() == shapes[i][d];
    }
    if (!fits) {
      return Status(Error::InvalidArgument, "manifest field '" + field +
                                                ".input_shapes' gives input '" + value.name +
                                                "' of function '" + graph.name + "' the shape " +
                                                runtime::shape_to_string(shapes[i]) +
                                                " (expected " + type.to_string() + ")");
    }
  }
  return Status();
}

Status check_same_dtypes(const std::string& kind, const std::vector<std::string>& names,
                         const std::vector<ScalarType>& got, const std::vector<ScalarType>& want,
                         const std::string& function, const std::string& first) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[i]) continue;
    return Status(Error::InvalidArgument, kind + " '" + names[i] + "' of function '" + function +
                                              "' has dtype " + std::string(to_string(got[i])) +
                                              " (expected " + std::string(to_string(want[i])) +
                                              ", as in function '" + first + "')");
  }
  return Status();
}

// Checks every function of the enumerated manifest against the package (present, with the
// manifest's names, the first function's dtypes, and its listed shapes fitting its inputs) and
// records the argument types; an input's rank is checked only when all listed shapes agree on it.
Status check_enumerated(KilnDelegate& delegate) {
  const auto& functions = delegate.manifest.enumerated_functions;
  std::vector<std::string> names;
  for (const auto& f : functions) names.push_back(f.function);
  delegate.subject = "execute functions " + join(names);
  for (size_t i = 0; i < functions.size(); ++i) {
    const EnumeratedFunction& f = functions[i];
    std::string field = "enumerated_functions[" + std::to_string(i) + "]";
    KILN_ASSIGN_OR_RETURN(const engine::ir::Graph* graph,
                          find_function(delegate, f.function, field + ".function"));
    KILN_ASSIGN_OR_RETURN(ArgumentTypes types, types_of(delegate, *graph));
    KILN_RETURN_IF_ERROR(check_shapes(*graph, f.input_shapes, field));
    for (size_t j = 0; j < f.input_shapes.size(); ++j) {
      types.input_ranks[j] = f.input_shapes[j].size();
    }
    if (i == 0) {
      delegate.types = std::move(types);
    } else {
      ArgumentTypes& first = delegate.types;
      auto context = "manifest field '" + field + ".function'";
      KILN_RETURN_IF_ERROR(check_same_dtypes("input", first.input_names, types.input_dtypes,
                                             first.input_dtypes, f.function, names[0])
                               .with_context(context));
      KILN_RETURN_IF_ERROR(check_same_dtypes("output", first.output_names, types.output_dtypes,
                                             first.output_dtypes, f.function, names[0])
                               .with_context(context));
      for (size_t j = 0; j < types.input_ranks.size(); ++j) {
        if (first.input_ranks[j] != types.input_ranks[j]) first.input_ranks[j] = std::nullopt;
      }
    }
    delegate.to_bind.emplace_back(f.function, f.input_shapes);
  }
  return Status();
}

// Binds one session per entry of `to_bind`. On a failure the caller discards the delegate, and
// with it the sessions bound so far.
//
// A warm load defers building each function to its first use; the first listed function (the
// only one, or the first enumerated shape: the default) is built here, so that a model with one
// function is ready to run when init returns, like a cold load, while the other enumerated
// shapes cost nothing until called (as Core ML prepares enumerated shapes other than the
// default on first use).
Status bind_sessions(KilnDelegate& delegate) {
  if (!delegate.symbolic_function.empty()) {
    // With expect_frequent_reshapes: one shape-generic plan, ready before the first call.
    Status prepared = delegate.model->prepare(delegate.symbolic_function);
    if (!prepared.ok())
      return prepared.with_context("prepare function '" + delegate.symbolic_function + "'");
  }
  bool first = true;
  for (const auto& [function, shapes] : delegate.to_bind) {
    auto session = delegate.model->bind(function, shapes);
    if (!session.ok()) {
      return session.status().with_context("bind function '" + function + "' to input shapes " +
                                           shapes_to_string(shapes));
    }
    if (first) {
      auto built = session->function();
      if (!built.ok()) {
        return built.status().with_context("build function '" + function + "' for input shapes " +
                                           shapes_to_string(shapes));
      }
      first = false;
    }
    delegate.sessions.add(shapes, function, std::move(session).get());
  }
  return Status();
}

std::mutex counters_mutex;
KilnLoadCounters counters;

// Callers hold counters_mutex.
void add_warning(const std::string& warning) {
  ++counters.warnings;
  counters.recent_warnings.push_back(warning);
  if (counters.recent_warnings.size() > 16) {
    counters.recent_warnings.erase(counters.recent_warnings.begin());
  }
}

void count_load(const engine::LoadReport& report) {
  std::lock_guard<std::mutex> lock(counters_mutex);
  if (report.cache == "hit") ++counters.cache_hits;
  if (report.cache == "miss") ++counters.cache_misses;
  if (report.cache == "off") ++counters.uncached;
  for (const std::string& warning : report.warnings) add_warning(warning);
}

// What a delegate's load asks the engine for; the embedded artifact's key is computed from the
// same values, so what it installs is what the load looks up.
struct LoadSettings {
  engine::specialization::SpecializationOptions options;
  engine::compile::CompileOptions compile;
};

Result<LoadSettings> load_settings(const KilnBackendConfig& config) {
  LoadSettings settings;
  KILN_ASSIGN_OR_RETURN(settings.options,
                        engine::specialization::SpecializationOptions::from_compute_unit(
                            config.compute_unit, config.expect_frequent_reshapes));
  settings.compile.num_threads = config.num_threads;
  settings.compile.winograd = config.winograd;
  return settings;
}

// Installs the `aot_artifact` compile spec's artifact into the cache (see compile_specs.h).
// Errors: the named data's (NotFound) when the program lacks the key the spec names.
Status install_embedded_artifact(const runtime::BackendInitContext& context,
                                 const KilnDelegate& delegate) {
  const std::string& name = delegate.config.aot_artifact;
  if (name.empty()) return Status();
  auto data = context.named_data().get_data(name);
  if (!data.ok()) {
    return Status(data.status().code(), "compile spec '" + std::string(kAotArtifactSpec) +
                                            "' names named data '" + name +
                                            "': " + data.status().message());
  }
  KILN_ASSIGN_OR_RETURN(LoadSettings settings, load_settings(delegate.config));
  runtime::Span<const uint8_t> bytes(static_cast<const uint8_t*>(data->data()), data->size());
  AotInstallResult result = install_aot_artifact(name, bytes, *delegate.package, settings.options,
                                                 settings.compile, delegate.config.cache_dir);
  std::lock_guard<std::mutex> lock(counters_mutex);
  if (result.installed) ++counters.aot;
  if (!result.warning.empty()) add_warning(result.warning);
  return Status();
}

Status load_model(KilnDelegate& delegate) {
  KILN_ASSIGN_OR_RETURN(LoadSettings settings, load_settings(delegate.config));
  // bind_sessions builds the first function right after: on a hit, the load builds it while
  // the entry's checksum is verified.
  if (!delegate.to_bind.empty()) settings.compile.build_on_hit = {delegate.to_bind.front().first};
  const engine::specialization::SpecializationOptions& options = settings.options;
  const engine::compile::CompileOptions& compile = settings.compile;
  auto load = [&]() -> Result<std::shared_ptr<engine::LoadedModel>> {
    ModelLoadRequest request{*delegate.package,
                             delegate.config.compute_unit,
                             delegate.config.expect_frequent_reshapes,
                             options,
                             compile,
                             delegate.config.cache_dir};
    KILN_ASSIGN_OR_RETURN(auto model, load_through_factory(request));
    count_load(model->load_report());
    return model;
  };
  if (delegate.config.share_multifunction_model) {
    SharedModelKey key{delegate.package->content_hash(), options.identifier(),
                       delegate.config.cache_dir};
    auto load_shared = [&]() -> Result<std::shared_ptr<SharedModel>> {
      KILN_ASSIGN_OR_RETURN(auto model, load());
      return SharedModel::adopt(std::move(delegate.package_bytes), std::move(delegate.package_copy),
                                std::move(delegate.package), std::move(model));
    };
    KILN_ASSIGN_OR_RETURN(auto shared,
                          SharedModelRegistry::instance().get_or_load(key, load_shared));
    delegate.model = SharedModel::model_of(std::move(shared));
    delegate.package.reset();  // on a shared hit: the shared model holds an equal package
    delegate.package_copy.reset();
    delegate.package_bytes.free();
  } else {
    KILN_ASSIGN_OR_RETURN(delegate.model, load());
  }
  return bind_sessions(delegate);
}

}  // namespace

KilnLoadCounters kiln_load_counters() {
  std::lock_guard<std::mutex> lock(counters_mutex);
  return counters;
}

std::string default_cache_dir() { return engine::cache::default_cache_dir(); }

std::vector<runtime::OptionSpec> KilnBackend::option_specs() const {
  using runtime::OptionType;
  return {
      {std::string(kComputeUnitKey),
       OptionType::String,
       "compute units a specialization may use and the one it prefers (default all)",
       {"all", "cpu_only", "cpu_and_gpu", "prefer_cpu", "prefer_gpu"}},
      {std::string(kExpectFrequentReshapesKey),
       OptionType::Bool,
       "input shapes change between calls: favour shape-generic plans (default false)",
       {}},
      {std::string(kShareMultifunctionModelKey),
       OptionType::Bool,
       "delegates loading the same package and specialization share one model (default false)",
       {}},
      {std::string(kCacheDirKey),
       OptionType::String,
       "where specializations persist; empty: no persistence (default $KILN_CACHE_DIR, "
       "$XDG_CACHE_HOME/kiln or ~/.cache/kiln)",
       {}},
      {std::string(kNumThreadsKey),
       OptionType::Int,
       "intra-op threads (default: the cores available)",
       {},
       1,
       kMaxThreads},
      {std::string(kWinogradKey),
       OptionType::Bool,
       "3x3 stride-1 Convs on Winograd kernels: faster, more rounding (default true)",
       {}},
  };
}

Result<runtime::DelegateHandle*> KilnBackend::init(
    runtime::BackendInitContext& context, runtime::FreeableBuffer* processed,
    runtime::Span<const runtime::CompileSpec> compile_specs) const {
  std::string at = where(context);
  // The executor validates options routed through a LoadBackendOptionsMap; a context made
  // elsewhere must not bypass the checks.
  auto accepted = option_specs();
  KILN_RETURN_IF_ERROR(
      runtime::validate_options(kKilnBackendId, accepted, context.options()).with_context(at));
  auto specs = parse_compile_specs(compile_specs);
  if (!specs.ok()) return specs.status().with_context(at);
  auto delegate = std::make_unique<KilnDelegate>();
  auto config = read_config(context, *specs);
  if (!config.ok()) return config.status().with_context(at);
  delegate->config = std::move(config).get();

  runtime::Span<const uint8_t> blob;
  if (processed != nullptr && processed->data() != nullptr) {
    blob = runtime::Span<const uint8_t>(static_cast<const uint8_t*>(processed->data()),
                                        processed->size());
  }
  auto manifest = parse_manifest(blob);
  if (!manifest.ok()) return manifest.status().with_context(at);
  delegate->manifest = std::move(manifest).get();
  KILN_RETURN_IF_ERROR(fetch_package(context, *delegate).with_context(at));
  KILN_RETURN_IF_ERROR(
      (delegate->manifest.enumerated ? check_enumerated(*delegate) : check_function(*delegate))
          .with_context(at));
  KILN_RETURN_IF_ERROR(install_embedded_artifact(context, *delegate).with_context(at));
  KILN_RETURN_IF_ERROR(load_model(*delegate).with_context(at));
  return static_cast<runtime::DelegateHandle*>(delegate.release());
}

runtime::Status KilnBackend::execute(runtime::BackendExecutionContext& context,
                                     runtime::DelegateHandle* handle,
                                     runtime::Span<runtime::EValue* const> inputs,
                                     runtime::Span<runtime::EValue* const> outputs) const {
  auto& d = *static_cast<KilnDelegate*>(handle);
  std::lock_guard<std::mutex> lock(d.mutex);
  KILN_RETURN_IF_ERROR(check_arguments(d.subject, d.types, inputs, outputs, d.call));
  SessionTable::Entry* entry = d.sessions.find(d.call.shapes);
  if (entry == nullptr) {
    if (d.sessions.closed()) return d.sessions.no_match(d.subject, d.call.shapes);
    auto session = d.model->bind(d.manifest.function, d.call.shapes);
    if (!session.ok()) {
      return session.status().with_context("bind function '" + d.manifest.function +
                                           "' to input shapes " + shapes_to_string(d.call.shapes));
    }
    entry = &d.sessions.add(d.call.shapes, d.manifest.function, std::move(session).get());
  }
  return entry->session.run(d.call.inputs, d.call.outputs,
                            [&](size_t index, runtime::Span<const int64_t> sizes) {
                              return context.resize_output(*outputs[index], sizes);
                            });
}

void KilnBackend::destroy(runtime::DelegateHandle* handle) const {
  delete static_cast<KilnDelegate*>(handle);
}

const KilnBackendConfig& KilnBackend::config_of(const runtime::DelegateHandle* handle) {
  return static_cast<const KilnDelegate*>(handle)->config;
}

std::vector<std::vector<std::vector<int64_t>>> KilnBackend::accepted_input_shapes(
    const runtime::DelegateHandle* handle) {
  return static_cast<const KilnDelegate*>(handle)->sessions.accepted();
}

const engine::LoadedModel* KilnBackend::model_of(const runtime::DelegateHandle* handle) {
  return static_cast<const KilnDelegate*>(handle)->model.get();
}

namespace {
const runtime::BackendRegistration kRegistration(kKilnBackendId, std::make_shared<KilnBackend>());
}  // namespace

}  // namespace kiln::backends
