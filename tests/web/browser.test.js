// End-to-end in real headless Chromium (Debian's chromium, driven by playwright-core from npm):
// load the inspector, pick the transformer sample, check the diagram and the kernel list (as
// many kernels as the module reports for it), change the target, download the plan and parse
// it, reload and see the cache hit. Saves a screenshot (KILN_WEB_ARTIFACTS, default
// build/web-artifacts) and reports the in-browser compile time of the transformer block.
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const path = require('path');
const { root, kiln, readSample } = require('./common.js');

const chromiumPath = process.env.KILN_CHROMIUM || '/usr/bin/chromium';
const artifacts = process.env.KILN_WEB_ARTIFACTS || path.join(root, 'build/web-artifacts');
let chromium, loadError;
try {
  ({ chromium } = require(path.join(root, 'web/node_modules/playwright-core')));
} catch (e) {
  loadError = e;
}

test('inspector page in headless Chromium', { timeout: 240000 }, async () => {
  assert.ok(chromium, `cannot load playwright-core from web/node_modules (npm ci in web/): ${loadError}`);
  assert.ok(fs.existsSync(chromiumPath), `no Chromium at ${chromiumPath} (Debian: chromium)`);
  fs.mkdirSync(artifacts, { recursive: true });
  const expected = (await kiln()).compile(readSample('transformer_block.json'), { target: 'cpu' }).kernels.length;
  const expectedCuda = (await kiln()).compile(readSample('transformer_block.json'), { target: 'cuda' }).kernels.length;

  const { serve } = require(path.join(root, 'web/app/serve.js'));
  const server = await serve(0);
  const url = `http://127.0.0.1:${server.address().port}/`;
  const browser = await chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update'],
  });
  try {
    const context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1600, height: 1000 } });
    const page = await context.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(url);
    await page.waitForSelector('body[data-ready="1"]', { timeout: 60000 });
    await page.selectOption('#sample', 'transformer_block.json');
    await page.waitForFunction(() => window.kilnInspector.last && window.kilnInspector.last.graph === 'transformer_block.json');
    assert.strictEqual(await page.evaluate(() => window.kilnInspector.last.hit), false, 'a fresh browser has no cached plan');

    // Diagram: a node per scheduled-graph node, coloured by kernel; kernel list with the count.
    const nodes = await page.locator('#diagram g.node').count();
    assert.ok(nodes > 20, `${nodes} nodes drawn`);
    const colouredKernels = await page.$$eval('#diagram g.node', (gs) =>
      new Set(gs.map((g) => g.dataset.kernel).filter((k) => k !== '').map((k) => k.split(' ')[0])).size);
    assert.strictEqual(await page.locator('#kernels > li').count(), expected);
    assert.ok(colouredKernels >= expected - 1 && colouredKernels <= expected, `${colouredKernels} kernel colours`);
    await page.hover('#diagram g.node[data-node="0"]');
    assert.match(await page.textContent('#hover'), /%0 = input .*: f32\[/);
    assert.ok(await page.locator('#kernels code.hljs span').count() > 0, 'highlighted source');
    // The captured graph view: one box per node of the graph file.
    await page.selectOption('#view', 'input');
    assert.strictEqual(await page.locator('#diagram g.node').count(), JSON.parse(readSample('transformer_block.json')).nodes.length);
    await page.selectOption('#view', 'scheduled');
    assert.strictEqual(await page.locator('#diagram g.node').count(), nodes);
    const guards = await page.locator('#guards li').count();
    assert.ok(guards > 0);

    // The compile time of the transformer block in this browser, fresh compiles (no cache):
    // the graph file (parse + optimise + codegen), and the C++ sample's program written in
    // JavaScript (trace through the builder + optimise + codegen), medians of 7 after a warm-up.
    const timing = await page.evaluate(() => {
      const s = window.kilnInspector;
      const median = (f) => {
        f();
        const times = [];
        for (let i = 0; i < 7; ++i) {
          const t0 = performance.now();
          f();
          times.push(performance.now() - t0);
        }
        return times.sort((a, b) => a - b)[3];
      };
      const text = s.graphText;
      // kiln.plan: graph -> passes -> scheduler -> codegen -> plan JSON (what trace + optimise +
      // codegen costs); kiln.compile also builds the page's report (every pass's graph, ...).
      const file = median(() => s.kiln.plan(s.kiln.loadGraph(text), { target: 'cpu' }));
      const fileReport = median(() => s.kiln.compile(s.kiln.loadGraph(text), { target: 'cpu' }));
      const trace = median(() => KilnPrograms.transformerBlock(s.kiln));
      const traced = median(() => s.kiln.plan(KilnPrograms.transformerBlock(s.kiln), { target: 'cpu' }));
      const tracedReport = median(() => s.kiln.compile(KilnPrograms.transformerBlock(s.kiln), { target: 'cpu' }));
      const r = s.kiln.compile(KilnPrograms.transformerBlock(s.kiln), { target: 'cpu' });
      return { file, fileReport, trace, traced, tracedReport, stages: r.timing_ms, kernels: r.kernels.length, first: s.last.ms };
    });
    console.log(`# transformer block in Chromium (median of 7): trace+optimise+codegen ${timing.traced.toFixed(1)} ms ` +
      `(trace ${timing.trace.toFixed(1)} ms; with the inspector's report ${timing.tracedReport.toFixed(1)} ms: passes ` +
      `${timing.stages.passes.toFixed(1)}, schedule ${timing.stages.schedule.toFixed(1)}, codegen ${timing.stages.codegen.toFixed(1)} ms), ` +
      `${timing.kernels} kernels; the sample graph file: load+optimise+codegen ${timing.file.toFixed(1)} ms, with report ` +
      `${timing.fileReport.toFixed(1)} ms`);
    fs.writeFileSync(path.join(artifacts, 'browser-timing.json'), JSON.stringify(timing, null, 1));
    const programs = require(path.join(root, 'web/app/programs.js'));
    assert.strictEqual(timing.kernels, (await kiln()).compile(programs.transformerBlock(await kiln()), { target: 'cpu' }).kernels.length);

    // The same program picked in the page: traced there, compiled, drawn.
    await page.selectOption('#sample', 'js:transformer block (JavaScript)');
    await page.waitForFunction(() => window.kilnInspector.last.graph === 'js:transformer block (JavaScript)');
    assert.strictEqual(await page.locator('#kernels > li').count(), timing.kernels);
    assert.match(await page.textContent('#status'), /traced in/);
    await page.selectOption('#sample', 'transformer_block.json');
    await page.waitForFunction(() => window.kilnInspector.last.graph === 'transformer_block.json');

    // Change the target: the plan changes to CUDA C.
    await page.selectOption('#target', 'cuda');
    await page.waitForFunction(() => window.kilnInspector.last.target === 'cuda');
    assert.strictEqual(await page.locator('#kernels > li').count(), expectedCuda);
    assert.match(await page.textContent('#kernels'), /__global__/);

    // The Vulkan target: GLSL compute shaders, highlighted; then back to CUDA for the download.
    await page.selectOption('#target', 'vulkan');
    await page.waitForFunction(() => window.kilnInspector.last.target === 'vulkan');
    assert.match(await page.textContent('#kernels'), /#version 450/);
    await page.selectOption('#target', 'cuda');
    await page.waitForFunction(() => window.kilnInspector.last.target === 'cuda');

    // Download the plan and parse it.
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#download')]);
    const file = path.join(artifacts, download.suggestedFilename());
    await download.saveAs(file);
    const plan = JSON.parse(fs.readFileSync(file, 'utf8'));
    assert.strictEqual(plan.format, 'kiln.plan');
    assert.strictEqual(plan.target, 'cuda');
    assert.strictEqual(plan.kernels.length, expectedCuda);
    assert.strictEqual(fs.readFileSync(file, 'utf8'), (await kiln()).plan(readSample('transformer_block.json'), { target: 'cuda' }));

    // Reload (the page then starts on the transformer): the same graph and targets come from
    // IndexedDB, whichever target the reloaded page starts on, and then the other one too.
    await page.evaluate(() => { location.hash = 'transformer_block.json'; });
    await page.reload();
    await page.waitForSelector('body[data-ready="1"]', { timeout: 60000 });
    await page.waitForFunction(() => window.kilnInspector.last);
    const first = await page.evaluate(() => window.kilnInspector.last);
    assert.strictEqual(first.hit, true, JSON.stringify(first));
    assert.match(await page.textContent('#status'), /cache hit/);
    const other = first.target === 'cuda' ? 'cpu' : 'cuda';
    await page.selectOption('#target', other);
    await page.waitForFunction((t) => window.kilnInspector.last.target === t, other);
    assert.strictEqual(await page.evaluate(() => window.kilnInspector.last.hit), true);
    assert.match(await page.textContent('#status'), /cache hit/);
    assert.strictEqual(await page.locator('#kernels > li').count(), other === 'cuda' ? expectedCuda : expected);
    await page.screenshot({ path: path.join(artifacts, 'inspector.png'), fullPage: false });
    assert.deepStrictEqual(errors, []);
  } finally {
    await browser.close();
    server.close();
  }
});
