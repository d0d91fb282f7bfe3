// .npz archives through libzip, and folders of .npy files (npz.h).
#include "kiln/npy/npz.h"

#include <zip.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <vector>

#include "kiln/graph/error.h"
#include "kiln/graph/files.h"
#include "kiln/graph/memory_budget.h"
#include "kiln/npy/npy.h"

namespace kiln::npy {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kSuffix = ".npy";

bool ends_with_npy(std::string_view s) { return s.size() > kSuffix.size() && s.ends_with(kSuffix); }

// A tensor name that is safe as a file name in a folder, or as a zip member (np.load takes any
// member name, so '/' is kept, as ONNX initializer names have it, but no absolute path or '..'
// part that would leave the folder the archive is unpacked into).
void check_name(const std::string& name, const std::string& where, bool in_folder) {
  bool ok = !name.empty() && name.find('\0') == std::string::npos && name.front() != '/';
  for (size_t at = 0; ok && at <= name.size();) {
    const size_t end = std::min(name.find('/', at), name.size());
    const std::string_view part = std::string_view(name).substr(at, end - at);
    ok = part != "." && part != ".." && (!in_folder || end == name.size());
    at = end + 1;
  }
  KILN_CHECK(ok, where, ": tensor name '", name, "' cannot be ", in_folder ? "a file name" : "a member name",
             in_folder ? " (empty, '.', '..', or holding '/' or a NUL)" : " (empty, absolute, a '.' or '..' part, or a NUL)");
}

std::string zip_error_text(int code) {
  zip_error_t e;
  zip_error_init_with_code(&e, code);
  std::string s = zip_error_strerror(&e);
  zip_error_fini(&e);
  return s;
}

struct ZipCloser {
  void operator()(zip_t* z) const { zip_discard(z); }
};

}  // namespace

NamedTensors load_npz(const std::string& path) {
  // Read once as a regular file of bounded size (no FIFOs, devices, or files over the budget).
  const std::string bytes = read_regular_file(path, ".npz file");
  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* src = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &err);
  KILN_CHECK(src != nullptr, ".npz file '", path, "': ", zip_error_strerror(&err));
  std::unique_ptr<zip_t, ZipCloser> za(zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &err));
  if (!za) {
    zip_source_free(src);
    const std::string why = zip_error_strerror(&err);
    zip_error_fini(&err);
    fail(".npz file '", path, "' is not a readable zip archive: ", why);
  }
  zip_error_fini(&err);
  const zip_int64_t n = zip_get_num_entries(za.get(), 0);
  NamedTensors out;
  int64_t total = static_cast<int64_t>(bytes.size());  // held while the members are read
  for (zip_int64_t i = 0; i < n; ++i) {
    zip_stat_t st;
    zip_stat_init(&st);
    KILN_CHECK(zip_stat_index(za.get(), static_cast<zip_uint64_t>(i), 0, &st) == 0 && (st.valid & ZIP_STAT_NAME) &&
                   (st.valid & ZIP_STAT_SIZE),
               ".npz file '", path, "': member ", i, ": ", zip_strerror(za.get()));
    const std::string name = st.name;
    if (name.ends_with("/")) continue;  // a folder entry
    const std::string where = ".npz file '" + path + "', member '" + name + "'";
    KILN_CHECK(ends_with_npy(name), where, ": not a NAME.npy member");
    // The declared size bounds what is read: a deflated member may claim far more than the
    // archive holds (a zip bomb), so it is checked against the budget before any allocation.
    KILN_CHECK(st.size <= static_cast<zip_uint64_t>(memory_budget_bytes() - total), where, " would need ",
               bytes_str(static_cast<int64_t>(std::min<zip_uint64_t>(st.size, INT64_MAX))),
               " with what is already read, more than ", memory_budget_str());
    total += static_cast<int64_t>(st.size);
    std::unique_ptr<zip_file_t, int (*)(zip_file_t*)> f(zip_fopen_index(za.get(), static_cast<zip_uint64_t>(i), 0),
                                                        zip_fclose);
    KILN_CHECK(f != nullptr, where, ": ", zip_strerror(za.get()));
    std::string member(static_cast<size_t>(st.size), '\0');
    const zip_int64_t got = zip_fread(f.get(), member.data(), st.size);
    KILN_CHECK(got >= 0 && static_cast<zip_uint64_t>(got) == st.size, where, ": ",
               got < 0 ? std::string(zip_file_strerror(f.get())) : "holds " + std::to_string(got) + " of its " +
                                                                       std::to_string(st.size) + " bytes");
    const std::string key = name.substr(0, name.size() - kSuffix.size());
    KILN_CHECK(!out.contains(key), where, ": a second member named '", key, "'");
    out.emplace(key, parse_npy(member, where));
  }
  return out;
}

void save_npz(const NamedTensors& tensors, const std::string& path) {
  // Every member's bytes first (libzip reads them when the archive is closed).
  std::vector<std::pair<std::string, std::string>> members;
  for (const auto& [name, t] : tensors) {
    check_name(name, "save_npz '" + path + "'", /*in_folder=*/false);
    members.emplace_back(name + std::string(kSuffix), npy_bytes(t));
  }
  int code = 0;
  std::unique_ptr<zip_t, ZipCloser> za(zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code));
  KILN_CHECK(za != nullptr, "save_npz: cannot create '", path, "': ", zip_error_text(code));
  for (const auto& [member, bytes] : members) {
    zip_source_t* src = zip_source_buffer(za.get(), bytes.data(), bytes.size(), 0);
    KILN_CHECK(src != nullptr, "save_npz '", path, "': ", zip_strerror(za.get()));
    const zip_int64_t idx = zip_file_add(za.get(), member.c_str(), src, ZIP_FL_ENC_UTF_8);
    if (idx < 0) {
      zip_source_free(src);
      fail("save_npz '", path, "': member '", member, "': ", zip_strerror(za.get()));
    }
    KILN_CHECK(zip_set_file_compression(za.get(), static_cast<zip_uint64_t>(idx), ZIP_CM_STORE, 0) == 0,
               "save_npz '", path, "': ", zip_strerror(za.get()));
  }
  // zip_close writes a temporary file beside `path` and renames it over: all or nothing.
  if (zip_close(za.get()) != 0) fail("save_npz: cannot write '", path, "': ", zip_strerror(za.get()));
  (void)za.release();
}

NamedTensors load_npy_folder(const std::string& dir) {
  std::error_code ec;
  KILN_CHECK(fs::is_directory(dir, ec), "'", dir, "' is not a folder of .npy files");
  std::vector<fs::path> files;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec))
    if (ends_with_npy(e.path().filename().string()) && e.is_regular_file(ec)) files.push_back(e.path());
  KILN_CHECK(!ec, "cannot list the folder '", dir, "': ", ec.message());
  KILN_CHECK(!files.empty(), "the folder '", dir, "' holds no NAME.npy files");
  std::sort(files.begin(), files.end());
  NamedTensors out;
  for (const fs::path& p : files) {
    const std::string file = p.filename().string();
    out.emplace(file.substr(0, file.size() - kSuffix.size()), load_npy(p.string()));
  }
  return out;
}

void save_npy_folder(const NamedTensors& tensors, const std::string& dir) {
  for (const auto& [name, t] : tensors) check_name(name, "save to the folder '" + dir + "'", /*in_folder=*/true);
  std::error_code ec;
  fs::create_directories(dir, ec);
  KILN_CHECK(!ec, "cannot create the folder '", dir, "': ", ec.message());
  for (const auto& [name, t] : tensors) save_npy(t, (fs::path(dir) / (name + std::string(kSuffix))).string());
}

}  // namespace kiln::npy
