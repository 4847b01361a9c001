// The tensor files a session has written in the current step, found again by the bytes they
// hold (BytesKey). A tensor dumped twice in one step (a kernel's output that is the next
// kernel's input, a parameter read by several kernels) then becomes one file under two names
// (FileSystem::LinkOrCopy) instead of a second copy of the same bytes: docs/file-format.md.
// Find, Insert, Forget and Clear run on the executor thread; a File is shared with the writer
// thread that writes it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "graphdump/internal/bytes_key.h"
#include "graphdump/tensor_view.h"

namespace graphdump {

class WrittenFiles {
 public:
  // One tensor file, written now (synchronous dump) or by a writer thread later.
  class File {
   public:
    explicit File(std::string path) : path_(std::move(path)) {}
    const std::string& path() const { return path_; }
    // Called once by whoever writes the file: its size, or nothing when it was not written.
    void Finish(std::optional<uint64_t> bytes);
    // Waits for Finish and returns what it was given. A writer thread may wait for a file
    // queued before its own job: that one is being written by another thread or is done.
    std::optional<uint64_t> Wait();

   private:
    const std::string path_;
    std::mutex mu_;
    std::condition_variable done_;
    bool finished_ = false;
    std::optional<uint64_t> bytes_;
  };

  // The file holding the bytes of `view` as a .npy of at most `max_elements` elements (0: all),
  // or null.
  std::shared_ptr<File> Find(const TensorView& view, int64_t max_elements) const;
  // Records that `file` will hold the bytes of `view`; views without an origin are ignored.
  void Insert(const TensorView& view, int64_t max_elements, std::shared_ptr<File> file);
  // Forgets the files of the allocation `storage`: its bytes changed without a new version.
  void Forget(const void* storage);
  // At a step's end: the next step's files are its own.
  void Clear() { files_.clear(); }

 private:
  struct Key {
    BytesKey bytes;
    int64_t max_elements;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& key) const {
      size_t seed = HashBytesKey(key.bytes);
      MixHash(&seed, static_cast<uint64_t>(key.max_elements));
      return seed;
    }
  };
  struct Entry {
    std::shared_ptr<File> file;
    Handle storage;  // pins the identity of BytesKey::storage
  };
  std::unordered_map<Key, Entry, KeyHash> files_;
};

}  // namespace graphdump
