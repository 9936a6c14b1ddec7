#pragma once

#include <kiln/runtime/backend/named_data.h>
#include <kiln/runtime/backend/options_map.h>
#include <kiln/runtime/core/data_loader.h>
#include <kiln/runtime/core/result.h>
#include <kiln/runtime/executor/file_format.h>
#include <kiln/runtime/executor/method_meta.h>

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::schema {
struct Program;
}

namespace kiln::runtime {

class Method;

/// A verified .kiln program: its methods, segments and named data. Load methods from it with
/// `load_method`.
///
/// Ownership: the Program shares ownership of its DataLoader; Methods share ownership of the
/// Program, so a Method stays valid after the caller drops the Program.
/// Thread-safety: every const member function may be called concurrently, including
/// `load_method` (delegate inits of one method run in order on the calling thread).
class Program : public std::enable_shared_from_this<Program> {
 public:
  /// Reads and verifies a program: header, flatbuffer (with flatbuffers' verifier), and every
  /// index, offset and size it contains (value and segment indices, arena bounds, dtypes,
  /// shapes). Nothing in the file is trusted before this check. Errors: InvalidProgram naming
  /// what is wrong, with the method and value when there is one; AccessFailed from the loader.
  static Result<std::shared_ptr<Program>> load(std::shared_ptr<DataLoader> loader);

  ~Program();
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  /// Program format version from the header.
  uint32_t format_version() const { return header_.format_version; }
  size_t num_methods() const;
  std::vector<std::string> method_names() const;
  bool has_method(std::string_view name) const;

  /// Inputs, outputs and delegates of method `name`. Errors: NotFound naming the method and
  /// the methods present.
  Result<MethodMeta> method_meta(std::string_view name) const;

  /// Builds method `name`: values, planned memory, kernels (every missing operator reported at
  /// once, OperatorMissing), and one backend `init` per delegate with only the options `options`
  /// registers under that delegate's backend id (none when `options` is null). Options are
  /// checked against each backend's declared `option_specs()`; an options entry for a backend
  /// id that no backend is registered under is InvalidArgument (typos must not pass silently).
  /// If an init fails, the delegates already made are destroyed and the error names the method,
  /// the delegate and the backend. `options` is only read during the call.
  Result<std::unique_ptr<Method>> load_method(std::string_view name,
                                              const LoadBackendOptionsMap* options = nullptr) const;

  /// The program's named data (key → bytes), served through the loader (zero-copy with mmap).
  const NamedDataMap& named_data() const;

  /// The bytes of segment `index` (cached after the first read). Errors: InvalidArgument for
  /// an index out of range; AccessFailed from the loader.
  Result<const FreeableBuffer*> segment(size_t index) const;
  size_t num_segments() const;

  /// The verified flatbuffer root (for tools such as `kiln inspect`).
  const schema::Program* flatbuffer() const { return root_; }

 private:
  class NamedData;
  Program(std::shared_ptr<DataLoader> loader, FileHeader header, FreeableBuffer program_data);
  Status verify() const;

  std::shared_ptr<DataLoader> loader_;
  FileHeader header_;
  FreeableBuffer program_data_;
  const schema::Program* root_ = nullptr;
  std::unique_ptr<NamedData> named_data_;
  mutable std::mutex segments_mutex_;
  mutable std::vector<std::unique_ptr<FreeableBuffer>> segments_;
};

}  // namespace kiln::runtime
