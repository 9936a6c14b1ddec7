#pragma once

#include <kiln/runtime/executor/method.h>

#include <memory>
#include <string>
#include <vector>

namespace kiln::runtime {

struct Method::Instruction {
  bool is_delegate = false;
  std::string name;  // op, or delegate id
  KernelFunction kernel = nullptr;
  size_t delegate = 0;
  std::vector<EValue*> inputs;
  std::vector<EValue*> outputs;
  Attributes attributes;
  std::unique_ptr<KernelContext> context;
};

struct Method::Delegate {
  std::string id;
  std::string backend_id;
  std::shared_ptr<BackendInterface> backend;
  DelegateHandle* handle = nullptr;
};

}  // namespace kiln::runtime
