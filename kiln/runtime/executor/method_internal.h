#pragma once

#include <kiln/runtime/executor/method.h>

#include <memory>
#include <string>
#include <vector>

namespace kiln::runtime {

struct Method::Instruction {
  enum class Kind { Kernel, Delegate, JumpFalse, Move };
  Kind kind = Kind::Kernel;
  std::string name;  // op, delegate id, "jump" or "move"
  KernelFunction kernel = nullptr;
  size_t delegate = 0;
  size_t destination = 0;  // JumpFalse: where to continue when the condition is false
  std::vector<EValue*> inputs;   // JumpFalse: the condition; Move: the source
  std::vector<EValue*> outputs;  // Move: the destination
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
