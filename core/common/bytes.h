// Little binary writer/reader for checkpoints and policy state: length-prefixed fields, bounds-checked reads
// (a truncated or corrupt blob raises std::runtime_error instead of reading past the end).
#pragma once
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace dd {

class ByteWriter {
 public:
  template <class T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable<T>::value, "plain values only");
    s_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  template <class T>
  void put_vec(const std::vector<T>& v) {
    put<uint64_t>(v.size());
    if (!v.empty()) s_.append(reinterpret_cast<const char*>(v.data()), sizeof(T) * v.size());
  }
  void put_floats(const float* p, size_t n) {
    put<uint64_t>(n);
    if (n) s_.append(reinterpret_cast<const char*>(p), 4 * n);  // p may be null when n == 0
  }
  void put_str(const std::string& v) {
    put<uint64_t>(v.size());
    s_.append(v);
  }
  void put_bools(const std::vector<bool>& v) {
    std::vector<uint8_t> b(v.begin(), v.end());
    put_vec(b);
  }
  const std::string& bytes() const { return s_; }

 private:
  std::string s_;
};

class ByteReader {
 public:
  // Reads from `s` in place: s must outlive the reader (no temporaries).
  explicit ByteReader(const std::string& s) : p_(s.data()), end_(s.data() + s.size()) {}
  explicit ByteReader(std::string&&) = delete;
  template <class T>
  T get() {
    T v;
    need(sizeof(T));
    std::memcpy(&v, p_, sizeof(T));
    p_ += sizeof(T);
    return v;
  }
  template <class T>
  std::vector<T> get_vec() {
    uint64_t n = get<uint64_t>();
    if (n > uint64_t(end_ - p_) / sizeof(T)) throw std::runtime_error("truncated data (vector)");
    std::vector<T> v(n);
    if (n) std::memcpy(v.data(), p_, sizeof(T) * n);
    p_ += sizeof(T) * n;
    return v;
  }
  // Reads exactly n floats into p (the stored count must match).
  void get_floats(float* p, size_t n) {
    uint64_t m = get<uint64_t>();
    if (m != n) throw std::runtime_error("size mismatch: stored " + std::to_string(m) + " floats, expected " + std::to_string(n));
    need(4 * n);
    if (n) std::memcpy(p, p_, 4 * n);  // p may be null when n == 0 (a model without buffers)
    p_ += 4 * n;
  }
  std::string get_str() {
    uint64_t n = get<uint64_t>();
    need(n);
    std::string s(p_, n);
    p_ += n;
    return s;
  }
  std::vector<bool> get_bools() {
    auto b = get_vec<uint8_t>();
    return std::vector<bool>(b.begin(), b.end());
  }
  bool done() const { return p_ == end_; }

  bool at_end() const { return p_ == end_; }

 private:
  void need(uint64_t n) {
    if (n > uint64_t(end_ - p_)) throw std::runtime_error("truncated data");
  }
  const char* p_;
  const char* end_;
};

}  // namespace dd
