// Shared by tests/web/*.test.js: where the module, the native twin and the samples are.
'use strict';
const path = require('path');
const fs = require('fs');
const { execFileSync } = require('child_process');

const root = path.resolve(__dirname, '../..');
const wasmDir = path.resolve(process.env.KILN_WASM_DIR || path.join(root, 'build/wasm/dist'));
const native = process.env.KILN_WEB_NATIVE ? path.resolve(process.env.KILN_WEB_NATIVE) : path.join(root, 'build/web-native/tests/web/kiln_web_native');
const cli = process.env.KILN_CLI ? path.resolve(process.env.KILN_CLI) : '';
const samplesDir = path.join(root, 'samples/graphs');
const samples = fs.readdirSync(samplesDir).filter((f) => f.endsWith('.json')).sort();

let loaded;
function kiln() {
  // The wasm bytes handed over directly: Node 20's fetch cannot load a file path (the loader
  // would try it), so this works with or without --no-experimental-fetch.
  if (!loaded) loaded = require(path.join(wasmDir, 'kiln.js')).load({ wasmBinary: fs.readFileSync(path.join(wasmDir, 'kiln_wasm.wasm')) });
  return loaded;
}

// Runs the native twin; gives {ok, out} (out without the "error: " prefix on failure).
function runNative(cmd, graphText, arg) {
  const args = [cmd, '-'];
  if (arg !== undefined) args.push(arg);
  try {
    return { ok: true, out: execFileSync(native, args, { input: graphText, maxBuffer: 1 << 28 }).toString() };
  } catch (e) {
    if (e.status !== 1) throw e;
    const out = e.stdout.toString();
    if (!out.startsWith('error: ')) throw new Error(`native twin failed: ${out}${e.stderr}`);
    return { ok: false, out: out.slice('error: '.length) };
  }
}

function readSample(name) { return fs.readFileSync(path.join(samplesDir, name), 'utf8'); }

// The ONNX decoder beside the module (protobufjs from web/node_modules: CTest sets NODE_PATH).
function onnx() { return require(path.join(wasmDir, 'onnx.js')); }
// tests/onnx/real_models: small exports of six architectures, each a folder of model.onnx, its
// external data file and inputs; the files of each as {name: Uint8Array}.
const realModelsDir = path.join(root, 'tests/onnx/real_models');
const realModels = fs.readdirSync(realModelsDir).filter((d) => fs.existsSync(path.join(realModelsDir, d, 'model.onnx'))).sort();
function modelFiles(name) {
  const dir = path.join(realModelsDir, name);
  return Object.fromEntries(fs.readdirSync(dir).map((f) => [f, new Uint8Array(fs.readFileSync(path.join(dir, f)))]));
}

// Headless Debian Chromium through playwright-core (web/node_modules) on the inspector, served
// on a free port: {browser, server, page, url, errors (the page's uncaught errors)}.
async function launchInspector(contextOptions = {}) {
  const chromiumPath = process.env.KILN_CHROMIUM || '/usr/bin/chromium';
  let chromium;
  try {
    ({ chromium } = require(path.join(root, 'web/node_modules/playwright-core')));
  } catch (e) {
    throw new Error(`cannot load playwright-core from web/node_modules (npm ci in web/): ${e}`);
  }
  if (!fs.existsSync(chromiumPath)) throw new Error(`no Chromium at ${chromiumPath} (Debian: chromium)`);
  const { serve } = require(path.join(root, 'web/app/serve.js'));
  const server = await serve(0);
  const url = `http://127.0.0.1:${server.address().port}/`;
  const browser = await chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update'],
  });
  const context = await browser.newContext({ viewport: { width: 1600, height: 1000 }, ...contextOptions });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  return { browser, server, page, url, errors };
}

// The least number of distinct colours a view's part of a screenshot must have: a blank page has
// 1, the diagram and the kernel list cleared by an error 2 (background and border); one line of
// antialiased text already has dozens (the Run tab with only its button: over 200).
const MIN_COLOURS = 16;

// Distinct colours (RGB) of a PNG's pixels (a Buffer, or its base64) inside each of `rects` (CSS
// pixels; null: the whole image), decoded in the page: createImageBitmap of the bytes, each
// rectangle drawn on an OffscreenCanvas of its size and read back.
function distinctColours(page, png, rects = [null]) {
  return page.evaluate(async ([b64, rs]) => {
    const bitmap = await createImageBitmap(await (await fetch(`data:image/png;base64,${b64}`)).blob());
    const k = devicePixelRatio || 1;
    return rs.map((r) => {
      const x0 = r ? Math.max(0, Math.floor(r.left * k)) : 0, y0 = r ? Math.max(0, Math.floor(r.top * k)) : 0;
      const x1 = r ? Math.min(bitmap.width, Math.ceil(r.right * k)) : bitmap.width, y1 = r ? Math.min(bitmap.height, Math.ceil(r.bottom * k)) : bitmap.height;
      if (x1 <= x0 || y1 <= y0) return 0;
      const g = new OffscreenCanvas(x1 - x0, y1 - y0).getContext('2d', { willReadFrequently: true });
      g.drawImage(bitmap, x0, y0, x1 - x0, y1 - y0, 0, 0, x1 - x0, y1 - y0);
      const px = new Uint32Array(g.getImageData(0, 0, x1 - x0, y1 - y0).data.buffer);
      const seen = new Set();
      for (let i = 0; i < px.length; ++i) seen.add(px[i] & 0xffffff);
      return seen.size;
    });
  }, [typeof png === 'string' ? png : png.toString('base64'), rects]);
}

// Which of `labels` ([selector, text] pairs) are not shown: for each, some element matching the
// selector whose text holds `text` must be visible (checkVisibility: not display:none, in a
// hidden tab or closed <details>, transparent or visibility:hidden) and the text itself (a Range
// over it; the element's box where the Range has none, as for SVG text) must lie wholly inside
// the viewport and inside every ancestor that clips it (the diagram's box, a tab's scrolled
// panel, the SVG), with nothing else on top of its middle (the minimap). Gives the reasons, [] if
// all are shown.
function hiddenLabels(page, labels) {
  return page.evaluate((pairs) => pairs.map(([selector, text]) => {
    const candidates = [...document.querySelectorAll(selector)].filter((e) => e.textContent.includes(text));
    if (!candidates.length) return `"${text}": no ${selector} holds it`;
    let why = '';
    for (const e of candidates) {
      if (!e.checkVisibility({ checkOpacity: true, checkVisibilityCSS: true })) {
        why = why || `"${text}": its ${selector} is hidden`;
        continue;
      }
      // The text's own box: a Range from its first character to its last, across text nodes.
      let r = null;
      const at = e.textContent.indexOf(text), walk = document.createTreeWalker(e, NodeFilter.SHOW_TEXT);
      const range = document.createRange();
      let seen = 0, started = false;
      for (let t = walk.nextNode(); t; t = walk.nextNode()) {
        const len = t.nodeValue.length;
        if (!started && at < seen + len) { range.setStart(t, at - seen); started = true; }
        if (started && at + text.length <= seen + len) { range.setEnd(t, at + text.length - seen); r = range.getBoundingClientRect(); break; }
        seen += len;
      }
      if (!r || r.width <= 0 || r.height <= 0) r = e.getBoundingClientRect();
      if (r.width <= 0 || r.height <= 0) {
        why = `"${text}": its ${selector} has no size`;
        continue;
      }
      const clip = { left: 0, top: 0, right: innerWidth, bottom: innerHeight, by: 'the viewport' };
      for (let a = e.parentElement; a; a = a.parentElement) {
        const cs = getComputedStyle(a);
        if (cs.overflowX === 'visible' && cs.overflowY === 'visible') continue;
        const b = a.getBoundingClientRect();
        const cut = { left: b.left + a.clientLeft, top: b.top + a.clientTop };
        Object.assign(cut, { right: cut.left + (a.clientWidth || b.width), bottom: cut.top + (a.clientHeight || b.height) });
        for (const side of ['left', 'top']) if (cut[side] > clip[side]) Object.assign(clip, { [side]: cut[side], by: a.id || a.tagName });
        for (const side of ['right', 'bottom']) if (cut[side] < clip[side]) Object.assign(clip, { [side]: cut[side], by: a.id || a.tagName });
      }
      const f = (v) => v.toFixed(0);
      if (r.left < clip.left - 1 || r.top < clip.top - 1 || r.right > clip.right + 1 || r.bottom > clip.bottom + 1) {
        why = `"${text}": at (${f(r.left)}, ${f(r.top)})-(${f(r.right)}, ${f(r.bottom)}), out of ${clip.by} ` +
          `(${f(clip.left)}, ${f(clip.top)})-(${f(clip.right)}, ${f(clip.bottom)})`;
        continue;
      }
      const top = document.elementFromPoint((r.left + r.right) / 2, (r.top + r.bottom) / 2);
      if (top && !top.contains(e) && !e.parentNode.contains(top)) {
        why = `"${text}": covered by ${top.id || top.tagName}`;
        continue;
      }
      return '';
    }
    return why;
  }).filter(Boolean), labels);
}

// A screenshot of the viewport saved as `file` and checked: not blank (at least MIN_COLOURS
// distinct colours inside the box of `region`, the view's own part of the page, else the whole
// shot; not the whole page, as its header and toolbar alone have hundreds: 826 beside a cleared
// diagram) and showing `labels` ([selector, text] pairs, texts the test expects from the data)
// in the viewport, as hiddenLabels checks them. `blank`: the region must be blank instead (fewer
// colours), the check's own control. Gives the region's number of colours.
const cdpSessions = new WeakMap();
async function checkScreenshot(page, file, labels, { region = null, blank = false } = {}) {
  const name = path.basename(file);
  const problems = await hiddenLabels(page, labels);
  const rect = region && await page.$eval(region, (e) => {
    const r = e.getBoundingClientRect();
    return { left: r.left, top: r.top, right: r.right, bottom: r.bottom };
  });
  // Chromium's own capture, encoded for speed (a bigger file, in 60% of the time page.screenshot
  // takes), its base64 handed back to the page as it came.
  if (!cdpSessions.has(page)) cdpSessions.set(page, await page.context().newCDPSession(page));
  const { data } = await cdpSessions.get(page).send('Page.captureScreenshot', { format: 'png', optimizeForSpeed: true });
  fs.writeFileSync(file, Buffer.from(data, 'base64'));
  const [colours] = await distinctColours(page, data, [rect]);
  if (!blank && colours < MIN_COLOURS) problems.unshift(`${colours} distinct colours in ${region || 'the shot'} (blank? at least ${MIN_COLOURS} wanted)`);
  if (blank && colours >= MIN_COLOURS) problems.unshift(`${colours} distinct colours in ${region || 'the shot'}, which should be blank (under ${MIN_COLOURS})`);
  if (problems.length) throw new Error(`${name}: ${problems.join('; ')}`);
  return colours;
}

module.exports = { checkScreenshot, distinctColours, hiddenLabels, MIN_COLOURS, launchInspector, root, wasmDir, native, cli, samplesDir, samples, kiln, runNative, readSample, onnx, realModelsDir, realModels, modelFiles };
