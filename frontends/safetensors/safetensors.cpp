// .safetensors reading and writing. Format reference: github.com/huggingface/safetensors
// (README "Format" and safetensors/src/tensor.rs: the header-size limit, the JSON layout and
// the rule that the tensors cover the data exactly).
#include "kiln/safetensors/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/graph/error.h"
#include "kiln/graph/files.h"

namespace kiln::safetensors {

static_assert(std::endian::native == std::endian::little, "the .safetensors code assumes a little-endian host");

namespace {

// The reference reader refuses headers over 100 MB (a header is small; a huge length is damage).
constexpr uint64_t kMaxHeader = 100'000'000;
constexpr int64_t kMaxNumel = int64_t{1} << 62;
constexpr const char* kMetadataKey = "__metadata__";

struct NamedDType {
  const char* name;
  DType dtype;
};
constexpr NamedDType kDTypes[] = {
    {"F64", DType::f64}, {"F32", DType::f32}, {"F16", DType::f16}, {"BF16", DType::bf16},
    {"I64", DType::i64}, {"I32", DType::i32}, {"BOOL", DType::bool_},
};

// One tensor of a header: where its bytes lie in the data that follows the header.
struct Span {
  std::string name;
  DType dtype;
  std::vector<int64_t> sizes;
  uint64_t begin = 0, end = 0;
};

struct Header {
  std::vector<Span> spans;
  std::map<std::string, std::string> metadata;
};

std::string shape_text(const std::vector<int64_t>& sizes) {
  std::string s = "[";
  for (size_t k = 0; k < sizes.size(); ++k) s += (k ? ", " : "") + std::to_string(sizes[k]);
  return s + "]";
}

// A non-negative integer of the header ("shape" or "data_offsets" entries), as JSON gives it.
uint64_t header_count(const nlohmann::json& v, std::string_view source, const std::string& name, const char* field) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  fail(source, ": tensor '", name, "': ", field, " holds ", v.dump(), ", not a non-negative integer");
}

Span read_span(const std::string& name, const nlohmann::json& info, std::string_view source) {
  KILN_CHECK(info.is_object(), source, ": tensor '", name, "' is described by ", info.type_name(),
             ", not an object with dtype, shape and data_offsets");
  Span s;
  s.name = name;
  bool has_dtype = false, has_shape = false, has_offsets = false;
  for (const auto& [key, v] : info.items()) {
    if (key == "dtype") {
      KILN_CHECK(v.is_string(), source, ": tensor '", name, "': dtype is ", v.dump(), ", not a string");
      s.dtype = dtype_of_type_name(v.get<std::string>(), std::string(source) + ": tensor '" + name + "'");
      has_dtype = true;
    } else if (key == "shape") {
      KILN_CHECK(v.is_array(), source, ": tensor '", name, "': shape is ", v.dump(), ", not an array");
      KILN_CHECK(v.size() <= 64, source, ": tensor '", name, "' has ", v.size(), " dims (at most 64)");
      for (const auto& d : v) {
        const uint64_t size = header_count(d, source, name, "shape");
        KILN_CHECK(size <= static_cast<uint64_t>(kMaxNumel), source, ": tensor '", name, "': dim size ", size,
                   " is too large");
        s.sizes.push_back(static_cast<int64_t>(size));
      }
      has_shape = true;
    } else if (key == "data_offsets") {
      KILN_CHECK(v.is_array() && v.size() == 2, source, ": tensor '", name, "': data_offsets is ", v.dump(),
                 ", not [begin, end]");
      s.begin = header_count(v[0], source, name, "data_offsets");
      s.end = header_count(v[1], source, name, "data_offsets");
      KILN_CHECK(s.begin <= s.end, source, ": tensor '", name, "': data_offsets [", s.begin, ", ", s.end,
                 "] ends before it begins");
      has_offsets = true;
    } else {
      fail(source, ": tensor '", name, "' has the key '", key, "' (a tensor has dtype, shape and data_offsets)");
    }
  }
  KILN_CHECK(has_dtype && has_shape && has_offsets, source, ": tensor '", name, "' lacks ",
             !has_dtype ? "dtype" : !has_shape ? "shape" : "data_offsets");
  return s;
}

// The header's JSON, checked against the `data_size` bytes that follow it.
Header read_header(std::string_view text, uint64_t data_size, std::string_view source) {
  // Keys are checked for duplicates (JSON allows them; a reader would keep one silently), and
  // nesting is bounded (the format nests three deep).
  std::vector<std::set<std::string>> keys;
  std::string duplicate;
  bool too_deep = false;
  auto check = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) {
      if (depth > 3) too_deep = true;
      keys.emplace_back();
    } else if (event == E::object_end) {
      if (!keys.empty()) keys.pop_back();
    } else if (event == E::array_start && depth > 3) {
      too_deep = true;
    } else if (event == E::key && !keys.empty() && !keys.back().insert(parsed.get<std::string>()).second &&
               duplicate.empty()) {
      duplicate = parsed.get<std::string>();
    }
    return !too_deep;
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.begin(), text.end(), check);
  } catch (const nlohmann::json::exception& e) {
    fail(source, ": the header is not JSON: ", e.what());
  }
  KILN_CHECK(!too_deep, source, ": the header nests deeper than a .safetensors header does (3 levels)");
  KILN_CHECK(duplicate.empty(), source, ": the header has the key '", duplicate, "' twice");
  KILN_CHECK(j.is_object(), source, ": the header is ", j.type_name(), ", not a JSON object");

  Header h;
  for (const auto& [name, info] : j.items()) {
    if (name == kMetadataKey) {
      KILN_CHECK(info.is_object(), source, ": ", kMetadataKey, " is ", info.type_name(), ", not an object of strings");
      for (const auto& [key, v] : info.items()) {
        KILN_CHECK(v.is_string(), source, ": ", kMetadataKey, " '", key, "' is ", v.dump(), ", not a string");
        h.metadata.emplace(key, v.get<std::string>());
      }
      continue;
    }
    Span s = read_span(name, info, source);
    int64_t numel = 1;
    for (int64_t d : s.sizes) {
      KILN_CHECK(d == 0 || numel <= kMaxNumel / d, source, ": tensor '", name, "' of shape ", shape_text(s.sizes),
                 " has too many elements");
      numel *= d;
    }
    const uint64_t nbytes = static_cast<uint64_t>(numel) * static_cast<uint64_t>(dtype_size(s.dtype));
    KILN_CHECK(numel <= kMaxNumel / 8 && s.end - s.begin == nbytes, source, ": tensor '", name, "' (",
               type_name(s.dtype), " ", shape_text(s.sizes), ") needs ", numel <= kMaxNumel / 8 ? nbytes : 0,
               " bytes, but its data_offsets [", s.begin, ", ", s.end, "] hold ", s.end - s.begin);
    KILN_CHECK(s.end <= data_size, source, ": tensor '", name, "' ends at byte ", s.end, " of the data, which has ",
               data_size, " bytes (the file is truncated or the offsets are wrong)");
    h.spans.push_back(std::move(s));
  }
  // The tensors must cover the data exactly, in some order: no gap (bytes nothing owns), no
  // overlap (two tensors over the same bytes), nothing after the last.
  std::vector<const Span*> order;
  for (const Span& s : h.spans) order.push_back(&s);
  std::sort(order.begin(), order.end(), [](const Span* a, const Span* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t covered = 0;
  const Span* previous = nullptr;
  for (const Span* s : order) {
    KILN_CHECK(s->begin == covered, source, ": tensor '", s->name, "' begins at byte ", s->begin, " of the data, ",
               s->begin < covered ? "inside" : "after a gap after", " the bytes of ",
               previous ? "tensor '" + previous->name + "'" : std::string("nothing"), ", which end at ", covered);
    covered = s->end;
    previous = s;
  }
  KILN_CHECK(covered == data_size, source, ": the tensors cover ", covered, " bytes of the data, which has ",
             data_size, " (bytes no tensor owns at its end)");
  return h;
}

void check_bools(const TensorData& t, std::string_view source, const std::string& name) {
  if (t.dtype != DType::bool_) return;
  const auto* p = t.data_as<uint8_t>();
  for (int64_t k = 0; k < t.numel(); ++k)
    KILN_CHECK(p[k] <= 1, source, ": tensor '", name, "' (BOOL) holds the byte ", int{p[k]}, " at element ", k,
               ", not 0 or 1");
}

// The tensors a checked header describes, each in storage of its own that `fill` writes its
// bytes into (from memory or from the file).
Tensors read_tensors(const Header& h, std::string_view source, const std::function<void(void*, const Span&)>& fill) {
  Tensors out;
  out.metadata = h.metadata;
  for (const Span& s : h.spans) {
    TensorData t = TensorData::empty_host(s.dtype, s.sizes);
    fill(t.data(), s);
    check_bools(t, source, s.name);
    out.tensors.emplace(s.name, std::move(t));
  }
  return out;
}

// The header length (8 bytes, little-endian), checked against what can follow it.
uint64_t header_length(const unsigned char (&bytes)[8], uint64_t file_size, std::string_view source) {
  uint64_t n = 0;
  for (int k = 7; k >= 0; --k) n = (n << 8) | bytes[k];
  KILN_CHECK(n <= kMaxHeader, source, ": the header length is ", n, " bytes (at most ", kMaxHeader,
             "): not a .safetensors file, or a damaged one");
  KILN_CHECK(n <= file_size - 8, source, ": the header length is ", n, " bytes but only ", file_size - 8,
             " follow it: the file is truncated");
  return n;
}

// The bytes of `t` in row-major order, handed to `sink` in pieces (one piece when contiguous).
void gather(const TensorData& t, const std::function<void(const char*, size_t)>& sink) {
  const int64_t numel = t.numel();
  if (numel == 0) return;
  const size_t esize = static_cast<size_t>(dtype_size(t.dtype));
  const char* base = static_cast<const char*>(t.data());
  if (t.is_contiguous()) return sink(base, static_cast<size_t>(numel) * esize);
  std::vector<int64_t> idx(t.sizes.size(), 0);
  std::string row;
  int64_t offset = 0;
  for (int64_t k = 0; k < numel; ++k) {
    row.append(base + offset * static_cast<int64_t>(esize), esize);
    if (row.size() >= (1 << 20)) {
      sink(row.data(), row.size());
      row.clear();
    }
    for (int64_t d = t.rank() - 1; d >= 0; --d) {
      if (++idx[d] < t.sizes[d]) {
        offset += t.strides[d];
        break;
      }
      offset -= (t.sizes[d] - 1) * t.strides[d];
      idx[d] = 0;
    }
  }
  sink(row.data(), row.size());
}

// What a writer writes, in order, to `sink`.
void write(const Tensors& t, const std::function<void(const char*, size_t)>& sink) {
  std::vector<std::pair<const std::string*, const TensorData*>> order;
  for (const auto& [name, data] : t.tensors) {
    KILN_CHECK(name != kMetadataKey, "safetensors: a tensor cannot be named '", kMetadataKey,
               "' (the format's metadata key)");
    KILN_CHECK(data.storage != nullptr, "safetensors: tensor '", name, "' has no storage");
    KILN_CHECK(data.device().type == DeviceType::cpu, "safetensors: tensor '", name, "' lives on ",
               data.device().str(), "; copy it to the host first");
    KILN_CHECK(data.strides.size() == data.sizes.size(), "safetensors: tensor '", name, "' has ", data.sizes.size(),
               " sizes but ", data.strides.size(), " strides");
    type_name(data.dtype);  // refuses a dtype the format has no name for
    order.emplace_back(&name, &data);
  }
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return dtype_size(a.second->dtype) > dtype_size(b.second->dtype);
  });
  nlohmann::json header = nlohmann::json::object();
  if (!t.metadata.empty()) header[kMetadataKey] = t.metadata;
  uint64_t at = 0;
  for (const auto& [name, data] : order) {
    const uint64_t nbytes = static_cast<uint64_t>(data->numel()) * static_cast<uint64_t>(dtype_size(data->dtype));
    nlohmann::json info = nlohmann::json::object();
    info["dtype"] = type_name(data->dtype);
    info["shape"] = data->sizes;
    info["data_offsets"] = nlohmann::json::array({at, at + nbytes});
    header[*name] = std::move(info);
    at += nbytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-aligned in the file
  unsigned char length[8];
  for (int k = 0; k < 8; ++k) length[k] = static_cast<unsigned char>(static_cast<uint64_t>(text.size()) >> (8 * k));
  sink(reinterpret_cast<const char*>(length), 8);
  sink(text.data(), text.size());
  for (const auto& entry : order) gather(*entry.second, sink);
}

}  // namespace

std::string type_name(DType dtype) {
  for (const NamedDType& d : kDTypes)
    if (d.dtype == dtype) return d.name;
  fail("safetensors: the format has no type for ", kiln::dtype_name(dtype));
}

DType dtype_of_type_name(std::string_view name, std::string_view where) {
  for (const NamedDType& d : kDTypes)
    if (name == d.name) return d.dtype;
  fail(where, " has dtype ", name, ", which Kiln has no type for (it reads F64, F32, F16, BF16, I64, I32, BOOL)");
}

Tensors parse(std::string_view bytes, std::string_view source) {
  KILN_CHECK(bytes.size() >= 8, source, ": ", bytes.size(), " bytes, too few for a .safetensors file (8-byte header length first)");
  unsigned char length[8];
  std::memcpy(length, bytes.data(), 8);
  const uint64_t n = header_length(length, bytes.size(), source);
  const std::string_view data = bytes.substr(8 + n);
  const Header h = read_header(bytes.substr(8, n), data.size(), source);
  return read_tensors(h, source, [&](void* into, const Span& s) {
    if (s.end > s.begin) std::memcpy(into, data.data() + s.begin, s.end - s.begin);
  });
}

Tensors load(const std::string& path) {
  check_regular_file(path, ".safetensors file");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  KILN_CHECK(fd >= 0, "cannot open .safetensors file '", path, "': ", std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st{};
  KILN_CHECK(::fstat(fd, &st) == 0, "cannot read .safetensors file '", path, "': ", std::strerror(errno));
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  // Reads [at, at + n) of the file into `into`; a short file is an error (it may shrink meanwhile).
  auto read_at = [&](void* into, uint64_t n, uint64_t at) {
    auto* p = static_cast<char*>(into);
    while (n > 0) {
      const ssize_t got = ::pread(fd, p, std::min<uint64_t>(n, uint64_t{1} << 30), static_cast<off_t>(at));
      if (got < 0 && errno == EINTR) continue;
      KILN_CHECK(got >= 0, "cannot read .safetensors file '", path, "': ", std::strerror(errno));
      KILN_CHECK(got > 0, path, ": the file ended at byte ", at, " while reading it (truncated meanwhile?)");
      p += got;
      n -= static_cast<uint64_t>(got);
      at += static_cast<uint64_t>(got);
    }
  };
  KILN_CHECK(file_size >= 8, path, ": ", file_size, " bytes, too few for a .safetensors file (8-byte header length first)");
  unsigned char length[8];
  read_at(length, 8, 0);
  const uint64_t n = header_length(length, file_size, path);
  std::string text(n, '\0');
  read_at(text.data(), n, 8);
  const uint64_t data_at = 8 + n;
  const Header h = read_header(text, file_size - data_at, path);
  return read_tensors(h, path, [&](void* into, const Span& s) { read_at(into, s.end - s.begin, data_at + s.begin); });
}

std::string to_bytes(const Tensors& t) {
  std::string out;
  write(t, [&out](const char* p, size_t n) { out.append(p, n); });
  return out;
}

void save(const Tensors& t, const std::string& path) {
  // Beside the target, so that the rename stays in one file system; unique per process and call.
  static std::atomic<uint64_t> counter{0};
  const std::string temp = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  try {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) fail("cannot write .safetensors file '", path, "' (its temporary '", temp, "'): ", std::strerror(errno));
    write(t, [&](const char* p, size_t n) {
      out.write(p, static_cast<std::streamsize>(n));
      if (!out) fail("cannot write .safetensors file '", path, "' (its temporary '", temp, "'): ", std::strerror(errno));
    });
    out.close();
    if (!out) fail("cannot write .safetensors file '", path, "' (its temporary '", temp, "')");
    std::error_code ec;
    std::filesystem::rename(temp, path, ec);
    if (ec) fail("cannot write .safetensors file '", path, "': renaming '", temp, "' over it: ", ec.message());
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(temp, ignored);
    throw;
  }
}

}  // namespace kiln::safetensors
