// Subcommands of DESIGN.md §8 that later issues build. They are registered now so `kiln
// --help` shows the whole tool, and fail clearly instead of being unknown.

#include <tools/kiln/commands.h>

#include <string>

namespace kiln::tools {

namespace {

Command planned(CLI::App& root, const std::string& name, const std::string& description) {
  CLI::App* app = root.add_subcommand(name, description + " (not implemented yet)");
  // Accept the arguments the finished command will take, so the message below is what users see.
  app->allow_extras();
  app->prefix_command();
  return Command{app, [name] {
                   return runtime::Status(runtime::Error::NotImplemented,
                                          "'kiln " + name + "' is not implemented yet");
                 }};
}

}  // namespace

std::vector<Command> add_planned_commands(CLI::App& root) {
  return {
      planned(root, "cache", "List, show stats of, evict or purge compiled specializations"),
      planned(root, "devices", "List the compute units found on this machine"),
  };
}

}  // namespace kiln::tools
