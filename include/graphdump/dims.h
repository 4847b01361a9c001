// A tensor's shape or strides: int64_t values held inline up to kInline dimensions, on the heap
// beyond. A statistic dump makes several views and keys of every tensor of every kernel; with
// std::vector each cost two allocations.
#pragma once

#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <span>
#include <vector>

namespace graphdump {

class Dims {
 public:
  static constexpr size_t kInline = 6;

  Dims() = default;
  Dims(std::initializer_list<int64_t> values) { Assign(values.begin(), values.size()); }
  template <typename It>
    requires std::forward_iterator<It>
  Dims(It first, It last) {
    assign(first, last);
  }
  Dims(std::span<const int64_t> values) { Assign(values.data(), values.size()); }  // NOLINT
  Dims(const std::vector<int64_t>& values) { Assign(values.data(), values.size()); }  // NOLINT
  Dims(const Dims& other) { Assign(other.data(), other.size()); }
  Dims(Dims&& other) noexcept { *this = std::move(other); }
  Dims& operator=(const Dims& other) {
    if (this != &other) Assign(other.data(), other.size());
    return *this;
  }
  Dims& operator=(Dims&& other) noexcept {
    if (this == &other) return *this;
    if (other.heap_) {
      heap_ = std::move(other.heap_);
      capacity_ = other.capacity_;
    } else {
      heap_.reset();
      capacity_ = kInline;
      std::copy_n(other.inline_, other.size_, inline_);
    }
    size_ = other.size_;
    other.size_ = 0;
    other.capacity_ = kInline;
    return *this;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t* data() { return heap_ ? heap_.get() : inline_; }
  const int64_t* data() const { return heap_ ? heap_.get() : inline_; }
  int64_t& operator[](size_t i) { return data()[i]; }
  int64_t operator[](size_t i) const { return data()[i]; }
  int64_t* begin() { return data(); }
  int64_t* end() { return data() + size_; }
  const int64_t* begin() const { return data(); }
  const int64_t* end() const { return data() + size_; }
  int64_t back() const { return data()[size_ - 1]; }
  operator std::span<const int64_t>() const { return {data(), size_}; }  // NOLINT
  std::vector<int64_t> ToVector() const { return {begin(), end()}; }

  void clear() { size_ = 0; }
  void push_back(int64_t value) {
    if (size_ == capacity_) Reserve(capacity_ * 2);
    data()[size_++] = value;
  }
  // New dimensions are `value`.
  void resize(size_t n, int64_t value = 0) {
    Reserve(n);
    if (n > size_) std::fill(data() + size_, data() + n, value);
    size_ = n;
  }
  template <typename It>
    requires std::forward_iterator<It>
  void assign(It first, It last) {
    size_ = 0;
    Reserve(static_cast<size_t>(std::distance(first, last)));
    for (; first != last; ++first) data()[size_++] = *first;
  }

  friend bool operator==(const Dims& a, const Dims& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const Dims& a, const std::vector<int64_t>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend std::strong_ordering operator<=>(const Dims& a, const Dims& b) {
    return std::lexicographical_compare_three_way(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  void Assign(const int64_t* values, size_t n) {
    size_ = 0;
    Reserve(n);
    std::copy_n(values, n, data());
    size_ = n;
  }
  // Room for `n` values, keeping the first size_.
  void Reserve(size_t n) {
    if (n <= capacity_) return;
    auto grown = std::make_unique_for_overwrite<int64_t[]>(n);
    std::copy_n(data(), size_, grown.get());
    heap_ = std::move(grown);
    capacity_ = n;
  }

  std::unique_ptr<int64_t[]> heap_;  // null while the values fit inline_
  size_t size_ = 0;
  size_t capacity_ = kInline;
  int64_t inline_[kInline] = {};
};

}  // namespace graphdump
