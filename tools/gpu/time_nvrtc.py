# Times the ways a CUDA C program (a plan's module_source(), saved to a file) can become a loaded
# module, with every cache off, median of 7 after one warm-up compile: NVRTC to a cubin (what the
# runtime does), NVRTC to PTX alone, and PTX through the driver's JIT (cuModuleLoadDataEx,
# CU_JIT_CACHE_MODE none) or through nvJitLink. Usage: time_nvrtc.py [--arch 90] PROGRAM.cu ...
import ctypes, os, statistics, sys, time
os.environ['CUDA_CACHE_DISABLE'] = '1'
nv = ctypes.CDLL('libnvrtc.so.13')
args = sys.argv[1:]
arch = 90
if args[:1] == ['--arch']: arch, args = int(args[1]), args[2:]
def nvrtc(src, cubin):
    p = ctypes.c_void_p(); assert nv.nvrtcCreateProgram(ctypes.byref(p), src.encode(), b'k.cu', 0, None, None) == 0
    opts = [('--gpu-architecture=%s_%d' % ('sm' if cubin else 'compute', arch)).encode(), b'-std=c++17', b'-default-device',
            b'--fmad=true', b'--no-cache', b'-minimal']
    t = time.perf_counter()
    r = nv.nvrtcCompileProgram(p, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    dt = time.perf_counter() - t
    if r:
        n = ctypes.c_size_t(); nv.nvrtcGetProgramLogSize(p, ctypes.byref(n)); b = ctypes.create_string_buffer(n.value)
        nv.nvrtcGetProgramLog(p, b); sys.exit(b.value.decode()[:2000])
    n = ctypes.c_size_t()
    (nv.nvrtcGetCUBINSize if cubin else nv.nvrtcGetPTXSize)(p, ctypes.byref(n))
    b = ctypes.create_string_buffer(n.value)
    (nv.nvrtcGetCUBIN if cubin else nv.nvrtcGetPTX)(p, b)
    nv.nvrtcDestroyProgram(ctypes.byref(p))
    return dt, b.raw
cu = None
try:
    cu = ctypes.CDLL('libcuda.so.1'); assert cu.cuInit(0) == 0
    dev = ctypes.c_int(); cu.cuDeviceGet(ctypes.byref(dev), 0)
    ctx = ctypes.c_void_p(); assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0 and cu.cuCtxSetCurrent(ctx) == 0
except (OSError, AssertionError):
    cu = None
try:
    jl = ctypes.CDLL('libnvJitLink.so.13')
except OSError:
    jl = None
def driver_jit(ptx):
    mod = ctypes.c_void_p()
    opts = (ctypes.c_int * 1)(14)           # CU_JIT_CACHE_MODE
    vals = (ctypes.c_void_p * 1)(0)         # CU_JIT_CACHE_OPTION_NONE
    t = time.perf_counter()
    assert cu.cuModuleLoadDataEx(ctypes.byref(mod), ptx, 1, opts, vals) == 0
    dt = time.perf_counter() - t
    cu.cuModuleUnload(mod)
    return dt
def jitlink(ptx):
    h = ctypes.c_void_p()
    o = [('-arch=sm_%d' % arch).encode()]
    t = time.perf_counter()
    assert jl.nvJitLinkCreate(ctypes.byref(h), 1, (ctypes.c_char_p * 1)(*o)) == 0
    assert jl.nvJitLinkAddData(h, 2, ptx, ctypes.c_size_t(len(ptx)), b'k') == 0  # NVJITLINK_INPUT_PTX
    assert jl.nvJitLinkComplete(h) == 0
    dt = time.perf_counter() - t
    jl.nvJitLinkDestroy(ctypes.byref(h))
    return dt
nvrtc('extern "C" __global__ void w() {}', True)
print('%-28s %9s %9s %9s %9s %9s' % ('program (ms, median of 7)', 'cubin', 'ptx', 'drv jit', 'ptx+jit', 'jitlink'))
for f in args:
    src = open(f).read()
    cub = statistics.median(nvrtc(src, True)[0] for _ in range(7)) * 1e3
    runs = [nvrtc(src, False) for _ in range(7)]
    ptx_ms = statistics.median(r[0] for r in runs) * 1e3
    ptx = runs[0][1]
    drv = statistics.median(driver_jit(ptx) for _ in range(7)) * 1e3 if cu else float('nan')
    jlk = statistics.median(jitlink(ptx) for _ in range(7)) * 1e3 if jl else float('nan')
    print('%-28s %9.1f %9.1f %9.1f %9.1f %9.1f' % (os.path.basename(f), cub, ptx_ms, drv, ptx_ms + drv, jlk), flush=True)
