// MemoryStore and DiskStore.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kiln/cache/cache.h"
#include "kiln/config/log.h"
#include "kiln/graph/error.h"

namespace fs = std::filesystem;

namespace kiln::cache {

namespace {

void check_key(const std::string& key, std::string_view store) {
  KILN_CHECK(is_valid_key(key), "cache ", store, ": '", key, "' is not a cache key (32 lowercase hex digits)");
}

int64_t unix_seconds(fs::file_time_type t) {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::file_clock::to_sys(t).time_since_epoch())
      .count();
}

constexpr std::string_view kSuffix = ".kce";
constexpr std::string_view kTempPrefix = ".tmp-";

}  // namespace

// ---- MemoryStore ------------------------------------------------------------------------------

std::optional<std::string> MemoryStore::get(const std::string& key) {
  check_key(key, "memory");
  std::lock_guard lock(mu_);
  auto it = bytes_.find(key);
  if (it == bytes_.end()) return std::nullopt;
  info_[key].last_used_unix = ++clock_;
  return it->second;
}

void MemoryStore::put(const std::string& key, std::string_view bytes) {
  check_key(key, "memory");
  std::lock_guard lock(mu_);
  bytes_[key] = std::string(bytes);
  info_[key] = StoredInfo{key, bytes.size(), ++clock_};
}

bool MemoryStore::remove(const std::string& key) {
  std::lock_guard lock(mu_);
  info_.erase(key);
  return bytes_.erase(key) > 0;
}

std::vector<StoredInfo> MemoryStore::list() {
  std::lock_guard lock(mu_);
  std::vector<StoredInfo> out;
  for (const auto& [k, i] : info_) out.push_back(i);
  std::sort(out.begin(), out.end(), [](const StoredInfo& a, const StoredInfo& b) { return a.last_used_unix > b.last_used_unix; });
  return out;
}

void MemoryStore::clear() {
  std::lock_guard lock(mu_);
  info_.clear();
  bytes_.clear();
}

// ---- DiskStore --------------------------------------------------------------------------------

DiskStore::DiskStore(std::string dir, uint64_t size_limit_bytes) : dir_(std::move(dir)), limit_(size_limit_bytes) {
  KILN_CHECK(!dir_.empty(), "cache disk store: the directory name is empty");
}

std::string DiskStore::path_of(const std::string& key) const { return (fs::path(dir_) / (key + std::string(kSuffix))).string(); }

std::optional<std::string> DiskStore::get(const std::string& key) {
  check_key(key, "disk");
  const std::string path = path_of(key);
  // Entries are regular files Kiln wrote (a temporary renamed into place): a link (to
  // /dev/zero, out of the cache), a FIFO or a device in an entry's place is not read (it would
  // never end, or block) but removed, a miss that the compile then fills.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  struct stat st {};
  if (fd < 0 && errno == ELOOP) {
    ::unlink(path.c_str());
    return std::nullopt;
  }
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
    fail("cache disk store: cannot open ", path, ": ", std::strerror(errno));
  }
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    ::unlink(path.c_str());
    return std::nullopt;
  }
  // Read straight into the result, sized by fstat with a byte to spare for seeing the end.
  std::string bytes(st.st_size > 0 ? static_cast<size_t>(st.st_size) + 1 : 4096, '\0');
  size_t have = 0;
  for (;;) {
    if (have == bytes.size()) bytes.resize(2 * bytes.size());  // it grew meanwhile
    const ssize_t n = ::read(fd, bytes.data() + have, bytes.size() - have);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      fail("cache disk store: cannot read ", path, ": ", std::strerror(err));
    }
    if (n == 0) break;
    have += static_cast<size_t>(n);
  }
  bytes.resize(have);
  // With a secret only what it signed is used (cache.h, "signatures"); anything else goes, so
  // that the compile writes a signed entry in its place. The clock is not refreshed for it.
  if (const std::optional<Signer> s = signer()) {
    std::optional<std::string> payload = verify(bytes, *s);
    if (!payload) {
      ::close(fd);
      ::unlink(path.c_str());
      logs::warn("disk cache: removed " + path + ": it is not signed with " + s->name +
                 " (written before the secret was set, signed with another secret, or edited); compiling it again");
      return std::nullopt;
    }
    bytes = std::move(*payload);
  } else if (const std::string_view payload = strip_signature(bytes); payload.size() != bytes.size()) {
    bytes = std::string(payload);
  }
  // The LRU clock: a read makes the entry the most recently used. Another process may have
  // evicted it in between; that is harmless.
  ::futimens(fd, nullptr);
  ::close(fd);
  return bytes;
}

void DiskStore::put(const std::string& key, std::string_view payload) {
  check_key(key, "disk");
  const std::optional<Signer> s = signer();
  const std::string signed_bytes = s ? sign(payload, *s) : std::string();
  const std::string_view bytes = s ? std::string_view(signed_bytes) : payload;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  KILN_CHECK(!ec, "cache disk store: cannot create the directory ", dir_, ": ", ec.message());
  static std::atomic<uint64_t> counter{0};
  const std::string temp = (fs::path(dir_) / (std::string(kTempPrefix) + key + "-" + std::to_string(::getpid()) + "-" +
                                              std::to_string(counter++)))
                               .string();
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  KILN_CHECK(fd >= 0, "cache disk store: cannot create ", temp, ": ", std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      ::unlink(temp.c_str());
      fail("cache disk store: cannot write ", temp, ": ", std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    fail("cache disk store: cannot write ", temp, ": ", std::strerror(err));
  }
  const std::string path = path_of(key);
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    fail("cache disk store: cannot rename ", temp, " to ", path, ": ", std::strerror(err));
  }
  evict(key);
}

bool DiskStore::remove(const std::string& key) {
  check_key(key, "disk");
  return ::unlink(path_of(key).c_str()) == 0;
}

std::vector<StoredInfo> DiskStore::list() {
  std::vector<StoredInfo> out;
  std::error_code ec;
  fs::directory_iterator it(dir_, ec), end;
  if (ec) return out;  // no directory: no entries
  for (; it != end; it.increment(ec)) {
    if (ec) break;
    const std::string name = it->path().filename().string();
    if (name.size() != 32 + kSuffix.size() || !name.ends_with(kSuffix)) continue;
    const std::string key = name.substr(0, 32);
    if (!is_valid_key(key)) continue;
    std::error_code e1, e2;
    const uint64_t size = it->file_size(e1);
    const auto mtime = it->last_write_time(e2);
    if (e1 || e2) continue;  // removed meanwhile
    out.push_back(StoredInfo{key, size, unix_seconds(mtime)});
  }
  std::sort(out.begin(), out.end(), [&](const StoredInfo& a, const StoredInfo& b) { return a.last_used_unix > b.last_used_unix; });
  return out;
}

size_t DiskStore::clear() {
  size_t removed = 0;
  std::error_code ec;
  fs::directory_iterator it(dir_, ec), end;
  if (ec) return 0;
  std::vector<fs::path> doomed;
  for (; it != end; it.increment(ec)) {
    if (ec) break;
    const std::string name = it->path().filename().string();
    const bool entry = name.size() == 32 + kSuffix.size() && name.ends_with(kSuffix) && is_valid_key(name.substr(0, 32));
    if (entry || name.starts_with(kTempPrefix)) doomed.push_back(it->path());
    if (entry) ++removed;
  }
  for (const fs::path& p : doomed) fs::remove(p, ec);
  return removed;
}

size_t DiskStore::evict(const std::string& keep) {
  std::error_code ec;
  fs::directory_iterator it(dir_, ec), end;
  if (ec) return 0;
  struct File {
    fs::path path;
    std::string key;
    uint64_t size;
    fs::file_time_type mtime;
  };
  std::vector<File> files;
  uint64_t total = 0;
  const auto stale_before = fs::file_time_type::clock::now() - std::chrono::hours(1);
  for (; it != end; it.increment(ec)) {
    if (ec) break;
    const std::string name = it->path().filename().string();
    std::error_code e1, e2;
    const uint64_t size = it->file_size(e1);
    const auto mtime = it->last_write_time(e2);
    if (e1 || e2) continue;
    if (name.starts_with(kTempPrefix)) {
      // A writer that died mid-write (a live writer renames within moments).
      if (mtime < stale_before) fs::remove(it->path(), e1);
      continue;
    }
    if (name.size() != 32 + kSuffix.size() || !name.ends_with(kSuffix) || !is_valid_key(name.substr(0, 32))) continue;
    files.push_back(File{it->path(), name.substr(0, 32), size, mtime});
    total += size;
  }
  if (total <= limit_) return 0;
  std::sort(files.begin(), files.end(), [](const File& a, const File& b) { return a.mtime < b.mtime; });
  size_t removed = 0;
  for (const File& f : files) {
    if (total <= limit_) break;
    if (f.key == keep) continue;
    std::error_code e;
    if (fs::remove(f.path, e)) {
      total -= f.size;
      ++removed;
      KILN_LOG(cache, "disk cache: evicted ", f.key, " (", f.size, " bytes, least recently used) to stay under ", limit_,
               " bytes");
    }
  }
  return removed;
}

}  // namespace kiln::cache
