// Internal: the CUDA target's LLVM module (libkiln_cuda_llvm.so, src/llvm_ptx_module.cpp): LLVM
// 16's NVPTX backend and the libdevice bitcode, the only part of the CUDA runtime that links LLVM.
// kiln::modules loads it the first time the runtime compiles with LLVM (or asks which
// architectures LLVM can target); src/llvm_ptx.cpp calls it through this table.
#pragma once

#include <string>
#include <vector>

#include "kiln/cuda/llvm_ptx.h"

namespace kiln::cuda::detail {

struct PtxTable {
  bool (*supports)(int arch);  // llvm_ptx_supports
  // ptx_from_llvm_ir of several modules (kiln/cuda/llvm_ptx.h); kiln::Errors as it documents.
  PtxOutput (*compile)(const std::vector<std::string>& modules, int arch, const std::string& name);
};

}  // namespace kiln::cuda::detail

// The module's entry point: its table.
extern "C" const kiln::cuda::detail::PtxTable* kiln_cuda_llvm_table();
