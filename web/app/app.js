// The inspector page: loads the module (window.Kiln from /wasm/kiln.js), compiles the chosen
// graph for the chosen target, mode and options, and shows what the compiler did. Plans are
// kept in IndexedDB under the module's cache key (sdk/cache's make_key, as native), so compiling
// the same thing again is a "cache hit" that runs no optimiser. Files open from a picker, by drag
// and drop or from ?url=: a graph JSON compiles as a sample does; a kernel plan JSON compiles its
// origin (the graph and codegen options that made it) and says whether this module makes the
// same plan from it, as the native runtime checks a plan file (docs/plan-trust.md).
'use strict';

const $ = (id) => document.getElementById(id);
const PALETTE = ['#8dd3c7', '#ffffb3', '#bebada', '#fb8072', '#80b1d3', '#fdb462', '#b3de69', '#fccde5',
  '#bc80bd', '#ccebc5', '#ffed6f', '#a6cee3', '#b2df8a', '#fb9a99', '#fdbf6f', '#cab2d6'];
// Kernel i's colour: the 16 of PALETTE, then pastel hues a golden angle apart (a real model has
// hundreds of kernels), as #rrggbb.
function colour(i) {
  if (i < PALETTE.length) return PALETTE[i];
  const h = ((i - PALETTE.length) * 137.508) % 360, s = 0.55 + 0.2 * ((i >> 4) % 2), l = 0.72 + 0.08 * ((i >> 5) % 2);
  const f = (n) => {
    const k = (n + h / 30) % 12;
    const v = l - s * Math.min(l, 1 - l) * Math.max(-1, Math.min(k - 3, 9 - k, 1));
    return Math.round(v * 255).toString(16).padStart(2, '0');
  };
  return '#' + f(0) + f(8) + f(4);
}

const state = { kiln: null, graphText: null, graphName: null, report: null, last: null, hljs: null, scale: 1, plan: null,
  traceMs: null, imported: null, onnx: null, marks: { selected: new Set(), inKernel: new Set(), match: new Set() } };
window.kilnInspector = state;  // what the browser test reads
state.colour = colour;

// ---- IndexedDB plan cache -------------------------------------------------------------------
const DB = 'kiln-plans', STORE = 'plans';
function openDb() {
  return new Promise((ok, bad) => {
    const r = indexedDB.open(DB, 1);
    r.onupgradeneeded = () => r.result.createObjectStore(STORE);
    r.onsuccess = () => ok(r.result);
    r.onerror = () => bad(r.error);
  });
}
async function cacheGet(key) {
  const db = await openDb();
  return new Promise((ok, bad) => {
    const r = db.transaction(STORE).objectStore(STORE).get(key);
    r.onsuccess = () => ok(r.result);
    r.onerror = () => bad(r.error);
  });
}
async function cachePut(key, value) {
  const db = await openDb();
  return new Promise((ok, bad) => {
    const tx = db.transaction(STORE, 'readwrite');
    tx.objectStore(STORE).put(value, key);
    tx.oncomplete = () => ok();
    tx.onerror = () => bad(tx.error);
  });
}

// ---- compile ----------------------------------------------------------------------------------
function request() {
  let options = {};
  const text = $('options').value.trim();
  if (text) options = JSON.parse(text);
  return { target: $('target').value, mode: $('mode').value, options };
}

async function compile() {
  $('error').hidden = true;
  if (!state.plan) $('notice').hidden = true;
  try {
    const req = request();
    if (state.onnx) importOnnx(req.target);
    const t0 = performance.now();
    const graph = state.kiln.loadGraph(state.graphText);  // parse + check: the capture step here
    const key = state.kiln.cacheKey(graph, req);
    const cached = await cacheGet(key);
    // The stored canonical graph must match too (as the native cache compares graphs).
    let report, hit = false;
    if (cached && cached.graph === graph.json) {
      report = cached.report;
      hit = true;
    } else {
      report = state.kiln.compile(graph, req);
    }
    const ms = performance.now() - t0;
    if (!hit) await cachePut(key, { graph: graph.json, report, saved: Date.now() });
    state.report = report;
    const drawn = await show(report);
    if (!drawn) return;  // a newer compile or view replaced this one while its layout ran
    // Set once the page shows this report (the browser test waits for it).
    state.last = { key, hit, ms, graph: state.graphName, kernels: report.kernels.length, target: report.target, compileMs: hit ? 0 : ms,
      stages: report.timing_ms, importMs: state.imported ? state.imported.ms : null };
    const st = $('status');
    st.className = 'status' + (hit ? ' hit' : '');
    st.textContent = hit
      ? `cache hit (key ${key}): ${report.kernels.length} kernels in ${ms.toFixed(1)} ms, no optimiser run`
      : (state.traceMs != null ? `traced in ${state.traceMs.toFixed(1)} ms; ` : '') +
        (state.imported ? `ONNX model (${state.imported.tensors} tensors, ${(state.imported.bytes / 1e6).toFixed(1)} MB) ` +
          `imported for ${state.imported.device} in ${state.imported.ms.toFixed(1)} ms; ` : '') +
        `compiled for ${report.target} in ${ms.toFixed(1)} ms (passes ${report.timing_ms.passes.toFixed(1)}, schedule ` +
        `${report.timing_ms.schedule.toFixed(1)}, codegen ${report.timing_ms.codegen.toFixed(1)} ms): ${report.kernels.length} kernels`;
    $('download').disabled = false;
    checkPlan(report);
  } catch (e) {
    showError(e.message);
  }
}

// An error leaves nothing of the previous graph on screen: its diagram, kernels and plan would
// read as this input's.
function showError(message) {
  $('error').textContent = (state.graphName ? state.graphName + ': ' : '') + message;
  $('error').hidden = false;
  $('notice').hidden = true;
  $('status').textContent = 'error';
  $('status').className = 'status';
  state.report = null;
  state.plan = null;
  ++layoutSeq;  // a layout still running for an earlier graph draws nothing
  state.last = { error: message, graph: state.graphName };
  $('download').disabled = true;
  for (const id of ['diagram', 'kernels', 'guards', 'passes', 'decisions']) $(id).replaceChildren();
  state.minimap = null;
  state.drawn = null;
  $('minimap').hidden = true;
  $('diagram-canvas').hidden = true;
  for (const id of ['plan-text', 'kernel-count', 'run-out', 'loops', 'search-count']) $(id).textContent = '';
  $('props').hidden = true;
}

function notice(text, warn = false) {
  $('notice').textContent = text;
  $('notice').className = 'notice' + (warn ? ' warn' : '');
  $('notice').hidden = false;
}

// A plan file opened: the plan this module makes from its origin, compared with the file's.
function checkPlan(report) {
  if (!state.plan) return;
  const { name, text } = state.plan;
  state.plan = null;
  if (report.plan === text) {
    notice(`${name}: a ${report.target} plan of ${report.kernels.length} kernels; this module makes the same plan from its origin (the graph and codegen options recorded in it), shown below.`);
    state.last.planCheck = 'same';
    return;
  }
  const a = text.split('\n'), b = report.plan.split('\n');
  const i = a.findIndex((line, j) => line !== b[j]);
  // The lines around their first differing character (a kernel's source is one long JSON line).
  const la = a[i] ?? '(end)', lb = b[i] ?? '(end)';
  let c = 0;
  while (c < la.length && la[c] === lb[c]) ++c;
  const around = (line) => (c > 60 ? '…' : '') + line.slice(Math.max(0, c - 60), c + 60) + (line.length > c + 60 ? '…' : '');
  notice(`${name}: this module makes a different plan from the file's origin (the file was edited, or made by another Kiln version): ` +
    `first difference at line ${i + 1}, column ${c + 1}:\n  file:   ${around(la)}\n  module: ${around(lb)}\nBelow: the module's plan.`, true);
  state.last.planCheck = 'different';
}

// ---- views ------------------------------------------------------------------------------------
function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  for (const c of children) e.append(c);
  return e;
}

function shapeStr(t) { return `${t.dtype}[${t.shape.join(', ')}]`; }

// A report on the page: the tabs at once, the diagram when its layout is back from the worker.
// Resolves to false when a newer report or view took its place meanwhile.
async function show(r) {
  const t0 = performance.now();
  showTabs(r);
  const tabsMs = performance.now() - t0;
  const drawn = await drawView(r);
  if (drawn) state.drawMs.tabs = tabsMs;
  return drawn;
}

// The view's graph. Every view's nodes come with the kernels they end up in (the module matches
// the captured graph and the graph after the passes to the scheduled graph, whose nodes the
// kernels' provenance names).
async function drawView(r) {
  const view = $('view').value;
  const kernelsOf = new Map(r.node_kernels[view].map((ks, id) => [id, ks]));
  const t0 = performance.now();
  if (!(await drawGraph(r[view], kernelsOf, r.kernels, view))) return false;
  $('view-note').textContent = {
    input: '(as traced, before the passes: nodes coloured by the fused kernel they end up in; hover for op, shape, dtype)',
    optimized: '(after the passes: nodes coloured by the fused kernel they end up in; hover for op, shape, dtype)',
    scheduled: '(after the passes and decomposition, as scheduled: nodes coloured by kernel; hover for op, shape, dtype)',
  }[view];
  $('props').hidden = true;
  search();
  // Where showing a view's time goes (the browser test prints it for a 12-block transformer).
  state.drawMs = { view, nodes: r[view].nodes.length, items: state.drawn.items, layout: state.layoutMs, total: performance.now() - t0 };
  return true;
}

// Kernel sources are highlighted when they scroll into view: highlighting the LLVM IR of a real
// model's hundreds of kernels up front took most of the time a report took to show.
// highlight.js loads beside the first compile (main): code to highlight before it is there waits.
const unhighlighted = new Set();
function highlight(code) {
  if (state.hljs) state.hljs.highlightElement(code);
  else unhighlighted.add(code);
}
const highlighter = typeof IntersectionObserver === 'function' ? new IntersectionObserver((entries) => {
  for (const e of entries) {
    if (!e.isIntersecting) continue;
    highlighter.unobserve(e.target);
    highlight(e.target);
  }
}) : null;

function showTabs(r) {
  $('kernel-count').textContent = `(${r.kernels.length})`;
  const list = $('kernels');
  list.replaceChildren();
  const lang = { cpu: 'llvm', cuda: 'cpp', vulkan: 'glsl' }[r.target] || 'plaintext';
  r.kernels.forEach((k, i) => {
    // A kernel in a language of its own (CUDA's LLVM IR for NVPTX) says so; the rest are the target's.
    const code = el('code', { class: 'language-' + (k.language || lang) });
    code.textContent = k.source || noSource(k, r.target);
    if (highlighter && k.source) highlighter.observe(code);
    else if (k.source) highlight(code);
    const head = el('div', { class: 'kernel-head', title: 'select its nodes in the diagram' }, el('span', { class: 'swatch', style: `background:${colour(i)}` }),
        `${k.name} · ${k.kind}${k.entry ? ' · ' + k.entry : ''}`);
    head.addEventListener('click', () => selectKernel(i));
    list.append(el('li', { class: 'kernel', 'data-kernel': String(i) }, head,
      el('div', { class: 'figures', 'data-kernel': String(i) }, kernelFigures(r, i)),
      el('div', {}, `computes: ${k.ops.join(', ')}`),
      el('div', {}, `from nodes: ${k.provenance.map((n) => '%' + n).join(' ')} · reads buffers ${k.reads.join(', ')} · writes ${k.writes.join(', ')}`),
      el('pre', {}, code)));
  });
  $('guards').replaceChildren(...r.guards.map((g) => el('li', {}, g)));
  $('decisions').replaceChildren(...r.decisions.map((d) => el('li', {}, d)));
  // A pass that changed nothing shows no dumps (they would be the same text twice); one that
  // did shows what it changed, the whole graphs before and after on demand.
  $('passes').replaceChildren(...r.passes.map((p) => (p.changed
    ? el('details', { class: 'pass', open: '' },
      el('summary', {}, `${p.name}: ${p.summary} (${p.ops_before} → ${p.ops_after} ops)`),
      passDiff(p.before, p.after),
      el('details', { class: 'whole' }, el('summary', {}, 'the graph before and after'),
        el('div', { class: 'pass-row' }, el('pre', {}, p.before), el('pre', {}, p.after))))
    : el('div', { class: 'unchanged' }, `${p.name}: no change (${p.ops_before} ops)`))));
  $('plan-text').textContent = r.plan_text;
  $('loops').textContent = r.schedule_text;
}

// A pass's change as lines removed (-) and added (+) with two lines of context around each run
// (jsdiff's diffLines, from npm); the unchanged lines between are counted, not shown.
const DIFF_CONTEXT = 2;
function passDiff(before, after) {
  const pre = el('pre', { class: 'pass-diff' });
  if (!window.Diff) {
    pre.textContent = '(no diff: jsdiff did not load)';
    return pre;
  }
  const parts = Diff.diffLines(before, after);
  const lines = (v) => v.replace(/\n$/, '').split('\n');
  parts.forEach((part, i) => {
    const ls = lines(part.value);
    if (part.added || part.removed) {
      for (const l of ls) pre.append(el('span', { class: part.added ? 'add' : 'del' }, (part.added ? '+ ' : '- ') + l + '\n'));
      return;
    }
    const head = i > 0 ? ls.slice(0, DIFF_CONTEXT) : [];
    const tail = i < parts.length - 1 ? ls.slice(Math.max(head.length, ls.length - DIFF_CONTEXT)) : [];
    const hidden = ls.length - head.length - tail.length;
    for (const l of head) pre.append('  ' + l + '\n');
    if (hidden > 0) pre.append(el('span', { class: 'same' }, `  … ${hidden} unchanged line${hidden === 1 ? '' : 's'}\n`));
    for (const l of tail) pre.append('  ' + l + '\n');
  });
  return pre;
}

// Why a kernel has no generated source: the target calls a library for it, or the reference
// interpreter runs it.
function noSource(k, target) {
  if (k.kind === 'matmul') {
    const lib = { cuda: 'cuBLASLt', cpu: 'the BLAS library' }[target] || 'the target\'s gemm library';
    return `(no generated source: ${lib} computes it, the matrix product and the ops listed with it as the library's epilogue ` +
      '(a bias, GELU, a scale); an epilogue it cannot take is generated and shown as this kernel\'s source)';
  }
  if (k.kind === 'convolution') return '(no generated source: a convolution through cuDNN)';
  if (k.kind === 'reference') return '(no generated source: the reference interpreter runs these ops on this target)';
  return '(no generated source: ' + k.kind + ')';
}

function download() {
  const r = state.report;
  const blob = new Blob([r.plan], { type: 'application/json' });
  const a = el('a', { href: URL.createObjectURL(blob), download: `${(state.graphName || 'graph').replace(/\.json$/, '')}.${r.target}.plan.json` });
  document.body.append(a);
  a.click();
  a.remove();
}

// A graph file of samples/graphs, "js:<name>": a program of programs.js traced here, or
// "onnx:<name>": a small ONNX export of tests/onnx/real_models with its external data.
async function pickSample(name) {
  if (name.startsWith('onnx:')) return openUrl(`/models/${name.slice(5)}/model.onnx`, name);
  state.graphName = name;
  state.plan = null;
  state.imported = null;
  state.onnx = null;
  if (name.startsWith('js:')) {
    const t0 = performance.now();
    state.graphText = KilnPrograms[name.slice(3)](state.kiln).json;
    state.traceMs = performance.now() - t0;
  } else {
    state.graphText = await (await fetch('/samples/' + name)).text();
    state.traceMs = null;
  }
  $('paste').value = state.graphText;
  await compile();
}

// ---- opening files -----------------------------------------------------------------------------
// A file's text by what it holds: a graph JSON (format kiln.graph) compiles as a sample does; a
// kernel plan (format kiln.plan) compiles its origin with the options recorded in it, and the
// result is compared with the file (checkPlan).
async function openText(name, text) {
  // A kiln.profile (`kiln run --profile`) is drawn over the graph shown, not opened as a graph.
  if (/^\s*\{\s*"format"\s*:\s*"kiln\.profile"/.test(text.slice(0, 100))) return openProfile(name, text);
  state.graphName = name;
  state.plan = null;
  state.imported = null;
  state.onnx = null;
  try {
    const head = text.replace(/^\s+/, '').slice(0, 1);
    if (head !== '{') throw new Error('neither JSON (a Kiln graph or kernel plan) nor an ONNX model');
    let doc;
    try {
      doc = JSON.parse(text);
    } catch (e) {
      throw new Error('not valid JSON: ' + e.message);
    }
    if (doc.format === 'kiln.plan') {
      if (!doc.origin || typeof doc.origin.graph !== 'string')
        throw new Error('a kernel plan without its origin (the graph that made it): there is nothing to draw or check it against');
      if (![...$('target').options].some((o) => o.value === doc.target)) throw new Error(`a plan for target '${doc.target}', which this page does not compile for`);
      $('target').value = doc.target;
      $('mode').value = 'default';
      $('options').value = JSON.stringify(doc.origin.options || {});
      state.plan = { name, text };
      state.graphText = doc.origin.graph;
    } else if (doc.format === 'kiln.graph') {
      state.graphText = text;
    } else {
      throw new Error(`neither a Kiln graph (format "kiln.graph") nor a kernel plan (format "kiln.plan"): format ${JSON.stringify(doc.format)}`);
    }
  } catch (e) {
    showError(e.message);
    return;
  }
  state.traceMs = null;
  $('paste').value = state.graphText;
  await compile();
}

// An ONNX model, decoded here (web/js/onnx.js: protobufjs and ONNX's schema) and imported by the
// module as the native importer imports the file; then compiled as a graph file is. `files`: the
// files opened with it by name, where its external data is.
async function openOnnx(name, bytes, files) {
  state.graphName = name;
  state.plan = null;
  state.traceMs = null;
  state.onnx = null;
  try {
    const t0 = performance.now();
    state.onnx = { decoded: await KilnOnnx.decode(bytes, files), device: null, decodeMs: performance.now() - t0 };
  } catch (e) {
    state.imported = null;
    showError(e.message);
    return;
  }
  $('paste').value = '';  // weights as base64 text would swamp the box
  await compile();
}

// The decoded model imported for the target's device, as kiln::onnx::compile imports it there
// (cpu: weights are constants; cuda, vulkan: they are inputs), again when the target changes.
function importOnnx(target) {
  const o = state.onnx;
  if (o.device === target) return;
  const t0 = performance.now();
  state.graphText = state.kiln.importOnnx(o.decoded, { device: target }).json;
  o.device = target;
  // The first import's time includes decoding the file; a later one is the import alone.
  state.imported = { ms: o.decodeMs + performance.now() - t0, tensors: o.decoded.tensors, bytes: o.decoded.bytes, device: target };
  o.decodeMs = 0;
}

// Whether `bytes` are an ONNX model rather than text: by its name, or by its first bytes.
function isOnnx(name, bytes) {
  if (/\.onnx$/i.test(name)) return true;
  const head = new TextDecoder().decode(bytes.subarray(0, 64)).replace(/^\s+/, '');
  return !head.startsWith('{') && KilnOnnx.looksLikeOnnx(bytes);
}

// Files picked or dropped together: an ONNX model with the files beside it (its external data),
// else the first file as text.
async function openFiles(list) {
  const files = [...(list || [])];
  if (!files.length) return;
  const read = async (f) => new Uint8Array(await f.arrayBuffer());
  let model = files.find((f) => /\.onnx$/i.test(f.name));
  if (!model && files.length === 1 && isOnnx(files[0].name, await read(files[0]))) model = files[0];
  if (!model) return openText(files[0].name, await files[0].text());
  const others = {};
  for (const f of files) if (f !== model) others[f.name] = await read(f);
  await openOnnx(model.name, await read(model), others);
}

// A file at an address; an ONNX model's external data files are fetched from beside it.
async function openUrl(address, name) {
  name = name || decodeURIComponent(address.split('/').pop().split('?')[0]) || address;
  const get = async (url) => {
    const r = await fetch(url);
    if (!r.ok) throw new Error(`HTTP ${r.status} ${r.statusText}`);
    return new Uint8Array(await r.arrayBuffer());
  };
  let bytes, onnx = false;
  const files = {};
  try {
    bytes = await get(address);
    onnx = isOnnx(name, bytes);
    if (onnx) {
      const base = new URL(address, location.href);
      for (const f of await KilnOnnx.externalFiles(bytes)) files[f] = await get(new URL(f, base));
    }
  } catch (e) {
    state.graphName = name;
    showError('could not fetch it: ' + e.message);
    return;
  }
  if (onnx) await openOnnx(name, bytes, files);
  else await openText(name, new TextDecoder().decode(bytes));
}

function initOpening() {
  $('open').addEventListener('click', () => $('file').click());
  $('file').addEventListener('change', async () => {
    await openFiles($('file').files);
    $('file').value = '';
  });
  let depth = 0;  // dragenter/dragleave pairs of nested elements
  document.addEventListener('dragenter', (e) => { e.preventDefault(); ++depth; $('drop').hidden = false; });
  document.addEventListener('dragleave', () => { if (--depth <= 0) { depth = 0; $('drop').hidden = true; } });
  document.addEventListener('dragover', (e) => e.preventDefault());
  document.addEventListener('drop', async (e) => {
    e.preventDefault();
    depth = 0;
    $('drop').hidden = true;
    await openFiles(e.dataTransfer.files);
  });
}

// highlight.js from npm: its core is a CommonJS file with no dependencies (evaluated here with a
// module object), its languages are ES modules.
async function loadHighlighter() {
  const text = await (await fetch('/npm/highlight.js/lib/core.js')).text();
  const module = { exports: {} };
  new Function('module', 'exports', text)(module, module.exports);
  const hljs = module.exports;
  hljs.registerLanguage('llvm', (await import('/npm/highlight.js/es/languages/llvm.js')).default);
  hljs.registerLanguage('cpp', (await import('/npm/highlight.js/es/languages/cpp.js')).default);
  hljs.registerLanguage('glsl', (await import('/npm/highlight.js/es/languages/glsl.js')).default);
  return hljs;
}

async function main() {
  // Everything the first graph needs starts at once (the module, the sample lists, the layout
  // worker); syntax highlighting is not among it and arrives when it arrives.
  loadHighlighter().then((hljs) => {
    state.hljs = hljs;
    for (const code of unhighlighted) if (code.isConnected) hljs.highlightElement(code);
    unhighlighted.clear();
  }, (e) => console.warn('no syntax highlighting:', e));
  layoutWorker();
  const lists = Promise.all([
    fetch('/samples/index.json').then((r) => r.json()),
    fetch('/models/index.json').then((r) => r.json()).catch((e) => {
      console.warn('no ONNX samples:', e);
      return [];
    }),
  ]);
  try {
    state.kiln = await Kiln.load();
  } catch (e) {
    $('status').textContent = 'could not load the module: ' + e.message;
    return;
  }
  const [samples, modelNames] = await lists;
  const programs = Object.keys(KilnPrograms).filter((n) => n.includes('(JavaScript)')).map((n) => 'js:' + n);
  const models = modelNames.map((m) => 'onnx:' + m);
  $('sample').replaceChildren(...samples.map((s) => el('option', { value: s }, s.replace(/\.json$/, ''))),
    ...programs.map((p) => el('option', { value: p }, p.slice(3))),
    ...models.map((m) => el('option', { value: m }, `${m.slice(5)} (ONNX, small)`)));
  const wanted = decodeURIComponent(location.hash.slice(1));
  $('sample').value = [...samples, ...programs, ...models].includes(wanted) ? wanted : samples[0];
  $('sample').addEventListener('change', () => pickSample($('sample').value));
  for (const id of ['target', 'mode']) $(id).addEventListener('change', compile);
  $('view').addEventListener('change', () => state.report && drawView(state.report));
  $('group').addEventListener('change', () => state.report && drawView(state.report));
  $('fill').addEventListener('change', () => state.drawn && redraw());
  $('options').addEventListener('change', compile);
  $('compile').addEventListener('click', compile);
  $('download').addEventListener('click', download);
  $('use-paste').addEventListener('click', () => {
    state.graphName = 'pasted';
    state.plan = null;
    state.imported = null;
    state.onnx = null;
    state.graphText = $('paste').value;
    state.traceMs = null;
    compile();
  });
  $('run').addEventListener('click', () => {
    try {
      const r = state.kiln.run(state.graphText, { random: 0 });
      $('run-out').textContent = r.outputs.map((o, i) => `output ${i}: ${shapeStr(o)}\n  ${o.data.slice(0, 16).map((v) => (typeof v === 'number' ? v.toPrecision(5) : v)).join(', ')}${o.data.length > 16 ? ', …' : ''}`).join('\n');
    } catch (e) { $('run-out').textContent = 'error: ' + e.message; }
  });
  for (const b of document.querySelectorAll('#tabs button')) b.addEventListener('click', () => {
    for (const o of document.querySelectorAll('#tabs button')) o.classList.toggle('active', o === b);
    for (const t of document.querySelectorAll('.tab')) t.hidden = t.id !== 'tab-' + b.dataset.tab;
  });
  initPanZoom();
  initOpening();
  $('search').addEventListener('input', () => search());
  $('search').addEventListener('keydown', (e) => { if (e.key === 'Enter') search(true); });
  $('status').textContent = `module ${state.kiln.version} loaded`;
  const address = new URLSearchParams(location.search).get('url');
  if (address) await openUrl(address);
  else await pickSample($('sample').value);
  document.body.dataset.ready = '1';
}

main();
