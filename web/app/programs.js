// Sample programs written against the JavaScript API: each builds its graph by calling ops on a
// builder (tracing, as the C++ frontend does). transformer_block is the program of
// samples/transformer_block.cpp (pre-norm block, batch 4, seq 128, d_model 256, 8 heads, gelu
// MLP of 1024), with the parameters as graph inputs. Shared by the page (window.KilnPrograms)
// and the Node tests (require).
(function (root, factory) {
  if (typeof module === 'object' && module.exports) module.exports = factory();
  else root.KilnPrograms = factory();
})(typeof self !== 'undefined' ? self : this, function () {
  'use strict';

  // opts.seq: a number, or a symbol name for a dynamic sequence length; opts.layers: blocks
  // stacked, each with parameters of its own (named "<layer>.<name>" past the first); opts.scoped:
  // each block's ops in a module scope of its own, "layer.<i>" (as kiln::scope names them in C++).
  function transformerBlock(kiln, opts = {}) {
    const batch = 4, seq = opts.seq ?? 128, model = 256, heads = 8, headDim = model / heads, ff = 4 * model;
    const k = kiln.builder();
    if (typeof seq === 'string') k.symbol(seq, { example: 128 });
    let x = k.input([batch, seq, model], 'f32', 'x');
    for (let layer = 0; layer < (opts.layers ?? 1); ++layer) {
      const dims = { model, heads, headDim, ff };
      x = opts.scoped ? k.scope(`layer.${layer}`, () => block(k, x, layer, dims)) : block(k, x, layer, dims);
    }
    return k.build(x);
  }

  function block(k, x, layer, { model, heads, headDim, ff }) {
    const p = {};
    for (const [name, shape] of [['ln1_w', [model]], ['ln1_b', [model]], ['wq', [model, model]], ['bq', [model]],
      ['wk', [model, model]], ['bk', [model]], ['wv', [model, model]], ['bv', [model]], ['wo', [model, model]],
      ['bo', [model]], ['ln2_w', [model]], ['ln2_b', [model]], ['w1', [ff, model]], ['b1', [ff]],
      ['w2', [model, ff]], ['b2', [model]]])
      p[name] = k.input(shape, 'f32', layer ? `${layer}.${name}` : name);
    const [b, s] = x.shape;
    const splitHeads = (t) => k.transpose(k.reshape(t, [b, s, heads, headDim]), 1, 2);
    const h = k.layer_norm(x, p.ln1_w, p.ln1_b, 1, 1e-5);
    const q = splitHeads(k.add(k.matmul(h, p.wq), p.bq));
    const kk = splitHeads(k.add(k.matmul(h, p.wk), p.bk));
    const v = splitHeads(k.add(k.matmul(h, p.wv), p.bv));
    const scores = k.mul(k.matmul(q, k.transpose(kk, -2, -1)), 1 / Math.sqrt(headDim));
    const attn = k.matmul(k.softmax(scores, -1), v);
    const merged = k.reshape(k.transpose(attn, 1, 2), [b, s, model]);
    const x1 = k.add(x, k.add(k.matmul(merged, p.wo), p.bo));
    const h2 = k.layer_norm(x1, p.ln2_w, p.ln2_b, 1, 1e-5);
    return k.add(x1, k.linear(k.gelu(k.linear(h2, p.w1, p.b1)), p.w2, p.b2));
  }

  // A 3-layer MLP with a softmax head (batch 256, widths 1024), as samples/mlp.cpp.
  function mlp(kiln) {
    const k = kiln.builder();
    let h = k.input([256, 1024], 'f32', 'x');
    for (let i = 0; i < 3; ++i) {
      const w = k.input([1024, 1024], 'f32', `w${i}`), bias = k.input([1024], 'f32', `b${i}`);
      h = k.linear(h, w, bias);
      if (i < 2) h = k.gelu(h);
    }
    return k.build(k.softmax(h, -1));
  }

  return {
    'transformer block (JavaScript)': (kiln) => transformerBlock(kiln),
    'transformer block, dynamic seq (JavaScript)': (kiln) => transformerBlock(kiln, { seq: 'seq' }),
    'mlp (JavaScript)': mlp,
    // A real model's size: 12 blocks (GPT-2's depth), about 600 nodes traced.
    'transformer, 12 blocks (JavaScript)': (kiln) => transformerBlock(kiln, { layers: 12 }),
    transformerBlock,
    mlp,
  };
});
