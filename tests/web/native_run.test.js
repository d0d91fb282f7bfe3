// A plan made by the WebAssembly module runs natively: for every sample graph, the module's plan
// for a target, run by `kiln run --plan PLAN.json --target T --random --seed 3 --out DIR` on that
// target's runtime, gives the reference target's outputs for the same inputs (`kiln run
// GRAPH.json --random --seed 3 --out DIR`), every element of every output compared.
//
// KILN_WEB_RUN_TARGETS (comma separated, default cpu) picks the targets; CTest runs one test per
// target (web_native_run_cpu, _vulkan, _cuda). vulkan needs a Vulkan device (lavapipe in CI) and
// fails without one; cuda skips, saying why, when this machine has no CUDA device.
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync } = require('child_process');
const { kiln, readSample, samples, samplesDir, cli } = require('./common.js');

const targets = (process.env.KILN_WEB_RUN_TARGETS || 'cpu').split(',').filter((t) => t);

// A .npy file (format 1.0-3.0, little-endian, C order) -> {descr, shape, data: Number[]}.
function readNpy(file) {
  const b = fs.readFileSync(file);
  assert.strictEqual(b.toString('latin1', 0, 6), '\x93NUMPY', `${file}: not a .npy file`);
  const major = b[6];
  const headerLen = major === 1 ? b.readUInt16LE(8) : b.readUInt32LE(8);
  const start = (major === 1 ? 10 : 12) + headerLen;
  const header = b.toString('latin1', major === 1 ? 10 : 12, start);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  assert.ok(!/'fortran_order':\s*True/.test(header), `${file}: Fortran order`);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim()).filter((s) => s).map(Number);
  const n = shape.reduce((p, q) => p * q, 1);
  const read = {
    '<f4': [4, (o) => b.readFloatLE(o)], '<f8': [8, (o) => b.readDoubleLE(o)], '<i4': [4, (o) => b.readInt32LE(o)],
    '<i8': [8, (o) => Number(b.readBigInt64LE(o))], '|b1': [1, (o) => b[o]], '|u1': [1, (o) => b[o]],
  }[descr];
  assert.ok(read, `${file}: dtype ${descr} not handled here`);
  const data = [];
  for (let i = 0; i < n; ++i) data.push(read[1](start + i * read[0]));
  return { descr, shape, data };
}

function run(args) {
  try {
    return { ok: true, out: execFileSync(cli, args, { stdio: ['ignore', 'pipe', 'pipe'] }).toString() };
  } catch (e) {
    return { ok: false, out: `${e.stdout}${e.stderr}` };
  }
}

for (const target of targets) {
  test(`plans from the module run natively on ${target} with the reference target's results`, { skip: !cli && 'KILN_CLI not set' },
    async (t) => {
      const k = await kiln();
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), `kiln-web-run-${target}-`));
      try {
        for (const sample of samples) {
          const planFile = path.join(dir, `${sample}.${target}.plan.json`);
          fs.writeFileSync(planFile, k.plan(readSample(sample), { target }));
          const got = run(['run', '--plan', planFile, '--target', target, '--random', '--seed', '3', '--out', path.join(dir, 'got')]);
          // No device of this kind here: cuda skips (saying why), any other target fails.
          const noDevice = /no CUDA device: .*/.exec(got.out);
          if (!got.ok && target === 'cuda' && noDevice) {
            t.skip(`${noDevice[0]} (run this test on a machine with a CUDA GPU)`);
            return;
          }
          assert.ok(got.ok, `kiln run ${sample} plan --target ${target}: ${got.out}`);
          const want = run(['run', path.join(samplesDir, sample), '--random', '--seed', '3', '--out', path.join(dir, 'want')]);
          assert.ok(want.ok, want.out);
          const outputs = JSON.parse(readSample(sample)).outputs.length;
          for (let i = 0; i < outputs; ++i) {
            const g = readNpy(path.join(dir, 'got', `out${i}.npy`));
            const w = readNpy(path.join(dir, 'want', `out${i}.npy`));
            const where = `${sample} on ${target}, output ${i}`;
            assert.strictEqual(g.descr, w.descr, where);
            assert.deepStrictEqual(g.shape, w.shape, where);
            assert.ok(w.data.length > 0, where);
            let num = 0, den = 0;
            w.data.forEach((v, j) => {
              const d = g.data[j] - v;
              assert.ok(Math.abs(d) <= 1e-4 * (1 + Math.abs(v)), `${where}[${j}]: plan gives ${g.data[j]}, reference ${v}`);
              num += d * d;
              den += v * v;
            });
            assert.ok(Math.sqrt(num / Math.max(den, 1e-30)) <= 1e-5, `${where}: relative L2 error ${Math.sqrt(num / den)}`);
          }
          fs.rmSync(path.join(dir, 'got'), { recursive: true });
          fs.rmSync(path.join(dir, 'want'), { recursive: true });
        }
        // A plan runs only on its own target, and says so.
        const other = target === 'cpu' ? 'reference' : 'cpu';
        const wrong = run(['run', path.join(dir, `softmax.json.${target}.plan.json`), '--target', other, '--random']);
        assert.ok(!wrong.ok && wrong.out.includes(`the plan is for target '${target}', not '${other}'`), wrong.out);
        // --plan insists on a plan file.
        const notPlan = run(['run', '--plan', path.join(samplesDir, 'softmax.json'), '--target', target, '--random']);
        assert.ok(!notPlan.ok && notPlan.out.includes('is not a kernel plan file'), notPlan.out);
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });
}
