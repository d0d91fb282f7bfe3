# Times flash-attention programs (CUDA C files: a plan's kernel_program(), hand-edited variants) on the GPU
# against torch's scaled_dot_product_attention, at the suite's attention_bf16 size (bf16 [4, 16, 2048, 64],
# scale 0.125), and checks each output against torch's. NVRTC (sm_90a) and the driver through ctypes, events
# from torch. A program's timed kernel is its last `extern "C" __global__` function; every such kernel of the
# fixed signature (q, k, v, o, lq, lk, ...) named kiln_flash_{bf16|f16}_d{D}_v{DV}_... is also checked on edge
# shapes against an fp32 reference. Threads a block come from __launch_bounds__, query rows a block from the
# kernel's `const long long tiles = (lq + R - 1) / R;` line, dynamic shared memory from a `KILN_DSMEM=<bytes>`
# comment in the lines just above the kernel (0 if none). The timed kernel runs at the suite's size with its own
# head dims and dtype (torch's SDPA timed at those too).
# Usage: time_flash.py PROGRAM.cu ...   (env FLASH_REPS: timing repetitions, default 50)
import ctypes, sys, os, re, statistics, struct, shutil, subprocess
import torch, torch.nn.functional as F
nv = ctypes.CDLL('libnvrtc.so.13'); cu = ctypes.CDLL('libcuda.so.1')
torch.cuda.init(); torch.zeros(1, device='cuda')
print('device:', torch.cuda.get_device_name(0))
def compile(src):
    p = ctypes.c_void_p(); assert nv.nvrtcCreateProgram(ctypes.byref(p), src.encode(), b'k.cu', 0, None, None) == 0
    opts = [b'--gpu-architecture=sm_90a', b'-std=c++17', b'-default-device', b'--fmad=true', b'--no-cache', b'-minimal']
    r = nv.nvrtcCompileProgram(p, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    if r:
        n = ctypes.c_size_t(); nv.nvrtcGetProgramLogSize(p, ctypes.byref(n)); b = ctypes.create_string_buffer(n.value); nv.nvrtcGetProgramLog(p, b); print(b.value.decode()[:2000]); sys.exit(1)
    n = ctypes.c_size_t(); nv.nvrtcGetCUBINSize(p, ctypes.byref(n)); b = ctypes.create_string_buffer(n.value); nv.nvrtcGetCUBIN(p, b); return b.raw
REPS = int(os.environ.get('FLASH_REPS', '50'))
def time(fn, reps=REPS):
    for _ in range(5): fn()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize(); ts.append(a.elapsed_time(b))
    return statistics.median(ts)
SCALE = 0.125
B, H, L, D = 4, 16, 2048, 64
torch.manual_seed(0)
q, k, v = (torch.randn(B, H, L, D, device='cuda', dtype=torch.bfloat16) for _ in range(3))
ref = F.scaled_dot_product_attention(q, k, v, scale=SCALE)
stream = torch.cuda.current_stream().cuda_stream

class Kernel:
    def __init__(self, mod, src, name):
        self.name = name
        fn = ctypes.c_void_p(); assert cu.cuModuleGetFunction(ctypes.byref(fn), mod, name.encode()) == 0, name
        self.fn = fn
        i = src.index(name + '(')
        head = src[:i]; body = src[i:].split('\n}\n')[0]
        m = re.search(r'__launch_bounds__\((\d+)', head[head.rfind('extern "C"'):])
        self.threads = int(m.group(1)) if m else 128
        above = head[:head.rfind('extern "C"')].split('\n')[-4:]
        m = re.search(r'KILN_DSMEM=(\d+)', '\n'.join(above))
        self.smem = int(m.group(1)) if m else 0
        if self.smem > 48 * 1024:
            assert cu.cuFuncSetAttribute(fn, 8, self.smem) == 0  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        self.rows = int(re.search(r'const long long tiles = \(lq \+ \d+\) / (\d+);', body).group(1))
        m = re.match(r'kiln_flash_(?:sm90_)?(bf16|f16)_d(\d+)_v(\d+)_', name)
        self.dtype = (torch.bfloat16 if m.group(1) == 'bf16' else torch.float16) if m else torch.bfloat16
        self.d, self.dv = (int(m.group(2)), int(m.group(3))) if m else (64, 64)
    def launcher(self, q, k, v, out, scale=None):
        if scale is None: scale = -SCALE if '_neg_' in self.name else SCALE
        b, h, lq, d = q.shape; lk = k.shape[2]; dv = v.shape[3]
        self.keep = [ctypes.c_void_p(t.data_ptr()) for t in (q, k, v, out)]
        vals = [lq, lk, 1, 0, 0, 0, 1, 0, 0, 0, b, h * lq * d, h * lk * d, h * lk * dv, h, lq * d, lk * d, lk * dv, 0, 0, 0, d, d, dv,
                struct.unpack('<I', struct.pack('<f', scale * 1.4426950408889634))[0]]
        self.cv = [ctypes.c_longlong(x) for x in vals]
        args = (ctypes.c_void_p * (4 + len(self.cv)))(*[ctypes.cast(ctypes.pointer(p), ctypes.c_void_p) for p in self.keep],
                                                      *[ctypes.cast(ctypes.pointer(x), ctypes.c_void_p) for x in self.cv])
        self.args = args
        grid = b * h * ((lq + self.rows - 1) // self.rows)
        fn, threads, smem = self.fn, self.threads, self.smem
        return lambda: cu.cuLaunchKernel(fn, grid, 1, 1, threads, 1, 1, smem, ctypes.c_void_p(stream), args, None)

def check(kern, b, h, lq, lk, seed):
    g = torch.Generator(device='cuda'); g.manual_seed(seed)
    qq = torch.randn(b, h, lq, kern.d, device='cuda', dtype=kern.dtype, generator=g)
    kk = torch.randn(b, h, lk, kern.d, device='cuda', dtype=kern.dtype, generator=g)
    vv = torch.randn(b, h, lk, kern.dv, device='cuda', dtype=kern.dtype, generator=g)
    out = torch.full((b, h, lq, kern.dv), float('nan'), device='cuda', dtype=kern.dtype)
    assert kern.launcher(qq, kk, vv, out)() == 0
    torch.cuda.synchronize()
    if lk == 0:
        r = torch.zeros(b, h, lq, kern.dv, device='cuda')
        return 0.0 if torch.equal(out.float(), r) else float('inf')
    r = torch.softmax(qq.float() @ kk.float().transpose(-1, -2) * (-SCALE if '_neg_' in kern.name else SCALE), -1) @ vv.float()
    return ((out.float() - r).norm() / r.norm()).item()

SHAPES = {64: [(1, 2, 77, 77), (2, 3, 200, 333), (1, 1, 64, 64), (1, 1, 1, 1), (1, 2, 130, 0), (1, 2, 129, 1000), (2, 4, 1024, 1024)],
          128: [(1, 1, 64, 64), (1, 2, 77, 77), (2, 3, 200, 333), (1, 2, 130, 0), (2, 4, 1024, 1024)]}
results = []
t_sdpa = time(lambda: F.scaled_dot_product_attention(q, k, v, scale=SCALE))
print('torch sdpa %.4f ms' % t_sdpa, flush=True)
for f in sys.argv[1:]:
    src = '\n'.join(l for l in open(f).read().split('\n') if not l.startswith('attention:'))  # drop a pasted timing line
    img = compile(src)
    if shutil.which('cuobjdump') and os.environ.get('FLASH_SASS'):
        open('/tmp/k.cubin', 'wb').write(img)
        sass = subprocess.run(['cuobjdump', '-sass', '/tmp/k.cubin'], capture_output=True, text=True).stdout
        if os.environ.get('FLASH_SASS_DIR'): open(os.path.join(os.environ['FLASH_SASS_DIR'], os.path.basename(f) + '.sass'), 'w').write(sass)
        print('%s: SASS HGMMA %d, HMMA %d, LDL/STL %d' % (f, sass.count('HGMMA'), sass.count('HMMA'), sass.count('LDL') + sass.count('STL')))
    mod = ctypes.c_void_p(); assert cu.cuModuleLoadData(ctypes.byref(mod), img) == 0
    names = [re.search(r'(\w+)\((?!\d)', l.split('__launch_bounds__')[-1].split(')', 1)[-1] if '__launch_bounds__' in l else l).group(1)
             for l in src.split('\n') if l.startswith('extern "C" __global__')]
    kerns = [Kernel(mod, src, n) for n in names]
    errs = []
    for kern in kerns:
        if 'lq, long long lk' not in src.split(kern.name + '(')[1].split('{')[0]: continue
        for i, shp in enumerate(SHAPES.get(kern.d, [])):
            e = check(kern, *shp, seed=i + 1)
            errs.append('%s %s%s%s %.2e' % ('bf16' if kern.dtype == torch.bfloat16 else 'f16', 'd%d ' % kern.d, 'neg/unaligned-path ' if '_neg_' in kern.name else '', 'x'.join(map(str, shp)), e))
    kern = kerns[-1]
    # Timed at the suite's size with the kernel's head dims (and torch's SDPA at those dims).
    tq, tk, tv, tref = q, k, v, ref
    if (kern.d, kern.dv) != (D, D) or kern.dtype != torch.bfloat16:
        tq, tk = (torch.randn(B, H, L, kern.d, device='cuda', dtype=kern.dtype) for _ in range(2))
        tv = torch.randn(B, H, L, kern.dv, device='cuda', dtype=kern.dtype)
        tref = F.scaled_dot_product_attention(tq, tk, tv, scale=SCALE)
        print('torch sdpa at d %d, dv %d: %.4f ms' % (kern.d, kern.dv, time(lambda: F.scaled_dot_product_attention(tq, tk, tv, scale=SCALE))))
    out = torch.full_like(tref, float('nan'))
    launch = kern.launcher(tq, tk, tv, out)
    assert launch() == 0
    torch.cuda.synchronize()
    err = ((out.float() - tref.float()).norm() / tref.float().norm()).item()
    t = time(launch)
    print('%-16s %.4f ms  rel err vs sdpa %.2e  (threads %d, rows %d, smem %d)' % (os.path.basename(f), t, err, kern.threads, kern.rows, kern.smem), flush=True)
    for e in errs: print('    ' + e, flush=True)
    results.append((os.path.basename(f), t, err))
t_sdpa2 = time(lambda: F.scaled_dot_product_attention(q, k, v, scale=SCALE))
print('\nsummary (%s)' % torch.cuda.get_device_name(0))
print('torch sdpa       %.4f / %.4f ms' % (t_sdpa, t_sdpa2))
for n, t, e in results: print('%-16s %.4f ms  err %.2e' % (n, t, e))
