// `kiln bench`: the flags and the printing; the measurement is `run_bench` (bench.h).

#include <tools/kiln/bench.h>
#include <tools/kiln/commands.h>

#include <iostream>
#include <memory>

namespace kiln::tools {

Command add_bench_command(CLI::App& root) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* app = root.add_subcommand(
      "bench", "Measure load time, first run and latency statistics of a method");
  add_bench_flags(*app, *args);
  return Command{app, [args]() -> runtime::Status {
                   KILN_ASSIGN_OR_RETURN(BenchReport report, run_bench(*args));
                   if (args->json) {
                     std::cout << bench_json(report).dump(2) << "\n";
                   } else {
                     std::cout << bench_text(report);
                   }
                   return runtime::Status();
                 }};
}

}  // namespace kiln::tools
