// A graph of about 10,000 nodes in the inspector, in headless Chromium: the 12-block
// transformer of programs.js stacked 220 blocks deep, each block in a module scope of its own,
// traced in the page, compiled, laid out scope by scope in the worker and drawn fully expanded
// on the canvas. Checks what is drawn (every node an item, a frame per scope, pixels in the
// canvas), clicks (a node selected by where it is drawn, a frame's header collapsing its scope,
// the collapsed box expanding it), search (Enter reveals the match), and prints how long each
// part took and the longest frame while the view is panned and zoomed (the goal: none
// over 100 ms; speed is reported here, not asserted). Screenshots: large-*.png, each checked by
// checkScreenshot (common.js).
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const path = require('path');
const { launchInspector, checkScreenshot, root } = require('./common.js');

const artifacts = process.env.KILN_WEB_ARTIFACTS || path.join(root, 'build/web-artifacts');
const BLOCKS = 220;

test('a 10,000-node graph expanded on the canvas', { timeout: 280000 }, async () => {
  fs.mkdirSync(artifacts, { recursive: true });
  const { browser, server, page, url, errors } = await launchInspector();
  try {
    await page.goto(url);
    await page.waitForSelector('body[data-ready="1"]', { timeout: 60000 });
    await page.selectOption('#group', 'off');  // every scope expanded, each a frame
    const made = await page.evaluate(async (blocks) => {
      const t0 = performance.now();
      const g = KilnPrograms.transformerBlock(window.kilnInspector.kiln, { layers: blocks, scoped: true });
      const traced = performance.now() - t0;
      await openText(`transformer, ${blocks} blocks, scoped`, g.json);
      const s = window.kilnInspector, d = s.drawn;
      return { traced, compile: s.last.ms, kernels: s.last.kernels, error: s.last.error, draw: s.drawMs, groups: s.layoutGroups,
        renderer: d && d.renderer, nodes: d && d.g.nodes.length, items: d && d.items, frames: d && d.frames.length };
    }, BLOCKS);
    assert.ok(!made.error, made.error);
    assert.ok(made.nodes >= 9000, JSON.stringify(made));
    assert.strictEqual(made.renderer, 'canvas');
    assert.strictEqual(made.items, made.nodes, 'fully expanded: every node is drawn');
    assert.strictEqual(made.frames, BLOCKS, 'a frame per scope');
    assert.strictEqual(await page.locator('#diagram g.node').count(), 0, 'no SVG elements per node');
    const painted = () => page.$eval('#diagram-canvas', (c) => {
      const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 3; i < px.length; i += 4) if (px[i]) ++n;
      return n / (px.length / 4);
    });
    await page.waitForFunction(() => window.kilnInspector.paint && window.kilnInspector.paint.frames > 0);
    assert.ok(await painted() > 0.05, 'the canvas draws the view');
    // The canvas draws the nodes' labels and the frames' names as pixels, not elements: what
    // checkScreenshot can check is that the canvas's box is not blank and the page's text around it
    // (the scope bar, the kernel count and the status line; the properties once a node is selected).
    const shots = {};
    const around = [['#scopes', `${BLOCKS} of ${BLOCKS} scopes expanded`], ['#kernel-count', `(${made.kernels})`],
      ['#status', `compiled for cpu`]];
    shots.top = await checkScreenshot(page, path.join(artifacts, 'large-top.png'), around, { region: '#diagram-canvas' });

    // Panning and zooming, a frame at a time: the longest gap between frames and paint.
    const motion = await page.evaluate(async () => {
      const box = document.getElementById('diagram'), s = window.kilnInspector;
      const frame = () => new Promise((r) => requestAnimationFrame(() => r(performance.now())));
      const gaps = [];
      let last = await frame();
      const step = async (move) => {
        move();
        const now = await frame();
        gaps.push(now - last);
        last = now;
      };
      s.paint.worst = 0;
      for (let i = 0; i < 40; ++i) await step(() => { box.scrollTop += 120; box.scrollLeft += (i % 2 ? 30 : -30); });
      const panned = { worst: Math.max(...gaps), paint: s.paint.worst };
      gaps.length = 0;
      s.paint.worst = 0;
      for (let i = 0; i < 30; ++i) await step(() => zoomTo(s.scale * 0.8));  // out to the whole graph
      await step(() => fit());
      for (let i = 0; i < 20; ++i) await step(() => { box.scrollTop += 40; });
      const zoomed = { worst: Math.max(...gaps), paint: s.paint.worst, scale: s.scale };
      return { panned, zoomed };
    });
    assert.ok(await painted() > 0, 'the whole graph drawn when fitted (a thin column: 220 blocks deep)');
    shots.fit = await checkScreenshot(page, path.join(artifacts, 'large-fit.png'), around, { region: '#diagram-canvas' });

    // Back at full size: a click where a node is drawn selects it (and its kernels).
    const target = await page.evaluate(() => {
      const s = window.kilnInspector, id = s.drawn.g.nodes.find((n) => n.op === 'softmax' && n.name.startsWith('layer.100/')).id;
      zoomTo(1);
      reveal(String(id));
      const it = s.drawn.leaves.get(String(id)), box = document.getElementById('diagram'), r = box.getBoundingClientRect();
      return { id, x: r.left + box.clientLeft + it.x * s.scale - box.scrollLeft, y: r.top + box.clientTop + it.y * s.scale - box.scrollTop };
    });
    await page.mouse.click(target.x, target.y);
    const picked = await page.evaluate(() => ({ sel: window.kilnInspector.selection, marks: [...window.kilnInspector.marks.selected] }));
    assert.strictEqual(picked.sel.node, target.id, JSON.stringify(picked));
    assert.deepStrictEqual(picked.marks, [String(target.id)]);
    assert.ok(picked.sel.kernels.length > 0);
    assert.match(await page.textContent('#props'), /scope: layer\.100/);
    shots.selected = await checkScreenshot(page, path.join(artifacts, 'large-selected.png'),
      [...around, ['#props', `%${target.id} = softmax "layer.100/`], ['#props', 'scope: layer.100']], { region: '#diagram-canvas' });

    // A frame's header collapses its scope into one box; a click on the box expands it again.
    const head = await page.evaluate(() => {
      const s = window.kilnInspector, f = s.drawn.frames.find((x) => x.scope === 'layer.100'), box = document.getElementById('diagram');
      box.scrollTop = (f.y - f.height / 2) * s.scale - 100;
      const r = box.getBoundingClientRect();
      return { x: r.left + box.clientLeft + (f.x - f.width / 2 + 30) * s.scale - box.scrollLeft,
        y: r.top + box.clientTop + (f.y - f.height / 2 + 8) * s.scale - box.scrollTop, items: s.drawn.items };
    });
    const collapseStart = Date.now();
    await page.mouse.click(head.x, head.y);
    await page.waitForFunction((n) => window.kilnInspector.drawn.items < n, head.items);
    const collapseMs = Date.now() - collapseStart;
    const box = await page.evaluate(() => {
      const s = window.kilnInspector, it = s.drawn.leaves.get('scope:layer.100'), b = document.getElementById('diagram');
      reveal('scope:layer.100');
      const r = b.getBoundingClientRect();
      return { items: s.drawn.items, frames: s.drawn.frames.length, groups: s.layoutGroups, members: it.members.length,
        x: r.left + b.clientLeft + it.x * s.scale - b.scrollLeft, y: r.top + b.clientTop + it.y * s.scale - b.scrollTop };
    });
    assert.strictEqual(box.frames, BLOCKS - 1);
    assert.strictEqual(box.items, made.items - box.members + 1);
    assert.ok(box.groups <= 2, `collapsing one scope lays out ${box.groups} groups again`);
    const expandStart = Date.now();
    await page.mouse.click(box.x, box.y);
    await page.waitForFunction((n) => window.kilnInspector.drawn.items === n, made.items);
    const expandMs = Date.now() - expandStart;

    // Search: a regular expression over every node; Enter selects the match and brings it into view.
    await page.fill('#search', '/^%\\d+ softmax layer\\.7\\//');
    assert.strictEqual(await page.textContent('#search-count'), '1 match');
    await page.press('#search', 'Enter');
    const found = await page.evaluate(() => {
      const s = window.kilnInspector, it = s.drawn.leaves.get(String(s.selection.node)), box = document.getElementById('diagram');
      const x = it.x * s.scale - box.scrollLeft, y = it.y * s.scale - box.scrollTop;
      return { name: it.node.name, inView: x > 0 && y > 0 && x < box.clientWidth && y < box.clientHeight };
    });
    assert.match(found.name, /^layer\.7\/softmax/);
    assert.ok(found.inView, 'the match is in view');
    assert.deepStrictEqual(errors, []);
    console.log(`# ${made.nodes} nodes (${BLOCKS} scoped blocks) in Chromium: traced in ${made.traced.toFixed(0)} ms, compiled in ` +
      `${made.compile.toFixed(0)} ms (${made.kernels} kernels), drawn expanded in ${made.draw.total.toFixed(0)} ms ` +
      `(layout in the worker ${made.draw.layout.toFixed(0)} ms, ${made.groups} groups), ${made.items} items and ${made.frames} frames on the canvas`);
    console.log(`# panned 40 frames: longest frame ${motion.panned.worst.toFixed(0)} ms (paint ${motion.panned.paint.toFixed(1)} ms); ` +
      `zoomed out to the whole graph: longest frame ${motion.zoomed.worst.toFixed(0)} ms (paint ${motion.zoomed.paint.toFixed(1)} ms, scale ${motion.zoomed.scale.toFixed(4)})`);
    console.log(`# a scope collapsed from its frame's header in ${collapseMs} ms (${box.groups} groups laid out again), expanded again in ${expandMs} ms`);
    console.log(`# screenshots, distinct colours in the canvas's box: ` +
      Object.entries(shots).map(([k, v]) => `large-${k} ${v}`).join(', '));
  } finally {
    await browser.close();
    server.close();
  }
});
