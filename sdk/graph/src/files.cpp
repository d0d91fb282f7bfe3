#include "kiln/graph/files.h"

#include <sys/stat.h>

#include "kiln/graph/error.h"

namespace kiln {

void check_regular_file(const std::string& path, std::string_view what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return;  // stat never blocks, even on a FIFO
  const char* kind = S_ISFIFO(st.st_mode)  ? "a FIFO"
                     : S_ISDIR(st.st_mode) ? "a directory"
                     : S_ISCHR(st.st_mode) ? "a character device"
                     : S_ISBLK(st.st_mode) ? "a block device"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                                            : "not a file";
  fail(what, " '", path, "' is not a regular file (", kind, ")");
}

}  // namespace kiln
