#include "kiln/graph/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "kiln/graph/error.h"
#include "kiln/graph/memory_budget.h"

namespace kiln {

namespace {
[[noreturn]] void not_regular(const std::string& path, std::string_view what, const struct stat& st) {
  const char* kind = S_ISFIFO(st.st_mode)  ? "a FIFO"
                     : S_ISDIR(st.st_mode) ? "a directory"
                     : S_ISCHR(st.st_mode) ? "a character device"
                     : S_ISBLK(st.st_mode) ? "a block device"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                                            : "not a file";
  fail(what, " '", path, "' is not a regular file (", kind, ")");
}
}  // namespace

void check_regular_file(const std::string& path, std::string_view what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return;  // stat never blocks, even on a FIFO
  not_regular(path, what, st);
}

std::string read_regular_file(const std::string& path, std::string_view what, int64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO for reading would wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail("cannot open ", what, " '", path, "': ", std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail("cannot read ", what, " '", path, "': ", std::strerror(errno));
  if (!S_ISREG(st.st_mode)) not_regular(path, what, st);
  const int64_t size = static_cast<int64_t>(st.st_size);
  const int64_t limit = max_bytes >= 0 ? max_bytes : memory_budget_bytes();
  if (size > limit)
    fail(what, " '", path, "' is ", bytes_str(size), ", more than ",
         max_bytes >= 0 ? "the " + bytes_str(limit) + " such a file may have" : memory_budget_str());
  std::string text(static_cast<size_t>(size), '\0');
  size_t done = 0;
  while (done < text.size()) {  // at most the size it had when opened, even if it grows
    const ssize_t got = ::read(fd, text.data() + done, text.size() - done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail("cannot read ", what, " '", path, "': ", std::strerror(errno));
    if (got == 0) break;  // it shrank meanwhile
    done += static_cast<size_t>(got);
  }
  text.resize(done);
  return text;
}

}  // namespace kiln
