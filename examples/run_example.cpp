// kiln_run_example PROGRAM.kiln: the Module API in a few lines. Loads the program, runs
// "forward" on a [1, 16] input of 0.5s and prints the class probabilities and the winner.
// Made for the program of kiln_make_example; any program whose forward takes one f32 [1, 16]
// tensor works.

#include <kiln/extension/module/module.h>
#include <kiln/extension/module/tensor_ptr.h>

#include <iostream>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: kiln_run_example PROGRAM.kiln\n";
    return 1;
  }
  kiln::extension::Module module(argv[1]);  // nothing is read yet

  auto x = kiln::extension::make_tensor_ptr({1, 16}, std::vector<float>(16, 0.5f));
  if (!x.ok()) {
    std::cerr << "error: " << x.status() << "\n";
    return 1;
  }
  // Loads the program and the method on first use; the input tensor is copied in.
  auto outputs = module.forward({kiln::runtime::EValue(**x)});
  if (!outputs.ok()) {
    std::cerr << "error: " << outputs.status() << "\n";
    return 1;
  }
  // Outputs alias the method's memory until the next run: read (or clone) them now.
  const kiln::runtime::Tensor& probs = (*outputs)[0].to_tensor();
  if (probs.dtype() != kiln::runtime::ScalarType::Float32) {
    std::cerr << "error: output 0 is not f32\n";
    return 1;
  }
  int64_t best = 0;
  for (int64_t i = 0; i < probs.numel(); ++i) {
    std::cout << "class " << i << ": " << probs.data_ptr<float>()[i] << "\n";
    if (probs.data_ptr<float>()[i] > probs.data_ptr<float>()[best]) best = i;
  }
  std::cout << "predicted class: " << best << "\n";
  return 0;
}
