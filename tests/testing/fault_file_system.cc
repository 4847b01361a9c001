#include "testing/fault_file_system.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace graphdump::testing {
namespace {

class FaultWritableFile : public WritableFile {
 public:
  FaultWritableFile(FaultFileSystem* fs, std::unique_ptr<WritableFile> base, std::string path)
      : fs_(fs), base_(std::move(base)), path_(std::move(path)) {}

  Status Append(const void* data, size_t size) override {
    const size_t allowed = fs_->Reserve(size);
    if (allowed > 0) GRAPHDUMP_RETURN_IF_ERROR(base_->Append(data, allowed));
    if (allowed < size) return Status::IOError(NoSpaceMessage(path_));
    return Status::Ok();
  }

  Status Commit() override { return base_->Commit(); }

 private:
  FaultFileSystem* fs_;
  std::unique_ptr<WritableFile> base_;
  std::string path_;
};

}  // namespace

std::string NoSpaceMessage(const std::string& path) {
  return "cannot write " + path + ": " + std::strerror(ENOSPC);
}

FaultFileSystem::FaultFileSystem(std::shared_ptr<FileSystem> base) : base_(std::move(base)) {}

void FaultFileSystem::FailAfterBytes(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  byte_limit_ = bytes;
}

void FaultFileSystem::FailOnFile(int k) {
  std::lock_guard<std::mutex> lock(mutex_);
  fail_on_file_ = k;
}

void FaultFileSystem::FailPathsContaining(std::string substring) {
  std::lock_guard<std::mutex> lock(mutex_);
  failing_substring_ = std::move(substring);
}

int FaultFileSystem::files_created() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return files_created_;
}

uint64_t FaultFileSystem::bytes_written() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_written_;
}

size_t FaultFileSystem::Reserve(size_t size) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t room = byte_limit_ > bytes_written_ ? byte_limit_ - bytes_written_ : 0;
  const size_t allowed = static_cast<size_t>(std::min<uint64_t>(room, size));
  bytes_written_ += allowed;
  return allowed;
}

bool FaultFileSystem::PathFails(const std::string& path) const {
  return !failing_substring_.empty() && path.find(failing_substring_) != std::string::npos;
}

Status FaultFileSystem::CreateDirectories(const std::string& dir) {
  return base_->CreateDirectories(dir);
}

StatusOr<std::unique_ptr<WritableFile>> FaultFileSystem::NewWritableFile(const std::string& path) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++files_created_;
    if (files_created_ == fail_on_file_ || PathFails(path)) {
      return Status::IOError("cannot create " + path + ": " + std::strerror(ENOSPC));
    }
  }
  GRAPHDUMP_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, base_->NewWritableFile(path));
  return std::unique_ptr<WritableFile>(
      std::make_unique<FaultWritableFile>(this, std::move(file), path));
}

Status FaultFileSystem::AppendToFile(const std::string& path, const std::string& data) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (PathFails(path)) return Status::IOError(NoSpaceMessage(path));
  }
  if (Reserve(data.size()) < data.size()) return Status::IOError(NoSpaceMessage(path));
  return base_->AppendToFile(path, data);
}

// A second name takes no bytes of the budget.
Status FaultFileSystem::LinkOrCopy(const std::string& existing, const std::string& path) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++files_created_;
    if (files_created_ == fail_on_file_ || PathFails(path)) {
      return Status::IOError("cannot create " + path + ": " + std::strerror(ENOSPC));
    }
  }
  return base_->LinkOrCopy(existing, path);
}

Status FaultFileSystem::Remove(const std::string& path) { return base_->Remove(path); }

bool FaultFileSystem::Exists(const std::string& path) { return base_->Exists(path); }

StatusOr<bool> FaultFileSystem::CreateDirectoryIfAbsent(const std::string& dir) {
  return base_->CreateDirectoryIfAbsent(dir);
}

Status FaultFileSystem::RemoveTree(const std::string& dir) { return base_->RemoveTree(dir); }

Status FaultFileSystem::Rename(const std::string& from, const std::string& to) {
  return base_->Rename(from, to);
}

StatusOr<std::unique_ptr<FileLock>> FaultFileSystem::TryLock(const std::string& path,
                                                             std::string* holder) {
  return base_->TryLock(path, holder);
}

}  // namespace graphdump::testing
