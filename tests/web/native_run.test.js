// A plan made by the WebAssembly module runs natively: `kiln run PLAN.json --target cpu` on the
// module's CPU plan of every sample gives the reference target's outputs (the same random
// inputs; the values `kiln run` prints, to 6 digits).
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync } = require('child_process');
const { kiln, readSample, samples, samplesDir, cli } = require('./common.js');

// "output K...: f32[8, 16]\n  [v0, v1, ...]" lines of `kiln run` -> [{type, values}].
function printedOutputs(text) {
  const out = [];
  const re = /^output (\d+)[^:]*: (.+?)\s*\n\s*\[([^\]]*)\]/gm;
  for (let m; (m = re.exec(text));) out[Number(m[1])] = { type: m[2], values: m[3].split(',').map((v) => v.trim()).filter((v) => v !== '...').map(Number) };
  return out;
}

test('plans from the module run natively with the reference target\'s results', { skip: !cli && 'KILN_CLI not set' }, async () => {
  const k = await kiln();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-web-run-'));
  try {
    for (const sample of samples) {
      const planFile = path.join(dir, sample + '.cpu.plan.json');
      fs.writeFileSync(planFile, k.plan(readSample(sample), { target: 'cpu' }));
      // `kiln run` of a plan prints its outputs' first values (it writes no --out files for plans).
      const got = printedOutputs(execFileSync(cli, ['run', planFile, '--random', '--seed', '3', '--target', 'cpu']).toString());
      const want = printedOutputs(execFileSync(cli, ['run', path.join(samplesDir, sample), '--random', '--seed', '3']).toString());
      assert.ok(want.length >= 1 && got.length === want.length, `${sample}: ${got.length} outputs, want ${want.length}`);
      want.forEach((w, i) => {
        assert.strictEqual(got[i].type, w.type, `${sample} output ${i}`);
        assert.ok(w.values.length >= 1 && got[i].values.length === w.values.length);
        w.values.forEach((v, j) => assert.ok(Math.abs(got[i].values[j] - v) <= 1e-4 * (1 + Math.abs(v)),
          `${sample} output ${i}[${j}]: plan gives ${got[i].values[j]}, reference ${v}`));
      });
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
