// `kiln devices [--json]`: the compute units the engine finds on this machine
// (engine::specialization::available_devices), and the CPU feature string and engine version
// of cache keys.

#include <kiln/engine/loader/model_loader.h>
#include <kiln/engine/specialization/devices.h>
#include <tools/kiln/commands.h>

#include <nlohmann/json.hpp>

#include <iostream>
#include <memory>
#include <string>

namespace kiln::tools {

namespace {

using json = nlohmann::ordered_json;
namespace specialization = engine::specialization;

runtime::Status print_devices(bool as_json) {
  const auto devices = specialization::available_devices();
  const std::string features = specialization::cpu_features();
  const std::string engine = engine::engine_version();
  if (as_json) {
    json doc = {{"devices", json::array()}, {"cpu_features", features}, {"engine_version", engine}};
    for (const auto& device : devices) {
      doc["devices"].push_back({{"name", device.name},
                                {"kind", std::string(specialization::to_string(device.kind))},
                                {"cores", device.num_cores},
                                {"features", device.features}});
    }
    std::cout << doc.dump(2) << "\n";
    return runtime::Status();
  }
  for (const auto& device : devices) {
    std::string list;
    for (const auto& feature : device.features) list += (list.empty() ? "" : " ") + feature;
    std::cout << specialization::to_string(device.kind) << "  " << device.name << "\n"
              << "  cores     " << device.num_cores << "\n"
              << "  features  " << (list.empty() ? "none" : list) << "\n";
  }
  std::cout << "cpu features (cache key): " << features << "\n"
            << "engine (cache key):       " << engine << "\n";
  return runtime::Status();
}

}  // namespace

Command add_devices_command(CLI::App& root) {
  auto as_json = std::make_shared<bool>(false);
  CLI::App* app = root.add_subcommand("devices", "List the compute units found on this machine");
  app->add_flag("--json", *as_json, "Print one JSON object instead of text");
  return Command{app, [as_json] { return print_devices(*as_json); }};
}

}  // namespace kiln::tools
