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

}  // namespace kiln
