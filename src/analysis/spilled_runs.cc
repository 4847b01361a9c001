// spilled_runs.h: records spilled to an unnamed temporary file in sorted runs, read back merged.
#include "graphdump/analysis/spilled_runs.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <queue>

namespace graphdump::analysis {
namespace {

constexpr size_t kReadBuffer = size_t{32} << 10;  // per run while merging

std::string TempDir() {
  const char* dir = std::getenv("TMPDIR");
  return dir && *dir ? dir : "/tmp";
}

}  // namespace

SpilledRuns::SpilledRuns(size_t runs, size_t key_words) : key_words_(key_words), runs_(runs) {
  std::string name = TempDir() + "/graphdump-spill-XXXXXX";
  fd_ = ::mkstemp(name.data());
  if (fd_ < 0) {
    status_ = Status::IOError(fmt::format("cannot create a temporary file in {}: {}", TempDir(),
                                          std::strerror(errno)));
    return;
  }
  ::unlink(name.c_str());  // nameless from now on: gone when the process ends, however
}

SpilledRuns::~SpilledRuns() {
  if (fd_ >= 0) ::close(fd_);
}

void SpilledRuns::Encode(const uint64_t* key, std::string_view text, std::string* chunk) const {
  if (key_words_ > 0) {
    chunk->append(reinterpret_cast<const char*>(key), key_words_ * sizeof(uint64_t));
  }
  const uint64_t size = text.size();
  chunk->append(reinterpret_cast<const char*>(&size), sizeof(size));
  chunk->append(text);
}

Status SpilledRuns::Append(size_t run, std::string* chunk) {
  if (chunk->empty()) return Status::Ok();
  size_t records = 0;
  for (size_t at = 0; at < chunk->size();) {
    uint64_t size;
    std::memcpy(&size, chunk->data() + at + key_words_ * sizeof(uint64_t), sizeof(size));
    at += key_words_ * sizeof(uint64_t) + sizeof(size) + size;
    ++records;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  GRAPHDUMP_RETURN_IF_ERROR(status_);
  const uint64_t offset = size_;
  for (size_t done = 0; done < chunk->size();) {
    const ssize_t n = ::pwrite(fd_, chunk->data() + done, chunk->size() - done, offset + done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      status_ = Status::IOError(fmt::format("cannot write a temporary file in {}: {}", TempDir(),
                                            n < 0 ? std::strerror(errno) : "nothing written"));
      return status_;
    }
    done += static_cast<size_t>(n);
  }
  size_ += chunk->size();
  runs_[run].chunks.push_back({offset, chunk->size()});
  runs_[run].count += records;
  chunk->clear();
  return Status::Ok();
}

size_t SpilledRuns::AddRun() {
  std::lock_guard<std::mutex> lock(mutex_);
  runs_.emplace_back();
  return runs_.size() - 1;
}

// One run's records in order, through a buffer of kReadBuffer bytes (more for a longer record).
class SpilledRuns::Reader {
 public:
  Reader(const SpilledRuns& spill, size_t run)
      : spill_(spill), run_(spill.runs_[run]), key_(spill.key_words_) {}

  // The next record (key() and text()); false at the run's end.
  StatusOr<bool> Next() {
    at_ += record_;
    record_ = 0;
    const size_t head = spill_.key_words_ * sizeof(uint64_t) + sizeof(uint64_t);
    GRAPHDUMP_ASSIGN_OR_RETURN(bool more, Fill(head));
    if (!more) return false;
    uint64_t size;
    std::memcpy(&size, buffer_.data() + at_ + head - sizeof(uint64_t), sizeof(size));
    GRAPHDUMP_ASSIGN_OR_RETURN(more, Fill(head + size));
    if (!more) return Status::IOError("a temporary file ends inside a record");
    record_ = head + size;
    // Copied out: a record starts at any byte of the buffer, and a key's words need alignment.
    if (!key_.empty()) {
      std::memcpy(key_.data(), buffer_.data() + at_, key_.size() * sizeof(uint64_t));
    }
    return true;
  }
  const uint64_t* key() const { return key_.data(); }
  std::string_view text() const {
    const size_t head = spill_.key_words_ * sizeof(uint64_t) + sizeof(uint64_t);
    return {buffer_.data() + at_ + head, record_ - head};
  }

 private:
  // At least `need` bytes from at_ in the buffer; false when the run ends first.
  StatusOr<bool> Fill(size_t need) {
    if (buffer_.size() - at_ >= need) return true;
    buffer_.erase(0, at_);
    at_ = 0;
    while (buffer_.size() < need) {
      if (chunk_ == run_.chunks.size()) {
        if (buffer_.empty()) return false;
        return Status::IOError("a temporary file ends inside a record");
      }
      const auto [offset, size] = run_.chunks[chunk_];
      const size_t want = static_cast<size_t>(
          std::min<uint64_t>(size - in_chunk_, std::max(kReadBuffer, need - buffer_.size())));
      const size_t old = buffer_.size();
      buffer_.resize(old + want);
      size_t got = 0;
      while (got < want) {
        const ssize_t n = ::pread(spill_.fd_, buffer_.data() + old + got, want - got,
                                  static_cast<off_t>(offset + in_chunk_ + got));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          return Status::IOError(fmt::format("cannot read a temporary file back: {}",
                                             n < 0 ? std::strerror(errno) : "it is shorter"));
        }
        got += static_cast<size_t>(n);
      }
      in_chunk_ += want;
      if (in_chunk_ == size) {
        ++chunk_;
        in_chunk_ = 0;
      }
    }
    return true;
  }

  const SpilledRuns& spill_;
  const Run& run_;
  std::vector<uint64_t> key_;  // the current record's key
  std::string buffer_;
  size_t at_ = 0, record_ = 0;
  size_t chunk_ = 0;
  uint64_t in_chunk_ = 0;
};

Status SpilledRuns::Read(size_t run, const std::function<Status(std::string_view)>& each) const {
  GRAPHDUMP_RETURN_IF_ERROR(status_);
  Reader reader(*this, run);
  while (true) {
    GRAPHDUMP_ASSIGN_OR_RETURN(bool more, reader.Next());
    if (!more) return Status::Ok();
    GRAPHDUMP_RETURN_IF_ERROR(each(reader.text()));
  }
}

Status SpilledRuns::Merge(const std::function<Status(std::string_view)>& each) const {
  GRAPHDUMP_RETURN_IF_ERROR(status_);
  std::vector<Reader> readers;
  readers.reserve(runs_.size());
  for (size_t r = 0; r < runs_.size(); ++r) readers.emplace_back(*this, r);
  // A heap of the runs by their next record's key, then run.
  auto later = [&](size_t a, size_t b) {
    const uint64_t *x = readers[a].key(), *y = readers[b].key();
    for (size_t w = 0; w < key_words_; ++w) {
      if (x[w] != y[w]) return x[w] > y[w];
    }
    return a > b;
  };
  std::priority_queue<size_t, std::vector<size_t>, decltype(later)> heap(later);
  for (size_t r = 0; r < readers.size(); ++r) {
    GRAPHDUMP_ASSIGN_OR_RETURN(bool more, readers[r].Next());
    if (more) heap.push(r);
  }
  while (!heap.empty()) {
    const size_t r = heap.top();
    heap.pop();
    GRAPHDUMP_RETURN_IF_ERROR(each(readers[r].text()));
    GRAPHDUMP_ASSIGN_OR_RETURN(bool more, readers[r].Next());
    if (more) heap.push(r);
  }
  return Status::Ok();
}

void AppendIndented(std::string_view text, size_t by, std::string* out) {
  size_t from = 0;
  for (size_t nl = text.find('\n'); nl != std::string_view::npos; nl = text.find('\n', from)) {
    out->append(text.substr(from, nl + 1 - from));
    out->append(by, ' ');
    from = nl + 1;
  }
  out->append(text.substr(from));
}

Status AppendJsonArray(size_t count, const std::function<Status(const TextSink&)>& read,
                       const TextSink& write, std::string* out) {
  constexpr size_t kFlush = size_t{1} << 20;
  *out += count == 0 ? "[]" : "[\n";
  if (count == 0) return Status::Ok();
  size_t written = 0;
  GRAPHDUMP_RETURN_IF_ERROR(read([&](std::string_view element) -> Status {
    *out += element;
    *out += ++written < count ? ",\n" : "\n";
    if (out->size() < kFlush) return Status::Ok();
    Status status = write(*out);
    out->clear();
    return status;
  }));
  *out += "  ]";
  return Status::Ok();
}

std::pair<std::string, std::string> SplitJsonAt(const std::string& text, const std::string& key) {
  // A newline inside a JSON string is written \n: the mark is found only where the key is.
  const std::string mark = "\n  \"" + key + "\": \"\"";
  const size_t at = text.find(mark);
  return {text.substr(0, at + mark.size() - 2), text.substr(at + mark.size())};
}

}  // namespace graphdump::analysis
