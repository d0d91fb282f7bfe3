// The page `kiln report` writes, in headless Chromium (Debian's chromium through playwright-core
// from web/node_modules, as tests/web/common.js launches it), opened from file:// and checked
// against the same report's data: KILN_REPORT_HTML (the page) and KILN_REPORT_JSON (its data as
// JSON; without KILN_REPORT_HTML the page is assembled from it by native/cli/report/assemble.js).
// Nothing but file:, data: and about: may be requested, nothing may log an error. Saves a
// screenshot of each tab (report-<tab>.png in KILN_WEB_ARTIFACTS, default build/web-artifacts),
// each checked not blank and showing what that tab is for, and prints the first render's time.
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { pathToFileURL } = require('url');
const { execFileSync } = require('child_process');

const root = path.resolve(__dirname, '../..');
const artifacts = process.env.KILN_WEB_ARTIFACTS || path.join(root, 'build/web-artifacts');
const jsonPath = process.env.KILN_REPORT_JSON;

function chromium() {
  const executablePath = process.env.KILN_CHROMIUM || '/usr/bin/chromium';
  if (!fs.existsSync(executablePath)) throw new Error(`no Chromium at ${executablePath} (Debian: chromium)`);
  let pw;
  try {
    pw = require(path.join(root, 'web/node_modules/playwright-core'));
  } catch (e) {
    pw = require('playwright-core');  // through NODE_PATH; else this throws, naming it
  }
  return pw.chromium.launch({ executablePath, headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update'] });
}

// Is the element matching `selector` whose text holds `text` shown inside the viewport?
function shownInViewport(page, selector, text) {
  return page.evaluate(([sel, t]) => [...document.querySelectorAll(sel)].some((e) => {
    if (!e.textContent.includes(t) || !e.checkVisibility()) return false;
    const r = e.getBoundingClientRect();
    return r.height > 0 && r.top < innerHeight && r.bottom > 0 && r.left < innerWidth && r.right > 0;
  }), [selector, text]);
}

// Distinct colours of a PNG, decoded in the page (an <img> of a data: URL drawn on a canvas).
function distinctColours(page, png) {
  return page.evaluate(async (b64) => {
    const img = new Image();
    img.src = `data:image/png;base64,${b64}`;
    await img.decode();
    const canvas = document.createElement('canvas');
    canvas.width = img.width;
    canvas.height = img.height;
    const g = canvas.getContext('2d');
    g.drawImage(img, 0, 0);
    const px = new Uint32Array(g.getImageData(0, 0, img.width, img.height).data.buffer);
    const seen = new Set();
    for (let i = 0; i < px.length && seen.size < 64; i += 7) seen.add(px[i]);
    return seen.size;
  }, png.toString('base64'));
}

test('kiln report page in headless Chromium', { timeout: 240000, skip: !jsonPath && 'KILN_REPORT_JSON is not set' }, async () => {
  const data = JSON.parse(fs.readFileSync(jsonPath, 'utf8'));
  let htmlPath = process.env.KILN_REPORT_HTML;
  if (!htmlPath) {
    htmlPath = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-report-')), 'report.html');
    execFileSync(process.execPath, [path.join(root, 'native/cli/report/assemble.js'), jsonPath, htmlPath]);
  }
  const url = pathToFileURL(path.resolve(htmlPath)).href;
  fs.mkdirSync(artifacts, { recursive: true });
  const compiles = data.compiles;

  const browser = await chromium();
  try {
    const context = await browser.newContext({ viewport: { width: 1600, height: 1000 } });
    const page = await context.newPage();
    const problems = [];
    context.on('request', (r) => { if (!/^(file|data|about):/.test(r.url())) problems.push(`request ${r.url()}`); });
    page.on('console', (m) => { if (m.type() === 'error') problems.push(`console error: ${m.text()}`); });
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));

    const state = () => page.evaluate(() => ({ title: document.title, hash: location.hash,
      tab: (document.querySelector('#main [role=tab][aria-selected=true]') || {}).dataset?.tab }));
    // Shows a place by its URL hash and waits until the page has (a hashchange is handled later).
    async function place(hash) {
      await page.evaluate((h) => { location.hash = h; }, hash);
      const q = new URLSearchParams(hash.slice(1));
      await page.waitForFunction(([id, tab]) => document.title.startsWith(`[${id}]`) &&
        document.querySelector('#main [role=tab][aria-selected=true]').dataset.tab === tab, [q.get('c'), q.get('tab') || 'overview']);
    }
    const panel = (tab) => `#main .panel.${tab}:not([hidden])`;
    const ids = (selector) => page.$$eval(selector, (es) => es.map((e) => Number(e.dataset.n ?? e.dataset.k)).sort((a, b) => a - b));
    const sorted = (it) => [...new Set(it)].sort((a, b) => a - b);

    await page.goto(url);
    await page.waitForFunction(() => window.kilnReport && window.kilnReport.firstRenderMs !== undefined);
    const perf = await page.evaluate(() => window.kilnReport);
    assert.strictEqual(await page.evaluate(() => JSON.parse(document.getElementById('kiln-report-data').textContent).compiles.length),
      compiles.length, 'the page holds the data of KILN_REPORT_JSON');
    const withReport = compiles.filter((c) => c.report);
    const largest = withReport.reduce((a, c) => (!a || c.report.input.nodes.length > a.report.input.nodes.length ? c : a), null);
    console.log(`# first render ${perf.firstRenderMs.toFixed(0)} ms (JSON.parse ${perf.parseMs.toFixed(0)} ms, ${perf.sinceNavigationMs.toFixed(0)} ms ` +
      `after navigation) for a ${(fs.statSync(htmlPath).size / 1e6).toFixed(1)} MB page, compiles: ${compiles.length}`);

    // The summary: every compile listed; or, without any, why.
    await page.click('#index a.summary-link');
    await page.waitForSelector('#main .summary');
    if (!compiles.length) {
      assert.match(await page.textContent('#main'), /No compiles were recorded/);
    } else {
      assert.deepStrictEqual(await page.$$eval('table.compiles tbody td:first-child', (tds) => tds.map((t) => t.textContent)), compiles.map((c) => c.id));
      for (const c of compiles.filter((x) => x.reason)) assert.ok((await page.textContent('table.compiles')).includes(c.reason), c.id);
    }
    await page.screenshot({ path: path.join(artifacts, 'report-summary.png') });

    // Each compile: its reason, graph breaks or error, guard lines, kernels.
    for (const c of compiles) {
      await place(`#c=${c.id}`);
      const head = await page.textContent('#main .chead');
      if (c.reason) assert.ok(head.includes(c.reason), `${c.id}: the reason`);
      if (!c.report) assert.ok(head.includes(c.error), `${c.id}: the error`);
      const overview = await page.textContent(panel('overview'));
      for (const b of c.graph_breaks || []) assert.ok(overview.includes(b), `${c.id}: graph break ${b}`);
      // Source lines: listed on the overview, beside each captured node, and on a selection.
      const sources = c.sources || [];
      const short = (x) => (x.file ? `${path.basename(x.file)}${x.line ? `:${x.line}` : ''}` : x.function);
      for (const x of sources) assert.ok(overview.includes(short(x)), `${c.id}: source line ${short(x)} on the overview`);
      if (sources.length && c.report) {
        await place(`#c=${c.id}&tab=graphs`);
        const x = sources[sources.length - 1];
        const row = `${panel('graphs')} .gcol[data-view="input"] .ln[data-n="${x.node}"]`;
        assert.ok((await page.textContent(`${row} .src`)).includes(short(x)), `${c.id}: %${x.node}'s source beside it`);
        await page.click(`${row} .nid`);
        await page.waitForFunction((t) => document.querySelector('#main .selbar:not([hidden])')?.textContent.includes(t), `traced at ${short(x)}`);
      }
      await place(`#c=${c.id}&tab=guards`);
      assert.deepStrictEqual(await page.$$eval(`${panel('guards')} .guards-fn li`, (li) => li.map((l) => l.textContent)), c.guards || [], `${c.id}: guards`);
      await place(`#c=${c.id}&tab=kernels`);
      if (!c.report) {
        assert.match(await page.textContent(panel('kernels')), /no report/);
        continue;
      }
      const ks = c.report.kernels;
      assert.strictEqual(await page.locator(`${panel('kernels')} .kernel`).count(), ks.length, `${c.id}: kernels`);
      const sourceless = ks.map((k, i) => (k.source ? -1 : i)).filter((i) => i >= 0);
      assert.deepStrictEqual(await page.$$eval(`${panel('kernels')} .kernel:has(.nosrc)`, (es) => es.map((e) => Number(e.dataset.k))), sourceless, `${c.id}: kernels without source`);
      if (ks.length && ks[0].source) assert.strictEqual(await page.textContent(`${panel('kernels')} .kernel[data-k="0"] pre`), ks[0].source);
    }

    if (largest) {
      const c = largest;
      const r = c.report;
      const kernelsOf = (view, k) => r.node_kernels[view].flatMap((list, id) => (list.includes(k) ? [id] : []));
      // A captured node in a kernel: its kernels lit in the kernel list, their nodes in every view.
      const node = r.node_kernels.input.findIndex((list) => list.length > 0);
      assert.ok(node >= 0, 'a captured node in a kernel');
      const ks = r.node_kernels.input[node];
      await place(`#c=${c.id}&tab=graphs`);
      await page.click(`.gcol[data-view="input"] .ln[data-n="${node}"] .nid`);
      assert.ok((await state()).hash.includes(`n=input:${node}`), 'the selection is in the URL');
      const times = await page.evaluate((key) => [window.kilnReport.tabMs[key], window.kilnReport.showMs], `${c.id} graphs`);
      console.log(`# [${c.id}]: ${r.input.nodes.length}, ${r.optimized.nodes.length} and ${r.scheduled.nodes.length} nodes, ${r.kernels.length} kernels, ` +
        `${r.passes.length} passes: graphs tab built in ${times[0].toFixed(0)} ms, a node selected (and lit everywhere) in ${times[1].toFixed(1)} ms`);
      assert.deepStrictEqual(await ids('.gcol[data-view="input"] .ln.sel'), [node]);
      // The scheduled view: the kernels' provenance, and the nodes node_kernels puts in them (a node recomputed inline).
      const scheduledOf = (k) => [...r.kernels[k].provenance, ...kernelsOf('scheduled', k)];
      assert.deepStrictEqual(await ids('.gcol[data-view="scheduled"] .ln.hl'), sorted(ks.flatMap(scheduledOf)));
      assert.deepStrictEqual(await ids('.gcol[data-view="optimized"] .ln.hl'), sorted(ks.flatMap((k) => kernelsOf('optimized', k))));
      await page.click('#main [role=tab][data-tab="kernels"]');
      await page.waitForSelector(panel('kernels'));
      assert.deepStrictEqual(await ids(`${panel('kernels')} .kernel.hl`), sorted(ks), 'the node\'s kernels, across a tab switch');
      // Its fusion decisions: those naming one of the lit scheduled nodes.
      const litScheduled = new Set(ks.flatMap(scheduledOf));
      const about = (r.decisions || []).flatMap((d, i) => ((d.match(/%\d+/g) || []).some((m) => litScheduled.has(Number(m.slice(1)))) ? [i] : []));
      assert.ok(about.length > 0, 'the node has fusion decisions');
      await page.click('#main [role=tab][data-tab="fusion"]');
      await page.waitForSelector(panel('fusion'));
      assert.deepStrictEqual(await page.$$eval(`${panel('fusion')} ol.decisions > li`, (lis) => lis.flatMap((li, i) => (li.classList.contains('hl') ? [i] : []))), about,
        'the fusion decisions about the node\'s scheduled nodes');
      await page.click('#main [role=tab][data-tab="kernels"]');
      await page.waitForSelector(panel('kernels'));
      // A kernel: its nodes lit in each view.
      const k = r.kernels.length - 1;
      await page.click(`${panel('kernels')} .kernel[data-k="${k}"] .kname`);
      assert.deepStrictEqual(await ids(`${panel('kernels')} .kernel.sel`), [k]);
      await page.click(`${panel('kernels')} .kernel[data-k="${k}"] .show`);
      await page.waitForSelector(panel('graphs'));
      assert.deepStrictEqual(await ids('.gcol[data-view="scheduled"] .ln.hl'), sorted(scheduledOf(k)));
      assert.deepStrictEqual(await ids('.gcol[data-view="input"] .ln.hl'), kernelsOf('input', k));
      assert.ok(await shownInViewport(page, '.gcol[data-view="scheduled"] .ln.hl', ''), 'the kernel\'s nodes scrolled into view');
      // Back and forward walk the tabs; a reload keeps the place.
      await page.goBack();
      await page.waitForFunction(() => document.querySelector('#main [role=tab][aria-selected=true]').dataset.tab === 'kernels');
      await page.goForward();
      await page.waitForFunction(() => document.querySelector('#main [role=tab][aria-selected=true]').dataset.tab === 'graphs');
      await page.goto(`${url}#c=${c.id}&tab=kernels&k=${k}`);
      await page.reload();
      await page.waitForSelector(`${panel('kernels')} .kernel.sel[data-k="${k}"]`);
      assert.strictEqual((await state()).tab, 'kernels');
      // Filters: a substring, a /regex/, a bad regex said so.
      const filter = `#main .fbox input`;
      await page.fill(filter, 'MATMUL');
      const matmuls = r.kernels.filter((x, i) => [`#${i}`, x.name, x.kind, x.ops.join(' '), x.entry, x.language].join(' ').toLowerCase().includes('matmul')).length;
      await page.waitForFunction((n) => document.querySelectorAll('#main .panel.kernels .kernel:not([hidden])').length === n, matmuls);
      await page.fill(filter, '/[/');
      await page.waitForFunction(() => /bad regular expression/.test(document.querySelector('#main .fmsg').textContent));
      await page.click('#main [role=tab][data-tab="graphs"]');
      await page.fill(filter, '/^%1\\d* = /');
      const lines = r.input_text.split('\n').filter((l) => /^%1\d* = /.test(l)).length;
      await page.waitForFunction((n) => document.querySelectorAll('.gcol[data-view="input"] .ln:not([hidden])').length === n, lines);
      console.log(`# the captured, optimised and scheduled graphs filtered in ${(await page.evaluate(() => window.kilnReport.filterMs)).toFixed(1)} ms`);
      await page.fill(filter, '');
    }

    // Each tab of one compile (a recompile where there is one), as a fresh load shows it.
    const shot = compiles.find((c) => c.report && c.kind === 'recompile') || compiles.find((c) => c.report) || compiles[0];
    if (shot) {
      const r = shot.report || {};
      const firstLine = (text) => (text || '').split('\n')[0];
      const expect = {
        overview: [['.chead .badge', shot.kind], [`${panel('overview')} h3`, 'Timing'],
          ...(shot.reason || shot.error ? [['.chead .reason', shot.reason || shot.error]] : [])],
        guards: [[`${panel('guards')} h3`, 'Guards of the compiled function'], [`${panel('guards')} .guards-fn li`, (shot.guards || [])[0] || '']],
        graphs: r.input_text ? [['.ghead', 'Scheduled'], ['.gcol[data-view="input"] .ln', firstLine(r.input_text)]] : [],
        passes: r.passes && r.passes.length ? [['.pname', r.passes[0].name]] : [],
        fusion: r.decisions ? [[`${panel('fusion')} h3`, 'Fusion decisions'], [`${panel('fusion')} li`, r.decisions[0] || '']] : [],
        kernels: r.kernels && r.kernels.length ? [['.kernel .kname', r.kernels[0].name]] : [],
        plan: r.plan_text ? [[`${panel('plan')} pre`, firstLine(r.plan_text)]] : [],
      };
      await page.goto(`${url}#c=${shot.id}`);
      await page.reload();
      for (const [tab, labels] of Object.entries(expect)) {
        await place(`#c=${shot.id}&tab=${tab}`);
        const png = await page.screenshot({ path: path.join(artifacts, `report-${tab}.png`) });
        const colours = await distinctColours(page, png);
        assert.ok(colours >= 8, `report-${tab}.png: ${colours} colours (blank?)`);
        for (const [selector, text] of labels) assert.ok(await shownInViewport(page, selector, text), `${tab}: "${text}" in view (${selector})`);
      }
    }
    if (shot && shot.report) {
      const tabMs = await page.evaluate(() => window.kilnReport.tabMs);
      console.log(`# [${shot.id}]'s tabs built on first showing (ms): ${Object.entries(tabMs).map(([k, v]) => `${k.split(' ')[1]} ${v.toFixed(0)}`).join(', ')}`);
    }
    assert.deepStrictEqual(problems, []);
  } finally {
    await browser.close();
  }
});
