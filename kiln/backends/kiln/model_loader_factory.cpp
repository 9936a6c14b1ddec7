#include <kiln/backends/kiln/model_loader_factory.h>

#include <kiln/engine/cache/model_cache.h>

#include <mutex>
#include <utility>

namespace kiln::backends {

namespace {

std::mutex factory_mutex;
ModelLoaderFactory& factory() {
  static ModelLoaderFactory instance;  // empty: the default loader
  return instance;
}

}  // namespace

runtime::Result<std::shared_ptr<engine::LoadedModel>> default_model_loader(
    const ModelLoadRequest& request) {
  // ModelCache treats an empty directory as "off"; ModelLoader still reports it as such.
  engine::cache::ModelCache cache(request.cache_dir);
  // A cold load returns once specialized; the artifact is written meanwhile.
  engine::compile::CompileOptions compile = request.compile;
  compile.store_in_background = true;
  return engine::ModelLoader::load(request.package, request.options, &cache, compile);
}

void set_model_loader_factory(ModelLoaderFactory replacement) {
  std::lock_guard<std::mutex> lock(factory_mutex);
  factory() = std::move(replacement);
}

void reset_model_loader_factory() { set_model_loader_factory({}); }

runtime::Result<std::shared_ptr<engine::LoadedModel>> load_through_factory(
    const ModelLoadRequest& request) {
  ModelLoaderFactory current;
  {
    std::lock_guard<std::mutex> lock(factory_mutex);
    current = factory();
  }
  if (!current) return default_model_loader(request);
  KILN_ASSIGN_OR_RETURN(auto model, current(request));
  if (model == nullptr) {
    return runtime::Status(runtime::Error::Internal,
                           "load model: the model loader factory returned no model "
                           "(expected a loaded model or an error)");
  }
  return model;
}

}  // namespace kiln::backends
