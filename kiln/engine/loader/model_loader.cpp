#include <kiln/engine/loader/model_loader.h>

#include <kiln/engine/package/package.h>

namespace kiln::engine {

using runtime::Error;
using runtime::Result;
using runtime::Status;

Result<Session> LoadedModel::bind(std::string_view function,
                                  const std::vector<std::vector<int64_t>>& input_sizes) {
  Key key{std::string(function), input_sizes};
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = compiled_.find(key);
  if (it == compiled_.end()) {
    KILN_ASSIGN_OR_RETURN(auto compiled,
                          compile::specialize(model_, function, input_sizes, options_, compile_));
    it = compiled_.emplace(std::move(key), std::move(compiled)).first;
  }
  return Session(shared_from_this(), it->second);
}

std::vector<FunctionPlacement> LoadedModel::placement() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<FunctionPlacement> report;
  for (const auto& [key, function] : compiled_) {
    report.push_back(FunctionPlacement{key.first, key.second, function->placement()});
  }
  return report;
}

std::vector<std::string> LoadedModel::function_names() const {
  std::vector<std::string> names;
  for (const auto& graph : model_.functions) names.push_back(graph.name);
  return names;
}

Result<std::shared_ptr<LoadedModel>> ModelLoader::load(
    const ir::Model& model, const specialization::SpecializationOptions& options,
    cache::ModelCache* /*cache: not consulted until compiled functions are serialized*/,
    const compile::CompileOptions& compile) {
  if (!options.allows(specialization::ComputeKind::Cpu)) {
    return Status(Error::NotSupported,
                  "load model: options '" + options.identifier() +
                      "' do not allow the CPU (expected units to include cpu, the only kind "
                      "this engine places work on)");
  }
  std::shared_ptr<LoadedModel> loaded(new LoadedModel(model, options, compile));
  for (const ir::Graph& graph : model.functions) {
    std::vector<std::vector<int64_t>> sizes;
    bool is_static = true;
    for (int input : graph.inputs) {
      auto s = graph.values[static_cast<size_t>(input)].type.static_sizes();
      is_static = is_static && s.has_value();
      if (s) sizes.push_back(*s);
    }
    if (!is_static) continue;
    Result<Session> session = loaded->bind(graph.name, sizes);
    if (!session.ok()) return session.status().with_context("load model");
  }
  return loaded;
}

Result<std::shared_ptr<LoadedModel>> ModelLoader::load(
    const package::PackageView& package, const specialization::SpecializationOptions& options,
    cache::ModelCache* cache, const compile::CompileOptions& compile) {
  compile::CompileOptions with_weights = compile;
  with_weights.weight_data.clear();
  for (size_t i = 0; i < package.num_weights(); ++i) {
    with_weights.weight_data.push_back(package.weight_data(i));
  }
  return load(package.model(), options, cache, with_weights);
}

}  // namespace kiln::engine
