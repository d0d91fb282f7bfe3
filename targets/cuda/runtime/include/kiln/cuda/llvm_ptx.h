// LLVM IR -> PTX -> cubin, in process: the second way to compile a kernel besides NVRTC. LLVM 16's
// NVPTX backend turns a module of LLVM IR (what a codegen for the NVPTX target prints) into PTX
// after linking the libdevice functions it calls (libdevice.10.bc, embedded at build time) and
// optimising at O3; nvJitLink (ptxas as a library) turns the PTX into a cubin. Needs no GPU and no
// driver: CI compiles with it. Errors are kiln::Errors that name the program and carry LLVM's
// diagnostic (file:line:col) or nvJitLink's log. Safe to call from several threads at once.
#pragma once

#include <string>
#include <vector>

namespace kiln::cuda {

// Whether LLVM 16's NVPTX backend can target sm_<arch> (80, 86, 87, 89, 90: yes; newer: no,
// callers use NVRTC).
bool llvm_ptx_supports(int arch);
// The newest of them: PTX for it also runs on newer devices (the driver compiles it).
inline constexpr int kLlvmNewestArch = 90;

struct PtxOutput {
  std::string ptx;
  double seconds = 0;  // the whole call
  std::string timing;  // per stage: "parse x ms, libdevice y ms, opt z ms, codegen w ms"
};

// `ir`, the LLVM IR text of one module (triple nvptx64-nvidia-cuda; kernels marked in
// !nvvm.annotations), -> PTX for sm_<arch> (PTX ISA 7.8, the newest LLVM 16 writes). The libdevice
// functions the module declares but does not define (__nv_sinf, __nv_tanhf, ...) are linked in
// first; then the O3 pipeline of the NVPTX target machine runs (NVVMReflect included: module flag
// "nvvm-reflect-ftz" is 0 unless the module sets it), with fp-contract fast (as nvcc's
// --fmad=true). `name` names the program in errors.
// Valid IR that LLVM 16's NVPTX backend would abort the process on is refused with an error
// instead: math intrinsics without a PTX instruction (llvm.exp, llvm.log, llvm.pow, llvm.sin, ...:
// call libdevice), integer division, conversions and atomics wider than 64 bits, fp128, and any
// bfloat arithmetic, truncation or vector (keep bf16 in i16; widen with a shift, narrow with
// llvm.nvvm.f2bf16.rn); so is llvm.maximum / llvm.minimum on double (LLVM 16 writes max.NaN.f64,
// which ptxas rejects).
PtxOutput ptx_from_llvm_ir(const std::string& ir, int arch, const std::string& name);
// Several modules (each its own text) linked into one program, then as above.
PtxOutput ptx_from_llvm_ir(const std::vector<std::string>& modules, int arch, const std::string& name);

// Starts (once per process) a background compile of a small kernel for `arch` through both
// stages, so that their one-time start (LLVM's NVPTX target, nvJitLink's ptxas, the pages of
// both libraries) is done before the first plan needs it. Context::get calls it with
// nvrtc_prewarm.
void llvm_ptx_prewarm(int arch);

// PTX -> cubin for sm_<arch> through nvJitLink. `seconds`, when given, receives the time it took.
std::string cubin_from_ptx(const std::string& ptx, int arch, const std::string& name, double* seconds = nullptr);

}  // namespace kiln::cuda
