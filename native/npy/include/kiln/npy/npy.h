// native/npy: NumPy .npy files (format versions 1.0, 2.0 and 3.0) to and from TensorData.
// Takes: a path. Gives: a contiguous host TensorData (load_npy), or a file (save_npy).
// Element types: '<f2' f16, '<f4' f32, '<f8' f64, '<i4' i32, '<i8' i64, '|b1' bool. NumPy has
// no bfloat16, so save_npy writes bf16 tensors as '<f4' (exactly: every bf16 value is a
// float) and load_npy never yields bf16. Arrays must be C-ordered; Fortran order, big-endian
// or other types, a malformed header or a truncated file give a kiln::Error naming the file
// and the problem.
#pragma once

#include <string>

#include "kiln/graph/tensor_data.h"

namespace kiln::npy {

TensorData load_npy(const std::string& path);
// Writes any host TensorData (strided views are gathered in row-major order).
void save_npy(const TensorData& t, const std::string& path);

// The .npy type string for a dtype as save_npy writes it ("<f4"; "<f4" for bf16 too).
std::string npy_descr(DType dtype);

}  // namespace kiln::npy
