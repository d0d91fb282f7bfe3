// PLAN IDENTITY: for every sample graph, target and a few modes/options, the KernelPlan JSON the
// WebAssembly module makes is byte-identical to the native one (the native twin of the module's
// calls, and for the CPU `kiln show --save-plan` itself), and so are the whole compile reports
// (passes, schedule, decisions, kernels, guards; timings aside) and the cache keys.
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync } = require('child_process');
const { kiln, runNative, readSample, samples, samplesDir, cli, onnx, realModelsDir, realModels, modelFiles } = require('./common.js');

const requests = [
  { target: 'cpu' },
  { target: 'cuda' },
  { target: 'cpu', mode: 'max-autotune' },
  { target: 'cuda', mode: 'max-autotune' },
  { target: 'cpu', options: { 'fusion.max_fusion_size': 4, 'emulate_precision_casts': true } },
  { target: 'cuda', options: { 'fusion.aggressive_fusion': true } },
  { target: 'vulkan' },
  { target: 'vulkan', mode: 'max-autotune', options: { 'emulate_precision_casts': true } },
];

test('there are sample graphs', () => assert.ok(samples.length >= 5, samples.join(', ')));

// Every target's plan is the same text from the wasm module and natively (the codegens never let
// the compiler's order of evaluating arguments number their temporaries).
const TODO = {};

for (const sample of samples) {
  for (const req of requests) {
    const label = `${sample} ${JSON.stringify(req)}`;
    const todo = TODO[req.target];
    test(`plan identity: ${label}`, { todo }, async () => {
      const k = await kiln();
      const text = readSample(sample);
      const wasmPlan = k.plan(text, req);
      const nat = runNative('plan', text, JSON.stringify(req));
      assert.ok(nat.ok, nat.out);
      assert.ok(wasmPlan.length > 100);
      assert.strictEqual(JSON.parse(wasmPlan).target, req.target);
      if (wasmPlan !== nat.out) {
        const a = wasmPlan.split('\n'), b = nat.out.split('\n');
        const i = a.findIndex((line, j) => line !== b[j]);
        assert.fail(`plans differ at line ${i + 1}:\n wasm:   ${a[i]}\n native: ${b[i]}`);
      }
    });
    test(`report identity: ${label}`, { todo }, async () => {
      const k = await kiln();
      const text = readSample(sample);
      const w = k.compile(text, req);
      const nat = runNative('report', text, JSON.stringify(req));
      assert.ok(nat.ok, nat.out);
      const n = JSON.parse(nat.out);
      delete w.timing_ms;
      delete n.timing_ms;
      assert.deepStrictEqual(w, n);
    });
    test(`cache key identity and the report's own plan: ${label}`, async () => {
      const k = await kiln();
      const text = readSample(sample);
      const w = k.compile(text, req);
      assert.strictEqual(w.plan, k.plan(text, req));
      assert.strictEqual(k.cacheKey(text, req), runNative('key', text, JSON.stringify(req)).out);
      assert.strictEqual(w.cache_key, k.cacheKey(text, req));
      // Everything but the generated code matches native already.
      const n = JSON.parse(runNative('report', text, JSON.stringify(req)).out);
      for (const field of ['cache_key', 'codegen_options', 'input', 'input_text', 'passes', 'optimized', 'scheduled',
        'scheduled_text', 'decisions', 'schedule_text', 'guards', 'plan_guards', 'peak_intermediate_bytes'])
        assert.deepStrictEqual(w[field], n[field], field);
      assert.deepStrictEqual(w.kernels.map((x) => [x.name, x.kind, x.provenance, x.reads, x.writes]),
        n.kernels.map((x) => [x.name, x.kind, x.provenance, x.reads, x.writes]));
    });
  }
}

test('cpu plans equal `kiln show --save-plan`', { skip: !cli && 'KILN_CLI not set', todo: TODO.cpu }, async () => {
  const k = await kiln();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-web-'));
  try {
    for (const sample of samples) {
      const out = path.join(dir, sample + '.plan.json');
      execFileSync(cli, ['show', path.join(samplesDir, sample), '--save-plan', out]);
      assert.strictEqual(k.plan(readSample(sample), { target: 'cpu' }), fs.readFileSync(out, 'utf8'), sample);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// ONNX models: decoded in JavaScript, imported by the module, planned there; the same plan as
// native code makes from the file, for every target.
test('plans of ONNX models equal `kiln show MODEL.onnx --save-plan`', { skip: !cli && 'KILN_CLI not set' }, async () => {
  const k = await kiln();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-web-onnx-'));
  try {
    for (const name of realModels) {
      const files = modelFiles(name);
      const decoded = await onnx().decode(files['model.onnx'], files);
      for (const target of ['cpu', 'cuda', 'vulkan']) {
        // Imported for the target's device, as `kiln show --target` imports it.
        const graph = k.importOnnx(decoded, { device: target });
        const out = path.join(dir, `${name}.${target}.plan.json`);
        execFileSync(cli, ['show', path.join(realModelsDir, name, 'model.onnx'), '--target', target, '--save-plan', out], { stdio: 'pipe' });
        assert.strictEqual(k.plan(graph, { target }), fs.readFileSync(out, 'utf8'), `${name} on ${target}`);
      }
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('cache keys change with target, mode, codegen options and graph, not with names', async () => {
  const k = await kiln();
  const text = readSample('softmax.json');
  const keys = new Set([
    k.cacheKey(text, { target: 'cpu' }),
    k.cacheKey(text, { target: 'cuda' }),
    k.cacheKey(text, { target: 'vulkan' }),
    k.cacheKey(text, { target: 'cpu', options: { 'fusion.max_fusion_size': 4 } }),
    k.cacheKey(readSample('layernorm.json'), { target: 'cpu' }),
  ]);
  assert.strictEqual(keys.size, 5);
  const renamed = JSON.parse(text);
  renamed.nodes[0].name = 'renamed_input';
  assert.strictEqual(k.cacheKey(JSON.stringify(renamed), { target: 'cpu' }), k.cacheKey(text, { target: 'cpu' }));
});
