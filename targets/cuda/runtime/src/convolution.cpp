#include "kiln/cuda/convolution.h"

#include <cudnn.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

#include "kiln/graph/error.h"
#include "kiln/graph/ops.h"
#include "background.h"
#include "toolkit_api.h"

namespace kiln::cuda {

namespace {

const detail::CudnnApi& api() { return detail::cudnn_api(); }

void check_dnn(cudnnStatus_t s, const char* call, const std::string& kernel) {
  if (s == CUDNN_STATUS_SUCCESS) return;
  fail("cuDNN: ", call, " failed: ", api().cudnnGetErrorString(s), " in kernel ", kernel);
}

struct Handle {
  cudnnHandle_t h = nullptr;
  DevicePtr workspace = 0;
  // Algorithms needing more are not proposed. A fixed size, allocated once: a CUDA graph's
  // capture may not allocate.
  size_t workspace_bytes = size_t{64} << 20;
  // Held while one convolution is queued (the handle's stream is set per call) and while the
  // heuristic runs on this handle (a cuDNN handle serves one thread at a time).
  std::mutex queue_mu;
};

Handle& handle_of(Context& ctx) {
  // Never destroyed, as the contexts (gemm.cpp says why).
  static std::mutex& mu = *new std::mutex;
  static std::map<Context*, Handle>& handles = *new std::map<Context*, Handle>;
  std::lock_guard<std::mutex> lock(mu);
  Handle& h = handles[&ctx];
  if (!h.h) {
    ctx.make_current();
    check_dnn(api().cudnnCreate(&h.h), "cudnnCreate", "(handle)");
    h.workspace = ctx.alloc(h.workspace_bytes);
  }
  return h;
}

// Loads cuDNN (once per process) and makes ctx's handle and workspace.
void start_handle(Context& ctx) {
  ctx.make_current();
  handle_of(ctx);
}

// cuDNN's names for its algorithms of each direction, by enum value.
const char* algorithm_name(ConvolutionComputes computes, int a) {
  static const char* const forward[] = {"implicit gemm", "implicit precomputed gemm", "gemm", "direct", "fft",
                                        "fft tiling", "winograd", "winograd nonfused"};
  static const char* const data[] = {"backward data 0", "backward data 1", "backward data fft", "backward data fft tiling",
                                     "backward data winograd", "backward data winograd nonfused"};
  static const char* const filter[] = {"backward filter 0", "backward filter 1", "backward filter fft", "backward filter 3",
                                       "backward filter winograd", "backward filter winograd nonfused",
                                       "backward filter fft tiling"};
  auto pick = [a](const auto& names) { return a >= 0 && a < static_cast<int>(std::size(names)) ? names[a] : "?"; };
  switch (computes) {
    case ConvolutionComputes::x: return pick(data);
    case ConvolutionComputes::w: return pick(filter);
    case ConvolutionComputes::y: break;
  }
  return pick(forward);
}

// One of cuDNN's algorithms for a direction, with the math it runs and the workspace it takes.
struct Algorithm {
  int algo = 0;  // a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  size_t memory = 0;
};

// One problem's descriptors and usable algorithms (best first).
struct Prepared {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  std::vector<Algorithm> algorithms;
  Prepared() = default;
  Prepared(const Prepared&) = delete;
  Prepared& operator=(const Prepared&) = delete;
  ~Prepared() {
    if (x) api().cudnnDestroyTensorDescriptor(x);
    if (y) api().cudnnDestroyTensorDescriptor(y);
    if (w) api().cudnnDestroyFilterDescriptor(w);
    if (conv) api().cudnnDestroyConvolutionDescriptor(conv);
  }
};

std::vector<int> contiguous_strides(const std::vector<int>& dims) {
  std::vector<int> s(dims.size(), 1);
  for (size_t d = dims.size() - 1; d-- > 0;) s[d] = s[d + 1] * dims[d + 1];
  return s;
}

// The strides of dims [N, C, *S] laid out channels last ([N, *S, C] contiguous): cuDNN takes the
// dims in NCHW order and the layout from the strides.
std::vector<int> channels_last_strides(const std::vector<int>& dims) {
  std::vector<int> s(dims.size(), 1);
  int step = dims[1];
  for (size_t d = dims.size(); d-- > 2;) {
    s[d] = step;
    step *= dims[d];
  }
  s[0] = step;
  return s;
}

int narrow(int64_t v, const char* what, const std::string& kernel) {
  KILN_CHECK(v >= 0 && v <= INT32_MAX, "cuda runtime: kernel ", kernel, ": the convolution's ", what, " (", v,
             ") does not fit cuDNN's 32-bit sizes");
  return static_cast<int>(v);
}

// The problems set up so far, by key, for every thread: the descriptors are only read once made
// (the math type, set per call, is set under the handle's queue lock). Never destroyed, as the
// handles.
detail::ProblemTable<std::shared_ptr<Prepared>>& problems() {
  static auto& p = *new detail::ProblemTable<std::shared_ptr<Prepared>>;
  return p;
}

// The problem at these sizes, set up on first use by any thread; null when y is empty.
std::shared_ptr<Prepared> prepare(Context& ctx, const plan::PlanConvolution& c, const std::vector<int64_t>& syms,
                                  bool allow_tf32, const std::string& kernel) {
  const int64_t batch = c.x_sizes.at(0).evaluate(syms);
  // Sizes in channels-first order whatever the layout (cuDNN's dims); the layout is in the strides.
  const SymShape xs = c.channels_last ? channels_first(c.x_sizes) : c.x_sizes;
  SymShape ws;
  for (int64_t e : c.w_sizes) ws.push_back(SymInt(e));
  if (c.channels_last) ws = channels_first(ws);
  const SymShape ys = c.channels_last ? channels_first(c.y_sizes()) : c.y_sizes();
  int64_t y_elems = batch;
  for (size_t d = 1; d < ys.size(); ++d) y_elems *= ys[d].hint();
  if (y_elems == 0) return nullptr;
  cudnnDataType_t t;
  switch (c.dtype) {
    case DType::f32: t = CUDNN_DATA_FLOAT; break;
    case DType::f16: t = CUDNN_DATA_HALF; break;
    case DType::bf16: t = CUDNN_DATA_BFLOAT16; break;
    default: fail("cuda runtime: kernel ", kernel, ": cuDNN convolutions of ", dtype_name(c.dtype), " are not supported");
  }
  // f32 without TF32: plain FMA math; with it, cuDNN's default (TF32 where it pays); f16/bf16:
  // tensor cores.
  const cudnnMathType_t math = c.dtype != DType::f32 ? CUDNN_TENSOR_OP_MATH : allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  // A 1-D convolution is a 2-D one of height 1.
  const size_t n = xs.size() - 2;
  std::vector<int> xd{narrow(batch, "batch", kernel), narrow(xs[1].hint(), "channels", kernel)};
  std::vector<int> wd{narrow(ws[0].hint(), "output channels", kernel), narrow(ws[1].hint(), "channels per group", kernel)};
  std::vector<int> pads, strides, dilations;
  if (n == 1) {
    xd.push_back(1);
    wd.push_back(1);
    pads.push_back(0);
    strides.push_back(1);
    dilations.push_back(1);
  }
  for (size_t d = 0; d < n; ++d) {
    xd.push_back(narrow(xs[2 + d].hint(), "spatial size", kernel));
    wd.push_back(narrow(ws[2 + d].hint(), "kernel size", kernel));
    KILN_CHECK(c.pads[d] == c.pads[d + n], "cuda runtime: kernel ", kernel,
               ": cuDNN pads both ends of a dim alike; the plan pads spatial dim ", d, " by ", c.pads[d], " and ", c.pads[d + n]);
    pads.push_back(narrow(c.pads[d], "padding", kernel));
    strides.push_back(narrow(c.strides[d], "stride", kernel));
    dilations.push_back(narrow(c.dilations[d], "dilation", kernel));
  }
  std::ostringstream key;
  key << &ctx << ' ' << static_cast<int>(c.computes) << ' ' << static_cast<int>(t) << ' ' << static_cast<int>(math) << ' '
      << c.groups << ' ' << c.channels_last;
  for (const std::vector<int>* v : {&xd, &wd, &pads, &strides, &dilations}) {
    key << " |";
    for (int e : *v) key << ' ' << e;
  }
  {
    std::lock_guard<std::mutex> lock(problems().mu);
    auto it = problems().by_key.find(key.str());
    if (it != problems().by_key.end()) return it->second;
  }
  const detail::LibrarySetupClock clock;
  auto p = std::make_shared<Prepared>();
  const int rank = static_cast<int>(xd.size());
  check_dnn(api().cudnnCreateTensorDescriptor(&p->x), "cudnnCreateTensorDescriptor", kernel);
  auto strides_of = [&](const std::vector<int>& dims) { return c.channels_last ? channels_last_strides(dims) : contiguous_strides(dims); };
  check_dnn(api().cudnnSetTensorNdDescriptor(p->x, t, rank, xd.data(), strides_of(xd).data()), "cudnnSetTensorNdDescriptor (x)", kernel);
  check_dnn(api().cudnnCreateFilterDescriptor(&p->w), "cudnnCreateFilterDescriptor", kernel);
  check_dnn(api().cudnnSetFilterNdDescriptor(p->w, t, c.channels_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, rank, wd.data()),
            "cudnnSetFilterNdDescriptor", kernel);
  check_dnn(api().cudnnCreateConvolutionDescriptor(&p->conv), "cudnnCreateConvolutionDescriptor", kernel);
  check_dnn(api().cudnnSetConvolutionNdDescriptor(p->conv, rank - 2, pads.data(), strides.data(), dilations.data(),
                                                  CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
            "cudnnSetConvolutionNdDescriptor", kernel);
  check_dnn(api().cudnnSetConvolutionGroupCount(p->conv, narrow(c.groups, "group count", kernel)), "cudnnSetConvolutionGroupCount", kernel);
  check_dnn(api().cudnnSetConvolutionMathType(p->conv, math), "cudnnSetConvolutionMathType", kernel);
  std::vector<int> yd(static_cast<size_t>(rank));
  check_dnn(api().cudnnGetConvolutionNdForwardOutputDim(p->conv, p->x, p->w, rank, yd.data()), "cudnnGetConvolutionNdForwardOutputDim", kernel);
  std::vector<int> want{xd[0], wd[0]};
  if (n == 1) want.push_back(1);
  for (size_t d = 2; d < ys.size(); ++d) want.push_back(static_cast<int>(ys[d].hint()));
  KILN_INTERNAL_CHECK(yd == want, "cuda runtime: kernel ", kernel, ": cuDNN's convolution output differs from the plan's");
  check_dnn(api().cudnnCreateTensorDescriptor(&p->y), "cudnnCreateTensorDescriptor", kernel);
  check_dnn(api().cudnnSetTensorNdDescriptor(p->y, t, rank, yd.data(), strides_of(yd).data()), "cudnnSetTensorNdDescriptor (y)", kernel);
  Handle& h = handle_of(ctx);
  std::unique_lock<std::mutex> handle_lock(h.queue_mu);
  // The heuristic's proposals for the direction, best first, less those that round f32 operands
  // to tensor-core precision without TF32 or need more than the workspace.
  auto keep = [&](const auto& perf, int found, auto workspace_of) {
    for (int i = 0; i < found; ++i) {
      const auto& a = perf[static_cast<size_t>(i)];
      if (a.status != CUDNN_STATUS_SUCCESS) continue;
      if (c.dtype == DType::f32 && !allow_tf32 && a.mathType != CUDNN_FMA_MATH && a.mathType != CUDNN_DEFAULT_MATH) continue;
      size_t bytes = 0;
      if (workspace_of(a.algo, &bytes) != CUDNN_STATUS_SUCCESS || bytes > h.workspace_bytes) continue;
      p->algorithms.push_back(Algorithm{static_cast<int>(a.algo), a.mathType, bytes});
    }
  };
  int found = 0;
  switch (c.computes) {
    case ConvolutionComputes::y: {
      std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
      check_dnn(api().cudnnGetConvolutionForwardAlgorithm_v7(h.h, p->x, p->w, p->conv, p->y, static_cast<int>(perf.size()), &found,
                                                             perf.data()),
                "cudnnGetConvolutionForwardAlgorithm_v7", kernel);
      keep(perf, found, [&](cudnnConvolutionFwdAlgo_t a, size_t* bytes) {
        return api().cudnnGetConvolutionForwardWorkspaceSize(h.h, p->x, p->w, p->conv, p->y, a, bytes);
      });
      break;
    }
    case ConvolutionComputes::x: {
      std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT);
      check_dnn(api().cudnnGetConvolutionBackwardDataAlgorithm_v7(h.h, p->w, p->y, p->conv, p->x, static_cast<int>(perf.size()),
                                                                  &found, perf.data()),
                "cudnnGetConvolutionBackwardDataAlgorithm_v7", kernel);
      keep(perf, found, [&](cudnnConvolutionBwdDataAlgo_t a, size_t* bytes) {
        return api().cudnnGetConvolutionBackwardDataWorkspaceSize(h.h, p->w, p->y, p->conv, p->x, a, bytes);
      });
      break;
    }
    case ConvolutionComputes::w: {
      std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);
      check_dnn(api().cudnnGetConvolutionBackwardFilterAlgorithm_v7(h.h, p->x, p->y, p->conv, p->w, static_cast<int>(perf.size()),
                                                                    &found, perf.data()),
                "cudnnGetConvolutionBackwardFilterAlgorithm_v7", kernel);
      keep(perf, found, [&](cudnnConvolutionBwdFilterAlgo_t a, size_t* bytes) {
        return api().cudnnGetConvolutionBackwardFilterWorkspaceSize(h.h, p->x, p->y, p->conv, p->w, a, bytes);
      });
      break;
    }
  }
  handle_lock.unlock();
  KILN_CHECK(!p->algorithms.empty(), "cuDNN: no algorithm for the ", dtype_name(c.dtype), " convolution of kernel ", kernel,
             " within a workspace of ", h.workspace_bytes >> 20, " MiB");
  std::lock_guard<std::mutex> lock(problems().mu);
  if (problems().by_key.size() > 512) problems().by_key.clear();  // many shapes (dynamic sizes): start again rather than grow
  // Another thread may have set it up meanwhile: the first one made stays.
  return problems().by_key.emplace(key.str(), std::move(p)).first->second;
}

}  // namespace

std::thread start_convolution(Context& ctx, std::vector<plan::PlanConvolution> convolutions, bool allow_tf32, bool ahead_of_plan) {
  // The problems in the plan's order on the context's handle (eight threads with a handle each
  // were not faster on an H100: resnet50's first run waited 304 ms for them, 262 ms for one
  // thread, on another machine); a problem met before is found in the table.
  return detail::start_library(
      "cuDNN", ahead_of_plan, std::move(convolutions), [&ctx] { start_handle(ctx); },
      [&ctx, allow_tf32](const plan::PlanConvolution& c) { prepare(ctx, c, {}, allow_tf32, "(start-up)"); });
}

int convolution_algorithms(Context& ctx, const plan::PlanConvolution& c, const std::vector<int64_t>& syms,
                           bool allow_tf32, const std::string& kernel) {
  const std::shared_ptr<Prepared> p = prepare(ctx, c, syms, allow_tf32, kernel);
  return p ? static_cast<int>(p->algorithms.size()) : 0;
}

std::string convolution_algorithm_name(Context& ctx, const plan::PlanConvolution& c, const std::vector<int64_t>& syms,
                                       bool allow_tf32, const std::string& kernel, int algorithm) {
  const std::shared_ptr<Prepared> p = prepare(ctx, c, syms, allow_tf32, kernel);
  if (!p) return "cuDNN (nothing to compute)";
  const size_t i = static_cast<size_t>(std::clamp(algorithm, 0, static_cast<int>(p->algorithms.size()) - 1));
  return std::string("cuDNN ") + algorithm_name(c.computes, p->algorithms[i].algo);
}

void run_convolution(Context& ctx, const plan::PlanConvolution& c, const std::vector<DevicePtr>& ptrs,
                     const std::vector<int64_t>& syms, bool allow_tf32, const std::string& kernel, void* stream, int algorithm) {
  const std::shared_ptr<Prepared> p = prepare(ctx, c, syms, allow_tf32, kernel);
  if (!p) {
    // Nothing to convolve (an empty batch): a weight's gradient is an empty sum, zeros.
    if (c.computes == ConvolutionComputes::w) {
      int64_t elems = 1;
      for (int64_t e : c.w_sizes) elems *= e;
      ctx.memset(ptrs[static_cast<size_t>(c.w)], 0, static_cast<size_t>(elems * dtype_size(c.dtype)));
    }
    return;
  }
  const Algorithm& a = p->algorithms[static_cast<size_t>(std::clamp(algorithm, 0, static_cast<int>(p->algorithms.size()) - 1))];
  Handle& h = handle_of(ctx);
  const float one = 1.0f, zero = 0.0f;  // f32 scaling for every dtype cuDNN computes in f32
  ctx.make_current();
  std::lock_guard<std::mutex> queue(h.queue_mu);
  check_dnn(api().cudnnSetStream(h.h, static_cast<cudaStream_t>(stream ? stream : ctx.stream())), "cudnnSetStream", kernel);
  check_dnn(api().cudnnSetConvolutionMathType(p->conv, a.math), "cudnnSetConvolutionMathType", kernel);
  auto at = [&](int32_t b) { return reinterpret_cast<void*>(ptrs[static_cast<size_t>(b)]); };
  void* ws = reinterpret_cast<void*>(h.workspace);
  switch (c.computes) {
    case ConvolutionComputes::y:
      check_dnn(api().cudnnConvolutionForward(h.h, &one, p->x, at(c.x), p->w, at(c.w), p->conv,
                                              static_cast<cudnnConvolutionFwdAlgo_t>(a.algo), ws, a.memory, &zero, p->y, at(c.y)),
                "cudnnConvolutionForward", kernel);
      break;
    case ConvolutionComputes::x:
      check_dnn(api().cudnnConvolutionBackwardData(h.h, &one, p->w, at(c.w), p->y, at(c.y), p->conv,
                                                   static_cast<cudnnConvolutionBwdDataAlgo_t>(a.algo), ws, a.memory, &zero, p->x,
                                                   at(c.x)),
                "cudnnConvolutionBackwardData", kernel);
      break;
    case ConvolutionComputes::w:
      check_dnn(api().cudnnConvolutionBackwardFilter(h.h, &one, p->x, at(c.x), p->y, at(c.y), p->conv,
                                                     static_cast<cudnnConvolutionBwdFilterAlgo_t>(a.algo), ws, a.memory, &zero, p->w,
                                                     at(c.w)),
                "cudnnConvolutionBackwardFilter", kernel);
      break;
  }
}

}  // namespace kiln::cuda
