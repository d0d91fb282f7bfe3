// frontends/npy: NumPy .npy files (format versions 1.0, 2.0 and 3.0) to and from TensorData.
// Takes: a path or the bytes of a file. Gives: a contiguous host TensorData (load_npy,
// parse_npy: one reader), or a file or its bytes (save_npy, npy_bytes).
// Element types: '<f2' f16, '<f4' f32, '<f8' f64, '<i4' i32, '<i8' i64, '|b1' bool. NumPy has
// no bfloat16, so save_npy writes bf16 tensors as '<f4' (exactly: every bf16 value is a
// float) and load_npy never yields bf16. Arrays must be C-ordered; Fortran order, big-endian
// or other types, a malformed header or a truncated file give a kiln::Error naming the file
// and the problem.
#pragma once

#include <string>
#include <string_view>

#include "kiln/graph/tensor_data.h"

namespace kiln::npy {

TensorData load_npy(const std::string& path);
// The same reader on the bytes of a file; `source_name` starts every error message.
TensorData parse_npy(std::string_view bytes, std::string_view source_name);
// Writes any host TensorData (strided views are gathered in row-major order).
void save_npy(const TensorData& t, const std::string& path);
// What save_npy writes, as bytes.
std::string npy_bytes(const TensorData& t);

// The .npy type string for a dtype as save_npy writes it ("<f4"; "<f4" for bf16 too).
std::string npy_descr(DType dtype);

}  // namespace kiln::npy
