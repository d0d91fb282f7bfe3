// NumPy .npz archives (np.savez, np.savez_compressed: a zip of NAME.npy members) and folders of
// NAME.npy files: named host tensors, as state dicts keep them (kiln/state_dict.h).
// Takes: a path. Gives: tensors by name (load_*), or writes them (save_*).
// Zip members are read through libzip (stored or deflated), each checked against the memory
// budget by its declared size before it is read, then parsed by parse_npy (npy.h: same types,
// bf16 saved as f32). Members that are not NAME.npy, a damaged archive, a folder without .npy
// files or a name that cannot be a file name give a kiln::Error naming the file and the problem.
// An archive is written to a temporary file that replaces `path` when complete (libzip), so a
// failed save leaves the old archive in place; a folder is written file by file.
#pragma once

#include <map>
#include <string>

#include "kiln/graph/tensor_data.h"

namespace kiln::npy {

using NamedTensors = std::map<std::string, TensorData>;

NamedTensors load_npz(const std::string& path);
// Members are stored uncompressed, as np.savez writes them; names may hold '/' (ONNX initializer
// names do) but not be absolute or have a '.' or '..' part.
void save_npz(const NamedTensors& tensors, const std::string& path);

// Every NAME.npy regular file directly in `dir` (other files are ignored).
NamedTensors load_npy_folder(const std::string& dir);
// Creates `dir` if needed and writes NAME.npy for each tensor; a name holding '/', a NUL or
// being "." or ".." (which would leave the folder) is refused before anything is written.
void save_npy_folder(const NamedTensors& tensors, const std::string& dir);

}  // namespace kiln::npy
