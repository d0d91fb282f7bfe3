// frontends/safetensors: files as Hugging Face's writer lays them out read back to the values they
// hold, save and load of every dtype (strided views, scalars, empty tensors, metadata), the
// alignment the writer keeps, and the error each kind of bad file gives.
#define BOOST_TEST_MODULE safetensors
#include <boost/test/unit_test.hpp>

#include "kiln_test_util.h"

#include <kiln/graph/error.h>
#include <kiln/safetensors/safetensors.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace kiln;
namespace st = kiln::safetensors;

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("kiln_test_safetensors_" + std::to_string(::getpid()) + "_" + name)).string();
}

using kiln_test_util::read_file;
using kiln_test_util::write_file;

// A file: the 8-byte little-endian length of `header`, `header`, then `data`.
std::string file_bytes(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  for (int k = 0; k < 8; ++k) out[k] = static_cast<char>(static_cast<uint64_t>(header.size()) >> (8 * k));
  return out + header + data;
}

template <class T>
std::string raw(std::initializer_list<T> values) {
  std::string s;
  for (T v : values) s.append(reinterpret_cast<const char*>(&v), sizeof(T));
  return s;
}

template <class T>
TensorData host(DType dtype, std::vector<int64_t> sizes, std::initializer_list<T> values) {
  TensorData t = TensorData::empty_host(dtype, std::move(sizes));
  BOOST_REQUIRE_EQUAL(static_cast<size_t>(t.numel()), values.size());
  std::memcpy(t.data(), std::data(values), values.size() * sizeof(T));
  return t;
}

bool same(const TensorData& a, const TensorData& b) {
  if (a.dtype != b.dtype || a.sizes != b.sizes) return false;
  const size_t n = static_cast<size_t>(a.numel() * dtype_size(a.dtype));
  return n == 0 || std::memcmp(a.data(), b.data(), n) == 0;
}

// The message of the kiln::Error that parsing `bytes` throws ("" when it loads).
std::string error_of(const std::string& bytes) {
  try {
    st::parse(bytes, "m.safetensors");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void check_error(const std::string& bytes, std::initializer_list<const char*> parts) {
  const std::string message = error_of(bytes);
  BOOST_TEST_CONTEXT(message) {
    BOOST_TEST(!message.empty());
    BOOST_TEST(message.find("m.safetensors") != std::string::npos);
    for (const char* p : parts) BOOST_TEST(message.find(p) != std::string::npos, "missing '" << p << "'");
  }
}

}  // namespace

// A file laid out as Hugging Face's Python writer writes it (its key order, __metadata__
// first, the header padded with spaces, largest elements first).
BOOST_AUTO_TEST_CASE(reads_a_file_as_hugging_face_writes_it) {
  std::string header =
      R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
      R"("ids":{"dtype":"I64","shape":[],"data_offsets":[16,24]},)"
      R"("h":{"dtype":"BF16","shape":[3],"data_offsets":[24,30]},"m":{"dtype":"BOOL","shape":[2],"data_offsets":[30,32]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  const std::string data = raw<float>({1.5f, -2.f, 0.25f, 3.f}) + raw<int64_t>({-7}) +
                           raw<uint16_t>({0x3F80, 0xC000, 0x3E80}) + std::string("\x01\x00", 2);
  const st::Tensors t = st::parse(file_bytes(header, data), "hf.safetensors");
  BOOST_TEST(t.metadata.at("format") == "pt");
  BOOST_TEST(t.tensors.size() == 4u);
  BOOST_TEST(same(t.tensors.at("w"), host<float>(DType::f32, {2, 2}, {1.5f, -2.f, 0.25f, 3.f})));
  BOOST_TEST(same(t.tensors.at("ids"), host<int64_t>(DType::i64, {}, {-7})));
  BOOST_TEST(same(t.tensors.at("h"), host<uint16_t>(DType::bf16, {3}, {0x3F80, 0xC000, 0x3E80})));
  BOOST_TEST(same(t.tensors.at("m"), host<uint8_t>(DType::bool_, {2}, {1, 0})));
  // Each tensor has storage of its own (not a view into the file's bytes).
  BOOST_TEST(t.tensors.at("w").storage != t.tensors.at("ids").storage);
  BOOST_TEST(t.tensors.at("w").is_contiguous());
}

BOOST_AUTO_TEST_CASE(every_dtype_round_trips_through_a_file) {
  st::Tensors t;
  t.metadata = {{"format", "pt"}, {"note", "kiln test"}};
  t.tensors["a.f64"] = host<double>(DType::f64, {3}, {1.0, -0.5, 1e300});
  t.tensors["b.f32"] = host<float>(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
  t.tensors["c.f16"] = host<uint16_t>(DType::f16, {2}, {0x3C00, 0x7C00});
  t.tensors["d.bf16"] = host<uint16_t>(DType::bf16, {1, 1, 1}, {0x4049});
  t.tensors["e.i64"] = host<int64_t>(DType::i64, {}, {INT64_MIN});
  t.tensors["f.i32"] = host<int32_t>(DType::i32, {4}, {-1, 0, 1, INT32_MAX});
  t.tensors["g.bool"] = host<uint8_t>(DType::bool_, {3}, {1, 1, 0});
  t.tensors["h.empty"] = TensorData::empty_host(DType::f32, {0, 5});
  // A strided view (the transpose of b) is written in row-major order.
  TensorData bt = t.tensors["b.f32"];
  bt.sizes = {3, 2};
  bt.strides = {1, 3};
  t.tensors["i.transposed"] = bt;

  const std::string path = temp_path("round_trip.safetensors");
  st::save(t, path);
  const st::Tensors back = st::load(path);
  BOOST_TEST(back.metadata == t.metadata);
  BOOST_TEST(back.tensors.size() == t.tensors.size());
  for (const auto& [name, data] : t.tensors) {
    if (name == "i.transposed") continue;
    BOOST_TEST_CONTEXT(name) { BOOST_TEST(same(back.tensors.at(name), data)); }
  }
  BOOST_TEST(same(back.tensors.at("i.transposed"), host<float>(DType::f32, {3, 2}, {1, 4, 2, 5, 3, 6})));
  // The file is what to_bytes gives, and parse reads the same as load.
  const std::string bytes = read_file(path);
  BOOST_TEST(bytes == st::to_bytes(t));
  BOOST_TEST(st::to_bytes(st::parse(bytes, "again")) == st::to_bytes(back));
  std::filesystem::remove(path);
}

// The header ends on a multiple of 8 bytes and every tensor begins at a multiple of its element
// size, so a reader may map the data and use it in place.
BOOST_AUTO_TEST_CASE(the_writer_keeps_every_tensor_aligned) {
  st::Tensors t;
  t.tensors["odd_bool"] = host<uint8_t>(DType::bool_, {3}, {1, 0, 1});
  t.tensors["half"] = host<uint16_t>(DType::f16, {1}, {0x3C00});
  t.tensors["float"] = host<float>(DType::f32, {3}, {1, 2, 3});
  t.tensors["double"] = host<double>(DType::f64, {1}, {2});
  const std::string bytes = st::to_bytes(t);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  BOOST_TEST((8 + n) % 8 == 0u);
  const std::string header = bytes.substr(8, n);
  for (const char* name : {"odd_bool", "half", "float", "double"}) BOOST_TEST(header.find(name) != std::string::npos);
  // Largest elements first: double at 0, float at 8, half at 20, the bools last.
  BOOST_TEST(header.find(R"("double":{"data_offsets":[0,8])") != std::string::npos, header);
  BOOST_TEST(header.find(R"("float":{"data_offsets":[8,20])") != std::string::npos, header);
  BOOST_TEST(header.find(R"("half":{"data_offsets":[20,22])") != std::string::npos, header);
  BOOST_TEST(header.find(R"("odd_bool":{"data_offsets":[22,25])") != std::string::npos, header);
}

BOOST_AUTO_TEST_CASE(bad_files_are_refused_with_what_is_wrong) {
  const std::string f32x2 = raw<float>({1, 2});
  auto one = [&](const std::string& info, const std::string& data) { return file_bytes(R"({"t":)" + info + "}", data); };
  // Framing.
  check_error("abc", {"too few"});
  check_error(std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8) + "{}", {"header length"});
  check_error(file_bytes("{}", "").substr(0, 9), {"truncated"});
  check_error(file_bytes("{\"t\":", ""), {"not JSON"});
  check_error(file_bytes("[1,2]", ""), {"not a JSON object"});
  check_error(file_bytes(R"({"a":{"b":{"c":{"d":{}}}}})", ""), {"nests deeper"});
  // A tensor's description.
  check_error(one(R"({"dtype":"I8","shape":[2],"data_offsets":[0,2]})", "ab"), {"'t'", "I8", "no type"});
  check_error(one(R"({"dtype":"F32","shape":[2]})", f32x2), {"'t'", "lacks data_offsets"});
  check_error(one(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":1})", f32x2), {"'t'", "'extra'"});
  check_error(one(R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})", f32x2), {"'t'", "-2"});
  check_error(one(R"({"dtype":"F32","shape":[2.5],"data_offsets":[0,8]})", f32x2), {"'t'", "2.5"});
  check_error(one(R"({"dtype":"F32","shape":[2],"data_offsets":[8,0]})", f32x2), {"'t'", "ends before"});
  check_error(one(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})", f32x2), {"'t'", "needs 12 bytes"});
  check_error(one(R"({"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]})", f32x2),
              {"'t'", "too many elements"});
  check_error(one(R"({"dtype":"F32","shape":[4],"data_offsets":[0,16]})", f32x2), {"'t'", "truncated"});
  check_error(one("[1]", f32x2), {"'t'", "not an object"});
  check_error(file_bytes(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", f32x2),
              {"'t' twice"});
  check_error(file_bytes(R"({"__metadata__":{"k":1}})", ""), {"__metadata__", "'k'", "not a string"});
  // Coverage of the data: a gap, an overlap, bytes no tensor owns.
  check_error(file_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                         raw<float>({1, 2, 3})),
              {"'b'", "after a gap", "'a'"});
  check_error(file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                         f32x2),
              {"'b'", "inside", "'a'"});
  check_error(one(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})", f32x2), {"cover 4 bytes", "has 8"});
  // Values.
  check_error(one(R"({"dtype":"BOOL","shape":[2],"data_offsets":[0,2]})", std::string("\x01\x02", 2)),
              {"'t'", "byte 2", "element 1"});
  // What loads: empty files of tensors and zero-size tensors sharing an offset.
  BOOST_TEST(error_of(file_bytes("{}", "")).empty());
  BOOST_TEST(error_of(file_bytes(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"b":{"dtype":"I32","shape":[0,3],"data_offsets":[0,0]}})", "")).empty());
}

BOOST_AUTO_TEST_CASE(files_and_failed_saves) {
  // load: a missing file and a directory say so.
  try {
    st::load(temp_path("missing.safetensors"));
    BOOST_FAIL("no error");
  } catch (const Error& e) {
    BOOST_TEST(std::string(e.what()).find("cannot open") != std::string::npos, e.what());
  }
  BOOST_CHECK_THROW(st::load(std::filesystem::temp_directory_path().string()), Error);
  // A file cut short after its header names the tensor that runs past its end.
  const std::string path = temp_path("kept.safetensors");
  st::Tensors t;
  t.tensors["w"] = host<float>(DType::f32, {2}, {1, 2});
  st::save(t, path);
  const std::string good = read_file(path);
  write_file(path + ".cut", good.substr(0, good.size() - 1));
  try {
    st::load(path + ".cut");
    BOOST_FAIL("no error");
  } catch (const Error& e) {
    BOOST_TEST(std::string(e.what()).find("'w'") != std::string::npos, e.what());
  }
  std::filesystem::remove(path + ".cut");
  // A save that fails (a tensor under the format's metadata key) leaves the file it would have
  // replaced as it was, and no temporary beside it.
  st::Tensors bad = t;
  bad.tensors["__metadata__"] = host<float>(DType::f32, {1}, {3});
  BOOST_CHECK_THROW(st::save(bad, path), Error);
  BOOST_TEST(read_file(path) == good);
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::temp_directory_path()))
    if (e.path().filename().string().rfind("kiln_test_safetensors_" + std::to_string(::getpid()) + "_kept", 0) == 0) ++files;
  BOOST_TEST(files == 1u);
  // A directory that does not exist: an error naming the path.
  try {
    st::save(t, temp_path("no_such_dir") + "/x.safetensors");
    BOOST_FAIL("no error");
  } catch (const Error& e) {
    BOOST_TEST(std::string(e.what()).find("no_such_dir") != std::string::npos, e.what());
  }
  std::filesystem::remove(path);
}
