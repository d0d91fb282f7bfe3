// The inspector in headless Chromium (as browser.test.js drives it) opening compile reports made
// natively: the report of tests/cli/report_program (a first compile, a recompile with its reason,
// two segments of a function with a graph break, one with a captured weight whose bytes the
// report leaves out), written by `kiln report` as JSON and as its HTML page, opened by the file
// picker and by ?url=; damaged reports refused with a sentence. And a selected node's fusion
// decisions, on the transformer sample. KILN_CLI (the kiln tool) and KILN_REPORT_PROGRAM
// (build/<preset>/tests/cli/report_program) make the report; without them that test is skipped.
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync } = require('child_process');
const { launchInspector, cli, kiln, readSample } = require('./common.js');

const program = process.env.KILN_REPORT_PROGRAM ? path.resolve(process.env.KILN_REPORT_PROGRAM) : '';
const noReport = !cli ? 'KILN_CLI is not set: the kiln tool writes the report opened here'
  : !program ? 'KILN_REPORT_PROGRAM is not set: tests/cli/report_program makes the compiles the report holds' : false;

// Waits for the page to show graph `graph` (compiled, or an error): what it last did.
async function shown(page, graph) {
  await page.waitForFunction((g) => window.kilnInspector.last && window.kilnInspector.last.graph === g &&
    (window.kilnInspector.last.kernels || window.kilnInspector.last.error), graph, { timeout: 60000 });
  return page.evaluate(() => window.kilnInspector.last);
}

// A file opened with the file picker; a compile of the open report picked in its selector.
async function openFile(page, file, graph) {
  await page.setInputFiles('#file', file);
  return shown(page, graph);
}
async function selectCompile(page, index, graph) {
  await page.selectOption('#report-compile', String(index));
  return shown(page, graph);
}

const elidedIn = (c) => c.report.input.nodes.filter((n) => n.op === 'constant' && n.attrs.value.data_elided_bytes !== undefined);

test('compile reports of `kiln report` open in the inspector', { timeout: 240000, skip: noReport }, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-open-report-'));
  const json = path.join(dir, 'report.json'), html = path.join(dir, 'report.html');
  execFileSync(program, [], { env: { ...process.env, KILN_DEBUG_DIR: path.join(dir, 'dumps') }, stdio: 'pipe' });
  execFileSync(cli, ['report', path.join(dir, 'dumps'), '--out', html, '--json', json], { stdio: 'pipe' });
  const doc = JSON.parse(fs.readFileSync(json, 'utf8'));
  assert.strictEqual(doc.compiles.length, 4);
  const recompile = doc.compiles.findIndex((c) => c.kind === 'recompile');
  const weighted = doc.compiles.findIndex((c) => c.report && elidedIn(c).length);
  const segments = doc.compiles.map((c, i) => (c.kind === 'segment' ? i : -1)).filter((i) => i >= 0);
  assert.ok(recompile >= 0 && doc.compiles[recompile].reason, 'the report holds a recompile with its reason');
  assert.ok(segments.length === 2 && segments.includes(weighted), 'two segments, one with an elided weight');
  const weight = elidedIn(doc.compiles[weighted])[0].attrs.value;
  assert.strictEqual(weight.data_elided_bytes, weight.shape.reduce((a, b) => a * b, 1) * 4);

  const { browser, server, page, url, errors } = await launchInspector();
  try {
    const t0 = Date.now();
    await page.goto(url);
    await page.waitForSelector('body[data-ready="1"]', { timeout: 60000 });

    // The JSON: the selector lists every compile (id, kind, function, reason), the first opens.
    let last = await openFile(page, json, 'report.json 0/0');
    assert.strictEqual(await page.isVisible('#report-bar'), true);
    const options = await page.$$eval('#report-compile option', (os) => os.map((o) => o.textContent));
    assert.strictEqual(options.length, 4, options.join('\n'));
    doc.compiles.forEach((c, i) => assert.ok(options[i].startsWith(`${c.id} · ${c.kind}`), options[i]));
    assert.match(options[recompile], new RegExp(doc.compiles[recompile].reason.slice(0, 30).replace(/[()]/g, '\\$&')));
    assert.strictEqual(await page.$eval('#report-compile', (s) => s.value), '0');

    // A compile whose constants are all there: compiled here for its target, mode and options,
    // the same kernels and the same cache key as natively.
    const checkSame = async (i, last) => {
      const c = doc.compiles[i];
      assert.strictEqual(last.graph, `report.json ${c.id}`);
      assert.deepStrictEqual(last.native, { id: c.id, kind: c.kind, keyMatch: true, elided: 0, otherVersion: false }, await page.textContent('#notice'));
      assert.strictEqual(last.key, c.report.cache_key);
      assert.strictEqual(last.kernels, c.report.kernels.length);
      assert.strictEqual(await page.locator('#kernels > li').count(), c.report.kernels.length);
      assert.strictEqual(await page.$eval('#target', (e) => e.value), c.report.target);
      const notice = await page.textContent('#notice');
      assert.ok(notice.includes(doc.functions[c.function].name), notice);
      assert.match(notice, /Cache key [0-9a-f]{32}: the report's \(the same graph, options and Kiln version\)/);
      assert.strictEqual(await page.isVisible('#error'), false);
      return notice;
    };
    assert.match(await checkSame(0, last), /its first compile/);
    assert.ok((await page.locator('#diagram g.node').count()) === doc.compiles[0].report.input.nodes.length);
    // A captured node's properties name the program's line that traced it (compile.json's sources).
    const src = doc.compiles[0].sources.find((x) => doc.compiles[0].report.input.nodes[x.node].op === 'softmax');
    assert.ok(src && src.file.endsWith('report_program.cpp') && src.line > 0, JSON.stringify(doc.compiles[0].sources));
    await page.click(`#diagram g.node[data-node="${src.node}"]`);
    assert.ok((await page.textContent('#props')).includes(`  source: ${src.file}:${src.line} in ${src.function}`), await page.textContent('#props'));

    // The recompile: its reason and the program's timings in the notice.
    last = await selectCompile(page, recompile, `report.json ${doc.compiles[recompile].id}`);
    const notice = await checkSame(recompile, last);
    assert.ok(notice.includes(`Recompiled because: ${doc.compiles[recompile].reason}`), notice);
    assert.match(notice, /In the program: trace [\d.]+ ms, compile [\d.]+ ms/);

    // The segment holding the weight the report left out: zeros of its size in its place, said so.
    const w = doc.compiles[weighted];
    last = await selectCompile(page, weighted, `report.json ${w.id}`);
    assert.ok(last.kernels > 0);
    assert.strictEqual(last.native.elided, 1);
    const wNotice = await page.textContent('#notice');
    assert.match(wNotice, new RegExp(`1 constant had its bytes left out of the report \\(%\\d+: ${weight.data_elided_bytes} bytes\\): ` +
      'zeros of the same size stand in'));
    assert.ok(wNotice.includes(`The graph ends at: ${w.graph_breaks[0]}`), wNotice);
    assert.match(wNotice, /segment 0 /);
    // The key hashes constants' bytes: the zeros make another key, and the notice says why.
    assert.strictEqual(last.native.keyMatch, false);
    assert.match(wNotice, /is not the report's [0-9a-f]{32} \(zeros stand in for the left-out constant bytes/);
    const loaded = JSON.parse(await page.evaluate(() => window.kilnInspector.graphText));
    const zeros = loaded.nodes.find((n) => n.op === 'constant' && n.attrs.value.shape.join() === weight.shape.join()).attrs.value;
    assert.strictEqual(Buffer.from(zeros.data_base64, 'base64').length, weight.data_elided_bytes);
    assert.ok(Buffer.from(zeros.data_base64, 'base64').every((b) => b === 0));
    console.log(`# segment ${w.id} with its weight as zeros: ${last.kernels} kernels here, ${w.report.kernels.length} in the report`);
    const other = segments.find((i) => i !== weighted);
    await checkSame(other, await selectCompile(page, other, `report.json ${doc.compiles[other].id}`));

    // The HTML page: the same compiles, from its kiln-report-data element.
    last = await openFile(page, html, 'report.html 0/0');
    assert.deepStrictEqual(await page.$$eval('#report-compile option', (os) => os.map((o) => o.textContent)), options);
    assert.strictEqual(last.native.keyMatch, true);
    assert.strictEqual(last.kernels, doc.compiles[0].report.kernels.length);
    last = await selectCompile(page, recompile, `report.html ${doc.compiles[recompile].id}`);
    assert.strictEqual(last.key, doc.compiles[recompile].report.cache_key);

    // Damaged or foreign reports: the page's error state with a sentence, nothing left on screen.
    const write = (name, text) => {
      const file = path.join(dir, name);
      fs.writeFileSync(file, text);
      return file;
    };
    const refused = async (name, text, message) => {
      const e = await openFile(page, write(name, text), name);
      assert.ok(e.error, JSON.stringify(e));
      assert.match(await page.textContent('#error'), message);
      assert.strictEqual(await page.isVisible('#report-bar'), false);
      assert.strictEqual(await page.locator('#kernels > li').count(), 0);
      assert.strictEqual(await page.locator('#diagram g.node').count(), 0);
    };
    await refused('wrong_format.json', JSON.stringify({ ...doc, format: 'kiln.reprot' }),
      /^wrong_format\.json: neither a Kiln graph .* nor a compile report \(format "kiln\.report"\): format "kiln\.reprot"$/);
    const { compiles, ...noCompiles } = doc;
    await refused('no_compiles.json', JSON.stringify(noCompiles), /^no_compiles\.json: a compile report .* without compiles: its "compiles" list is missing or empty$/);
    await refused('version2.json', JSON.stringify({ ...doc, version: 2 }), /^version2\.json: a compile report of version 2; this page reads version 1$/);
    const page_ = fs.readFileSync(html, 'utf8');
    const start = page_.indexOf('id="kiln-report-data">') + 'id="kiln-report-data">'.length;
    await refused('cut.html', page_.slice(0, start + 200) + page_.slice(page_.indexOf('</script>', start)), /^cut\.html: a page of `kiln report` whose report data \(kiln-report-data\) is not valid JSON: /);
    await refused('other.html', '<!doctype html><title>x</title><p>not a report</p>', /^other\.html: an HTML page without the data of a compile report \(no kiln-report-data element/);

    // A compile without a report shows its error; the others still open. A report of another
    // Kiln version opens, saying so. (JSON.parse here rounds INT64_MAX, the recompile's symbol
    // bound, so the recompile is the compile whose report is taken out.)
    const broken = JSON.parse(JSON.stringify(doc));
    broken.kiln_version = '0.0.1+0123456789abcdef';
    broken.compiles[1] = { ...broken.compiles[1], report: null, error: 'graph.json: node 3 (sofmax): unknown op' };
    last = await openFile(page, write('broken.json', JSON.stringify(broken)), 'broken.json 0/0');
    assert.strictEqual(last.native.otherVersion, true);
    assert.match(await page.textContent('#notice'), /Made by Kiln 0\.0\.1\+0123456789abcdef; this page's module is 0\.1\.0\+[0-9a-f]+: /);
    assert.match((await page.$$eval('#report-compile option', (os) => os.map((o) => o.textContent)))[1], / · no report$/);
    last = await selectCompile(page, 1, `broken.json ${doc.compiles[1].id}`);
    assert.match(await page.textContent('#error'), /^broken\.json 0\/1: compile 0\/1 \(recompile of .*\) has no report: graph\.json: node 3 \(sofmax\): unknown op$/);
    assert.strictEqual(await page.isVisible('#report-bar'), true);
    assert.strictEqual(await page.locator('#kernels > li').count(), 0);
    await page.click('#compile');  // still the compile's error, not the last graph compiled
    await page.waitForFunction(() => window.kilnInspector.last.error);
    assert.match(await page.textContent('#error'), /has no report/);
    last = await selectCompile(page, 3, `broken.json ${doc.compiles[3].id}`);
    assert.strictEqual(last.kernels, doc.compiles[3].report.kernels.length);
    // Any other file closes the report.
    await openFile(page, write('graph.json', readSample('softmax.json')), 'graph.json');
    assert.strictEqual(await page.isVisible('#report-bar'), false);

    // ?url= of the HTML page (served here by the test).
    await page.route('**/reports/report.html', (route) => route.fulfill({ path: html, contentType: 'text/html' }));
    await page.goto(url + '?url=' + encodeURIComponent('/reports/report.html'));
    await page.waitForSelector('body[data-ready="1"]', { timeout: 60000 });
    last = await page.evaluate(() => window.kilnInspector.last);
    assert.strictEqual(last.graph, 'report.html 0/0', await page.textContent('#error'));
    assert.strictEqual(last.native.keyMatch, true);
    assert.strictEqual(await page.locator('#report-compile option').count(), 4);
    console.log(`# compile reports opened, selected and refused in ${Date.now() - t0} ms`);
    assert.deepStrictEqual(errors, []);
  } finally {
    await browser.close();
    server.close();
    fs.rmSync(dir, { recursive: true });
  }
});

test('a selected node marks its fusion decisions', { timeout: 120000 }, async () => {
  const report = (await kiln()).compile(readSample('transformer_block.json'), { target: 'cpu' });
  const captured = JSON.parse(readSample('transformer_block.json')).nodes;
  const decisions = report.decisions;
  // The log numbers the scheduler's kernels; with no horizontal merge here they are the plan's.
  assert.ok(!decisions.some((d) => /^fused kernels/.test(d)));
  assert.strictEqual(decisions.filter((d) => /^kernel \d+: /.test(d)).length, report.kernels.length);
  const names = (d, id) => new RegExp(`%${id}\\b`).test(d);

  const { browser, server, page, url, errors } = await launchInspector();
  try {
    await page.goto(url + '#transformer_block.json');
    await page.waitForSelector('body[data-ready="1"]', { timeout: 60000 });
    assert.strictEqual(await page.evaluate(() => window.kilnInspector.last.graph), 'transformer_block.json');
    const marked = () => page.$$eval('#decisions > li', (ls) => ({
      node: ls.map((l, i) => (l.classList.contains('about-node') ? i : -1)).filter((i) => i >= 0),
      kernel: ls.map((l, i) => (l.classList.contains('about-kernel') ? i : -1)).filter((i) => i >= 0) }));

    // The softmax and the first layer_norm (decomposed by the scheduler: its value is an add).
    for (const op of ['softmax', 'layer_norm']) {
      const id = captured.find((n) => n.op === op).id;
      const s = report.node_scheduled.input[id], ks = report.node_kernels.input[id];
      await page.click(`#diagram g.node[data-node="${id}"]`);
      const m = await marked();
      // Marked about the node: exactly the decisions naming its scheduled node.
      const own = decisions.map((d, i) => (names(d, s) ? i : -1)).filter((i) => i >= 0);
      assert.ok(own.length > 0, `${op}: decisions name %${s}`);
      assert.deepStrictEqual(m.node, own, op);
      // About its kernels: each decision naming a node its kernels store or reduce, or the kernel.
      const nodes = ks.flatMap((k) => report.kernels[k].provenance);
      const aboutKernel = (d) => nodes.some((n) => names(d, n)) ||
        ks.some((k) => new RegExp(`\\bkernel ${k}\\b|\\bkernels (${k} and \\d+|\\d+ and ${k})\\b`).test(d));
      const expected = decisions.map((d, i) => (!own.includes(i) && aboutKernel(d) ? i : -1)).filter((i) => i >= 0);
      assert.deepStrictEqual(m.kernel, expected, `${op}: ${m.kernel.map((i) => decisions[i]).join(' | ')}`);
      ks.forEach((k) => assert.ok(decisions.some((d, i) => d.startsWith(`kernel ${k}: `) && m.kernel.concat(m.node).includes(i)), `kernel ${k}`));
      assert.strictEqual(await page.textContent('#decision-count'), `(${own.length + expected.length} of ${decisions.length} marked)`);
      // The properties list them.
      const props = await page.textContent('#props');
      assert.ok(props.includes(`fusion decisions naming %${s}, its node in the scheduled graph:\n` +
        own.map((i) => '    ' + decisions[i]).join('\n')), props);
      assert.ok(props.includes(`fusion decisions about its kernel${ks.length === 1 ? '' : 's'} ${ks.map((k) => report.kernels[k].name).join(', ')}:\n` +
        expected.map((i) => '    ' + decisions[i]).join('\n') + '\n  kernels: '), props);
    }

    // The graph's input: no scheduled node's decisions name it, it is in no kernel.
    await page.click('#diagram g.node[data-node="0"]');
    assert.deepStrictEqual(await marked(), { node: [], kernel: [] });
    assert.match(await page.textContent('#props'), /fusion decisions naming %\d+, its node in the scheduled graph: none/);
    assert.strictEqual(await page.textContent('#decision-count'), '');

    // In the scheduled view a node is its own scheduled node.
    const sm = report.node_scheduled.input[captured.find((n) => n.op === 'softmax').id];
    await page.selectOption('#view', 'scheduled');
    await page.waitForFunction(() => window.kilnInspector.drawn.view === 'scheduled');
    assert.deepStrictEqual(await marked(), { node: [], kernel: [] }, 'a new drawing clears the marks');
    await page.click(`#diagram g.node[data-node="${sm}"]`);
    assert.deepStrictEqual((await marked()).node, decisions.map((d, i) => (names(d, sm) ? i : -1)).filter((i) => i >= 0));
    assert.match(await page.textContent('#props'), /fusion decisions naming it:\n {4}/);

    // A kernel clicked: the decisions about it.
    const k = report.node_kernels.scheduled[sm][0];
    await page.click(`#kernels > li[data-kernel="${k}"] .kernel-head`);
    const mk = await marked();
    assert.deepStrictEqual(mk.node, []);
    assert.ok(mk.kernel.some((i) => decisions[i].startsWith(`kernel ${k}: `)), mk.kernel.map((i) => decisions[i]).join(' | '));

    // On vulkan, with vulkan.fuse_gemm_epilogue off, a gemm's epilogue is a kernel of its own, so
    // the plan's kernel numbers are not the log's: the softmax's kernel is found in the log by the
    // nodes it stores, not by its index.
    const unfused = { 'vulkan.fuse_gemm_epilogue': false };
    const vr = (await kiln()).compile(readSample('transformer_block.json'), { target: 'vulkan', options: unfused });
    await page.selectOption('#view', 'input');
    const before = await page.evaluate(() => window.kilnInspector.last.key);
    await page.fill('#options', JSON.stringify(unfused));
    await page.$eval('#options', (e) => e.blur());  // (an edited input's change event comes as it loses focus)
    await page.waitForFunction((k) => window.kilnInspector.last.key !== k && window.kilnInspector.drawn.view === 'input', before);
    await page.selectOption('#target', 'vulkan');
    await page.waitForFunction((n) => window.kilnInspector.last.target === 'vulkan' && window.kilnInspector.last.kernels === n &&
      window.kilnInspector.drawn.view === 'input', vr.kernels.length);
    const softmax = captured.find((n) => n.op === 'softmax').id, [vk] = vr.node_kernels.input[softmax];
    const starts = vr.decisions.findIndex((d) => vr.kernels[vk].provenance.some((p) => d.match(new RegExp(`^kernel \\d+: starts at %${p}\\b`))));
    const numbered = vr.decisions.findIndex((d) => d.startsWith(`kernel ${vk}: `));
    assert.ok(starts >= 0 && numbered >= 0 && starts !== numbered, `${vr.decisions[starts]} | ${vr.decisions[numbered]}`);
    await page.click(`#diagram g.node[data-node="${softmax}"]`);
    const mv = await marked();
    assert.ok(mv.kernel.includes(starts), vr.decisions[starts]);
    assert.ok(!mv.kernel.includes(numbered) && !mv.node.includes(numbered), vr.decisions[numbered]);
    assert.deepStrictEqual(errors, []);
  } finally {
    await browser.close();
    server.close();
  }
});

// The page loads what only some inputs need when one comes: protobufjs with the first ONNX model,
// dagre and layout.js on the page only where no layout worker runs (here: no Worker at all).
test('scripts for some inputs load on demand; without workers the page lays out itself', { timeout: 120000 }, async () => {
  const nodes = JSON.parse(readSample('transformer_block.json')).nodes.length;
  const { browser, server, page, url, errors } = await launchInspector();
  try {
    await page.addInitScript(() => { delete window.Worker; });
    await page.goto(url + '#transformer_block.json');
    await page.waitForSelector('body[data-ready="1"]', { timeout: 60000 });
    const first = await page.evaluate(() => ({ where: window.kilnInspector.layoutIn, graph: window.kilnInspector.last.graph,
      drawn: document.querySelectorAll('#diagram g.node').length, protobuf: typeof window.protobuf }));
    assert.deepStrictEqual(first, { where: 'page', graph: 'transformer_block.json', drawn: nodes, protobuf: 'undefined' });
    await page.goto(url + '?url=' + encodeURIComponent('/models/bert/model.onnx'));
    await page.waitForSelector('body[data-ready="1"]', { timeout: 60000 });
    const onnx = await page.evaluate(() => ({ where: window.kilnInspector.layoutIn, kernels: window.kilnInspector.last.kernels,
      error: window.kilnInspector.last.error || null, protobuf: typeof window.protobuf }));
    assert.strictEqual(onnx.error, null);
    assert.ok(onnx.kernels > 0, JSON.stringify(onnx));
    assert.strictEqual(onnx.protobuf, 'object');
    assert.strictEqual(onnx.where, 'page');
    assert.deepStrictEqual(errors, []);
  } finally {
    await browser.close();
    server.close();
  }
});
