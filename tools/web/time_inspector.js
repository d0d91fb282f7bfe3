// Times the inspector page on a model in headless Chromium (as tests/web/browser.test.js drives
// it): import and compile, the diagram drawn grouped by module scope, a scope expanded, and the
// graph drawn with every scope expanded. For models too big for the repository, e.g. the
// BERT-base-structured model of tools/models/make_bert_onnx.py:
//   NODE_PATH=/usr/share/nodejs node tools/web/time_inspector.js /tmp/bert-base/model.onnx [cuda|cpu]
// (after the release build, which puts the module where web/app/serve.js serves it from).
'use strict';
const path = require('path');
const fs = require('fs');
const root = path.resolve(__dirname, '../..');
const { chromium } = require(path.join(root, 'web/node_modules/playwright-core'));
const { serve } = require(path.join(root, 'web/app/serve.js'));

async function main() {
  const model = process.argv[2];
  const target = process.argv[3] || 'cuda';
  if (!model) throw new Error('usage: time_inspector.js MODEL.onnx [cuda|cpu]');
  const files = [model, ...fs.readdirSync(path.dirname(model)).filter((f) => f.startsWith(path.basename(model) + '.')).map((f) => path.join(path.dirname(model), f))];
  const server = await serve(0);
  const url = `http://127.0.0.1:${server.address().port}/`;
  const browser = await chromium.launch({ executablePath: process.env.KILN_CHROMIUM || '/usr/bin/chromium', headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'] });
  try {
    const page = await (await browser.newContext({ viewport: { width: 1600, height: 1000 } })).newPage();
    await page.goto(url);
    await page.waitForSelector('body[data-ready="1"]', { timeout: 60000 });
    await page.selectOption('#target', target);
    await page.waitForFunction((t) => window.kilnInspector.last && window.kilnInspector.last.target === t, target);
    const t0 = Date.now();
    await page.setInputFiles('#file', files);
    await page.waitForFunction((name) => window.kilnInspector.last.graph === name && (window.kilnInspector.last.kernels || window.kilnInspector.last.error),
      path.basename(model), { timeout: 600000 });
    const wall = Date.now() - t0;
    const r = await page.evaluate(() => ({ last: window.kilnInspector.last, draw: window.kilnInspector.drawMs }));
    if (r.last.error) throw new Error(await page.textContent('#error'));
    console.log(`${path.basename(path.dirname(model))} for ${target}: picked to drawn ${wall} ms; imported ${r.last.importMs.toFixed(0)} ms, ` +
      `compiled ${r.last.ms.toFixed(0)} ms, ${r.last.kernels} kernels; drawn (${r.draw.nodes} nodes as ${r.draw.items} items) ` +
      `${r.draw.total.toFixed(0)} ms (layout ${r.draw.layout.toFixed(0)} ms)`);
    // Expand scopes one after another, widest first, to a layer's depth.
    for (let k = 0; k < 3; ++k) {
      const scope = await page.$$eval('#diagram g.scope', (gs) => gs.map((g) => [g.dataset.scope, g.dataset.nodes.split(' ').length])
        .sort((a, b) => b[1] - a[1])[0]);
      if (!scope) break;
      const ms = await page.evaluate(async (s) => { const t = performance.now(); await expandScope(s); return performance.now() - t; }, scope[0]);
      const items = await page.evaluate(() => window.kilnInspector.drawn.items);
      console.log(`  expanded ${scope[0]} (${scope[1]} nodes): ${ms.toFixed(0)} ms, ${items} items drawn`);
    }
    for (const view of ['optimized', 'scheduled']) {
      const v = await page.evaluate(async (name) => {
        const t = performance.now();
        document.getElementById('view').value = name;
        await drawView(window.kilnInspector.report);
        return { ms: performance.now() - t, nodes: window.kilnInspector.drawMs.nodes, items: window.kilnInspector.drawn.items };
      }, view);
      console.log(`  ${view} view: ${v.nodes} nodes drawn as ${v.items} items in ${v.ms.toFixed(0)} ms`);
    }
    await page.evaluate(() => { document.getElementById('view').value = 'input'; });
    const all = await page.evaluate(async () => {
      const t = performance.now();
      document.getElementById('group').value = 'off';
      await drawView(window.kilnInspector.report);
      return { ms: performance.now() - t, items: window.kilnInspector.drawn.items };
    });
    console.log(`  every scope expanded: ${all.items} items drawn in ${all.ms.toFixed(0)} ms`);
  } finally {
    await browser.close();
    server.close();
  }
}
main().catch((e) => { console.error(e.message); process.exit(1); });
