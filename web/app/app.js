// The inspector page: loads the module (window.Kiln from /wasm/kiln.js), compiles the chosen
// graph for the chosen target, mode and options, and shows what the compiler did. Plans are
// kept in IndexedDB under the module's cache key (sdk/cache's make_key, as native), so compiling
// the same thing again is a "cache hit" that runs no optimiser. Files open from a picker, by drag
// and drop or from ?url=: a graph JSON compiles as a sample does; a kernel plan JSON compiles its
// origin (the graph and codegen options that made it) and says whether this module makes the
// same plan from it, as the native runtime checks a plan file (docs/plan-trust.md); a compile
// report of `kiln report` (its JSON, or the HTML page holding it) lists the compiles a program
// made, and each opens as its captured graph compiled here as it was natively, beside what only
// the native side knows (why it compiled, its graph breaks, the program's timings).
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
  traceMs: null, imported: null, onnx: null, opened: null, marks: { selected: new Set(), inKernel: new Set(), match: new Set() } };
window.kilnInspector = state;  // what the browser test reads
state.colour = colour;

// ---- IndexedDB plan cache -------------------------------------------------------------------
const DB = 'kiln-plans', STORE = 'plans';
// Opened once (main starts it while the module loads: the first compile does not wait for it);
// opened again after a failure.
let dbOpening = null;
function openDb() {
  dbOpening = dbOpening || new Promise((ok, bad) => {
    const r = indexedDB.open(DB, 1);
    r.onupgradeneeded = () => r.result.createObjectStore(STORE);
    r.onsuccess = () => ok(r.result);
    r.onerror = () => bad(r.error);
  });
  dbOpening.catch(() => { dbOpening = null; });
  return dbOpening;
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
  const r = { target: $('target').value, mode: $('mode').value, options };
  // A native report's compile: for the device its plan was made for (a CUDA arch), while its target stays.
  const o = state.opened;
  const dr = o && o.index >= 0 && o.doc.compiles[o.index] && o.doc.compiles[o.index].device_request;
  if (dr && Object.keys(dr).length && o.doc.compiles[o.index].target === r.target) r.device_request = dr;
  return r;
}

async function compile() {
  // A report's compile without a report has no graph to compile: its error again.
  const o = state.opened;
  if (o && !o.doc.compiles[o.index].report) return openReportCompile(o.index);
  $('error').hidden = true;
  if (!state.plan && !state.opened) $('notice').hidden = true;
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
    const stored = hit ? null : cachePut(key, { graph: graph.json, report, saved: Date.now() });  // while it is drawn
    state.report = report;
    const drawn = await show(report);
    await stored;
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
    reportNotice(report);
  } catch (e) {
    showError(e.message);
  }
}

// An error leaves nothing of the previous graph on screen: its diagram, kernels and plan would
// read as this input's.
const HOVER_HINT = 'hover a node; click one to select it and its kernels; drag to pan';

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
  for (const id of ['plan-text', 'kernel-count', 'decision-count', 'run-out', 'loops', 'search-count', 'scopes']) $(id).textContent = '';
  $('hover').textContent = HOVER_HINT;
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

// A script the page needs only for some inputs, loaded the first time one comes (once; again
// after a failure). `what` says what it is for in the error.
const scriptsLoaded = new Map();
function loadScript(src, what) {
  if (!scriptsLoaded.has(src)) {
    scriptsLoaded.set(src, new Promise((resolve, reject) => {
      const script = el('script', { src });
      script.onload = resolve;
      script.onerror = () => {
        scriptsLoaded.delete(src);
        reject(new Error(`could not load ${src} (${what})`));
      };
      document.head.append(script);
    }));
  }
  return scriptsLoaded.get(src);
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
// highlight.js loads once the first graph is drawn (main): code to highlight before it is there waits.
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
  $('decision-count').textContent = '';  // a node selected marks those about it (diagram.js: markDecisions)
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
  const a = el('a', { href: URL.createObjectURL(blob), download: `${(state.graphName || 'graph').replace(/\.json$/, '').replace(/\//g, '-')}.${r.target}.plan.json` });
  document.body.append(a);
  a.click();
  a.remove();
}

// A graph file of samples/graphs, "js:<name>": a program of programs.js traced here, or
// "onnx:<name>": a small ONNX export of tests/onnx/real_models with its external data.
async function pickSample(name) {
  if (name.startsWith('onnx:')) return openUrl(`/models/${name.slice(5)}/model.onnx`, name);
  closeReport();
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
// result is compared with the file (checkPlan); a compile report (format kiln.report, as JSON or
// inside the HTML page `kiln report` writes) opens its compiles (openReport).
async function openText(name, text) {
  // A kiln.profile (`kiln run --profile`) is drawn over the graph shown, not opened as a graph.
  if (/^\s*\{\s*"format"\s*:\s*"kiln\.profile"/.test(text.slice(0, 100))) return openProfile(name, text);
  closeReport();
  state.graphName = name;
  state.plan = null;
  state.imported = null;
  state.onnx = null;
  let doc;
  try {
    const head = text.replace(/^\s+/, '').slice(0, 1);
    if (head !== '{' && head !== '<') throw new Error('neither JSON (a Kiln graph, kernel plan or compile report) nor an ONNX model nor a page of `kiln report`');
    const json = head === '<' ? reportText(text) : text;
    try {
      doc = JSON.parse(json);
    } catch (e) {
      throw new Error((head === '<' ? 'a page of `kiln report` whose report data (kiln-report-data) is not valid JSON: ' : 'not valid JSON: ') + e.message);
    }
    if (doc.format === 'kiln.report') {
      doc = parseExact(json);
      checkReport(doc);
    } else if (doc.format === 'kiln.plan') {
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
      throw new Error('neither a Kiln graph (format "kiln.graph"), a kernel plan (format "kiln.plan") nor a compile report ' +
        `(format "kiln.report"): format ${JSON.stringify(doc.format)}`);
    }
  } catch (e) {
    showError(e.message);
    return;
  }
  if (doc.format === 'kiln.report') return openReport(name, doc);
  state.traceMs = null;
  $('paste').value = state.graphText;
  await compile();
}

// ---- compile reports made natively (`kiln report`) --------------------------------------------
// A report holds, per compile a program made (or one graph file compiled), the compile report
// this page makes (web/src/core's compile_report) without its plan JSON, and with the bytes of
// big constants left out of its graphs. A compile opens as its captured graph (report.input),
// compiled here for its target, mode and codegen options; the notice adds what only the program
// knew (kind, recompile reason, graph breaks, its timings) and whether this module's cache key
// is the report's.

// The report data of a page `kiln report` wrote: JSON in its kiln-report-data script element
// (`<` written as \u003c, so the element's text is the JSON as it is). DOMParser runs no script.
function reportText(text) {
  const data = new DOMParser().parseFromString(text, 'text/html').getElementById('kiln-report-data');
  if (!data) throw new Error('an HTML page without the data of a compile report (no kiln-report-data element, which `kiln report` writes)');
  return data.textContent;
}

// JSON.parse makes every number a double, so an integer past 2^53 in a graph (a dynamic
// symbol's bound, INT64_MAX) would come back changed, which the loader refuses. parseExact
// keeps such literals as marked strings (the JSON text's tokens: strings, skipped, and numbers)
// and stringifyExact writes them back as the numbers they were.
const EXACT = '\\u0000int:';  // as JSON text: a NUL starts the string, which no graph's strings do
function parseExact(text) {
  return JSON.parse(text.replace(/"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g,
    (t) => (t[0] !== '"' && /^-?\d{16,}$/.test(t) && !Number.isSafeInteger(Number(t)) ? `"${EXACT}${t}"` : t)));
}
const stringifyExact = (value) => JSON.stringify(value).replace(/"\\u0000int:(-?\d+)"/g, '$1');

// Throws a sentence where `doc` (format kiln.report) is not a report this page can open.
function checkReport(doc) {
  if (doc.version !== 1) throw new Error(`a compile report of version ${JSON.stringify(doc.version)}; this page reads version 1`);
  if (!Array.isArray(doc.compiles) || !doc.compiles.length)
    throw new Error('a compile report (format "kiln.report") without compiles: its "compiles" list is missing or empty');
  doc.compiles.forEach((c, i) => {
    if (!c || typeof c !== 'object' || typeof c.id !== 'string') throw new Error(`a compile report whose compile ${i} has no id`);
    if (c.report !== null && (typeof c.report !== 'object' || !c.report.input || !Array.isArray(c.report.input.nodes)))
      throw new Error(`a compile report whose compile ${c.id} has neither a report with its captured graph (report.input) nor null`);
  });
}

function closeReport() {
  state.opened = null;
  $('report-bar').hidden = true;
}

const functionName = (doc, c) => (doc.functions && doc.functions[c.function] && doc.functions[c.function].name) || '(function unknown)';
const shorten = (text, n) => (text.length > n ? text.slice(0, n - 1) + '…' : text);

// The report's compiles in the selector; the first with a report opens.
async function openReport(name, doc) {
  state.opened = { name, doc, index: -1 };
  $('report-name').textContent = `${name}: a compile report of ${doc.source || '?'}${doc.created ? ', made ' + doc.created : ''} by Kiln ` +
    `${doc.kiln_version || '?'} (${doc.compiles.length} compile${doc.compiles.length === 1 ? '' : 's'})`;
  $('report-compile').replaceChildren(...doc.compiles.map((c, i) => el('option', { value: String(i) },
    [c.id, c.kind + (c.segment != null ? ' ' + c.segment : ''), shorten(functionName(doc, c), 48),
      ...(c.reason ? [shorten(c.reason, 48)] : []), ...(c.report ? [] : ['no report'])].join(' · '))));
  $('report-bar').hidden = false;
  const first = doc.compiles.findIndex((c) => c.report);
  await openReportCompile(first >= 0 ? first : 0);
}

// Bytes of one element of each dtype (docs/graph-format.md).
const DTYPE_BYTES = { bool: 1, i32: 4, i64: 8, f16: 2, bf16: 2, f32: 4, f64: 8 };

// The captured graph with zeros in place of the constant bytes the report left out (their
// dtype and shape are kept), and what was put in: [{node, bytes}].
function withZeros(graph) {
  const g = JSON.parse(JSON.stringify(graph)), elided = [];
  for (const n of g.nodes) {
    for (const v of Object.values(n.attrs || {})) {
      if (!v || typeof v !== 'object' || v.data_elided_bytes === undefined) continue;
      const count = (v.shape || []).reduce((a, b) => a * b, 1);
      const bytes = DTYPE_BYTES[v.dtype] !== undefined ? count * DTYPE_BYTES[v.dtype] : v.data_elided_bytes;
      v.data_base64 = 'AAAA'.repeat(Math.floor(bytes / 3)) + ['', 'AA==', 'AAA='][bytes % 3];  // base64 of zero bytes
      delete v.data_elided_bytes;
      elided.push({ node: n.id, bytes });
    }
  }
  return { text: stringifyExact(g), elided };
}

// The report's codegen options (each as config prints its value: strings quoted, as JSON) as the
// page passes options: the module parses a string as the option's type, so only quoted strings
// are unquoted, and numbers stay text (an int64 past 2^53 is no JavaScript number).
function reportOptions(codegen) {
  const out = {};
  for (const [name, value] of Object.entries(codegen || {})) out[name] = typeof value === 'string' && value.startsWith('"') ? JSON.parse(value) : value;
  return out;
}

// Compile i of the open report: its captured graph compiled here as it was natively.
async function openReportCompile(i) {
  const o = state.opened, c = o.doc.compiles[i];
  o.index = i;
  $('report-compile').value = String(i);
  state.graphName = `${o.name} ${c.id}`;
  state.plan = null;
  state.traceMs = null;
  if (!c.report) {
    showError(`compile ${c.id} (${c.kind} of ${functionName(o.doc, c)}) has no report: ${c.error || 'the report says nothing of why'}`);
    return;
  }
  const r = c.report;
  try {
    for (const [id, value] of [['target', r.target], ['mode', r.mode]])
      if (![...$(id).options].some((x) => x.value === value)) throw new Error(`compile ${c.id} was made for ${id} '${value}', which this page does not compile for`);
    const { text, elided } = withZeros(r.input);
    $('target').value = r.target;
    $('mode').value = r.mode;
    $('options').value = JSON.stringify(reportOptions(r.codegen_options));
    o.request = { target: r.target, mode: r.mode, options: $('options').value };
    o.elided = elided;
    state.graphText = text;
  } catch (e) {
    showError(e.message);
    return;
  }
  $('paste').value = state.graphText;
  await compile();
}

// After a compile of a report's compile: what the program knew of it, and this module's result
// against the report's (the cache key: same graph, options and Kiln version).
function reportNotice(report) {
  const o = state.opened;
  if (!o || !state.last) return;
  const c = o.doc.compiles[o.index], native = c.report;
  const kind = {
    first: 'its first compile',
    recompile: 'a recompile',
    segment: `segment ${c.segment ?? '?'} (a graph break splits the function into graphs compiled apart)`,
    graph: 'a graph or model file compiled by `kiln report` (no program ran)',
  }[c.kind] || `a compile of kind ${c.kind}`;
  const lines = [`${o.name}: compile ${c.id} of ${functionName(o.doc, c)}, ${kind}, for ${native.target} (mode ${native.mode}).`];
  if (c.reason) lines.push(`Recompiled because: ${c.reason}`);
  if (c.graph_breaks && c.graph_breaks.length) lines.push(`The graph ends at: ${c.graph_breaks.join('; ')}`);
  const times = Object.entries(c.timing_ms || {}).map(([k, v]) => `${k} ${Number(v).toFixed(1)} ms`);
  if (times.length) lines.push(`In the program: ${times.join(', ')}.`);
  const changed = $('target').value !== o.request.target || $('mode').value !== o.request.mode || $('options').value !== o.request.options;
  const otherVersion = o.doc.kiln_version !== state.kiln.version;
  const same = report.cache_key === native.cache_key;
  let why = '';
  if (!same) {
    why = [changed ? 'the target, mode or options were changed here' : '',
      o.elided.length ? 'zeros stand in for the left-out constant bytes, which the key hashes' : '',
      otherVersion ? 'the report was made by another Kiln version' : ''].filter(Boolean).join('; ') || 'the graph or options differ';
  }
  lines.push(same
    ? `Cache key ${report.cache_key}: the report's (the same graph, options and Kiln version); ${report.kernels.length} kernels here, ${native.kernels.length} in the report.`
    : `Cache key ${report.cache_key} is not the report's ${native.cache_key} (${why}); ${report.kernels.length} kernels here, ${native.kernels.length} in the report.`);
  if (o.elided.length) {
    const sizes = o.elided.slice(0, 6).map((e) => `%${e.node}: ${e.bytes} bytes`).join(', ') + (o.elided.length > 6 ? ', …' : '');
    lines.push(`${o.elided.length} constant${o.elided.length === 1 ? '' : 's'} had ${o.elided.length === 1 ? 'its' : 'their'} bytes left out of the report (${sizes}): ` +
      'zeros of the same size stand in for them, so the kernels may differ where the passes fold them.');
  }
  if (otherVersion) lines.push(`Made by Kiln ${o.doc.kiln_version}; this page's module is ${state.kiln.version}: its passes, kernels and cache key may differ.`);
  if (c.plan_check) lines.push(`Natively: ${c.plan_check}.`);
  notice(lines.join('\n'), !same || otherVersion);
  state.last.native = { id: c.id, kind: c.kind, keyMatch: same, elided: o.elided.length, otherVersion };
}

// web/js/onnx.js with protobufjs, which loads when the first ONNX model opens: evaluating it
// took ~45 ms of the page's thread before the first graph.
async function onnxDecoder() {
  await loadScript('/npm/protobufjs/dist/protobuf.min.js', 'protobufjs, which reads ONNX files');
  return KilnOnnx;
}

// An ONNX model, decoded here (web/js/onnx.js: protobufjs and ONNX's schema) and imported by the
// module as the native importer imports the file; then compiled as a graph file is. `files`: the
// files opened with it by name, where its external data is.
async function openOnnx(name, bytes, files) {
  closeReport();
  state.graphName = name;
  state.plan = null;
  state.traceMs = null;
  state.onnx = null;
  try {
    const t0 = performance.now();
    state.onnx = { decoded: await (await onnxDecoder()).decode(bytes, files), device: null, decodeMs: performance.now() - t0 };
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

// The sample menu names what was opened from a file or an address, so that it never shows a
// sample the page is not showing.
function markOpened(name) {
  let o = $('sample').querySelector('option[value=""]');
  if (!o) {
    o = el('option', { value: '' });
    $('sample').prepend(o);
  }
  o.textContent = `(opened) ${name}`;
  $('sample').value = '';
}

// Files picked or dropped together: an ONNX model with the files beside it (its external data),
// else the first file as text.
async function openFiles(list) {
  const files = [...(list || [])];
  if (!files.length) return;
  markOpened((files.find((f) => /\.onnx$/i.test(f.name)) || files[0]).name);
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
  markOpened(name);
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
      for (const f of await (await onnxDecoder()).externalFiles(bytes)) files[f] = await get(new URL(f, base));
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

// Kiln.load's arguments: instantiate the module index.html compiled while the page loaded,
// rather than fetch and compile it again (emscripten's instantiateWasm hook).
async function moduleArgs() {
  const compiled = await window.kilnWasmCompiled;
  if (!compiled) return {};
  return {
    instantiateWasm(imports, receive) {
      WebAssembly.instantiate(compiled, imports).then((instance) => receive(instance, compiled),
        (e) => { $('status').textContent = 'could not instantiate the module: ' + e.message; });
      return {};  // the exports come through receive
    },
  };
}

async function main() {
  // Everything the first graph needs starts at once (the module, the sample lists, the layout
  // worker); syntax highlighting is not among it and loads after the first graph is drawn (its
  // scripts' evaluation on the main thread delayed the first graph by 100-200 ms).
  layoutWorker();
  openDb().catch(() => {});  // the first compile's cache lookup waits for it otherwise
  const lists = Promise.all([
    fetch('/samples/index.json').then((r) => r.json()),
    fetch('/models/index.json').then((r) => r.json()).catch((e) => {
      console.warn('no ONNX samples:', e);
      return [];
    }),
  ]);
  try {
    state.kiln = await Kiln.load(await moduleArgs());
    performance.mark('kiln-module-ready');  // where the first graph's time goes (web_browser prints it)
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
  $('sample').addEventListener('change', () => $('sample').value && pickSample($('sample').value));
  for (const id of ['target', 'mode']) $(id).addEventListener('change', compile);
  $('view').addEventListener('change', () => state.report && drawView(state.report));
  $('report-compile').addEventListener('change', () => openReportCompile(Number($('report-compile').value)));
  $('group').addEventListener('change', () => state.report && drawView(state.report));
  $('fill').addEventListener('change', () => state.drawn && redraw());
  $('options').addEventListener('change', compile);
  $('compile').addEventListener('click', compile);
  $('download').addEventListener('click', download);
  $('use-paste').addEventListener('click', () => {
    closeReport();
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
  performance.mark('kiln-first-graph');
  document.body.dataset.ready = '1';
  loadHighlighter().then((hljs) => {
    state.hljs = hljs;
    for (const code of unhighlighted) if (code.isConnected) hljs.highlightElement(code);
    unhighlighted.clear();
  }, (e) => console.warn('no syntax highlighting:', e));
}

main();
