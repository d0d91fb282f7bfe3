# Times flash-attention programs (CUDA C files: a plan's kernel_program(), hand-edited variants) on the GPU
# against torch's scaled_dot_product_attention, at the suite's attention_bf16 size (bf16 [4, 16, 2048, 64],
# scale 0.125), and checks each output against torch's. NVRTC and the driver through ctypes, events
# from torch. A program's kernel is its last `extern "C" __global__` function; one of fixed signature
# (lq, lk, ...) gets the arguments the CUDA codegen gives it. Usage: time_flash.py PROGRAM.cu ...
import ctypes, sys, glob, os, statistics, struct
import torch, torch.nn.functional as F
nv = ctypes.CDLL('libnvrtc.so.13'); cu = ctypes.CDLL('libcuda.so.1')
torch.cuda.init(); torch.zeros(1, device='cuda')
def compile(src):
    p = ctypes.c_void_p(); assert nv.nvrtcCreateProgram(ctypes.byref(p), src.encode(), b'k.cu', 0, None, None) == 0
    opts = [b'--gpu-architecture=sm_90', b'-std=c++17', b'-default-device', b'--fmad=true', b'--no-cache', b'-minimal']
    r = nv.nvrtcCompileProgram(p, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    if r:
        n = ctypes.c_size_t(); nv.nvrtcGetProgramLogSize(p, ctypes.byref(n)); b = ctypes.create_string_buffer(n.value); nv.nvrtcGetProgramLog(p, b); print(b.value.decode()[:2000]); sys.exit(1)
    n = ctypes.c_size_t(); nv.nvrtcGetCUBINSize(p, ctypes.byref(n)); b = ctypes.create_string_buffer(n.value); nv.nvrtcGetCUBIN(p, b); return b.raw
B, H, L, D = 4, 16, 2048, 64
q, k, v = (torch.randn(B, H, L, D, device='cuda', dtype=torch.bfloat16) for _ in range(3))
ref = F.scaled_dot_product_attention(q, k, v, scale=0.125)
def time(fn, reps=50):
    for _ in range(5): fn()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize(); ts.append(a.elapsed_time(b))
    return statistics.median(ts)
print('torch sdpa %.4f ms' % time(lambda: F.scaled_dot_product_attention(q, k, v, scale=0.125)))
for f in sorted(sys.argv[1:]):
    src = open(f).read()
    img = compile(src)
    mod = ctypes.c_void_p(); assert cu.cuModuleLoadData(ctypes.byref(mod), img) == 0
    name = [l for l in src.split('\n') if l.startswith('extern "C" __global__')][-1].split(') ')[1].split('(')[0]
    fn = ctypes.c_void_p(); assert cu.cuModuleGetFunction(ctypes.byref(fn), mod, name.encode()) == 0, name
    out = torch.empty_like(q)
    ptrs = [ctypes.c_void_p(t.data_ptr()) for t in (q, k, v, out)]
    vals = []
    if 'lq, long long lk' in src.split(name)[1].split('{')[0]:
        vals = [L, L, 1, 0, 0, 0, 1, 0, 0, 0, B, H*L*D, H*L*D, H*L*D, H, L*D, L*D, L*D, 0, 0, 0, D, D, D, struct.unpack('<I', struct.pack('<f', 0.125 * 1.4426950408889634))[0]]
    cv = [ctypes.c_longlong(x) for x in vals]
    args = (ctypes.c_void_p * (4 + len(cv)))(*[ctypes.cast(ctypes.pointer(p), ctypes.c_void_p) for p in ptrs], *[ctypes.cast(ctypes.pointer(x), ctypes.c_void_p) for x in cv])
    import re
    R = int(re.search(r'const long long tiles = \(lq \+ \d+\) / (\d+);', src).group(1))
    grid = B * H * ((L + R - 1) // R)
    stream = torch.cuda.current_stream().cuda_stream
    launch = lambda: cu.cuLaunchKernel(fn, grid, 1, 1, 128, 1, 1, 0, ctypes.c_void_p(stream), args, None)
    assert launch() == 0
    torch.cuda.synchronize()
    err = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
    print('%-16s %.4f ms  rel err %.2e' % (os.path.basename(f), time(launch), err), flush=True)
