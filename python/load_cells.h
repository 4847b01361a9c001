// graphdump.load's columns as load_columns.cc builds them: names numbered once (Interner,
// SharedNames), statistic.csv cells parsed (ParseCell) into columns as compact as their cells
// allow (StatColumn), in malloc'd buffers that NumPy arrays take over (Buffer).
#pragma once

#include <pybind11/numpy.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "graphdump/internal/json_text.h"

namespace graphdump::python::load {

namespace py = pybind11;
using internal::ValidUtf8;

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

// Strings of one column, each kept once: a row holds its string's number (a categorical code).
struct Interner {
  StringMap<int32_t> ids;
  std::vector<std::string> names;
  int32_t Id(std::string_view s) {
    if (auto it = ids.find(s); it != ids.end()) return it->second;
    const auto id = static_cast<int32_t>(names.size());
    ids.emplace(std::string(s), id);
    names.emplace_back(s);
    return id;
  }
};

// Names as the dump wrote them -> codes of their valid UTF-8 form (two spellings that are not
// UTF-8 may become one name): each spelling is made valid once.
struct NameCodes {
  Interner names;
  StringMap<int32_t> written;
  std::string last;  // the spelling looked up last (rows of a file share their dtype)
  int32_t last_id = -1;
  int32_t Id(std::string_view bytes) {
    if (last_id >= 0 && bytes == last) return last_id;
    auto it = written.find(bytes);
    if (it == written.end()) it = written.emplace(std::string(bytes), names.Id(ValidUtf8(bytes))).first;
    last = bytes;
    last_id = it->second;
    return last_id;
  }
};

// The names of one column, shared by the ranks being read on every core: each spelling as the
// dump wrote it has a number, that of its valid UTF-8 form (two spellings that are not UTF-8
// may become one name; paths keep their bytes), made valid once for the whole dump.
class SharedNames {
 public:
  explicit SharedNames(bool paths = false) : paths_(paths) {}
  int32_t Id(std::string_view bytes) {
    {
      std::shared_lock<std::shared_mutex> lock(mu_);
      if (auto it = written_.find(bytes); it != written_.end()) return it->second;
    }
    std::unique_lock<std::shared_mutex> lock(mu_);
    if (auto it = written_.find(bytes); it != written_.end()) return it->second;
    const int32_t id = names_.Id(paths_ ? std::string(bytes) : ValidUtf8(bytes));
    written_.emplace(std::string(bytes), id);
    return id;
  }
  // Once no rank is being read.
  const std::string& name(int32_t id) const { return names_.names[static_cast<size_t>(id)]; }

 private:
  const bool paths_;
  std::shared_mutex mu_;
  StringMap<int32_t> written_;
  Interner names_;
};

// One rank's use of a shared column: its rows' numbers, and the numbers in the order the rank
// first met them (the table's categories come in that order, rank after rank).
struct PartNames {
  SharedNames* shared = nullptr;
  std::vector<int32_t> first_met;
  std::vector<bool> met;  // by number
  std::string last;       // the spelling looked up last (rows of a file share their dtype)
  int32_t last_id = -1;
  int32_t Id(std::string_view bytes) {
    if (last_id >= 0 && bytes == last) return last_id;
    const int32_t id = shared->Id(bytes);
    if (static_cast<size_t>(id) >= met.size()) met.resize(static_cast<size_t>(id) + 1);
    if (!met[static_cast<size_t>(id)]) {
      met[static_cast<size_t>(id)] = true;
      first_met.push_back(id);
    }
    last.assign(bytes);
    last_id = id;
    return id;
  }
};

// The shared columns of load()'s table.
struct Names {
  SharedNames kernels, op_types, nets, dtypes, sources, files{true};
};

// A statistic.csv cell as load() gives it: an int, else a float, else text (Python's int() and
// float() of the cell); missing where a tensor has no such column.
struct StatCell {
  enum Kind : uint8_t { kMissing, kInt, kFloat, kText } kind = kMissing;
  int64_t i = 0;
  double d = 0;
  int32_t text = -1;
};

inline StatCell ParseCell(std::string_view text, Interner* texts) {
  StatCell c;
  std::string_view t = text;
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.front()))) t.remove_prefix(1);
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.remove_suffix(1);
  std::string_view digits = t;
  if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
  if (!digits.empty()) {
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (ec == std::errc() && ptr == digits.data() + digits.size() &&
        (digits.size() == t.size() || digits.front() != '-')) {
      c.kind = StatCell::kInt;
      c.i = v;
      return c;
    }
    // from_chars reads what strtod reads, but for a leading '+', hexadecimal and values out of
    // range: those take strtod's way.
    double d = 0;
    auto [end, error] = std::from_chars(t.data(), t.data() + t.size(), d);
    if (error == std::errc() && end == t.data() + t.size()) {
      c.kind = StatCell::kFloat;
      c.d = d;
      return c;
    }
    const std::string copy(t);
    char* stop = nullptr;
    d = std::strtod(copy.c_str(), &stop);
    if (stop == copy.c_str() + copy.size() && copy.find_first_of("xX") == std::string::npos) {
      c.kind = StatCell::kFloat;
      c.d = d;
      return c;
    }
  }
  c.kind = StatCell::kText;
  c.text = texts->Id(ValidUtf8(text));
  return c;
}

// A column's values in one block of malloc'd memory, grown by realloc (which moves large
// blocks by remapping them, not copying), then owned by the NumPy array made of it.
template <typename T>
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(capacity_, other.capacity_);
    return *this;
  }
  ~Buffer() { std::free(data_); }

  size_t size() const { return size_; }
  T* data() { return data_; }
  const T* data() const { return data_; }
  void Append(const T* values, size_t n) {
    Reserve(size_ + n);
    if (n) std::memcpy(data_ + size_, values, n * sizeof(T));
    size_ += n;
  }
  void Append(const std::vector<T>& values) { Append(values.data(), values.size()); }
  T* Grow(size_t n) {
    Reserve(size_ + n);
    size_ += n;
    return data_ + size_ - n;
  }
  // The values as a NumPy array of `dtype` (T's own when none), which frees them.
  py::array Release(py::dtype dtype = py::dtype::of<T>()) {
    T* data = data_ != nullptr ? data_ : static_cast<T*>(std::malloc(sizeof(T)));
    if (data == nullptr) throw std::bad_alloc();
    data_ = nullptr;
    py::capsule owner(data, [](void* p) { std::free(p); });
    py::array array(dtype, {static_cast<py::ssize_t>(size_)}, {}, data, owner);
    size_ = capacity_ = 0;
    return array;
  }

 private:
  void Reserve(size_t n) {
    if (n <= capacity_) return;
    const size_t capacity = std::max<size_t>({n, capacity_ + capacity_ / 2, 1024});
    T* grown = static_cast<T*>(std::realloc(data_, capacity * sizeof(T)));
    if (grown == nullptr) throw std::bad_alloc();
    data_ = grown;
    capacity_ = capacity;
  }
  T* data_ = nullptr;
  size_t size_ = 0, capacity_ = 0;
};

// One statistic column of some rows, as compact as its cells allow: int64 while every row has
// an int, float64 (NaN where missing) while every cell is a number, else every cell.
struct StatColumn {
  enum Mode : uint8_t { kInts, kDoubles, kCells } mode = kInts;
  Buffer<int64_t> ints;
  Buffer<double> doubles;
  std::vector<bool> was_int;                          // kDoubles: the cell was an int...
  std::vector<std::pair<size_t, int64_t>> wide_ints;  // ...which its double does not hold
  std::vector<StatCell> cells;

  size_t size() const {
    return mode == kInts ? ints.size() : mode == kDoubles ? doubles.size() : cells.size();
  }
  // A cell as parsed (kDoubles: an int too wide for a double is in wide_ints).
  StatCell At(size_t row) const {
    StatCell c;
    if (mode == kInts) {
      c.kind = StatCell::kInt;
      c.i = ints.data()[row];
    } else if (mode == kCells) {
      c = cells[row];
    } else if (was_int[row]) {
      c.kind = StatCell::kInt;
      c.i = static_cast<int64_t>(doubles.data()[row]);
    } else {
      c.kind = StatCell::kFloat;  // a missing cell is a NaN float, as an object too
      c.d = doubles.data()[row];
    }
    return c;
  }
  void PushDouble(int64_t i) {
    const double d = static_cast<double>(i);
    if (d >= 0x1p63 || static_cast<int64_t>(d) != i) wide_ints.emplace_back(doubles.size(), i);
    *doubles.Grow(1) = d;
    was_int.push_back(true);
  }
  void PushMissing(size_t n) {
    std::fill_n(doubles.Grow(n), n, std::nan(""));
    was_int.resize(was_int.size() + n, false);
  }
  void Widen(Mode to) {
    if (to <= mode) return;
    if (mode == kInts) {
      for (size_t i = 0; i < ints.size(); ++i) PushDouble(ints.data()[i]);
      ints = Buffer<int64_t>();
      mode = kDoubles;
    }
    if (to == kCells) {
      cells.reserve(doubles.size());
      for (size_t row = 0; row < doubles.size(); ++row) cells.push_back(At(row));
      for (const auto& [row, i] : wide_ints) cells[row].i = i;
      doubles = Buffer<double>();
      was_int = {};
      wide_ints = {};
      mode = kCells;
    }
  }
  void Add(const StatCell& c) {
    Widen(c.kind == StatCell::kText ? kCells : c.kind == StatCell::kInt ? kInts : kDoubles);
    if (mode == kInts) {
      *ints.Grow(1) = c.i;
    } else if (mode == kCells) {
      cells.push_back(c);
    } else if (c.kind == StatCell::kInt) {
      PushDouble(c.i);
    } else if (c.kind == StatCell::kFloat) {
      *doubles.Grow(1) = c.d;
      was_int.push_back(false);
    } else {
      PushMissing(1);
    }
  }
  void Fill(size_t rows) {
    if (size() >= rows) return;
    Widen(kDoubles);
    if (mode == kCells) {
      cells.resize(rows);
    } else {
      PushMissing(rows - size());
    }
  }
  // Appends the `n` cells of `from` (none: n missing), its texts renumbered by `text_map`.
  void Append(const StatColumn* from, size_t n, const std::vector<int32_t>& text_map) {
    Widen(from ? from->mode : kDoubles);
    const size_t base = size();
    if (from == nullptr) {
      Fill(base + n);
    } else if (mode == kInts) {
      ints.Append(from->ints.data(), n);
    } else if (mode == kDoubles && from->mode == kInts) {
      for (size_t i = 0; i < n; ++i) PushDouble(from->ints.data()[i]);
    } else if (mode == kDoubles) {
      doubles.Append(from->doubles.data(), n);
      was_int.insert(was_int.end(), from->was_int.begin(), from->was_int.end());
      for (const auto& [row, i] : from->wide_ints) wide_ints.emplace_back(base + row, i);
    } else {
      for (size_t i = 0; i < n; ++i) {
        StatCell cell = from->At(i);
        if (cell.kind == StatCell::kText) cell.text = text_map[static_cast<size_t>(cell.text)];
        cells.push_back(cell);
      }
      if (from->mode == kDoubles) {
        for (const auto& [row, i] : from->wide_ints) cells[base + row].i = i;
      }
    }
  }
};

}  // namespace graphdump::python::load
