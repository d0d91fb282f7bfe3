// The module's JavaScript API: building graphs with the op table's ops, loading graph JSON,
// compile reports, errors as JavaScript Errors with native's messages, and the reference
// interpreter's numbers (against values computed here and against native).
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { kiln, runNative, readSample, samples, cli, onnx, realModelsDir, realModels, modelFiles } = require('./common.js');

test('version and op table', async () => {
  const k = await kiln();
  // sdk/cache's kiln_version(): the project version and the source fingerprint, as native.
  assert.match(k.version, /^\d+\.\d+\.\d+\+[0-9a-f]{16}$/);
  assert.strictEqual(k.version, JSON.parse(runNative('key-inputs', readSample('softmax.json'), '{}').out).kiln_version);
  const names = k.ops.map((o) => o.name);
  for (const op of ['input', 'add', 'softmax', 'layer_norm', 'matmul', 'sum', 'reshape', 'cat', 'where'])
    assert.ok(names.includes(op), op);
  assert.deepStrictEqual(k.ops.find((o) => o.name === 'softmax').attrs, [{ name: 'dim', kind: 'int' }]);
});

test('build a graph from JavaScript: shapes, symbols, scalars, negative dims', async () => {
  const k = (await kiln()).builder();
  const x = k.input([1024, 'n'], 'f32', { name: 'x' });
  assert.deepStrictEqual(x.shape, [1024, 's0']);
  const y = k.softmax(k.add(x, 1), -1);
  assert.strictEqual(y.op, 'softmax');
  assert.deepStrictEqual(y.shape, [1024, 's0']);
  const g = k.build(y).toJSON();
  assert.strictEqual(g.format, 'kiln.graph');
  assert.deepStrictEqual(g.nodes.map((n) => n.op), ['input', 'full', 'add', 'softmax']);
  assert.strictEqual(g.nodes[3].attrs.dim, 1, 'dim -1 normalised like the C++ frontend');
  assert.strictEqual(g.nodes[1].attrs.dtype, 'f32', 'a scalar takes the tensor dtype');
  assert.strictEqual(g.symbols[0].example, 16);

  const i = k.input([4], 'i32');
  assert.strictEqual(k.mul(i, 2).dtype, 'i32', 'int scalar keeps an int tensor int');
  assert.strictEqual(k.mul(i, 0.5).dtype, 'f32', 'float scalar lifts an int tensor');
  assert.strictEqual(k.sub(1, i).dtype, 'i32', 'scalar on the left');
  assert.deepStrictEqual(k.sum(x, [-1], true).shape, [1024, 1]);
  assert.deepStrictEqual(k.sum(x).shape, []);
  assert.deepStrictEqual(k.reshape(x, [-1]).shape, ['1024*s0']);
  assert.deepStrictEqual(k.cat([x, x], 0).shape, [2048, 's0']);
  assert.deepStrictEqual(k.transpose(x, 0, -1).shape, ['s0', 1024]);
  assert.deepStrictEqual(k.var(x, { dims: [1] }).shape, [1024]);
});

test('module scopes name the ops built inside them', async () => {
  const k = (await kiln()).builder();
  const x = k.input([4, 8], 'f32', 'x');
  const w = k.input([8, 8], 'f32', 'w');
  const y = k.scope('encoder', () => k.scope('layer.0', () => k.relu(k.matmul(x, w))));
  const z = k.exp(y);
  const g = k.build(z).toJSON();
  assert.deepStrictEqual(g.nodes.map((n) => n.name || ''), ['x', 'w', 'encoder/layer.0/matmul', 'encoder/layer.0/relu', '']);
  assert.throws(() => k.scope('a/b', () => x), /scope: a scope name must be a non-empty string without '\/'/);
  assert.throws(() => k.scope('', () => x), /non-empty string/);
  // A scope ends with its function, also when the function throws.
  assert.throws(() => k.scope('broken', () => k.matmul(x, k.input([3, 3]))));
  assert.deepStrictEqual(k.scopes, []);
});

test('named symbols with examples and ranges', async () => {
  const k = (await kiln()).builder();
  const n = k.symbol('seq', { example: 128, min: 2, max: 4096, dynamic: true });
  assert.strictEqual(n, 's0');
  const x = k.input([4, 'seq', 64], 'f32', 'x');
  const w = k.input([64, 32], 'f32', 'w');
  const g = k.build(k.matmul(x, w)).toJSON();
  assert.deepStrictEqual(g.symbols[0], { name: 's0', example: 128, min: 2, max: 4096, source: 'symbol seq', user_dynamic: true });
  assert.deepStrictEqual(g.nodes[2].type.shape, [4, 's0', 32]);
});

test('cache keys: sdk/cache\'s make_key over the same components as native', async () => {
  const k = await kiln();
  for (const sample of samples) {
    const text = readSample(sample);
    for (const req of [{ target: 'cpu' }, { target: 'vulkan', mode: 'max-autotune' }, { target: 'cuda', options: { cache_key_tag: 'x' } }]) {
      const key = k.cacheKey(text, req);
      assert.match(key, /^[0-9a-f]{32}$/);
      assert.strictEqual(key, runNative('key', text, JSON.stringify(req)).out, `${sample} ${JSON.stringify(req)}`);
      const parts = k.cacheKeyInputs(text, req);
      assert.deepStrictEqual(parts, JSON.parse(runNative('key-inputs', text, JSON.stringify(req)).out));
      assert.strictEqual(parts.pipeline, `${req.target}.plan`);
      assert.strictEqual(parts.target, req.target);
      assert.strictEqual(parts.kiln_version, k.version);
      assert.strictEqual(parts.tag, req.options ? 'x' : '');
      assert.strictEqual(JSON.parse(parts.graph).format, 'kiln.graph', 'the canonical captured graph, serialised');
    }
  }
});

test('captured graph nodes map to the kernels they end up in', async () => {
  const k = await kiln();
  const categories = new Map(k.ops.map((o) => [o.name, o.category]));
  for (const sample of samples) {
    const r = k.compile(readSample(sample), { target: 'cpu' });
    for (const view of ['input', 'optimized', 'scheduled']) {
      assert.strictEqual(r.node_kernels[view].length, r[view].nodes.length, `${sample} ${view}`);
      r[view].nodes.forEach((n, i) => {
        const ks = r.node_kernels[view][i];
        for (const x of ks) assert.ok(Number.isInteger(x) && x >= 0 && x < r.kernels.length);
        if (['source', 'layout'].includes(categories.get(n.op))) assert.deepStrictEqual(ks, [], `${sample} ${view} %${i} ${n.op}`);
        else assert.ok(ks.length > 0, `${sample} ${view} %${i} ${n.op} is in no kernel`);
      });
    }
    // A captured node's kernels are those of the scheduled node it was matched to.
    r.node_scheduled.input.forEach((s, i) => assert.deepStrictEqual(r.node_kernels.input[i], s < 0 ? [] : r.node_kernels.scheduled[s]));
  }
  // On every target (cuda's passes fold the attention's scalar scale constant into a full, which
  // must still match it, or the softmax and what follows would map to the wrong kernels).
  for (const target of ['cpu', 'cuda', 'vulkan']) {
    const r = k.compile(readSample('transformer_block.json'), { target });
    const kernelsOf = (op, nth = 0) => r.node_kernels.input[r.input.nodes.filter((n) => n.op === op)[nth].id].map((x) => r.kernels[x]);
    const kernelOf = (op, nth = 0) => kernelsOf(op, nth)[0];
    assert.strictEqual(kernelsOf('softmax').length, 1, `${target}: the softmax's kernels`);
    for (const op of ['exp', 'sum', 'div']) assert.ok(kernelOf('softmax').ops.includes(op), `${target}: ${kernelOf('softmax').ops.join()}`);
    assert.ok(kernelOf('layer_norm', 0).ops.includes('mean'), target);
    assert.ok(kernelOf('layer_norm', 1).ops.includes('mean'), target);
    assert.notStrictEqual(kernelOf('layer_norm', 0), kernelOf('layer_norm', 1), target);
    assert.ok(kernelOf('gelu').ops.includes('gelu') || kernelOf('gelu').ops.includes('matmul'), target);
    assert.ok(kernelOf('matmul').ops.includes('matmul'), target);
  }
});

// plan::kernel_costs: each kernel's bytes (its buffers at the example sizes) and FLOPs (its
// nodes'); recomputed here from the scheduled graph for the matmuls, which must be counted in
// the kernels that compute them, for every target.
test('kernels carry the bytes they move and the FLOPs they compute', async () => {
  const k = await kiln();
  for (const target of ['cpu', 'cuda', 'vulkan']) {
    const r = k.compile(readSample('transformer_block.json'), { target });
    const numel = (t) => t.shape.reduce((a, b) => a * (typeof b === 'number' ? b : NaN), 1);
    for (const kn of r.kernels) {
      assert.ok(kn.bytes > 0 && Number.isFinite(kn.flops) && kn.flops >= 0, `${target} ${kn.name}: ${kn.bytes} B, ${kn.flops} FLOPs`);
    }
    let matmuls = 0;
    r.scheduled.nodes.forEach((n, i) => {
      if (n.op !== 'matmul') return;
      const a = r.scheduled.nodes[n.inputs[0]].type.shape;
      const flops = 2 * numel(n.type) * a[a.length - 1];
      ++matmuls;
      for (const kk of r.node_kernels.scheduled[i]) assert.ok(r.kernels[kk].flops >= flops, `${target} %${i}: ${r.kernels[kk].flops} < ${flops}`);
    });
    assert.ok(matmuls >= 6, `${target}: ${matmuls} matmuls`);
  }
});

test('the transformer sample written in JavaScript compiles like the graph file', async () => {
  const kl = await kiln();
  const file = kl.loadGraph(readSample('transformer_block.json'));
  const r = kl.compile(file, { target: 'cpu' });
  assert.ok(r.kernels.length >= 5, `${r.kernels.length} kernels`);
  assert.ok(r.passes.length >= 5);
  for (const p of r.passes) assert.ok(typeof p.summary === 'string' && p.before && p.after);
  assert.ok(r.decisions.length > 0);
  assert.ok(r.guards.length > 0);
  for (const kern of r.kernels) {
    assert.ok(kern.provenance.length > 0, kern.name);
    assert.strictEqual(kern.ops.length, kern.provenance.length);
  }
  assert.ok(r.kernels.some((kern) => kern.source.includes('define void @')), 'LLVM IR');
  const cuda = kl.compile(file, { target: 'cuda' });
  // cuda: LLVM IR for NVPTX (pointwise kernels, row reductions) and CUDA C (the rest)
  assert.ok(cuda.kernels.some((kern) => kern.language === 'llvm' && kern.source.includes('nvptx64-nvidia-cuda')), 'LLVM IR for NVPTX');
  const nvrtc = kl.compile(file, { target: 'cuda', options: { 'cuda.compiler': 'nvrtc' } });
  assert.ok(nvrtc.kernels.some((kern) => kern.source.includes('__global__')), 'CUDA C');
  assert.strictEqual(JSON.parse(cuda.plan).target, 'cuda');
  const vulkan = kl.compile(file, { target: 'vulkan' });
  assert.ok(vulkan.kernels.some((kern) => kern.source.includes('#version 450')), 'GLSL');
  assert.strictEqual(JSON.parse(vulkan.plan).target, 'vulkan');
  assert.ok(r.timing_ms.total > 0);
});

// Each case: graph text (or a builder action) that must fail with exactly native's message.
const badGraphs = {
  'not JSON': '{"format": "kiln.graph", ',
  'no version': '{"format": "kiln.graph"}',
  'version 2': '{"format": "kiln.graph", "version": 2, "nodes": [], "outputs": []}',
  'unknown op': JSON.stringify({ format: 'kiln.graph', version: 1, nodes: [
    { id: 0, op: 'input', type: { dtype: 'f32', shape: [4] } }, { id: 1, op: 'sofmax', inputs: [0], attrs: { dim: 0 } }], outputs: [1] }),
  'bad broadcast': JSON.stringify({ format: 'kiln.graph', version: 1, nodes: [
    { id: 0, op: 'input', type: { dtype: 'f32', shape: [4] } }, { id: 1, op: 'input', type: { dtype: 'f32', shape: [3] } },
    { id: 2, op: 'add', inputs: [0, 1] }], outputs: [2] }),
  'bad dtype': JSON.stringify({ format: 'kiln.graph', version: 1, nodes: [
    { id: 0, op: 'input', type: { dtype: 'f31', shape: [4] } }], outputs: [0] }),
};
for (const [label, text] of Object.entries(badGraphs)) {
  test(`error identical to native: graph ${label}`, async () => {
    const k = await kiln();
    const nat = runNative('plan', text, '{}');
    assert.strictEqual(nat.ok, false);
    assert.throws(() => k.plan(text, {}), (e) => e instanceof Error && e.message === nat.out);
    assert.throws(() => k.loadGraph(text), (e) => e.message === nat.out);
  });
}

const badRequests = {
  'unknown target': { target: 'metal' },
  'unknown mode': { mode: 'fastest' },
  'unknown option': { options: { 'fusion.max_fusion_sise': 3 } },
  'option of the wrong type': { options: { 'fusion.max_fusion_size': 'many' } },
  'option out of range': { options: { 'fusion.max_fusion_size': 0 } },
  'unknown key': { targte: 'cpu' },
};
for (const [label, req] of Object.entries(badRequests)) {
  test(`error identical to native: request with ${label}`, async () => {
    const k = await kiln();
    const text = readSample('softmax.json');
    const nat = runNative('plan', text, JSON.stringify(req));
    assert.strictEqual(nat.ok, false, nat.out);
    assert.throws(() => k.plan(text, req), (e) => e instanceof Error && e.message === nat.out);
    assert.throws(() => k.compile(text, req), (e) => e.message === nat.out);
  });
}

test('builder errors are JavaScript Errors with the shape rules\' messages', async () => {
  const k = (await kiln()).builder();
  const a = k.input([4, 3], 'f32');
  const b = k.input([5], 'f32');
  assert.throws(() => k.add(a, b), (e) => e instanceof Error && /add/.test(e.message) && /broadcast/.test(e.message));
  assert.throws(() => k.softmax(a, 2), { message: 'softmax: dim 2 out of range for rank 2' });
  assert.throws(() => k.matmul(a, a), (e) => /matmul/.test(e.message));
  assert.throws(() => k.input([2], 'f31'), (e) => /f31/.test(e.message));
  assert.throws(() => k.op('sofmax', [a]), { message: "unknown op 'sofmax'" });
  // still usable after errors
  assert.deepStrictEqual(k.add(a, 1).shape, [4, 3]);
});

test('reference run: numbers as computed by hand', async () => {
  const kl = await kiln();
  const k = kl.builder();
  const x = k.input([2, 3], 'f32', 'x');
  const g = k.build([k.softmax(x, -1), k.sum(k.mul(x, 2), [0]), k.matmul(x, k.transpose(x, 0, 1))]);
  const data = [1, 2, 3, -1, 0, 1];
  const r = kl.run(g, { inputs: [{ shape: [2, 3], data }] });
  const [sm, s, mm] = r.outputs;
  assert.deepStrictEqual(sm.shape, [2, 3]);
  for (let row = 0; row < 2; ++row) {
    const v = data.slice(row * 3, row * 3 + 3);
    const m = Math.max(...v);
    const e = v.map((t) => Math.exp(t - m));
    const z = e.reduce((p, q) => p + q, 0);
    e.forEach((t, j) => assert.ok(Math.abs(sm.data[row * 3 + j] - t / z) < 1e-6));
  }
  assert.deepStrictEqual(s.data, [0, 4, 8]);
  assert.deepStrictEqual(mm.shape, [2, 2]);
  assert.deepStrictEqual(mm.data, [14, 2, 2, 2]);
  assert.throws(() => kl.run(g, { inputs: [{ shape: [2, 4], data: [1, 2, 3, 4, 5, 6, 7, 8] }] }), /input 0/);
});

for (const sample of samples) {
  test(`reference run identical to native: ${sample}`, async () => {
    const k = await kiln();
    const text = readSample(sample);
    const req = JSON.stringify({ random: 7 });
    const nat = runNative('run', text, req);
    assert.ok(nat.ok, nat.out);
    const w = k.run(text, { random: 7 });
    assert.deepStrictEqual(w, JSON.parse(nat.out));
    assert.ok(w.outputs.length >= 1);
    for (const o of w.outputs) assert.ok(o.data.every((v) => typeof v === 'number' && Number.isFinite(v)), sample);
  });
}

test('plan output shapes match the reference run', async () => {
  const k = await kiln();
  for (const sample of samples) {
    const text = readSample(sample);
    const plan = JSON.parse(k.plan(text, { target: 'cpu' }));
    const run = k.run(text, { random: 1 });
    const g = JSON.parse(text);
    const examples = g.symbols.map((s) => s.example);
    const evalSize = (s) => (typeof s === 'number' ? s : evalExpr(s, examples));
    plan.outputs.forEach((bufId, i) => {
      const buf = plan.buffers.find((b) => b.id === bufId);
      assert.deepStrictEqual(buf.sizes.map(evalSize), run.outputs[i].shape, `${sample} output ${i}`);
    });
  }
});

// "2*s0*s1 + 3" at the given symbol values.
function evalExpr(text, values) {
  return text.split(/\s*(?=[+-])\s*/).reduce((acc, term) => {
    const sign = term.startsWith('-') ? -1 : 1;
    const factors = term.replace(/^[+-]\s*/, '').split('*');
    return acc + sign * factors.reduce((p, f) => p * (f.startsWith('s') ? values[Number(f.slice(1))] : Number(f)), 1);
  }, 0);
}

test('the JavaScript transformer block (samples/transformer_block.cpp) with a dynamic sequence length', async () => {
  const kl = await kiln();
  const programs = require('../../web/app/programs.js');
  const fixed = kl.compile(programs.transformerBlock(kl), { target: 'cpu' });
  const dynamic = kl.compile(programs.transformerBlock(kl, { seq: 'seq' }), { target: 'cpu' });
  // The C++ sample fuses the block into as many kernels (README: 29 ops traced, 12 kernels).
  assert.strictEqual(dynamic.kernels.length, fixed.kernels.length);
  assert.ok(fixed.kernels.length >= 8 && fixed.kernels.length <= 16, `${fixed.kernels.length} kernels`);
  const plan = JSON.parse(dynamic.plan);
  assert.deepStrictEqual(plan.symbols.map((s) => s.name), ['s0']);
  assert.deepStrictEqual(plan.bindings, [{ symbol: 's0', input: 0, dim: 1 }]);
  assert.ok(dynamic.guards.some((g) => /s0/.test(g)), dynamic.guards.join('\n'));
  assert.ok(!fixed.guards.some((g) => /s0/.test(g)));
  // The reference interpreter runs it at another sequence length.
  const run = kl.run(programs.transformerBlock(kl, { seq: 'seq' }), { random: 1, symbols: { s0: 5 } });
  assert.deepStrictEqual(run.outputs[0].shape, [4, 5, 256]);
  assert.ok(run.outputs[0].data.every(Number.isFinite));
});

test('ONNX models decoded in JavaScript import as the native importer imports the file', { skip: !cli && 'KILN_CLI not set' }, async () => {
  const fs = require('fs');
  const os = require('os');
  const path = require('path');
  const { execFileSync } = require('child_process');
  const kl = await kiln();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-onnx-'));
  assert.ok(realModels.length >= 6, realModels.join(' '));
  for (const name of realModels) {
    const files = modelFiles(name);
    const decoded = await onnx().decode(files['model.onnx'], files);
    assert.ok(decoded.tensors > 0 && decoded.bytes > 0, name);
    const graph = kl.importOnnx(decoded);
    const out = path.join(tmp, name + '.json');
    execFileSync(cli, ['show', path.join(realModelsDir, name, 'model.onnx'), '--save-graph', out], { stdio: 'pipe' });
    // Byte for byte: the same nodes in the same order (no argument evaluation order in the
    // converters), the same constants (external data read from the blob), the same symbols.
    assert.strictEqual(graph.json, fs.readFileSync(out, 'utf8'), `${name}: the graph differs from native's`);
    // For a CUDA device the weights are inputs (parameters), as kiln::onnx::compile has them there.
    const onCuda = kl.importOnnx(decoded, { device: 'cuda' });
    execFileSync(cli, ['show', path.join(realModelsDir, name, 'model.onnx'), '--target', 'cuda', '--save-graph', out], { stdio: 'pipe' });
    assert.strictEqual(onCuda.json, fs.readFileSync(out, 'utf8'), `${name} for cuda: the graph differs from native's`);
    assert.ok(onCuda.toJSON().nodes.some((n) => n.op === 'input' && n.type.device === 'cuda:0'), name);
    // Nodes are named by the exporter's module scopes (NodeProto.metadata_props, which onnx.js
    // declares on Debian's schema), as natively (the JSON above is the same).
    assert.ok(graph.toJSON().nodes.some((n) => /^([^/]+\/){2,}node_/.test(n.name || '')), `${name}: no node named by module scope`);
    const report = kl.compile(graph, { target: 'cpu' });
    assert.ok(report.kernels.length > 0, name);
  }
  fs.rmSync(tmp, { recursive: true, force: true });
});

test('ONNX input errors say what is wrong', async () => {
  const kl = await kiln();
  const files = modelFiles(realModels[0]);
  await assert.rejects(onnx().decode(new Uint8Array([0x0a, 0xff, 0xff, 0xff, 0x0f]), {}), /not a valid ONNX protobuf \(malformed or truncated ModelProto, 5 bytes\)/);
  // The weights of an external-data export are in a second file.
  await assert.rejects(onnx().decode(files['model.onnx'], {}),
    /has its data in the file 'model\.onnx\.data', which was not opened with the model/);
  const short = { 'model.onnx.data': files['model.onnx.data'].subarray(0, 16) };
  await assert.rejects(onnx().decode(files['model.onnx'], short), /lies outside 'model\.onnx\.data' \(16 bytes\)/);
  // What the module is handed is checked field by field.
  const decoded = await onnx().decode(files['model.onnx'], files);
  assert.throws(() => kl.importOnnx({ json: '{"graph": ', blob: decoded.blob }), /^Error: onnx: the decoded model is not valid JSON/);
  assert.throws(() => kl.importOnnx({ json: '{"graph": 3}', blob: decoded.blob }), /^Error: onnx: graph must be an object$/);
  assert.throws(() => kl.importOnnx({ json: '{"irVersion": "7x"}', blob: decoded.blob }), /^Error: onnx: model\.irVersion is '7x', not an integer$/);
  const model = JSON.parse(decoded.json);
  model.graph.initializer[0].rawData.blob[0] = decoded.blob.length;
  assert.throws(() => kl.importOnnx({ json: JSON.stringify(model), blob: decoded.blob }),
    /^Error: onnx: graph\.initializer\[0\]\.rawData is bytes \d+ to \d+ \+ \d+, outside the \d+-byte blob$/);
  // A model the importer refuses: the message native gives for the file.
  const noisy = JSON.parse(decoded.json);
  noisy.graph.node[0].opType = 'TfIdfVectorizer';
  assert.throws(() => kl.importOnnx({ json: JSON.stringify(noisy), blob: decoded.blob }),
    /^Error: onnx: node 'node_[^']+' \(TfIdfVectorizer, domain ai\.onnx, opset 18\): unsupported op type 'TfIdfVectorizer'$/);
});

test('module size: kiln_wasm.wasm at most 1.5 MB after wasm-opt', () => {
  const fs = require('fs');
  const path = require('path');
  const zlib = require('zlib');
  const { wasmDir } = require('./common.js');
  const bytes = fs.readFileSync(path.join(wasmDir, 'kiln_wasm.wasm'));
  const gz = zlib.gzipSync(bytes, { level: 9 }).length;
  console.log(`# kiln_wasm.wasm: ${bytes.length} bytes, ${gz} gzipped (-9)`);
  assert.ok(bytes.length <= 1.5e6, `${bytes.length} bytes`);
});
