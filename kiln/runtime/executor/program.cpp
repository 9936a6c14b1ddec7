#include <kiln/runtime/executor/program.h>

#include <kiln/runtime/executor/method.h>
#include <kiln/runtime/executor/method_meta_builder.h>
#include <kiln/runtime/executor/program_verify.h>
#include <kiln/runtime/schema/program_generated.h>

#include <kiln/runtime/core/aligned_buffer.h>

#include <algorithm>
#include <cstring>

namespace kiln::runtime {

class Program::NamedData final : public NamedDataMap {
 public:
  explicit NamedData(const Program* program) : program_(program) {}

  Result<FreeableBuffer> get_data(std::string_view key) const override {
    const auto* entries = program_->root_->named_data();
    if (entries != nullptr) {
      for (const auto* entry : *entries) {
        if (entry->key()->string_view() != key) continue;
        KILN_ASSIGN_OR_RETURN(const FreeableBuffer* segment, program_->segment(entry->segment()));
        // Without an owner (caller's memory), the Program keeps the bytes alive.
        std::shared_ptr<const void> owner = segment->owner();
        if (owner == nullptr) owner = program_->shared_from_this();
        return FreeableBuffer(segment->data(), segment->size(), std::move(owner));
      }
    }
    std::string present;
    for (const auto& k : keys()) present += (present.empty() ? "'" : ", '") + k + "'";
    return Status(Error::NotFound, "get named data '" + std::string(key) +
                                       "': no such key (present: " +
                                       (present.empty() ? "none" : present) + ")");
  }

  std::vector<std::string> keys() const override {
    std::vector<std::string> out;
    if (program_->root_->named_data() != nullptr) {
      for (const auto* entry : *program_->root_->named_data()) out.push_back(entry->key()->str());
    }
    return out;
  }

 private:
  const Program* program_;
};

Program::Program(std::shared_ptr<DataLoader> loader, FileHeader header,
                 FreeableBuffer program_data)
    : loader_(std::move(loader)), header_(header), program_data_(std::move(program_data)) {}

Program::~Program() = default;

Result<std::shared_ptr<Program>> Program::load(std::shared_ptr<DataLoader> loader) {
  if (loader == nullptr) {
    return Status(Error::InvalidArgument, "load program: data loader is null");
  }
  size_t file_size = loader->size();
  size_t head = std::min<size_t>(file_size, FileHeader::kSize);
  KILN_ASSIGN_OR_RETURN(FreeableBuffer header_bytes, loader->load(0, head));
  auto header = FileHeader::decode(static_cast<const uint8_t*>(header_bytes.data()),
                                   header_bytes.size(), file_size);
  if (!header.ok()) return header.status().with_context("'" + loader->name() + "'");
  KILN_ASSIGN_OR_RETURN(FreeableBuffer data,
                        loader->load(header->program_offset, header->program_size));
  if (reinterpret_cast<uintptr_t>(data.data()) % 8 != 0) {
    // Caller memory at an odd address: copy so that every 8-byte field is aligned.
    KILN_ASSIGN_OR_RETURN(AlignedBuffer copy, allocate_aligned(data.size()));
    std::memcpy(copy.get(), data.data(), data.size());
    std::shared_ptr<const void> owner(copy.release(), [](const void* p) {
      std::free(const_cast<void*>(p));
    });
    const void* aligned = owner.get();
    data = FreeableBuffer(aligned, data.size(), std::move(owner));
  }
  flatbuffers::Verifier verifier(static_cast<const uint8_t*>(data.data()), data.size(),
                                 /*max_depth=*/64, /*max_tables=*/10'000'000);
  // The identifier sits after the 4-byte root offset; shorter buffers cannot hold it.
  if (data.size() < 8 || !schema::ProgramBufferHasIdentifier(data.data()) ||
      !schema::VerifyProgramBuffer(verifier)) {
    return Status(Error::InvalidProgram,
                  "'" + loader->name() + "': load program: the program flatbuffer (" +
                      std::to_string(data.size()) +
                      " bytes) fails verification (corrupt or not a kiln program)");
  }
  auto program =
      std::shared_ptr<Program>(new Program(std::move(loader), *header, std::move(data)));
  program->root_ = schema::GetProgram(program->program_data_.data());
  Status verified = verify_program_contents(*program->root_, program->header_);
  if (!verified.ok()) return verified.with_context("'" + program->loader_->name() + "'");
  program->named_data_ = std::make_unique<NamedData>(program.get());
  program->segments_.resize(program->num_segments());
  return program;
}

size_t Program::num_methods() const {
  return root_->methods() == nullptr ? 0 : root_->methods()->size();
}

std::vector<std::string> Program::method_names() const {
  std::vector<std::string> names;
  if (root_->methods() != nullptr) {
    for (const auto* method : *root_->methods()) names.push_back(method->name()->str());
  }
  return names;
}

bool Program::has_method(std::string_view name) const {
  auto names = method_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

size_t Program::num_segments() const {
  return root_->segments() == nullptr ? 0 : root_->segments()->size();
}

Result<const FreeableBuffer*> Program::segment(size_t index) const {
  if (index >= num_segments()) {
    return Status(Error::InvalidArgument, "load segment " + std::to_string(index) +
                                              ": out of range (expected < " +
                                              std::to_string(num_segments()) + ")");
  }
  std::lock_guard<std::mutex> lock(segments_mutex_);
  if (segments_[index] == nullptr) {
    const auto* s = root_->segments()->Get(index);
    KILN_ASSIGN_OR_RETURN(FreeableBuffer bytes,
                          loader_->load(header_.segment_base_offset + s->offset(), s->size()));
    segments_[index] = std::make_unique<FreeableBuffer>(std::move(bytes));
  }
  return segments_[index].get();
}

const NamedDataMap& Program::named_data() const { return *named_data_; }

Result<MethodMeta> Program::method_meta(std::string_view name) const {
  if (root_->methods() != nullptr) {
    for (const auto* method : *root_->methods()) {
      if (method->name()->string_view() == name) return make_method_meta(*method, *root_);
    }
  }
  std::string present;
  for (const auto& n : method_names()) present += (present.empty() ? "'" : ", '") + n + "'";
  return Status(Error::NotFound, "find method '" + std::string(name) + "': no such method (" +
                                     (present.empty() ? "the program has none" : "present: " + present) +
                                     ")");
}

}  // namespace kiln::runtime
