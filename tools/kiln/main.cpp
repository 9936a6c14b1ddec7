// The `kiln` command line: one subcommand per file (see commands.h). Errors go to stderr with a
// non-zero exit code; nothing thrown inside escapes main.

#include <kiln/runtime/core/error.h>
#include <tools/kiln/commands.h>

#include <exception>
#include <iostream>
#include <string>
#include <vector>

namespace {

using kiln::runtime::Error;
using kiln::runtime::Status;
using kiln::tools::Command;

// CLI11 says only "A subcommand is required" for a misspelt subcommand; name it instead.
bool check_subcommand(int argc, char** argv, const std::vector<Command>& commands) {
  if (argc < 2 || argv[1][0] == '-') return true;
  std::string names;
  for (const Command& command : commands) {
    if (command.app->get_name() == argv[1]) return true;
    names += (names.empty() ? "" : ", ") + command.app->get_name();
  }
  std::cerr << "kiln: error: unknown subcommand '" << argv[1] << "' (expected one of " << names
            << "; see kiln --help)\n";
  return false;
}

int run_main(int argc, char** argv) {
  CLI::App app{"kiln: run and inspect .kiln programs (an on-device inference runtime)", "kiln"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kiln 0.1.0");

  std::vector<Command> commands;
  commands.push_back(kiln::tools::add_export_command(app));
  commands.push_back(kiln::tools::add_run_command(app));
  commands.push_back(kiln::tools::add_bench_command(app));
  commands.push_back(kiln::tools::add_inspect_command(app));
  commands.push_back(kiln::tools::add_conformance_command(app));
  commands.push_back(kiln::tools::add_cache_command(app));
  commands.push_back(kiln::tools::add_devices_command(app));
  if (!check_subcommand(argc, argv, commands)) return 1;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  for (const Command& command : commands) {
    if (!command.app->parsed()) continue;
    const Status status = command.run();
    if (status.ok()) return 0;
    std::cerr << "kiln " << command.app->get_name() << ": error: " << status.message() << " ["
              << kiln::runtime::to_string(status.code()) << "]\n";
    return status.code() == Error::NotImplemented ? 2 : 1;
  }
  std::cerr << "kiln: error: no subcommand given (see kiln --help)\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run_main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "kiln: error: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "kiln: error: unknown exception\n";
  }
  return 1;
}
