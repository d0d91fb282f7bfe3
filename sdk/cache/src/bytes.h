// Little-endian binary writer and bounds-checked reader for the entry and bundle formats.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kiln/graph/error.h"

namespace kiln::cache::detail {

struct Writer {
  std::string out;
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void str(std::string_view s) {
    u64(s.size());
    out.append(s.data(), s.size());
  }
};

// Every read past the end is a kiln::Error naming `where`.
class Reader {
 public:
  Reader(std::string_view bytes, std::string where) : bytes_(bytes), where_(std::move(where)) {}
  uint32_t u32() {
    need(4);
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(bytes_[pos_ + i])) << (8 * i);
    pos_ += 4;
    return v;
  }
  uint64_t u64() {
    need(8);
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(bytes_[pos_ + i])) << (8 * i);
    pos_ += 8;
    return v;
  }
  int64_t i64() { return static_cast<int64_t>(u64()); }
  std::string str() {
    const uint64_t n = u64();
    KILN_CHECK(n <= bytes_.size() - pos_, where_, ": truncated (a field of ", n, " bytes at offset ", pos_, ", ",
               bytes_.size() - pos_, " left)");
    std::string s(bytes_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  bool at_end() const { return pos_ == bytes_.size(); }
  void expect_end() const {
    KILN_CHECK(at_end(), where_, ": ", bytes_.size() - pos_, " unexpected bytes after the last field");
  }

 private:
  void need(size_t n) const {
    KILN_CHECK(n <= bytes_.size() - pos_, where_, ": truncated (", n, " bytes needed at offset ", pos_, ", ",
               bytes_.size() - pos_, " left)");
  }
  std::string_view bytes_;
  std::string where_;
  size_t pos_ = 0;
};

}  // namespace kiln::cache::detail
