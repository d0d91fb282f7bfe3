// End-to-end in real headless Chromium (Debian's chromium, driven by playwright-core from npm):
// load the inspector, pick the transformer sample, check the diagram and the kernel list (as
// many kernels as the module reports for it), change the target, download the plan and parse
// it, reload and see the cache hit. Saves a screenshot of each view, each checked not blank and
// showing the labels expected from the data (KILN_WEB_ARTIFACTS, default build/web-artifacts:
// view-*.png, inspector.png, scopes.png), and reports the in-browser compile time of the
// transformer block.
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');
const { launchInspector, checkScreenshot, root, cli, kiln, readSample, onnx, realModelsDir, realModels, modelFiles } = require('./common.js');

const artifacts = process.env.KILN_WEB_ARTIFACTS || path.join(root, 'build/web-artifacts');

test('inspector page in headless Chromium', { timeout: 240000 }, async () => {
  fs.mkdirSync(artifacts, { recursive: true });
  const expected = (await kiln()).compile(readSample('transformer_block.json'), { target: 'cpu' }).kernels.length;
  const expectedCuda = (await kiln()).compile(readSample('transformer_block.json'), { target: 'cuda' }).kernels.length;

  const { browser, server, page, url, errors } = await launchInspector({ acceptDownloads: true });
  try {
    const encodings = {};
    page.on('response', (r) => { encodings[new URL(r.url()).pathname] = r.headers()['content-encoding'] || 'identity'; });
    const loadStart = Date.now();
    await page.goto(url);
    await page.waitForSelector('body[data-ready="1"]', { timeout: 60000 });
    const loadMs = Date.now() - loadStart;
    const marks = await page.evaluate(() => Object.fromEntries(performance.getEntriesByType('mark').map((m) => [m.name, Math.round(m.startTime)])));
    console.log(`# first graph drawn ${loadMs} ms after the page was asked for (module served gzipped; in the page: ` +
      `module ready at ${marks['kiln-module-ready']} ms, first graph at ${marks['kiln-first-graph']} ms)`);
    // The module and the page's scripts come gzipped (the browser asks for it).
    assert.strictEqual(encodings['/wasm/kiln_wasm.wasm'], 'gzip', JSON.stringify(encodings));
    assert.strictEqual(encodings['/app.js'], 'gzip', JSON.stringify(encodings));
    // Files carry an ETag: asked again with it, the server answers 304 and sends nothing.
    for (const file of ['app.js', 'wasm/kiln_wasm.wasm', 'wasm/onnx.proto']) {
      const first = await fetch(url + file);
      await first.arrayBuffer();
      const etag = first.headers.get('etag');
      assert.match(etag || '', /^"[0-9a-z]+-[0-9a-z]+"$/, file);
      const again = await fetch(url + file, { headers: { 'if-none-match': etag } });
      assert.strictEqual(again.status, 304, file);
    }
    await page.selectOption('#sample', 'transformer_block.json');
    await page.waitForFunction(() => window.kilnInspector.last && window.kilnInspector.last.graph === 'transformer_block.json');
    assert.strictEqual(await page.evaluate(() => window.kilnInspector.last.hit), false, 'a fresh browser has no cached plan');

    // Diagram, first the captured graph (as traced, before the passes): one box per node of the
    // graph file, each coloured by the fused kernel it ends up in (the module's node_kernels,
    // matched pass by pass to the scheduled graph); every computing node has one.
    const report = (await kiln()).compile(readSample('transformer_block.json'), { target: 'cpu' });
    const categories = new Map((await kiln()).ops.map((o) => [o.name, o.category]));
    const captured = JSON.parse(readSample('transformer_block.json')).nodes;
    assert.strictEqual(await page.$eval('#view', (e) => e.value), 'input', 'the page starts on the captured graph');
    const drawn = await page.$$eval('#diagram g.node', (gs) => gs.map((g) => ({
      id: Number(g.dataset.node), kernel: g.dataset.kernel, fill: g.querySelector('rect').getAttribute('fill') })));
    assert.strictEqual(drawn.length, captured.length);
    for (const d of drawn) {
      const n = captured[d.id];
      assert.strictEqual(d.kernel, report.node_kernels.input[d.id].join(' '), `node ${d.id} (${n.op})`);
      if (!['source', 'layout'].includes(categories.get(n.op))) assert.notStrictEqual(d.kernel, '', `node ${d.id} (${n.op}) has no kernel`);
    }
    const capturedKernels = new Set(drawn.filter((d) => d.kernel !== '').map((d) => d.kernel.split(' ')[0]));
    assert.ok(capturedKernels.size >= expected - 2, `${capturedKernels.size} kernel colours of ${expected} on the captured graph`);
    // The softmax node: coloured like its kernel's swatch in the list, hover names it.
    const sm = captured.find((n) => n.op === 'softmax').id;
    const smKernel = report.node_kernels.input[sm][0];
    assert.strictEqual(drawn.find((d) => d.id === sm).fill,
      await page.$eval(`#kernels > li[data-kernel="${smKernel}"] .swatch`, (e) => e.style.background.startsWith('rgb')
        ? '#' + e.style.background.match(/\d+/g).map((v) => Number(v).toString(16).padStart(2, '0')).join('') : e.style.background));
    await page.hover(`#diagram g.node[data-node="${sm}"]`);
    assert.match(await page.textContent('#hover'), new RegExp(`^%${sm} = softmax .*: f32\\[8, 8\\] · kernel ${report.kernels[smKernel].name}$`));
    await page.hover('#diagram g.node[data-node="0"]');
    assert.match(await page.textContent('#hover'), /%0 = input .*: f32\[8, 16\] · no kernel/);
    assert.strictEqual(await page.locator('#kernels > li').count(), expected);
    await page.waitForSelector('#kernels code.hljs span', { timeout: 10000 });  // highlighted as it scrolls into view

    // A screenshot of each view (view-<name>.png), each checked by checkScreenshot (common.js):
    // not blank (enough colours in the view's own box) and showing texts expected from the
    // module's report for this graph, inside the viewport. First every tab of the report panel
    // (the diagram on the captured graph beside it), then the three graph views, each with its
    // first matmul searched for (Enter selects it and brings it into view); the page is left on the
    // scheduled graph, which the next part checks.
    const shots = {};
    const firstLine = (t) => t.split('\n')[0];
    const ran = (await kiln()).run(readSample('transformer_block.json'), { random: 0 }).outputs[0];
    const firstPass = report.passes[0], changedPass = report.passes.find((p) => p.changed);
    const tabLabels = {
      kernels: [['#kernel-count', `(${expected})`], ['#kernels .kernel-head', `${report.kernels[0].name} · ${report.kernels[0].kind}`]],
      guards: [['#guards li', report.guards[0]]],
      passes: [['#passes .unchanged, #passes summary', firstPass.changed ? `${firstPass.name}: ${firstPass.summary}` : `${firstPass.name}: no change`],
        ['#passes summary', `${changedPass.name}: ${changedPass.summary}`]],
      decisions: [['#decisions li', report.decisions[0]]],
      loops: [['#loops', firstLine(report.schedule_text)]],
      plan: [['#plan-text', firstLine(report.plan_text)]],
      run: [['#run-out', `output 0: ${ran.dtype}[${ran.shape.join(', ')}]\n  ${ran.data.slice(0, 3).map((v) => (typeof v === 'number' ? v.toPrecision(5) : v)).join(', ')}`]],
    };
    for (const [tab, labels] of Object.entries(tabLabels)) {
      await page.click(`#tabs button[data-tab="${tab}"]`);
      if (tab === 'run') await page.click('#run');
      shots[tab] = await checkScreenshot(page, path.join(artifacts, `view-${tab}.png`), labels, { region: `#tab-${tab}` });
    }
    await page.click('#tabs button[data-tab="kernels"]');
    for (const view of ['input', 'optimized', 'scheduled']) {
      if (view !== 'input') {  // the page is on it
        await page.selectOption('#view', view);
        await page.waitForFunction((v) => window.kilnInspector.drawn.view === v, view);
      }
      const n = report[view].nodes.find((x) => x.op === 'matmul');
      await page.fill('#search', `/^%${n.id} matmul /`);
      await page.press('#search', 'Enter');
      shots[view] = await checkScreenshot(page, path.join(artifacts, `view-${view}.png`),
        [['#diagram g.node text', `%${n.id} matmul`], ['#props', `%${n.id} = matmul`]], { region: '#diagram' });
    }
    await page.fill('#search', '');

    // The scheduled graph: a node per scheduled-graph node, coloured by kernel (every kernel).
    await page.selectOption('#view', 'scheduled');
    await page.waitForFunction(() => window.kilnInspector.drawn.view === 'scheduled');
    const nodes = await page.locator('#diagram g.node').count();
    assert.strictEqual(nodes, report.scheduled.nodes.length);
    const colouredKernels = await page.$$eval('#diagram g.node', (gs) =>
      new Set(gs.map((g) => g.dataset.kernel).filter((k) => k !== '').map((k) => k.split(' ')[0])).size);
    assert.strictEqual(colouredKernels, expected, `${colouredKernels} kernel colours`);
    await page.selectOption('#view', 'input');
    await page.waitForFunction(() => window.kilnInspector.drawn.view === 'input');
    assert.strictEqual(await page.locator('#diagram g.node').count(), captured.length);
    const guards = await page.locator('#guards li').count();
    assert.ok(guards > 0);

    // Overlays: each kernel's bytes, FLOPs and FLOPs per byte in the list; the fill by intensity
    // (the matmul's node darker than the softmax's); a profile measured natively by `kiln run
    // --profile` on the same graph and target, opened as a file: its times in the list and the
    // fill; one of another plan refused with the first kernel that differs.
    const fillOf = (id) => page.$eval(`#diagram g.node[data-node="${id}"] rect`, (r) => r.getAttribute('fill'));
    assert.match(await page.textContent(`#kernels > li[data-kernel="${smKernel}"] .figures`), /B · .*FLOP · [\d.]+ FLOP\/B$/);
    await page.selectOption('#fill', 'intensity');
    await page.waitForFunction(() => window.kilnInspector.drawn.overlay && window.kilnInspector.drawn.overlay.mode === 'intensity');
    const mm = captured.find((n) => n.op === 'matmul').id;
    const lightness = (hex) => [1, 3, 5].reduce((a, i) => a + parseInt(hex.slice(i, i + 2), 16), 0);
    const mmK = report.kernels[report.node_kernels.input[mm][0]], smK = report.kernels[smKernel];
    assert.ok(mmK.flops / mmK.bytes > smK.flops / smK.bytes, 'the matmul kernel does more per byte than the softmax');
    assert.ok(lightness(await fillOf(mm)) < lightness(await fillOf(sm)), 'higher intensity, darker fill');
    assert.match(await page.textContent('#legend'), /FLOPs per byte/);
    if (cli) {
      const dir = fs.mkdtempSync(path.join(require('os').tmpdir(), 'kiln-profile-'));
      const profile = path.join(dir, 'transformer_block.cpu.profile.json');
      execFileSync(cli, ['run', path.join(root, 'samples/graphs/transformer_block.json'), '--random', '--target', 'cpu', '--profile', profile, '--repeat', '3']);
      await page.setInputFiles('#file', profile);
      await page.waitForFunction(() => window.kilnInspector.drawn.overlay && window.kilnInspector.drawn.overlay.mode === 'time');
      const doc = JSON.parse(fs.readFileSync(profile, 'utf8'));
      assert.match(await page.textContent(`#kernels > li[data-kernel="${smKernel}"] .figures`),
        new RegExp(` · ${doc.kernels[smKernel].median_ms.toPrecision(3).replace('.', '\\.')} ms \\(`));
      assert.match(await page.textContent('#legend'), /measured time/);
      assert.match(await page.textContent('#notice'), /kernels measured on cpu/);
      assert.strictEqual(await page.evaluate(() => window.kilnInspector.last.graph), 'transformer_block.json', 'the graph stays');
      doc.kernels[1].name = 'k_other';
      fs.writeFileSync(profile, JSON.stringify(doc));
      await page.setInputFiles('#file', profile);
      await page.waitForFunction(() => /is not a profile of this plan/.test(document.getElementById('notice').textContent));
      assert.match(await page.textContent('#notice'), /its kernel 1 is k_other/);
      fs.rmSync(dir, { recursive: true });
    }
    await page.selectOption('#fill', 'kernel');
    await page.waitForFunction(() => !window.kilnInspector.drawn.overlay);

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

    // A real model's size (12 blocks, ~540 nodes traced): laid out in the worker while the page
    // keeps answering; the time each part takes is printed.
    const bigName = 'js:transformer, 12 blocks (JavaScript)';
    await page.selectOption('#sample', bigName);
    const answers = [];
    for (let i = 0; i < 5 && !(await page.evaluate((n) => window.kilnInspector.last.graph === n, bigName)); ++i) {
      const t0 = Date.now();
      await page.evaluate(() => 1);
      answers.push(Date.now() - t0);
    }
    await page.waitForFunction((n) => window.kilnInspector.last.graph === n, bigName, { timeout: 60000 });
    const big = await page.evaluate(() => ({ draw: window.kilnInspector.drawMs, last: window.kilnInspector.last, where: window.kilnInspector.layoutIn }));
    assert.strictEqual(big.where, 'worker');
    assert.strictEqual(await page.locator('#diagram g.node').count(), big.draw.nodes);
    assert.ok(big.draw.nodes > 500, JSON.stringify(big.draw));
    // The minimap: the whole graph small in the diagram's corner (shown while it does not fit the
    // view); a click there moves the view to that part of the graph.
    await page.waitForSelector('#minimap:not([hidden])');
    const mini = await page.$eval('#minimap', (c) => ({ width: c.width, height: c.height, px: c.getContext('2d').getImageData(0, 0, c.width, c.height).data }));
    assert.ok(mini.width > 0 && mini.height > 0 && mini.width <= 200 && mini.height <= 150, JSON.stringify([mini.width, mini.height]));
    assert.ok(Object.values(mini.px).some((v, i) => i % 4 === 3 && v > 0), 'the minimap draws the graph');
    const scrolled = await page.$eval('#diagram', (b) => b.scrollTop);
    await page.click('#minimap', { position: { x: mini.width / 2, y: mini.height - 2 } });
    const moved = await page.$eval('#diagram', (b) => b.scrollTop);
    assert.ok(moved > scrolled, `the minimap moved the view down: ${scrolled} -> ${moved}`);
    await page.$eval('#diagram', (b) => { b.scrollTop = 0; b.scrollLeft = 0; });
    console.log(`# 12-block transformer in Chromium: ${big.draw.nodes} nodes, ${big.last.kernels} kernels; compile ${big.last.ms.toFixed(0)} ms, ` +
      `tabs ${big.draw.tabs.toFixed(0)} ms, diagram ${big.draw.total.toFixed(0)} ms (layout in the worker ${big.draw.layout.toFixed(0)} ms); ` +
      `the page answered in ${answers.join(', ') || '-'} ms meanwhile`);

    // The same program picked in the page: traced there, compiled, drawn.
    await page.selectOption('#sample', 'js:transformer block (JavaScript)');
    await page.waitForFunction(() => window.kilnInspector.last.graph === 'js:transformer block (JavaScript)');
    assert.strictEqual(await page.locator('#kernels > li').count(), timing.kernels);
    assert.match(await page.textContent('#status'), /traced in/);
    await page.selectOption('#sample', 'transformer_block.json');
    await page.waitForFunction(() => window.kilnInspector.last.graph === 'transformer_block.json');

    // Change the target: the plan changes to LLVM IR for NVPTX (and CUDA C where it has no such form).
    await page.selectOption('#target', 'cuda');
    await page.waitForFunction(() => window.kilnInspector.last.target === 'cuda');
    assert.strictEqual(await page.locator('#kernels > li').count(), expectedCuda);
    assert.match(await page.textContent('#kernels'), /nvptx64-nvidia-cuda/);

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

    // Open the plan file (the file picker): the page compiles its origin with the options recorded
    // in it and finds the same plan; the kernels shown are the plan's.
    await page.setInputFiles('#file', file);
    await page.waitForFunction(() => window.kilnInspector.last.planCheck);
    assert.strictEqual(await page.evaluate(() => window.kilnInspector.last.planCheck), 'same', await page.textContent('#notice'));
    assert.match(await page.textContent('#notice'), /this module makes the same plan from its origin/);
    assert.strictEqual(await page.$eval('#target', (e) => e.value), 'cuda');
    assert.strictEqual(await page.locator('#kernels > li').count(), expectedCuda);
    // An edited plan (one kernel's source changed) opens with a warning naming the first difference.
    const edited = path.join(artifacts, 'edited.cuda.plan.json');
    const text = fs.readFileSync(file, 'utf8');
    const at = text.indexOf('nvptx64-nvidia-cuda');
    assert.ok(at > 0);
    fs.writeFileSync(edited, text.slice(0, at) + 'nvptx64-nvidia-cudX' + text.slice(at + 19));
    await page.setInputFiles('#file', edited);
    await page.waitForFunction(() => window.kilnInspector.last.graph === 'edited.cuda.plan.json' && window.kilnInspector.last.planCheck);
    assert.strictEqual(await page.evaluate(() => window.kilnInspector.last.planCheck), 'different');
    assert.match(await page.textContent('#notice'), /makes a different plan .*first difference at line \d+, column \d+:[^]*cudX/);

    // An ONNX model picked with its external data file: decoded in the page (protobufjs), imported
    // by the module (the graph the module imports in Node), compiled and drawn.
    const gpt2 = modelFiles('gpt2');
    // The page is on cuda here: the model is imported for a CUDA device (its weights are inputs).
    const gpt2Graph = (await kiln()).importOnnx(await onnx().decode(gpt2['model.onnx'], gpt2), { device: 'cuda' });
    const gpt2Cuda = (await kiln()).compile(gpt2Graph, { target: 'cuda' }).kernels.length;
    await page.setInputFiles('#file', [path.join(realModelsDir, 'gpt2/model.onnx'), path.join(realModelsDir, 'gpt2/model.onnx.data')]);
    await page.waitForFunction(() => window.kilnInspector.last.graph === 'model.onnx' && window.kilnInspector.last.kernels);
    assert.strictEqual(await page.evaluate(() => window.kilnInspector.graphText), gpt2Graph.json);
    assert.strictEqual(await page.locator('#kernels > li').count(), gpt2Cuda);
    assert.strictEqual(await page.locator('#diagram g.node').count(), gpt2Graph.toJSON().nodes.length);
    assert.match(await page.textContent('#status'), /^ONNX model \(\d+ tensors, [\d.]+ MB\) imported for cuda in [\d.]+ ms; compiled for cuda/);
    // Another target imports it again, for that target's device (cpu: the weights are constants).
    await page.selectOption('#target', 'cpu');
    await page.waitForFunction(() => window.kilnInspector.last.target === 'cpu');
    const gpt2Cpu = (await kiln()).importOnnx(await onnx().decode(gpt2['model.onnx'], gpt2));
    assert.strictEqual(await page.evaluate(() => window.kilnInspector.graphText), gpt2Cpu.json);
    assert.ok(gpt2Cpu.toJSON().nodes.filter((n) => n.op === 'input').length < gpt2Graph.toJSON().nodes.filter((n) => n.op === 'input').length);
    await page.selectOption('#target', 'cuda');
    await page.waitForFunction(() => window.kilnInspector.last.target === 'cuda');
    const imported = await page.evaluate(() => window.kilnInspector.last);
    console.log(`# gpt2 (ONNX, small) in Chromium: imported in ${imported.importMs.toFixed(0)} ms, compiled in ${imported.ms.toFixed(0)} ms, ` +
      `${imported.kernels} cuda kernels`);
    // Without its data file: the error names the file to open with it.
    await page.setInputFiles('#file', path.join(realModelsDir, 'gpt2/model.onnx'));
    await page.waitForFunction(() => window.kilnInspector.last.error);
    assert.match(await page.textContent('#error'),
      /^model\.onnx: tensor '[^']+' has its data in the file 'model\.onnx\.data', which was not opened with the model/);

    // A file that parses as a ModelProto without a graph: the importer's error, and nothing of the
    // last graph stays on screen.
    const noGraph = path.join(artifacts, 'model.onnx');
    fs.writeFileSync(noGraph, Buffer.from([0x08, 0x07, 0x12, 0x04, 0x6b, 0x69, 0x6c, 0x6e]));
    await page.setInputFiles('#file', noGraph);
    await page.waitForFunction(() => window.kilnInspector.last.error);
    assert.match(await page.textContent('#error'), /^model\.onnx: onnx: the model has no graph$/);
    assert.strictEqual(await page.locator('#kernels > li').count(), 0);
    assert.strictEqual(await page.locator('#diagram g.node').count(), 0);
    assert.strictEqual(await page.textContent('#plan-text'), '');
    assert.strictEqual(await page.isDisabled('#download'), true);
    assert.strictEqual(await page.textContent('#scopes'), '', 'the previous graph\'s scope bar is cleared');
    assert.match(await page.textContent('#hover'), /^hover a node/, 'the previous graph\'s hover line is cleared');
    assert.match(await page.$eval('#sample', (e) => e.selectedOptions[0].textContent), /^\(opened\) /, 'the sample menu names what was opened');
    // checkScreenshot's own control: the cleared diagram is blank to it.
    shots.error = await checkScreenshot(page, path.join(artifacts, 'view-error.png'),
      [['#error', 'onnx: the model has no graph']], { region: '#diagram', blank: true });

    // A graph file dropped on the page.
    const dropped = await page.evaluateHandle((t) => {
      const dt = new DataTransfer();
      dt.items.add(new File([t], 'dropped.json', { type: 'application/json' }));
      return dt;
    }, readSample('transformer_block.json'));
    await page.dispatchEvent('body', 'drop', { dataTransfer: dropped });
    await page.waitForFunction(() => window.kilnInspector.last.graph === 'dropped.json' && window.kilnInspector.last.kernels);
    assert.strictEqual(await page.isVisible('#error'), false);
    assert.strictEqual(await page.locator('#kernels > li').count(), expectedCuda);

    // Click a node: it and its kernel are selected (the kernel's entry outlined in the list, its
    // nodes in the diagram); click a kernel: its nodes. Passes that changed nothing show no dumps.
    await page.click(`#diagram g.node[data-node="${sm}"]`);
    const cudaReport = (await kiln()).compile(readSample('transformer_block.json'), { target: 'cuda' });
    const smKernels = cudaReport.node_kernels.input[sm].map(String);
    assert.deepStrictEqual(await page.$$eval('#kernels > li.selected', (ls) => ls.map((l) => l.dataset.kernel)), smKernels);
    assert.ok(await page.locator('#diagram g.node.in-kernel').count() >= 1);
    // The selected node's properties: its type, attributes, inputs, users and kernels.
    const props = await page.textContent('#props');
    assert.match(props, new RegExp(`^%${sm} = softmax : f32\\[8, 8\\]\\n  dim: -?\\d+\\n  input 0: %\\d+ `));
    assert.match(props, new RegExp(`kernels: ${smKernels.map((k) => cudaReport.kernels[Number(k)].name).join(', ')}$`));
    // Search: the softmax by its op (Enter selects it), the layer norms by a regular expression.
    await page.fill('#search', 'SOFTMAX');
    assert.strictEqual(await page.textContent('#search-count'), '1 match');
    await page.press('#search', 'Enter');
    assert.strictEqual(await page.evaluate(() => window.kilnInspector.selection.node), sm);
    await page.fill('#search', '/^%\\d+ layer_norm /');
    const norms = captured.filter((n) => n.op === 'layer_norm').length;
    assert.ok(norms >= 2);
    assert.strictEqual(await page.locator('#diagram g.node.match').count(), norms);
    await page.fill('#search', '/[/');
    assert.match(await page.textContent('#search-count'), /^bad expression/);
    await page.fill('#search', '');
    // Kernel colours stay distinct past the palette's 16 (real models have hundreds of kernels).
    const colours = await page.evaluate(() => Array.from({ length: 300 }, (_, i) => window.kilnInspector.colour(i)));
    assert.strictEqual(new Set(colours).size, 300);
    assert.ok(colours.every((c) => /^#[0-9a-f]{6}$/.test(c)), colours.join(' '));
    // The loop-level IR the scheduler made.
    assert.strictEqual(await page.textContent('#loops'), cudaReport.schedule_text);
    await page.click('#kernels > li[data-kernel="0"] .kernel-head');
    const inKernel0 = cudaReport.node_kernels.input.map((ks, id) => (ks.includes(0) ? id : -1)).filter((id) => id >= 0);
    assert.deepStrictEqual(await page.evaluate(() => window.kilnInspector.selection.nodes), inKernel0);
    await page.click('#tabs button[data-tab="passes"]');
    assert.strictEqual(await page.locator('#passes .unchanged').count(), cudaReport.passes.filter((p) => !p.changed).length);
    const changed = cudaReport.passes.filter((p) => p.changed);
    assert.strictEqual(await page.locator('#passes details.pass').count(), changed.length);
    // Each changed pass shows its change: removed and added lines, fewer lines than the two dumps.
    for (let i = 0; i < changed.length; ++i) {
      const diff = page.locator('#passes details.pass .pass-diff').nth(i);
      assert.ok(await diff.locator('.add, .del').count() > 0, changed[i].name);
      const shown = (await diff.textContent()).split('\n').length;
      assert.ok(shown < changed[i].before.split('\n').length + changed[i].after.split('\n').length, `${changed[i].name}: ${shown} lines`);
    }
    await page.click('#tabs button[data-tab="kernels"]');
    // Zoom: Fit shows the whole graph in the box.
    await page.click('#fit');
    const fitted = await page.$eval('#diagram', (b) => {
      const r = b.querySelector('svg').getBoundingClientRect();
      return r.width <= b.clientWidth + 1 && r.height <= b.clientHeight + 1;
    });
    assert.ok(fitted, 'Fit: the drawing fits the box');

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
    const otherReport = other === 'cuda' ? cudaReport : report;
    shots.inspector = await checkScreenshot(page, path.join(artifacts, 'inspector.png'), [['#status', 'cache hit'],
      ['#kernels .kernel-head', `${otherReport.kernels[0].name} · ${otherReport.kernels[0].kind}`], ['#diagram g.node text', '%0 input']], { region: 'main' });

    // ?url=: the page opens a graph from an address instead of the first sample.
    await page.goto(url + '?url=' + encodeURIComponent('/samples/transformer_block.json'));
    await page.waitForSelector('body[data-ready="1"]', { timeout: 60000 });
    assert.strictEqual(await page.evaluate(() => window.kilnInspector.last.graph), 'transformer_block.json');
    assert.ok(await page.locator('#kernels > li').count() > 0);
    // An ONNX model by address: its external data file is fetched from beside it.
    await page.goto(url + '?url=' + encodeURIComponent('/models/bert/model.onnx'));
    await page.waitForSelector('body[data-ready="1"]', { timeout: 60000 });
    assert.strictEqual(await page.evaluate(() => window.kilnInspector.last.graph), 'model.onnx', await page.textContent('#error'));
    assert.ok(await page.locator('#kernels > li').count() > 0);
    // Module scopes (the exporter's, in the node names): grouped, each collapsed scope is one
    // dashed box holding its nodes and their kernels; a click expands it, the bar collapses it.
    await page.selectOption('#group', 'on');
    await page.waitForSelector('#diagram g.scope');
    const scopeView = await page.evaluate(() => ({ nodes: window.kilnInspector.drawn.g.nodes.length, items: window.kilnInspector.drawn.items,
      ms: window.kilnInspector.drawMs }));
    const boxes = await page.locator('#diagram g.scope').count();
    assert.strictEqual(boxes + await page.locator('#diagram g.node').count(), scopeView.items);
    assert.ok(boxes > 0 && scopeView.items < scopeView.nodes / 4, JSON.stringify(scopeView));
    const scopes = await page.$$eval('#diagram g.scope', (gs) => gs.map((g) => ({ scope: g.dataset.scope, nodes: g.dataset.nodes.split(' '),
      kernels: g.dataset.kernel })));
    const widest = scopes.reduce((a, b) => (b.nodes.length > a.nodes.length ? b : a));
    assert.ok(widest.kernels.length > 0, JSON.stringify(big));
    await page.click(`#diagram g.scope[data-scope="${widest.scope}"]`);
    await page.waitForSelector(`#scopes button[data-scope="${widest.scope}"]`);
    assert.strictEqual(await page.locator(`#diagram g.scope[data-scope="${widest.scope}"]`).count(), 0);
    const expandedItems = await page.evaluate(() => window.kilnInspector.drawn.items);
    assert.ok(expandedItems > scopeView.items, `${expandedItems} items after expanding ${widest.scope}`);
    await page.click(`#scopes button[data-scope="${widest.scope}"]`);
    await page.waitForSelector(`#diagram g.scope[data-scope="${widest.scope}"]`);
    // A search finds nodes inside collapsed scopes (their box outlined); Enter opens the scopes
    // around the match and selects it.
    const inside = widest.nodes[widest.nodes.length - 1];
    await page.fill('#search', `/^%${inside} /`);
    assert.strictEqual(await page.textContent('#search-count'), '1 match');
    assert.strictEqual(await page.locator(`#diagram g.scope.match[data-scope="${widest.scope}"]`).count(), 1);
    await page.press('#search', 'Enter');
    await page.waitForSelector(`#diagram g.node.selected[data-node="${inside}"]`);
    assert.match(await page.textContent('#props'), new RegExp(`scope: ${widest.scope.replace(/[.]/g, '\\.')}`));
    console.log(`# bert (ONNX, small) grouped by module scope: ${scopeView.nodes} nodes drawn as ${scopeView.items} items ` +
      `(${boxes} scopes) in ${scopeView.ms.total.toFixed(0)} ms; ${widest.scope} expanded: ${expandedItems} items`);
    // The diagram's box fits the window below the scope bar and the properties: its bottom edge,
    // where this match (the scope's last node) lies, is in the window without scrolling.
    await page.waitForFunction(() => document.getElementById('diagram').getBoundingClientRect().bottom <= innerHeight);
    assert.strictEqual(await page.evaluate(() => scrollY), 0);
    shots.scopes = await checkScreenshot(page, path.join(artifacts, 'scopes.png'), [['#props', `scope: ${widest.scope}`],
      ['#diagram g.node text', `%${inside} `], ['#scopes button', `− ${widest.scope}`]], { region: '#diagram' });
    await page.selectOption('#group', 'auto');
    // The small ONNX exports (tests/onnx/real_models: each real model's structure) are samples of
    // the page too: every one opens, imports and compiles, with no error.
    const models = await page.$$eval('#sample option', (os) => os.map((o) => o.value).filter((v) => v.startsWith('onnx:')));
    assert.deepStrictEqual(models.map((m) => m.slice(5)), realModels);
    const modelTimes = [];
    for (const m of models) {
      await page.selectOption('#sample', m);
      await page.waitForFunction((name) => window.kilnInspector.last.graph === name && (window.kilnInspector.last.kernels || window.kilnInspector.last.error), m);
      assert.strictEqual(await page.isVisible('#error'), false, `${m}: ${await page.textContent('#error')}`);
      const last = await page.evaluate(() => window.kilnInspector.last);
      assert.ok(last.kernels > 0, m);
      modelTimes.push(`${m.slice(5)} ${last.importMs.toFixed(0)}+${last.compileMs.toFixed(0)} ms (${last.kernels} kernels)`);
    }
    console.log(`# the real models' small exports in the page (${models.length}), imported+compiled for cpu: ${modelTimes.join(', ')}`);
    await page.goto(url + '?url=' + encodeURIComponent('/samples/no_such_file.json'));
    await page.waitForSelector('body[data-ready="1"]', { timeout: 60000 });
    assert.match(await page.textContent('#error'), /could not fetch it: HTTP 404/);
    console.log(`# screenshots, distinct colours in the view's box: ` +
      Object.entries(shots).map(([k, v]) => `${k} ${v}`).join(', '));
    assert.deepStrictEqual(errors, []);
  } finally {
    await browser.close();
    server.close();
  }
});
