// frontends/safetensors: .safetensors files (the format Hugging Face models ship their weights in)
// to and from named host tensors, a model's state dict.
// Takes: a path or the bytes of a file. Gives: the tensors by name, each a contiguous host
// TensorData with its own storage, and the file's string metadata (load, parse: one reader);
// or a file or its bytes (save, to_bytes).
// The format (github.com/huggingface/safetensors): an 8-byte little-endian header length N, N
// bytes of JSON ({"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
// optionally "__metadata__": {string: string}}), then the data, each tensor's bytes row-major
// and little-endian at [begin, end) of what follows the header. Element types: F64, F32, F16,
// BF16, I64, I32, BOOL; the others (I8, U8, F8_*, ...) have no Kiln dtype and are refused by
// name. As the reference reader does, a file is refused unless its tensors cover the data
// exactly, without gaps or overlaps; a duplicate or unknown key, a size that does not match
// its shape, a truncated file or a bool byte other than 0/1 is a kiln::Error naming the file
// and the tensor. load reads each tensor straight into its storage (no copy of the whole file).
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "kiln/graph/tensor_data.h"

namespace kiln::safetensors {

struct Tensors {
  std::map<std::string, TensorData> tensors;      // by name
  std::map<std::string, std::string> metadata;    // the file's "__metadata__"
};

Tensors load(const std::string& path);
// The same reader on the bytes of a file; `source_name` starts every error message.
Tensors parse(std::string_view bytes, std::string_view source_name);

// Writes host tensors (strided views are gathered in row-major order) as the Hugging Face
// writer does: the header padded with spaces to a multiple of 8 bytes, tensors ordered by
// element size (largest first), then name, so each starts aligned to its element size. save
// writes a temporary file beside `path` and renames it over `path`, so a failed save leaves
// what was there.
void save(const Tensors& t, const std::string& path);
std::string to_bytes(const Tensors& t);

// The format's name for a dtype ("F32") and back (a kiln::Error for a name Kiln has no dtype for).
std::string type_name(DType dtype);
DType dtype_of_type_name(std::string_view name, std::string_view where);

}  // namespace kiln::safetensors
