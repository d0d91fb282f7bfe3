// Files Kiln reads that a user names (graph, plan, .npy, bundle files): only regular files, so a
// FIFO, a device or a directory given by mistake or on purpose is an error that says so instead
// of a read that blocks forever (a FIFO) or never ends (/dev/zero).
#pragma once

#include <string>
#include <string_view>

namespace kiln {

// Throws kiln::Error "<what> '<path>' is not a regular file (a FIFO)" when `path` (its links
// followed) exists and is anything but a regular file; a missing file is left to the caller's
// open, which says why it cannot open it.
void check_regular_file(const std::string& path, std::string_view what);

// The whole of the regular file `path`, read through one descriptor (opened without following a
// FIFO's wait, then checked with fstat, so the file checked is the file read) and at most its size
// when opened: kiln::Error when it cannot be opened, is not a regular file, or is larger than
// `max_bytes` (default: the memory budget, kiln/graph/memory_budget.h), naming `what` and `path`.
std::string read_regular_file(const std::string& path, std::string_view what, int64_t max_bytes = -1);

}  // namespace kiln
