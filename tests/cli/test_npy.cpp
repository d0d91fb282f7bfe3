// frontends/npy: save and load of every dtype, strided views, bf16 saved as f32, and the errors
// that bad files give.
#define BOOST_TEST_MODULE npy
#include <boost/test/unit_test.hpp>

#include "kiln_test_util.h"

#include <kiln/graph/error.h>
#include <kiln/npy/npy.h>

#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace kiln;

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("kiln_test_npy_" + name)).string();
}

using kiln_test_util::read_file;
using kiln_test_util::write_file;

// A file with the given header dict and `data_bytes` zero bytes of data.
std::string npy_bytes(const std::string& dict, size_t data_bytes) {
  std::string header = dict;
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = std::string("\x93NUMPY", 6) + '\x01' + '\x00';
  out += static_cast<char>(header.size() & 0xFF);
  out += static_cast<char>(header.size() >> 8);
  return out + header + std::string(data_bytes, '\0');
}

bool says(const Error& e, const std::string& part) {
  const bool ok = std::string(e.what()).find(part) != std::string::npos;
  if (!ok) BOOST_TEST_MESSAGE("message \"" << e.what() << "\" lacks \"" << part << "\"");
  return ok;
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_dtype_round_trips) {
  for (DType t : {DType::f16, DType::f32, DType::f64, DType::i32, DType::i64, DType::bool_}) {
    BOOST_TEST_CONTEXT(dtype_name(t)) {
      TensorData a = TensorData::empty_host(t, {2, 3});
      auto* bytes = static_cast<unsigned char*>(a.data());
      for (int64_t i = 0; i < a.numel() * dtype_size(t); ++i)
        bytes[i] = t == DType::bool_ ? static_cast<unsigned char>(i % 2) : static_cast<unsigned char>(i * 37 + 1);
      const std::string path = temp_path(std::string(dtype_name(t)) + ".npy");
      npy::save_npy(a, path);
      const std::string file = read_file(path);
      BOOST_TEST(file.substr(0, 6) == std::string("\x93NUMPY", 6));
      BOOST_TEST(file.find("'descr': '" + npy::npy_descr(t) + "'") != std::string::npos);
      BOOST_TEST((file.size() - a.numel() * dtype_size(t)) % 64 == 0u);  // data aligned to 64
      const TensorData b = npy::load_npy(path);
      BOOST_TEST((b.dtype == t));
      BOOST_TEST(b.sizes == a.sizes);
      BOOST_TEST(std::memcmp(a.data(), b.data(), static_cast<size_t>(a.numel() * dtype_size(t))) == 0);
      std::filesystem::remove(path);
    }
  }
}

BOOST_AUTO_TEST_CASE(scalars_empty_and_1d) {
  for (std::vector<int64_t> sizes : {std::vector<int64_t>{}, {0}, {5}, {2, 0, 3}}) {
    TensorData a = TensorData::empty_host(DType::f32, sizes);
    for (int64_t i = 0; i < a.numel(); ++i) a.data_as<float>()[i] = static_cast<float>(i) - 1.5f;
    const std::string path = temp_path("shape.npy");
    npy::save_npy(a, path);
    const TensorData b = npy::load_npy(path);
    BOOST_TEST(b.sizes == sizes);
    for (int64_t i = 0; i < a.numel(); ++i) BOOST_TEST(b.data_as<float>()[i] == a.data_as<float>()[i]);
  }
  const std::string file = read_file(temp_path("shape.npy"));
  BOOST_TEST(file.find("'shape': (2, 0, 3)") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(strided_views_are_gathered) {
  TensorData a = TensorData::empty_host(DType::i32, {2, 3});
  for (int i = 0; i < 6; ++i) a.data_as<int32_t>()[i] = i;
  TensorData t = a;  // the transpose, a [3, 2] view
  t.sizes = {3, 2};
  t.strides = {1, 3};
  const std::string path = temp_path("strided.npy");
  npy::save_npy(t, path);
  const TensorData b = npy::load_npy(path);
  BOOST_TEST(b.sizes == (std::vector<int64_t>{3, 2}));
  const std::vector<int32_t> want = {0, 3, 1, 4, 2, 5};
  for (int i = 0; i < 6; ++i) BOOST_TEST(b.data_as<int32_t>()[i] == want[i]);
}

BOOST_AUTO_TEST_CASE(bf16_is_saved_as_f32) {
  TensorData a = TensorData::empty_host(DType::bf16, {3});
  const float values[] = {1.5f, -2.0f, 0.0078125f};
  for (int i = 0; i < 3; ++i) a.data_as<uint16_t>()[i] = float_to_bf16_bits(values[i]);
  const std::string path = temp_path("bf16.npy");
  npy::save_npy(a, path);
  const TensorData b = npy::load_npy(path);
  BOOST_TEST((b.dtype == DType::f32));
  for (int i = 0; i < 3; ++i) BOOST_TEST(b.data_as<float>()[i] == values[i]);
}

// parse_npy and npy_bytes are the file functions' reader and writer on bytes: the same bytes,
// the same tensor, the same errors (named by the source name given).
BOOST_AUTO_TEST_CASE(bytes_are_what_files_hold) {
  TensorData a = TensorData::empty_host(DType::i32, {3, 2});
  for (int64_t i = 0; i < a.numel(); ++i) a.data_as<int32_t>()[i] = static_cast<int32_t>(i * 7 - 3);
  const std::string path = temp_path("bytes.npy");
  npy::save_npy(a, path);
  const std::string bytes = npy::npy_bytes(a);
  BOOST_TEST(read_file(path) == bytes);
  const TensorData b = npy::parse_npy(bytes, "mem.npy");
  BOOST_TEST(b.sizes == a.sizes);
  BOOST_TEST(std::memcmp(a.data(), b.data(), 24) == 0);
  BOOST_CHECK_EXCEPTION(npy::parse_npy(bytes.substr(0, bytes.size() - 1), "mem.npy"), Error,
                        [&](const Error& e) { return says(e, "mem.npy: truncated .npy file"); });
  std::filesystem::remove(path);
}

BOOST_AUTO_TEST_CASE(truncated_and_malformed_files) {
  TensorData a = TensorData::empty_host(DType::f64, {4, 4});
  const std::string good = temp_path("good.npy");
  npy::save_npy(a, good);
  const std::string file = read_file(good);
  const std::string bad = temp_path("bad.npy");

  write_file(bad, file.substr(0, file.size() - 8));
  BOOST_CHECK_EXCEPTION(npy::load_npy(bad), Error, [&](const Error& e) {
    return says(e, bad + ": truncated .npy file: a <f8 array of shape (4, 4) needs 128 bytes of data, the file holds 120");
  });
  write_file(bad, file.substr(0, 40));
  BOOST_CHECK_EXCEPTION(npy::load_npy(bad), Error, [&](const Error& e) { return says(e, "truncated .npy file"); });
  write_file(bad, file.substr(0, 5));
  BOOST_CHECK_EXCEPTION(npy::load_npy(bad), Error, [&](const Error& e) { return says(e, "not a .npy file"); });
  write_file(bad, "PK\x03\x04 this is a zip file, not an npy file");
  BOOST_CHECK_EXCEPTION(npy::load_npy(bad), Error, [&](const Error& e) { return says(e, "magic string"); });
  write_file(bad, file + "xx");
  BOOST_CHECK_EXCEPTION(npy::load_npy(bad), Error, [&](const Error& e) { return says(e, "2 bytes after the data"); });

  write_file(bad, npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 24));
  BOOST_CHECK_EXCEPTION(npy::load_npy(bad), Error, [&](const Error& e) { return says(e, "Fortran order"); });
  write_file(bad, npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", 24));
  BOOST_CHECK_EXCEPTION(npy::load_npy(bad), Error,
                        [&](const Error& e) { return says(e, "unsupported .npy element type '>f4'"); });
  write_file(bad, npy_bytes("{'descr': '<u2', 'fortran_order': False, 'shape': (2, 3), }", 12));
  BOOST_CHECK_EXCEPTION(npy::load_npy(bad), Error, [&](const Error& e) { return says(e, "'<u2'"); });
  write_file(bad, npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3 }", 24));
  BOOST_CHECK_EXCEPTION(npy::load_npy(bad), Error, [&](const Error& e) { return says(e, "malformed .npy header"); });
  write_file(bad, npy_bytes("{'descr': '<f4', 'fortran_order': False}", 24));
  BOOST_CHECK_EXCEPTION(npy::load_npy(bad), Error, [&](const Error& e) { return says(e, "no 'shape' entry"); });
  write_file(bad, npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4), }", 0));
  BOOST_CHECK_EXCEPTION(npy::load_npy(bad), Error, [&](const Error& e) { return says(e, "too large"); });
  // 2^62 elements of 4 bytes: a byte count that wraps to 0 must not pass for a file without data.
  write_file(bad, npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2147483648, 2147483648), }", 0));
  BOOST_CHECK_EXCEPTION(npy::load_npy(bad), Error, [&](const Error& e) {
    return says(e, bad + ": the array shape (2147483648, 2147483648) is too large");
  });
  write_file(bad, npy_bytes("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", 0) + "\x01\x07");
  BOOST_CHECK_EXCEPTION(npy::load_npy(bad), Error, [&](const Error& e) { return says(e, "not 0 or 1"); });

  // A FIFO or a device is refused, not read (the read would block, or never end).
  const std::string fifo = temp_path("fifo.npy");
  std::remove(fifo.c_str());
  BOOST_REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  BOOST_CHECK_EXCEPTION(npy::load_npy(fifo), Error, [&](const Error& e) { return says(e, "is not a regular file (a FIFO)"); });
  std::remove(fifo.c_str());
  BOOST_CHECK_EXCEPTION(npy::load_npy("/dev/zero"), Error,
                        [&](const Error& e) { return says(e, "is not a regular file (a character device)"); });

  // A 1-D array written with fortran_order True is the same array: accepted.
  write_file(bad, npy_bytes("{'descr': '<i8', 'fortran_order': True, 'shape': (3,), }", 24));
  BOOST_TEST(npy::load_npy(bad).sizes == std::vector<int64_t>{3});

  BOOST_CHECK_EXCEPTION(npy::load_npy(temp_path("does_not_exist.npy")), Error,
                        [&](const Error& e) { return says(e, "cannot open .npy file"); });
  std::filesystem::remove(good);
  std::filesystem::remove(bad);
}
