#pragma once

#include <kiln/runtime/backend/options_map.h>
#include <kiln/runtime/core/evalue.h>
#include <kiln/runtime/core/result.h>
#include <kiln/runtime/executor/method.h>
#include <kiln/runtime/executor/method_meta.h>
#include <kiln/runtime/executor/program.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::extension {

/// The friendly facade over Program and Method: open a `.kiln` file, load methods with
/// load-time backend options, and run them with a vector of inputs.
///
///   Module module("model.kiln");
///   LoadBackendOptionsMap map;
///   map.set_options("KilnBackend", opts.view());
///   KILN_RETURN_IF_ERROR(module.load("forward", map));
///   auto outputs = module.forward({EValue(*input)});
///
/// **Options and precedence.** A map given to `load_method(name, map)` (or
/// `load(name, map)`) applies to that method only. Otherwise the map given to the latest
/// successful `load(map)` applies (the Module's default). Otherwise no options are passed and
/// every backend uses its defaults. Maps are not merged: the more specific map replaces the
/// default for the method it is given to. Inside a map, each delegate's backend sees only the
/// options registered under its own backend id (see LoadBackendOptionsMap).
///
/// **Ownership.** The Module copies the path and the default map; nothing a caller passes
/// must outlive the call that received it (an explicit map is only read during the call).
/// The Module owns its Program and Methods; tensors returned by `execute` alias a Method's
/// memory (see `execute`).
///
/// **Transactional loading.** A failed `load` or `load_method` leaves the Module exactly as
/// it was: a loaded program stays loaded, loaded methods stay loaded (a failed reload of a
/// method keeps the previous Method), and the default map is unchanged.
///
/// **Thread-safety.** Not synchronized: use a Module from one thread at a time (including
/// `method_names` and `method_meta`, which may load the program). Different Modules, even of
/// the same file, may be used concurrently.
class Module {
 public:
  /// How the program file is read.
  enum class LoadMode {
    /// Reads what is needed (program, constants, delegate blobs) with `pread` into aligned
    /// memory the Module owns: a private copy in memory, no mapping. Use it where mapping is
    /// unavailable or the file may change. Takes effect at `load`.
    File,
    /// Maps the file read-only (zero copy: weights stay in the page cache and are shared by
    /// processes). The default. The file must not be truncated while the Module lives.
    Mmap,
  };

  /// A Module for the program at `path`; nothing is read until `load` (or a call that needs
  /// the program). Never fails; a missing file is reported by `load`.
  explicit Module(std::string path, LoadMode load_mode = LoadMode::Mmap);
  /// Destroys the Methods (their delegates) and then the Program.
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  /// Moves the program, the methods and the default map; Method pointers from `method()` stay
  /// valid (now owned by the new Module). The moved-from Module may only be destroyed or
  /// assigned to.
  Module(Module&&) noexcept;
  /// As the move constructor; the methods this Module held before are destroyed.
  Module& operator=(Module&&) noexcept;

  /// The path given at construction.
  const std::string& path() const { return path_; }
  /// The load mode given at construction.
  LoadMode load_mode() const { return load_mode_; }

  /// Reads and verifies the program if it is not loaded yet; does nothing when it is (the
  /// file is not read again). Keeps the default options map as it is.
  /// Errors: AccessFailed naming the path when the file cannot be opened or mapped;
  /// InvalidProgram when verification fails (see `Program::load`).
  runtime::Status load();

  /// Loads the program if needed (as `load()`), then stores a copy of `options` as the default
  /// for every method loaded later without an explicit map. Methods already loaded keep the
  /// options they were loaded with. Errors: as `load()`; InvalidArgument when `options` names a
  /// backend id that no backend is registered under (with a did-you-mean hint). On error the
  /// previous default map is kept.
  runtime::Status load(const runtime::LoadBackendOptionsMap& options);

  /// Loads the program if needed and then method `method_name` with `options` (which apply to
  /// this method only; the default map is not changed). One transactional step: if the method
  /// fails to load, a program loaded by this call is dropped again. Errors: as `load()` and
  /// `load_method`.
  runtime::Status load(std::string_view method_name, const runtime::LoadBackendOptionsMap& options);

  /// Loads (or reloads) method `name`, loading the program first if needed. The options are
  /// `options` when given, else the default map from `load(map)`, else none (see the class
  /// comment). A method already loaded is replaced only when the new one loads (both exist
  /// for a moment, so a reload needs memory for two); outputs returned by the old one become
  /// invalid then. `options` is only read during the call.
  /// Errors: NotFound naming the method and the methods present; OperatorMissing;
  /// InvalidArgument for options a backend rejects (naming the backend and key); a delegate's
  /// init error naming the method, delegate and backend; errors of `load()`.
  runtime::Status load_method(std::string_view name,
                              const runtime::LoadBackendOptionsMap* options = nullptr);
  /// Same as above with an explicit map.
  runtime::Status load_method(std::string_view name, const runtime::LoadBackendOptionsMap& options);

  /// True once the program has been loaded successfully.
  bool is_loaded() const { return program_ != nullptr; }
  /// True when method `name` is loaded.
  bool is_method_loaded(std::string_view name) const;

  /// Names of the program's methods, in program order. Loads the program if needed.
  /// Errors: those of `load()`.
  runtime::Result<std::vector<std::string>> method_names();

  /// Inputs, outputs, delegates and planned memory of method `name`, without loading the
  /// method. Loads the program if needed. Errors: those of `load()`; NotFound naming the
  /// method and the methods present.
  runtime::Result<runtime::MethodMeta> method_meta(std::string_view name);

  /// Runs method `name` with `inputs` (one per method input, in order) and returns copies of
  /// its output EValues. Loads the program and the method (with the default options) first if
  /// needed.
  ///
  /// Lifetime: output tensors alias the Method's memory; their data stays valid until the next
  /// `execute` of this method, its reload, or the Module's destruction. Clone what you keep
  /// (`clone_tensor_ptr`). Input tensors need only live for the call: those the method only
  /// reads are read in place, without a copy; the others, and outputs of an earlier run given
  /// back as inputs, are copied into the method (`Method::execute(inputs)`).
  ///
  /// Errors: those of `load_method`; InvalidArgument for a wrong number of inputs (naming the
  /// count given and the inputs expected) or an input whose kind, dtype or shape does not
  /// match (naming the input, what was given and what is expected); errors of the run, which
  /// name the instruction and its op or delegate.
  runtime::Result<std::vector<runtime::EValue>> execute(std::string_view name,
                                                        const std::vector<runtime::EValue>& inputs);

  /// `execute("forward", inputs)`.
  runtime::Result<std::vector<runtime::EValue>> forward(const std::vector<runtime::EValue>& inputs);

  /// The loaded Method `name`, for advanced use (set inputs one by one, run repeatedly
  /// without copying outputs). Loads the program and the method with the default options if
  /// needed. The Method is owned by the Module; the pointer stays valid until the method is
  /// reloaded or its owning Module is destroyed. Errors: those of `load_method`.
  runtime::Result<runtime::Method*> method(std::string_view name);

  /// The loaded program, or null before a successful `load`. Shared so that tools can read
  /// segments and named data; Methods keep it alive too.
  std::shared_ptr<const runtime::Program> program() const { return program_; }

 private:
  runtime::Result<std::shared_ptr<runtime::Program>> open_program() const;
  runtime::Status check_backend_ids(const runtime::LoadBackendOptionsMap& options) const;
  runtime::Status load_method_from(const std::shared_ptr<runtime::Program>& program,
                                   std::string_view name,
                                   const runtime::LoadBackendOptionsMap* options);
  runtime::Status check_inputs(const runtime::Method& method,
                               const std::vector<runtime::EValue>& inputs) const;

  std::string path_;
  LoadMode load_mode_;
  std::shared_ptr<runtime::Program> program_;
  std::optional<runtime::LoadBackendOptionsMap> default_options_;
  std::map<std::string, std::unique_ptr<runtime::Method>, std::less<>> methods_;
};

/// "file" or "mmap".
std::string_view to_string(Module::LoadMode mode);

}  // namespace kiln::extension
