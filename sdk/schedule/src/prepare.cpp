// prepare: the graph the scheduler works on. Composites are decomposed (passes::decompose);
// every f16/bf16 matmul multiplies f32 operands into an f32 result, with casts around it (the gemm
// runs in f32, as kernels accumulate in f32 anyway; the casts become its prologue and epilogue),
// unless the target multiplies them in their own dtype (Target::low_precision_gemm: GPUs);
// attention (written as the op, or recognised here by passes::recognize_attention) stays one op
// where the target has a kernel for it (Target::fused_attention), and so does a convolution
// (Target::convolution), in the form its kernel takes (prepare_convolution);
// a large matrix product by a 2-D weight whose rows the target's gemm cannot read aligned is padded
// to aligned sizes and sliced back (Target::gemm_row_alignment, pad_unaligned_gemm);
// and where a reshape or a gemm operand reads a graph input through a layout no strides or no
// BLAS call can express (a permuted input reshaped, a sliced operand), a copy (a cast to the
// same dtype) is put in between, which fusion then stores contiguously.
// An f16/bf16 scatter_add or scatter_reduce combines in f32. An index_select, gather or scatter
// op whose indices are only known at run time gathers (scatters) on the device with each index
// clamped into the dim, and gets a check: one more graph output counting the indices
// outside the dim, which the runtime reads after the kernels (Schedule::checks).
#include <algorithm>
#include <optional>

#include "internal.h"
#include "kiln/passes/passes.h"

namespace kiln::schedule::detail {

namespace {

bool low_precision_matmul(const Node& n) {
  return n.op == OpId::matmul && (n.meta.dtype == DType::f16 || n.meta.dtype == DType::bf16);
}

// A context whose buffers are the inputs, the constants and `also` (a computed value taken as
// stored contiguous, as the fusion stores it), for asking the layouts of views of them.
Context sources_and(const Graph& g, NodeId also) {
  Context c{g, {}, {}, {}, {}};
  c.source.assign(g.size(), false);
  for (NodeId i = 0; i < static_cast<NodeId>(g.size()); ++i)
    c.source[static_cast<size_t>(i)] = g.node(i).op == OpId::input || g.node(i).op == OpId::constant || i == also;
  c.realized = c.source;
  return c;
}

// The layout of `id` in `g` when every input and constant is a buffer and nothing else is but
// `also`.
std::optional<Layout> source_layout(const Graph& g, NodeId id, NodeId also = -1) {
  return sources_and(g, also).layout(id, nullptr);
}

// The node under a chain of views.
NodeId view_base(const Graph& g, NodeId id) {
  for (;;) {
    const Node& n = g.node(id);
    if (op_def(n.op).category != OpCategory::layout || n.op == OpId::cat || n.op == OpId::pad || gathers(n.op))
      return id;
    id = n.inputs[0];
  }
}

// The layout of `id` read through its chain of views over a contiguous base (what the fusion
// stores a computed value as; inputs and constants are their own buffers), and over the input of
// each reshape in the chain that no strides express, which the fusion stores contiguous too
// (ConvNeXt's downsampling windows: a permute of the activations merged into [N, OH, OW, 4 * C]
// rows is stored once, not copied again).
std::optional<Layout> stored_view_layout(const Graph& g, NodeId id) {
  std::vector<NodeId> chain;  // id, then down its views to the base
  for (NodeId v = id;; v = g.node(v).inputs[0]) {
    chain.push_back(v);
    if (v == view_base(g, v)) break;
  }
  Context c = sources_and(g, chain.back());
  for (size_t k = chain.size() - 1; k-- > 0;) {
    const Node& n = g.node(chain[k]);
    if (n.op == OpId::reshape && !c.layout(chain[k], nullptr)) c.source[static_cast<size_t>(n.inputs[0])] = c.realized[static_cast<size_t>(n.inputs[0])] = true;
  }
  return c.layout(id, nullptr);
}

// Whether the batch dims (all but the last two) of `id` run at one stride, read as above.
bool batch_dims_share_a_stride(const Graph& g, NodeId id) {
  const std::optional<Layout> l = stored_view_layout(g, id);
  if (!l) return false;
  const SymShape& sizes = g.node(id).meta.sizes;
  std::optional<size_t> inner;  // the next batch dim inwards of more than one element
  for (size_t d = sizes.size() < 2 ? 0 : sizes.size() - 2; d-- > 0;) {
    if (sizes[d] == 1) continue;
    if (inner && !(l->strides[d] == l->strides[*inner] * sizes[*inner])) return false;
    inner = d;
  }
  return true;
}

// A convolution the target runs (kept by decompose_except) in the form its kernel takes:
// operands of the result's dtype, contiguous in memory (a graph input or constant read through
// other strides is copied first); pads symmetric (the rest is a pad op before it); the bias an
// add after it, which fuses with what follows.
NodeId prepare_convolution(Graph& out, const Node& n, std::vector<NodeId> ins) {
  const DType t = n.meta.dtype;
  for (NodeId& i : ins) {
    if (out.node(i).meta.dtype != t) i = out.add(OpId::cast, {i}, Attrs{t});
    const Node& b = out.node(view_base(out, i));
    if (b.op != OpId::input && b.op != OpId::constant) continue;  // fusion stores computed operands itself
    // A view of other sizes (a weight [M, C, 1, 1] read as [M, 1, 1, C]) is copied too, though
    // its memory would do: the plan's convolution names whole buffers of the operands' sizes.
    const std::optional<Layout> l = source_layout(out, i);
    if (!l || !contiguous_from_start(out.node(i).meta, *l) || !(b.meta.sizes == out.node(i).meta.sizes))
      i = out.add(OpId::cast, {i}, Attrs{t});
  }
  const size_t sp = static_cast<size_t>(n.meta.rank() - 2);
  // A gradient op keeps its attributes (runs_convolution took only symmetric pads).
  if (n.op == OpId::convolution_input_grad || n.op == OpId::convolution_weight_grad) return out.add(n.op, ins, n.attrs);
  const bool last = n.op == OpId::convolution_channels_last;
  std::vector<int64_t> pads = n.attrs.ints(1);
  std::vector<int64_t> extra;  // pad's pairs, last dim first
  if (last) extra = {0, 0};    // the channels
  bool asymmetric = false;
  for (size_t d = sp; d-- > 0;) {
    const int64_t common = std::min(pads[d], pads[d + sp]);
    extra.push_back(pads[d] - common);
    extra.push_back(pads[d + sp] - common);
    asymmetric = asymmetric || pads[d] != pads[d + sp];
    pads[d] = pads[d + sp] = common;
  }
  if (asymmetric) ins[0] = out.add(OpId::pad, {ins[0]}, Attrs{extra, 0.0});
  NodeId y = out.add(n.op, {ins[0], ins[1]}, Attrs{n.attrs.ints(0), pads, n.attrs.ints(2), n.attrs.i(3)});
  if (ins.size() > 2 && last) {
    y = out.add(OpId::add, {y, ins[2]});
  } else if (ins.size() > 2) {
    SymShape bs{out.node(ins[2]).meta.sizes[0]};
    bs.insert(bs.end(), sp, SymInt(1));
    y = out.add(OpId::add, {y, out.add(OpId::reshape, {ins[2]}, Attrs{bs})});
  }
  return y;
}

// Copies of gemm operands, one per value: contiguous copies (copy) and zero-padded ones
// (pad_unaligned_gemm). A pad goes below the
// views and casts its operand is read through, onto the value they read (pad(cast(x^T)) is
// (cast(pad(x)))^T: a cast of zero is zero), so that operands which view one value share its one
// pad: GPT-2's tied embedding is read as w^T by the LM head and as w by its gradient's product,
// and the logits' gradient as [b, s, V] and as [b*s, V]; each was padded twice, and the head's
// weight was first stored transposed by a cast kernel of its own (0.3 ms for [768, 50257] on an
// H200). The views sunk through keep a pad's result readable by a gemm: 2-D permutes (a
// transposed operand) and reshapes that keep the padded last dim.
class OperandCopies {
 public:
  explicit OperandCopies(Graph& out) : out_(out) {}

  // x padded with zeros at the high end of each dim by `high[d]` elements.
  NodeId pad(NodeId x, std::vector<int64_t> high) {
    std::vector<Node> above;  // the views and casts from x down to the value padded (copies: out_ grows)
    for (;;) {
      const Node n = out_.node(x);
      if (n.op == OpId::cast) {
        above.push_back(n);
      } else if (n.op == OpId::permute && n.meta.rank() == 2) {
        const std::vector<int64_t> p = n.attrs.ints(0);
        std::vector<int64_t> below(2, 0);
        for (size_t d = 0; d < 2; ++d) below[static_cast<size_t>(p[d])] = high[d];
        high = below;
        above.push_back(n);
      } else if (n.op == OpId::reshape && only_last_dim(high) && out_.node(n.inputs[0]).meta.rank() >= 1 &&
                 out_.node(n.inputs[0]).meta.sizes.back() == n.meta.sizes.back()) {
        const int64_t last = high.back();
        high.assign(static_cast<size_t>(out_.node(n.inputs[0]).meta.rank()), 0);
        high.back() = last;
        above.push_back(n);
      } else {
        break;
      }
      x = n.inputs[0];
    }
    // pad's pairs (low, high) run from the last dim; dims before the first padded one are left out.
    std::vector<int64_t> pairs;
    size_t first = 0;
    while (first < high.size() && high[first] == 0) ++first;
    for (size_t d = high.size(); d-- > first;) pairs.insert(pairs.end(), {0, high[d]});
    NodeId y = once(OpId::pad, x, Attrs{pairs, 0.0});
    // The casts first (elementwise: they commute with the views), so that the stored value is the
    // cast of the padded one in its own order and the views read it as they read x.
    for (size_t i = above.size(); i-- > 0;)
      if (above[i].op == OpId::cast) y = once(OpId::cast, y, above[i].attrs);
    for (size_t i = above.size(); i-- > 0;) {
      const Node& v = above[i];
      if (v.op == OpId::permute) {
        y = out_.add(OpId::permute, {y}, v.attrs);
      } else if (v.op == OpId::reshape) {
        SymShape sizes = v.meta.sizes;
        sizes.back() = out_.node(y).meta.sizes.back();
        y = out_.add(OpId::reshape, {y}, Attrs{sizes});
      }
    }
    return y;
  }

  // x copied in its own dtype (an operand a kernel reads contiguous), one copy per value: the
  // gradient that two batched products of an attention's backward read (dO for dV = P^T dO and
  // dP = dO V^T) was copied twice.
  NodeId copy(NodeId x) { return once(OpId::cast, x, Attrs{out_.node(x).meta.dtype}); }

  // A gemm operand x (a matrix or a batch of them) copied so that its batch dims share a stride,
  // its two matrix dims kept in the order its stored view has them: a transposed view (attention's
  // k^T, read from rows of k) is copied as the rows it reads and stays a transposed view of the
  // copy, which the gemm takes as such. Each side of the copy then runs along unit strides;
  // copying k^T into [.., d, keys] order wrote one column at a time (vit_b_16 on an H100: 13.3 us
  // a layer, against 8.4 for q and v together).
  NodeId matrix_copy(NodeId x) {
    const int64_t r = out_.node(x).meta.rank();
    const std::optional<Layout> l = stored_view_layout(out_, x);
    const bool transposed = r >= 2 && l && l->strides[static_cast<size_t>(r - 2)] == 1 &&
                            !(l->strides[static_cast<size_t>(r - 1)] == 1);
    if (!transposed) return copy(x);
    std::vector<int64_t> swap(static_cast<size_t>(r));
    for (int64_t d = 0; d < r; ++d) swap[static_cast<size_t>(d)] = d;
    std::swap(swap[static_cast<size_t>(r - 2)], swap[static_cast<size_t>(r - 1)]);
    const NodeId rows = once(OpId::permute, x, Attrs{swap});
    return out_.add(OpId::permute, {copy(rows)}, Attrs{swap});
  }

 private:
  static bool only_last_dim(const std::vector<int64_t>& high) {
    for (size_t d = 0; d + 1 < high.size(); ++d)
      if (high[d] != 0) return false;
    return !high.empty();
  }
  // One node per (op, input, attrs): a value padded (or cast) for two gemms is stored once.
  NodeId once(OpId op, NodeId x, const Attrs& attrs) {
    for (const Made& m : made_)
      if (m.op == op && m.input == x && m.attrs == attrs) return m.node;
    made_.push_back({op, x, attrs, out_.add(op, {x}, attrs)});
    return made_.back().node;
  }
  struct Made {
    OpId op;
    NodeId input;
    Attrs attrs;
    NodeId node;
  };
  Graph& out_;
  std::vector<Made> made_;
};

// A matrix product whose rows are not aligned to what the target's gemm reads in vectors
// (Target::gemm_row_alignment bytes) falls back to slow kernels: GPT-2's LM head, [1024, 768] @
// [768, 50257] in bf16, took 0.84-0.94 ms of a 2 ms forward on an H200. So x @ w with w 2-D is
// padded with zeros to aligned K and N (zero rows and columns add nothing) and its result is
// sliced back, as torch inductor's pad_mm does. The pads are copies, one pass over each padded
// operand (the weight's too, each call: it is a graph input) and one over the sliced result, so
// only products large in every dim are padded (each >= 64, and 2^24 multiply-adds), and only in
// f16/bf16, whose tensor-core kernels need the alignment: measured on an H200 (docs/cuda.md),
// padding made gpt2 and bart_decoder 23-24% faster in bf16 and 5-6% slower in fp32.
// Returns the columns added to the result (0: none), which the caller slices off.
int64_t pad_unaligned_gemm(Graph& out, const Node& n, std::vector<NodeId>& ins, const Target& target, OperandCopies& operands) {
  if (target.gemm_row_alignment <= 0 || !low_precision_matmul(n)) return 0;
  const SymShape& a = out.node(ins[0]).meta.sizes;
  const SymShape& w = out.node(ins[1]).meta.sizes;
  if (a.size() < 2 || w.size() != 2 || !w[0].is_static() || !w[1].is_static()) return 0;
  const int64_t k = w[0].hint(), cols = w[1].hint(), bytes = dtype_size(n.meta.dtype);
  if (target.gemm_row_alignment % bytes != 0) return 0;
  const int64_t align = target.gemm_row_alignment / bytes;  // elements
  double rows = 1;
  for (size_t d = 0; d + 1 < a.size(); ++d) rows *= static_cast<double>(a[d].hint());
  constexpr int64_t kMinDim = 64;
  if (rows < kMinDim || k < kMinDim || cols < kMinDim || rows * static_cast<double>(k) * static_cast<double>(cols) < 0x1p24)
    return 0;
  const int64_t pad_k = (align - k % align) % align, pad_n = (align - cols % align) % align;
  if (pad_k == 0 && pad_n == 0) return 0;
  if (pad_k > 0) {
    std::vector<int64_t> high(a.size(), 0);
    high.back() = pad_k;
    ins[0] = operands.pad(ins[0], high);
  }
  ins[1] = operands.pad(ins[1], {pad_k, pad_n});
  return pad_n;
}

// Whether the convolutions the target's library runs on tensor cores (Target::channels_last_f32)
// do most of the graph's multiply-adds (those of every convolution and matrix product): then the
// graph runs channels last (Target::channels_last), whatever its permutes. A graph of depthwise
// and 1x1 convolutions (MobileNet, EfficientNet) gains nothing in the library and would reduce
// over spatial dims as column reductions (their squeeze-excitation means), as torch.compile's
// layout optimisation also skips some conv nets by their convolutions' kinds. Measured on an
// H200 (docs/cuda.md, bf16, reduce-overhead): resnet50 0.96 ms channels last against 1.73
// channels first.
bool library_convolutions_dominate(const Graph& g, const Target& target) {
  double library = 0, all = 0;
  auto count = [](const SymShape& out) {
    double n = 1;
    for (const SymInt& s : out) n *= static_cast<double>(s.hint());
    return n;
  };
  for (const Node& n : g.nodes()) {
    if (n.op == OpId::convolution || n.op == OpId::convolution_input_grad || n.op == OpId::convolution_weight_grad) {
      // Each is a product of the forward's size: y's elements times C/groups * prod(K).
      const SymShape& w = n.op == OpId::convolution_weight_grad ? n.meta.sizes : g.node(n.inputs[1]).meta.sizes;
      double macs = count(n.op == OpId::convolution ? n.meta.sizes : g.node(n.inputs[n.op == OpId::convolution_input_grad ? 0 : 1]).meta.sizes);
      for (size_t d = 1; d < w.size(); ++d) macs *= static_cast<double>(w[d].hint());  // C/groups * prod(K)
      all += macs;
      const DType t = n.meta.dtype;
      const bool tensor_cores = t == DType::f16 || t == DType::bf16 || (t == DType::f32 && target.channels_last_f32);
      if (target.runs_convolution(g, n) && tensor_cores) library += macs;
    } else if (n.op == OpId::matmul || n.op == OpId::linear) {
      const SymShape& a = g.node(n.inputs[0]).meta.sizes;  // the reduced dim is a's last
      if (!a.empty()) all += count(n.meta.sizes) * static_cast<double>(a.back().hint());
    } else if (n.op == OpId::scaled_dot_product_attention) {  // q @ k^T, then the weights @ v
      const SymShape& q = g.node(n.inputs[0]).meta.sizes;
      const SymShape& k = g.node(n.inputs[1]).meta.sizes;
      const double keys = static_cast<double>(k[k.size() - 2].hint());
      all += (count(q) + count(n.meta.sizes)) * keys;
    }
  }
  return library > 0 && library * 2 > all;
}

// Attention recognized where the target fuses it, composites decomposed but those the target
// runs as one kernel (attention, library convolutions).
Graph decompose_for(const Graph& in, const Target& target, bool channels_last) {
  const Graph recognized = target.fused_attention ? passes::eliminate_dead_code(passes::recognize_attention(in)) : Graph();
  const Graph& recognized_or_in = target.fused_attention ? recognized : in;
  // Channels last: convolutions turned before decomposition (so that the ones that decompose,
  // depthwise and 1x1, decompose channels last too), permutes moved and cancelled after it.
  const Graph turned = channels_last ? passes::to_channels_last(recognized_or_in) : Graph();
  const Graph& src = channels_last ? turned : recognized_or_in;
  Graph g = target.fused_attention || target.convolution
                ? passes::decompose_except(src, [&](const Graph& gr, const Node& n) {
                    return target.fuses_attention(gr, n) || target.runs_convolution(gr, n);
                  })
                : passes::decompose(in);
  if (channels_last) g = passes::eliminate_dead_code(passes::simplify(passes::sink_permutes(g)));
  return g;
}

// Elements moved by the graph's permutes (a permute of a handful, a bias's, is a view read in
// place): what a kernel reads or writes across its loop order.
double transposed_elements(const Graph& g) {
  double moved = 0;
  for (const Node& n : g.nodes()) {
    if (n.op != OpId::permute) continue;
    double e = 1;
    for (const SymInt& s : n.meta.sizes) e *= static_cast<double>(s.hint());
    if (e > 16) moved += e;
  }
  return moved;
}

// The graph decomposed for the target, and whether channels last. Channels last where the
// library's convolutions dominate, or where the graph was written channels last between its
// convolutions, so that turning it leaves fewer elements under permutes than there are now: a
// ConvNeXt block permutes its depthwise convolution's output to normalise over channels and run
// its MLP, and back for the residual; channels last, those permutes cancel the convolutions'
// and every kernel of the block reads and writes in one order (docs/cuda.md: convnext_tiny bf16
// 4.93 ms channels last against 2.72 channels first while they did not cancel).
std::pair<Graph, bool> decompose_with_layout(const Graph& in, const Target& target) {
  // By permutes only where the library runs every convolution it takes on tensor cores: cuDNN's
  // f32 NHWC kernels without TF32 are slow (input gradients of 29-36 ms each in ResNet-50's step).
  // A convolution whose windows tile x that the library leaves (over an image's channels) is a
  // gemm over its patches, which reads either layout alike: it leaves the choice to the permutes.
  bool convolutions = false, tensor_cores = true;
  if (target.convolution && target.channels_last)
    for (const Node& n : in.nodes()) {
      if (n.op != OpId::convolution && n.op != OpId::convolution_input_grad && n.op != OpId::convolution_weight_grad) continue;
      if (target.runs_convolution(in, n)) {
        convolutions = true;
        const DType t = n.meta.dtype;
        tensor_cores = tensor_cores && (t == DType::f16 || t == DType::bf16 || (t == DType::f32 && target.channels_last_f32));
      } else if (detail::forward_convolution_tiles_input(in, n)) {
        convolutions = true;
      }
    }
  if (!convolutions) return {decompose_for(in, target, false), false};
  if (library_convolutions_dominate(in, target)) return {decompose_for(in, target, true), true};
  if (!tensor_cores) return {decompose_for(in, target, false), false};
  Graph first = decompose_for(in, target, false);
  Graph last = decompose_for(in, target, true);
  if (transposed_elements(last) < transposed_elements(first)) return {std::move(last), true};
  return {std::move(first), false};
}

}  // namespace

Graph prepare(const Graph& in, const Target& target, std::vector<std::string>& checks) {
  Graph g = decompose_with_layout(in, target).first;
  // A composite's backward differentiates its own copy of the decomposition (sdk/autodiff): once
  // the forward's copy is decomposed too, the two compute the same statistics from the same values.
  g = passes::eliminate_dead_code(passes::eliminate_common_subexpressions(g));
  // Last, on the node order the kernels will follow: what a backward recomputes.
  g = passes::rematerialize(g);
  Graph out;
  out.shapes() = g.shapes();
  OperandCopies operands(out);
  std::vector<NodeId> map(g.size(), -1);
  for (NodeId id = 0; id < static_cast<NodeId>(g.size()); ++id) {
    const Node& n = g.node(id);
    if (n.op == OpId::input) {
      map[static_cast<size_t>(id)] = out.add_input(n.meta, n.name);
      continue;
    }
    std::vector<NodeId> ins;
    for (NodeId i : n.inputs) ins.push_back(map[static_cast<size_t>(i)]);
    // x @ w with w 2-D (weights every row shares) and x a permute keeping its last dim is the
    // same permute of x's own product: one gemm over x's rows in memory order instead of a batch
    // of small ones (ViT's attention projections multiply a [seq, batch, d] transpose).
    std::vector<int64_t> rows_permuted;
    if (n.op == OpId::matmul && out.node(ins[1]).meta.rank() == 2 && out.node(ins[0]).op == OpId::permute) {
      const std::vector<int64_t> p = out.node(ins[0]).attrs.ints(0);
      bool identity = true;
      for (size_t d = 0; d < p.size(); ++d) identity = identity && p[d] == static_cast<int64_t>(d);
      if (p.size() >= 3 && p.back() == static_cast<int64_t>(p.size()) - 1 && !identity) {
        rows_permuted = p;
        ins[0] = out.node(ins[0]).inputs[0];
      }
    }
    // Two or more batch dims on a target whose gemm takes one batch stride: operands that are
    // views (whose batch dims need not share a stride) are copied contiguous, so the product is
    // one strided-batched call (bert's attention products ran as 8 calls of 12 gemms each).
    if (target.one_batch_stride && n.op == OpId::matmul && n.meta.rank() >= 4)
      for (NodeId& i : ins)
        if (!batch_dims_share_a_stride(out, i)) i = operands.matrix_copy(i);
    const bool reshape = n.op == OpId::reshape && !reshape_is_unsqueeze(g.node(n.inputs[0]).meta.sizes, n.meta.sizes);
    if (n.op == OpId::scaled_dot_product_attention) {
      // The attention kernel reads rows of q, k and v with a unit stride along the head dim, and a
      // mask of any strides, bool or of the attention's dtype (a float one is cast, as the op does).
      const DType t = n.meta.dtype;
      if (ins.size() > 3 && out.node(ins[3]).meta.dtype != DType::bool_ && out.node(ins[3]).meta.dtype != t)
        ins[3] = out.add(OpId::cast, {ins[3]}, Attrs{t});
      for (size_t j = 0; j < ins.size(); ++j) {
        NodeId& i = ins[j];
        const Node& b = out.node(view_base(out, i));
        if (b.op != OpId::input && b.op != OpId::constant) continue;
        const std::optional<Layout> l = source_layout(out, i);
        if (!l || (j < 3 && !(l->strides.back() == 1))) i = operands.copy(i);
      }
    }
    if ((n.op == OpId::scatter_add || n.op == OpId::scatter_reduce) &&
        (n.meta.dtype == DType::f16 || n.meta.dtype == DType::bf16)) {
      // Kernels combine atomically in f32 (16-bit atomics are not on every target, and lose more):
      // the sums and products are rounded once, after.
      for (size_t j : {size_t{0}, size_t{2}}) ins[j] = out.add(OpId::cast, {ins[j]}, Attrs{DType::f32});
      map[static_cast<size_t>(id)] = out.add(OpId::cast, {out.add(n.op, ins, n.attrs)}, Attrs{n.meta.dtype});
      if (!n.name.empty()) out.set_name(map[static_cast<size_t>(id)], n.name);
      continue;
    }
    if (convolves(n.op)) {
      map[static_cast<size_t>(id)] = prepare_convolution(out, n, ins);
      if (!n.name.empty()) out.set_name(map[static_cast<size_t>(id)], n.name);
      continue;
    }
    if (reshape || (n.op == OpId::matmul && g.node(n.inputs[0]).meta.rank() >= 2 && g.node(n.inputs[1]).meta.rank() >= 2)) {
      for (NodeId& i : ins) {
        const NodeId base = view_base(out, i);
        const Node& b = out.node(base);
        if (b.op != OpId::input && b.op != OpId::constant) continue;  // fusion stores computed bases itself
        const std::optional<Layout> l = source_layout(out, i);
        bool ok = l.has_value();
        if (ok && reshape) ok = reshape_strides(out.node(i).meta.sizes, l->strides, n.meta.sizes, out.shapes()).has_value();
        if (ok && !reshape) {
          const size_t r = l->strides.size();
          const SymInt& rs = l->strides[r - 2];
          const SymInt& cs = l->strides[r - 1];
          ok = (cs == 1 && !(rs == 0)) || (rs == 1 && !(cs == 0));
        }
        if (!ok) i = operands.copy(i);
      }
    }
    // f16/bf16 products run as f32 gemms unless the target multiplies them as they are.
    const bool gemm_in_f32 = low_precision_matmul(n) && !target.low_precision_gemm;
    if (n.op == OpId::matmul && is_floating(n.meta.dtype) && !gemm_in_f32) {
      // Mixed operands (f32 @ f16, f64 @ f32, bf16 @ f32): the gemm takes both in the result's dtype.
      for (NodeId& i : ins)
        if (out.node(i).meta.dtype != n.meta.dtype) i = out.add(OpId::cast, {i}, Attrs{n.meta.dtype});
    }
    if (gemm_in_f32) {
      for (NodeId& i : ins)
        if (out.node(i).meta.dtype != DType::f32) i = out.add(OpId::cast, {i}, Attrs{DType::f32});
      const NodeId mm = out.add(OpId::matmul, ins);
      map[static_cast<size_t>(id)] = out.add(OpId::cast, {mm}, Attrs{n.meta.dtype});
    } else {
      const int64_t padded_columns = pad_unaligned_gemm(out, n, ins, target, operands);
      NodeId y = out.add(n.op, ins, n.attrs);
      if (padded_columns > 0) {
        const int64_t last = out.node(y).meta.rank() - 1, cols = out.node(y).meta.sizes.back().hint() - padded_columns;
        y = out.add(OpId::slice, {y}, Attrs{last, int64_t{0}, cols, int64_t{1}});
      }
      map[static_cast<size_t>(id)] = y;
    }
    if (!rows_permuted.empty())
      map[static_cast<size_t>(id)] = out.add(OpId::permute, {map[static_cast<size_t>(id)]}, Attrs{rows_permuted});
    if (!n.name.empty()) out.set_name(map[static_cast<size_t>(id)], n.name);
  }
  std::vector<NodeId> outs;
  for (NodeId o : g.outputs()) outs.push_back(map[static_cast<size_t>(o)]);
  // Checks of run-time indices: sum(index < 0 or index >= size) over the index tensor.
  checks.clear();
  auto scalar = [&](DType t, int64_t v) {
    return out.add(OpId::full, {}, Attrs{std::vector<SymInt>{}, static_cast<double>(v), t});
  };
  const size_t num_nodes = out.size();
  for (NodeId id = 0; id < static_cast<NodeId>(num_nodes); ++id) {
    const Node& n = out.node(id);
    if (!index_checked_at_run_time(out, n)) continue;
    const int64_t dim = n.attrs.i(0);
    const int64_t size = out.node(n.inputs[0]).meta.sizes[static_cast<size_t>(dim)].hint();
    const std::string what = std::string(op_name(n.op)) + (n.name.empty() ? std::string() : " '" + n.name + "'") + " (node %" +
                             std::to_string(id) + " of the scheduled graph)";
    NodeId index = n.inputs[1];
    // Each index once, not once per element it is broadcast to (an index_add's 1-D index spread over rows).
    for (;;) {
      const Node& v = out.node(index);
      if (v.op != OpId::expand && !(v.op == OpId::reshape && reshape_is_unsqueeze(out.node(v.inputs[0]).meta.sizes, v.meta.sizes)))
        break;
      index = v.inputs[0];
    }
    if (out.node(index).meta.dtype != DType::i64) index = out.add(OpId::cast, {index}, Attrs{DType::i64});
    const NodeId below = out.add(OpId::lt, {index, scalar(DType::i64, 0)});
    const NodeId above = out.add(OpId::ge, {index, scalar(DType::i64, size)});
    const NodeId outside = out.add(OpId::logical_or, {below, above});
    outs.push_back(out.add(OpId::sum, {outside}, Attrs{std::vector<int64_t>{}, false}));
    checks.push_back(what + ": indices outside [0, " + std::to_string(size) + "), the size of dim " + std::to_string(dim) +
                     " of its input");
  }
  out.set_outputs(outs);
  // Nodes no output reads (a view or cast whose reader now reads a pad below it) are dropped.
  return passes::eliminate_dead_code(out);
}

}  // namespace kiln::schedule::detail

namespace kiln::schedule {

std::optional<Graph> channels_last_layout(const Graph& g, const Target& target) {
  std::pair<Graph, bool> laid = detail::decompose_with_layout(g, target);
  if (!laid.second) return std::nullopt;
  return std::move(laid.first);
}

}  // namespace kiln::schedule
