#include <kiln/backends/kiln/kiln_backend.h>

#include <kiln/backends/kiln/manifest.h>
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
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

namespace kiln::backends {

using runtime::Error;
using runtime::Result;
using runtime::ScalarType;
using runtime::Status;
using runtime::Tensor;
using Shapes = std::vector<std::vector<int64_t>>;

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
  std::vector<ScalarType> input_dtypes;
  std::vector<std::optional<size_t>> input_ranks;  // empty when the IR does not know the rank
  std::vector<ScalarType> output_dtypes;

  std::mutex mutex;  // one execution at a time: sessions and the argument vectors below
  std::optional<Shapes> static_shapes;
  std::map<Shapes, engine::Session> sessions;
  Shapes shapes;
  std::vector<const Tensor*> input_tensors;
  std::vector<Tensor*> output_tensors;
};

std::string where(const runtime::BackendInitContext& context) {
  return "init delegate '" + context.delegate_id() + "' of method '" + context.method_name() + "'";
}

Result<KilnBackendConfig> read_config(const runtime::BackendInitContext& context) {
  KilnBackendConfig config;
  config.cache_dir = default_cache_dir();
  config.num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
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
  auto view = engine::package::PackageView::open(runtime::Span<const uint8_t>(bytes, size));
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

// Checks the manifest against the package's function and records the argument types.
Status check_function(KilnDelegate& delegate) {
  const engine::ir::Model& model = delegate.package->model();
  const std::string& name = delegate.manifest.function;
  const engine::ir::Graph* graph = model.find_function(name);
  if (graph == nullptr) {
    std::vector<std::string> names;
    for (const auto& g : model.functions) names.push_back(g.name);
    return Status(Error::InvalidArgument, "manifest field 'function' is '" + name +
                                              "', which package '" + delegate.manifest.package +
                                              "' does not hold (functions: " + join(names) + ")");
  }
  std::vector<std::string> inputs, outputs;
  bool all_static = true;
  Shapes static_shapes;
  for (int index : graph->inputs) {
    const auto& value = graph->values[static_cast<size_t>(index)];
    inputs.push_back(value.name);
    delegate.input_dtypes.push_back(value.type.dtype);
    delegate.input_ranks.push_back(value.type.rank_known ? std::optional(value.type.shape.size())
                                                         : std::nullopt);
    auto sizes = value.type.static_sizes();
    all_static = all_static && sizes.has_value();
    if (sizes) static_shapes.push_back(*sizes);
  }
  for (int index : graph->outputs) {
    const auto& value = graph->values[static_cast<size_t>(index)];
    outputs.push_back(value.name);
    delegate.output_dtypes.push_back(value.type.dtype);
  }
  KILN_RETURN_IF_ERROR(check_names("input_names", delegate.manifest.input_names, inputs, name));
  KILN_RETURN_IF_ERROR(check_names("output_names", delegate.manifest.output_names, outputs, name));
  if (all_static) delegate.static_shapes = std::move(static_shapes);
  return Status();
}

std::mutex counters_mutex;
KilnLoadCounters counters;

void count_load(const engine::LoadReport& report) {
  std::lock_guard<std::mutex> lock(counters_mutex);
  if (report.cache == "hit") ++counters.cache_hits;
  if (report.cache == "miss") ++counters.cache_misses;
  if (report.cache == "off") ++counters.uncached;
  for (const std::string& warning : report.warnings) {
    ++counters.warnings;
    counters.recent_warnings.push_back(warning);
    if (counters.recent_warnings.size() > 16) {
      counters.recent_warnings.erase(counters.recent_warnings.begin());
    }
  }
}

Status load_model(KilnDelegate& delegate) {
  KILN_ASSIGN_OR_RETURN(
      auto options, engine::specialization::SpecializationOptions::from_compute_unit(
                        delegate.config.compute_unit, delegate.config.expect_frequent_reshapes));
  engine::compile::CompileOptions compile;
  compile.num_threads = delegate.config.num_threads;
  engine::cache::ModelCache cache(delegate.config.cache_dir);
  auto load = [&]() -> Result<std::shared_ptr<engine::LoadedModel>> {
    KILN_ASSIGN_OR_RETURN(auto model,
                          engine::ModelLoader::load(*delegate.package, options, &cache, compile));
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
  if (delegate.static_shapes) {
    KILN_ASSIGN_OR_RETURN(engine::Session session, delegate.model->bind(delegate.manifest.function,
                                                                        *delegate.static_shapes));
    delegate.sessions.emplace(*delegate.static_shapes, std::move(session));
  }
  return Status();
}

std::string shapes_to_string(const Shapes& shapes) {
  std::string out;
  for (const auto& s : shapes) out += (out.empty() ? "" : ", ") + runtime::shape_to_string(s);
  return "(" + out + ")";
}

Status check_arguments(KilnDelegate& d, runtime::Span<runtime::EValue* const> inputs,
                       runtime::Span<runtime::EValue* const> outputs) {
  const Manifest& m = d.manifest;
  if (inputs.size() != m.input_names.size() || outputs.size() != m.output_names.size()) {
    return Status(Error::InvalidArgument,
                  "execute function '" + m.function + "': got " + std::to_string(inputs.size()) +
                      " inputs and " + std::to_string(outputs.size()) + " outputs (expected " +
                      std::to_string(m.input_names.size()) + " and " +
                      std::to_string(m.output_names.size()) + ")");
  }
  d.shapes.resize(inputs.size());
  d.input_tensors.resize(inputs.size());
  d.output_tensors.resize(outputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string name = "execute function '" + m.function + "': input '" + m.input_names[i] + "'";
    if (!inputs[i]->is_tensor()) {
      return Status(
          Error::InvalidArgument,
          name + " is " + std::string(to_string(inputs[i]->tag())) + " (expected a tensor)");
    }
    const Tensor& t = inputs[i]->to_tensor();
    if (t.dtype() != d.input_dtypes[i]) {
      return Status(Error::InvalidArgument, name + " has dtype " +
                                                std::string(to_string(t.dtype())) + " (expected " +
                                                std::string(to_string(d.input_dtypes[i])) + ")");
    }
    if (d.input_ranks[i] && static_cast<size_t>(t.dim()) != *d.input_ranks[i]) {
      return Status(Error::InvalidArgument, name + " has rank " + std::to_string(t.dim()) +
                                                " (expected " + std::to_string(*d.input_ranks[i]) +
                                                ")");
    }
    d.shapes[i].assign(t.sizes().begin(), t.sizes().end());
    d.input_tensors[i] = &t;
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::string name = "execute function '" + m.function + "': output '" + m.output_names[i] + "'";
    if (!outputs[i]->is_tensor() || outputs[i]->to_tensor().dtype() != d.output_dtypes[i]) {
      return Status(Error::InvalidArgument, name + " is not a tensor of dtype " +
                                                std::string(to_string(d.output_dtypes[i])));
    }
    d.output_tensors[i] = &outputs[i]->to_tensor();
  }
  return Status();
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
  };
}

Result<runtime::DelegateHandle*> KilnBackend::init(
    runtime::BackendInitContext& context, runtime::FreeableBuffer* processed,
    runtime::Span<const runtime::CompileSpec> /*compile_specs: none defined yet*/) const {
  std::string at = where(context);
  // The executor validates options routed through a LoadBackendOptionsMap; a context made
  // elsewhere must not bypass the checks.
  auto specs = option_specs();
  KILN_RETURN_IF_ERROR(
      runtime::validate_options(kKilnBackendId, specs, context.options()).with_context(at));
  auto delegate = std::make_unique<KilnDelegate>();
  auto config = read_config(context);
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
  KILN_RETURN_IF_ERROR(check_function(*delegate).with_context(at));
  KILN_RETURN_IF_ERROR(load_model(*delegate).with_context(at));
  return static_cast<runtime::DelegateHandle*>(delegate.release());
}

runtime::Status KilnBackend::execute(runtime::BackendExecutionContext& context,
                                     runtime::DelegateHandle* handle,
                                     runtime::Span<runtime::EValue* const> inputs,
                                     runtime::Span<runtime::EValue* const> outputs) const {
  auto& d = *static_cast<KilnDelegate*>(handle);
  std::lock_guard<std::mutex> lock(d.mutex);
  KILN_RETURN_IF_ERROR(check_arguments(d, inputs, outputs));
  auto it = d.sessions.find(d.shapes);
  if (it == d.sessions.end()) {
    if (d.static_shapes) {
      return Status(Error::InvalidArgument, "execute function '" + d.manifest.function +
                                                "': input shapes " + shapes_to_string(d.shapes) +
                                                " (expected " + shapes_to_string(*d.static_shapes) +
                                                ")");
    }
    auto session = d.model->bind(d.manifest.function, d.shapes);
    if (!session.ok()) {
      return session.status().with_context("bind function '" + d.manifest.function +
                                           "' to input shapes " + shapes_to_string(d.shapes));
    }
    it = d.sessions.emplace(d.shapes, std::move(session).get()).first;
  }
  return it->second.run(d.input_tensors, d.output_tensors,
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

const engine::LoadedModel* KilnBackend::model_of(const runtime::DelegateHandle* handle) {
  return static_cast<const KilnDelegate*>(handle)->model.get();
}

namespace {
const runtime::BackendRegistration kRegistration(kKilnBackendId, std::make_shared<KilnBackend>());
}  // namespace

}  // namespace kiln::backends
