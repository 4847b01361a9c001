#include "graphdump/internal/written_files.h"

namespace graphdump {
namespace {

// Bounds the memory of a step with very many tensors; later ones are written as copies.
constexpr size_t kMaxFiles = size_t{1} << 16;

}  // namespace

void WrittenFiles::File::Finish(std::optional<uint64_t> bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    finished_ = true;
    bytes_ = bytes;
  }
  done_.notify_all();
}

std::optional<uint64_t> WrittenFiles::File::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return finished_; });
  return bytes_;
}

std::shared_ptr<WrittenFiles::File> WrittenFiles::Find(const TensorView& view,
                                                       int64_t max_elements) const {
  std::optional<BytesKey> bytes = BytesKeyOf(view);
  if (!bytes) return nullptr;
  auto it = files_.find(Key{std::move(*bytes), max_elements});
  return it == files_.end() ? nullptr : it->second.file;
}

void WrittenFiles::Insert(const TensorView& view, int64_t max_elements,
                          std::shared_ptr<File> file) {
  std::optional<BytesKey> bytes = BytesKeyOf(view);
  if (!bytes || files_.size() >= kMaxFiles) return;
  files_.insert_or_assign(Key{std::move(*bytes), max_elements},
                          Entry{std::move(file), view.origin.storage});
}

void WrittenFiles::Forget(const void* storage) {
  std::erase_if(files_, [&](const auto& entry) { return entry.first.bytes.storage == storage; });
}

}  // namespace graphdump
