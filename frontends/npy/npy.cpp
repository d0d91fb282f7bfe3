// .npy reading and writing. Format reference: numpy/lib/format.py (NEP 1): the magic
// "\x93NUMPY", a major and minor version byte, the header length (uint16 little-endian in
// version 1.0, uint32 in 2.0 and 3.0), then a Python dict literal with 'descr',
// 'fortran_order' and 'shape', padded with spaces and a '\n' so the data starts aligned to 64.
#include "kiln/graph/files.h"
#include "kiln/npy/npy.h"

#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <variant>

#include "kiln/graph/error.h"

namespace kiln::npy {

static_assert(std::endian::native == std::endian::little, "the .npy code assumes a little-endian host");

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMaxHeader = size_t{1} << 20;
constexpr int64_t kMaxNumel = int64_t{1} << 62;

struct DescrInfo {
  const char* descr;
  DType dtype;
};
constexpr DescrInfo kDescrs[] = {
    {"<f2", DType::f16}, {"<f4", DType::f32}, {"<f8", DType::f64},
    {"<i4", DType::i32}, {"<i8", DType::i64}, {"|b1", DType::bool_},
};

// A value of the header dict: a string, a bool or a tuple of integers.
using HeaderValue = std::variant<std::string, bool, std::vector<int64_t>>;

class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& path) : s_(text), path_(path) {}

  std::map<std::string, HeaderValue> parse() {
    std::map<std::string, HeaderValue> out;
    ws();
    expect('{');
    for (;;) {
      ws();
      if (peek() == '}') break;
      std::string key = str();
      ws();
      expect(':');
      ws();
      out[key] = value();
      ws();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      if (peek() == '}') break;
      bad("expected ',' or '}'");
    }
    ++i_;
    return out;
  }

 private:
  std::string_view s_;
  size_t i_ = 0;
  const std::string& path_;

  [[noreturn]] void bad(const std::string& what) const {
    fail(path_, ": malformed .npy header: ", what, " at offset ", i_, " of \"", std::string(s_.substr(0, 200)), "\"");
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c) {
    if (peek() != c) bad(std::string("expected '") + c + "'");
    ++i_;
  }
  std::string str() {
    char q = peek();
    if (q != '\'' && q != '"') bad("expected a quoted string");
    ++i_;
    size_t start = i_;
    while (i_ < s_.size() && s_[i_] != q) ++i_;
    if (i_ >= s_.size()) bad("unterminated string");
    return std::string(s_.substr(start, i_++ - start));
  }
  HeaderValue value() {
    char c = peek();
    if (c == '\'' || c == '"') return str();
    if (s_.substr(i_, 4) == "True") {
      i_ += 4;
      return true;
    }
    if (s_.substr(i_, 5) == "False") {
      i_ += 5;
      return false;
    }
    if (c == '(') {
      ++i_;
      std::vector<int64_t> dims;
      for (;;) {
        ws();
        if (peek() == ')') break;
        if (peek() < '0' || peek() > '9') bad("expected a dimension size");
        int64_t v = 0;
        while (peek() >= '0' && peek() <= '9') {
          if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) bad("dimension size too large");
          v = v * 10 + (peek() - '0');
          ++i_;
        }
        if (peek() == 'L') ++i_;  // Python 2 longs
        dims.push_back(v);
        ws();
        if (peek() == ',') {
          ++i_;
          continue;
        }
        if (peek() != ')') bad("expected ',' or ')' in the shape");
      }
      ++i_;
      return dims;
    }
    bad("expected a string, True, False or a tuple");
  }
};

std::string shape_text(const std::vector<int64_t>& sizes) {
  std::string s = "(";
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(sizes[i]);
  }
  if (sizes.size() == 1) s += ",";
  return s + ")";
}

}  // namespace

std::string npy_descr(DType dtype) {
  if (dtype == DType::bf16) return "<f4";
  for (const auto& d : kDescrs)
    if (d.dtype == dtype) return d.descr;
  fail("no .npy type for dtype ", dtype_name(dtype));
}

namespace {

// Reads `n` bytes at the current position into `dst`; false when fewer are there.
using ReadFn = std::function<bool(char* dst, uint64_t n)>;

// The whole reader, on a source of `size` bytes read in order through `read`: the preamble, the
// header and the data, each checked before anything is allocated for the next. `name` starts
// every message ("x.npy: ...").
TensorData read_npy(uint64_t size, const std::string& name, const ReadFn& read) {
  char pre[12] = {};
  if (size < 10 || !read(pre, 10)) fail(name, ": not a .npy file (shorter than the 10-byte preamble)");
  if (std::memcmp(pre, kMagic, 6) != 0) fail(name, ": not a .npy file (the magic string \\x93NUMPY is missing)");
  const int major = static_cast<unsigned char>(pre[6]);
  const int minor = static_cast<unsigned char>(pre[7]);
  uint64_t header_len = 0, prefix = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(pre[8]) | (static_cast<unsigned>(static_cast<unsigned char>(pre[9])) << 8);
    prefix = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12 || !read(pre + 10, 2)) fail(name, ": truncated .npy preamble");
    for (int k = 3; k >= 0; --k) header_len = (header_len << 8) | static_cast<unsigned char>(pre[8 + k]);
    prefix = 12;
  } else {
    fail(name, ": unsupported .npy format version ", major, ".", minor, " (this reads 1.0, 2.0 and 3.0)");
  }
  if (header_len > kMaxHeader) fail(name, ": .npy header of ", header_len, " bytes is implausibly large");
  if (prefix + header_len > size)
    fail(name, ": truncated .npy file: the header needs ", header_len, " bytes, the file has ", size - prefix);
  std::string header(header_len, '\0');
  if (!read(header.data(), header_len)) fail(name, ": cannot read the .npy header");

  auto dict = HeaderParser(header, name).parse();
  auto get = [&](const char* key) -> const HeaderValue& {
    auto it = dict.find(key);
    if (it == dict.end()) fail(name, ": malformed .npy header: no '", key, "' entry");
    return it->second;
  };
  const auto* descr = std::get_if<std::string>(&get("descr"));
  const auto* fortran = std::get_if<bool>(&get("fortran_order"));
  const auto* shape = std::get_if<std::vector<int64_t>>(&get("shape"));
  if (!descr) fail(name, ": malformed .npy header: 'descr' is not a string (structured arrays are not supported)");
  if (!fortran) fail(name, ": malformed .npy header: 'fortran_order' is not True or False");
  if (!shape) fail(name, ": malformed .npy header: 'shape' is not a tuple of integers");

  std::optional<DType> dtype;
  for (const auto& d : kDescrs)
    if (*descr == d.descr || (d.descr[0] == '<' && *descr == std::string("=") + (d.descr + 1)) ||
        (d.dtype == DType::bool_ && *descr == "b1"))
      dtype = d.dtype;
  if (!dtype) {
    std::string list;
    for (const auto& d : kDescrs) list += (list.empty() ? "" : ", ") + std::string(d.descr);
    fail(name, ": unsupported .npy element type '", *descr, "' (supported: ", list, ")");
  }
  if (*fortran && shape->size() > 1)
    fail(name, ": the array is in Fortran order; only C-ordered arrays are supported (save it with "
               "numpy.ascontiguousarray)");

  int64_t numel = 1;
  for (int64_t d : *shape)
    if (__builtin_mul_overflow(numel, d, &numel) || numel > kMaxNumel)
      fail(name, ": the array shape ", shape_text(*shape), " is too large");
  // numel is at most 2^62, its bytes up to 2^65: counted with a check, or (2^31, 2^31) of '<f4'
  // would wrap to 0 bytes and pass for a file without data.
  uint64_t need = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(numel), static_cast<uint64_t>(dtype_size(*dtype)), &need))
    fail(name, ": the array shape ", shape_text(*shape), " is too large (its ", *descr,
         " data would need more than 2^64 bytes)");
  const uint64_t have = size - prefix - header_len;
  if (have < need)
    fail(name, ": truncated .npy file: a ", *descr, " array of shape ", shape_text(*shape), " needs ", need,
         " bytes of data, the file holds ", have);
  if (have > need)
    fail(name, ": .npy file has ", have - need, " bytes after the data of a ", *descr, " array of shape ",
         shape_text(*shape));

  TensorData t = TensorData::empty_host(*dtype, *shape);
  if (need > 0 && !read(static_cast<char*>(t.data()), need)) fail(name, ": cannot read the .npy data");
  if (*dtype == DType::bool_) {
    auto* b = static_cast<unsigned char*>(t.data());
    for (uint64_t k = 0; k < need; ++k)
      if (b[k] > 1) fail(name, ": bool element ", k, " is ", int(b[k]), ", not 0 or 1");
  }
  return t;
}

}  // namespace

TensorData load_npy(const std::string& path) {
  check_regular_file(path, ".npy file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open .npy file '", path, "': ", std::strerror(errno));
  in.seekg(0, std::ios::end);
  const auto end = in.tellg();
  in.seekg(0, std::ios::beg);
  if (end < 0) fail("cannot read .npy file '", path, "'");
  return read_npy(static_cast<uint64_t>(end), path, [&](char* dst, uint64_t n) {
    return static_cast<bool>(in.read(dst, static_cast<std::streamsize>(n)));
  });
}

TensorData parse_npy(std::string_view bytes, std::string_view source_name) {
  size_t pos = 0;
  return read_npy(bytes.size(), std::string(source_name), [&](char* dst, uint64_t n) {
    if (n > bytes.size() - pos) return false;
    std::memcpy(dst, bytes.data() + pos, static_cast<size_t>(n));
    pos += static_cast<size_t>(n);
    return true;
  });
}

std::string npy_bytes(const TensorData& t) {
  KILN_CHECK(t.device().type == DeviceType::cpu, "npy_bytes: the tensor lives on ", t.device().str(),
             "; copy it to the host first");
  KILN_CHECK(t.strides.size() == t.sizes.size(), "npy_bytes: the tensor has ", t.sizes.size(), " sizes but ",
             t.strides.size(), " strides");
  const DType out_dtype = t.dtype == DType::bf16 ? DType::f32 : t.dtype;
  const std::string descr = npy_descr(t.dtype);
  const int64_t numel = t.numel();
  const int64_t in_size = dtype_size(t.dtype);
  const int64_t out_size = dtype_size(out_dtype);

  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape_text(t.sizes) + ", }";
  // Pad with spaces so that preamble + header + '\n' is a multiple of 64.
  size_t prefix = 10;
  size_t total = prefix + header.size() + 1;
  if (total > 65535 + prefix) prefix = 12;
  total = prefix + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';

  std::string out(kMagic, 6);
  const uint64_t len = header.size();
  if (prefix == 10) {
    const char v[4] = {1, 0, static_cast<char>(len & 0xFF), static_cast<char>((len >> 8) & 0xFF)};
    out.append(v, 4);
  } else {
    const char v[6] = {2, 0, static_cast<char>(len & 0xFF), static_cast<char>((len >> 8) & 0xFF),
                       static_cast<char>((len >> 16) & 0xFF), static_cast<char>((len >> 24) & 0xFF)};
    out.append(v, 6);
  }
  out += header;

  // The data, gathered in row-major order after the header.
  const size_t data_at = out.size();
  out.resize(data_at + static_cast<size_t>(numel * out_size));
  if (numel > 0) {
    KILN_CHECK(t.storage != nullptr, "npy_bytes: the tensor has no storage");
    const char* base = static_cast<const char*>(t.data());
    std::vector<int64_t> idx(t.sizes.size(), 0);
    int64_t offset = 0;  // in elements, relative to data()
    for (int64_t k = 0; k < numel; ++k) {
      const char* src = base + offset * in_size;
      char* dst = out.data() + data_at + k * out_size;
      if (t.dtype == DType::bf16) {
        uint16_t bits;
        std::memcpy(&bits, src, 2);
        float f = bf16_bits_to_float(bits);
        std::memcpy(dst, &f, 4);
      } else {
        std::memcpy(dst, src, static_cast<size_t>(in_size));
      }
      for (size_t d = t.sizes.size(); d-- > 0;) {
        if (++idx[d] < t.sizes[d]) {
          offset += t.strides[d];
          break;
        }
        offset -= (idx[d] - 1) * t.strides[d];
        idx[d] = 0;
      }
    }
  }
  return out;
}

void save_npy(const TensorData& t, const std::string& path) {
  const std::string bytes = npy_bytes(t);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail("cannot write .npy file '", path, "': ", std::strerror(errno));
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) fail("cannot write .npy file '", path, "'");
}

}  // namespace kiln::npy
