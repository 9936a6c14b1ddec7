// Writes the seed corpus of the program fuzzer: one valid .kiln file per program of
// tests/program_corpus.h (kernels, constants, several methods, delegates with named data,
// bounded inputs, ...).
//
// Usage: make_program_seeds OUTDIR

#include <tests/program_corpus.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " OUTDIR\n";
    return 2;
  }
  const std::filesystem::path outdir = argv[1];
  std::error_code ec;
  std::filesystem::create_directories(outdir, ec);
  if (ec) {
    std::cerr << "create directory '" << outdir.string() << "': " << ec.message() << "\n";
    return 1;
  }
  auto corpus = kiln::tests::make_program_corpus();
  if (!corpus.ok()) {
    std::cerr << corpus.status() << "\n";
    return 1;
  }
  for (const auto& program : *corpus) {
    const auto path = outdir / (program.name + ".kiln");
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(program.bytes.data()),
              static_cast<std::streamsize>(program.bytes.size()));
    if (!out) {
      std::cerr << "write seed '" << path.string() << "': failed\n";
      return 1;
    }
  }
  std::cout << "wrote " << corpus->size() << " seed programs to " << outdir.string() << "\n";
  return 0;
}
