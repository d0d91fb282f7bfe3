// The inspector page: loads the module (window.Kiln from /wasm/kiln.js), compiles the chosen
// graph for the chosen target, mode and options, and shows what the compiler did. Plans are
// kept in IndexedDB under the module's cache key (sdk/cache's make_key, as native), so compiling
// the same thing again is a "cache hit" that runs no optimiser.
'use strict';

const $ = (id) => document.getElementById(id);
const PALETTE = ['#8dd3c7', '#ffffb3', '#bebada', '#fb8072', '#80b1d3', '#fdb462', '#b3de69', '#fccde5',
  '#bc80bd', '#ccebc5', '#ffed6f', '#a6cee3', '#b2df8a', '#fb9a99', '#fdbf6f', '#cab2d6'];
const state = { kiln: null, graphText: null, graphName: null, report: null, last: null, hljs: null };
window.kilnInspector = state;  // what the browser test reads

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
  try {
    const req = request();
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
    state.last = { key, hit, ms, graph: state.graphName, kernels: report.kernels.length, target: report.target, compileMs: hit ? 0 : ms,
      stages: report.timing_ms };
    show(report);
    const st = $('status');
    st.className = 'status' + (hit ? ' hit' : '');
    st.textContent = hit
      ? `cache hit (key ${key}): ${report.kernels.length} kernels in ${ms.toFixed(1)} ms, no optimiser run`
      : (state.traceMs != null ? `traced in ${state.traceMs.toFixed(1)} ms; ` : '') +
        `compiled for ${report.target} in ${ms.toFixed(1)} ms (passes ${report.timing_ms.passes.toFixed(1)}, schedule ` +
        `${report.timing_ms.schedule.toFixed(1)}, codegen ${report.timing_ms.codegen.toFixed(1)} ms): ${report.kernels.length} kernels`;
    $('download').disabled = false;
  } catch (e) {
    $('error').textContent = e.message;
    $('error').hidden = false;
    $('status').textContent = 'error';
    $('status').className = 'status';
  }
}

// ---- views ------------------------------------------------------------------------------------
function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  for (const c of children) e.append(c);
  return e;
}

function shapeStr(t) { return `${t.dtype}[${t.shape.join(', ')}]`; }

function show(r) {
  // Every view's nodes with the kernels they end up in (the module matches the captured graph and
  // the graph after the passes to the scheduled graph, whose nodes the kernels' provenance names).
  const view = $('view').value;
  const kernelsOf = new Map(r.node_kernels[view].map((ks, id) => [id, ks]));
  drawGraph(r[view], kernelsOf, r.kernels);
  $('view-note').textContent = {
    input: '(as traced, before the passes: nodes coloured by the fused kernel they end up in; hover for op, shape, dtype)',
    optimized: '(after the passes: nodes coloured by the fused kernel they end up in; hover for op, shape, dtype)',
    scheduled: '(after the passes and decomposition, as scheduled: nodes coloured by kernel; hover for op, shape, dtype)',
  }[view];

  $('kernel-count').textContent = `(${r.kernels.length})`;
  const list = $('kernels');
  list.replaceChildren();
  const lang = { cpu: 'llvm', cuda: 'cpp', vulkan: 'glsl' }[r.target] || 'plaintext';
  r.kernels.forEach((k, i) => {
    const code = el('code', { class: 'language-' + lang });
    code.textContent = k.source || '(no generated source: ' + k.kind + ')';
    if (state.hljs) state.hljs.highlightElement(code);
    list.append(el('li', { class: 'kernel', 'data-kernel': String(i) },
      el('div', { class: 'kernel-head' }, el('span', { class: 'swatch', style: `background:${PALETTE[i % PALETTE.length]}` }),
        `${k.name} · ${k.kind}${k.entry ? ' · ' + k.entry : ''}`),
      el('div', {}, `computes: ${k.ops.join(', ')}`),
      el('div', {}, `from nodes: ${k.provenance.map((n) => '%' + n).join(' ')} · reads buffers ${k.reads.join(', ')} · writes ${k.writes.join(', ')}`),
      el('pre', {}, code)));
  });
  $('guards').replaceChildren(...r.guards.map((g) => el('li', {}, g)));
  $('decisions').replaceChildren(...r.decisions.map((d) => el('li', {}, d)));
  $('passes').replaceChildren(...r.passes.map((p) => el('details', { open: '' },
    el('summary', {}, `${p.name}: ${p.summary} (${p.ops_before} → ${p.ops_after} ops)`),
    el('div', { class: 'pass-row' }, el('pre', {}, p.before), el('pre', {}, p.after)))));
  $('plan-text').textContent = r.plan_text;
}

function drawGraph(g, kernelsOf, kernels) {
  const layout = new dagre.graphlib.Graph();
  layout.setGraph({ rankdir: 'TB', nodesep: 14, ranksep: 24, marginx: 8, marginy: 8 });
  layout.setDefaultEdgeLabel(() => ({}));
  for (const n of g.nodes) {
    const label = `%${n.id} ${n.op}`;
    layout.setNode(String(n.id), { width: Math.max(70, label.length * 7 + 12), height: 24, label, n });
  }
  for (const n of g.nodes) for (const i of n.inputs || []) layout.setEdge(String(i), String(n.id));
  dagre.layout(layout);
  const NS = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(NS, 'svg');
  const { width, height } = layout.graph();
  svg.setAttribute('width', width + 16);
  svg.setAttribute('height', height + 16);
  svg.innerHTML = '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" orient="auto"><path d="M0,0L10,5L0,10z" fill="#888"/></marker></defs>';
  for (const e of layout.edges()) {
    const pts = layout.edge(e).points;
    const path = document.createElementNS(NS, 'path');
    path.setAttribute('d', 'M' + pts.map((p) => `${p.x},${p.y}`).join('L'));
    path.setAttribute('class', 'edge');
    svg.append(path);
  }
  for (const id of layout.nodes()) {
    const v = layout.node(id);
    const n = v.n;
    const ks = kernelsOf.get(n.id) || [];
    const group = document.createElementNS(NS, 'g');
    group.setAttribute('class', 'node');
    group.setAttribute('data-node', id);
    group.setAttribute('data-kernel', ks.join(' '));
    const rect = document.createElementNS(NS, 'rect');
    rect.setAttribute('x', v.x - v.width / 2);
    rect.setAttribute('y', v.y - v.height / 2);
    rect.setAttribute('width', v.width);
    rect.setAttribute('height', v.height);
    rect.setAttribute('rx', 4);
    rect.setAttribute('fill', ks.length ? PALETTE[ks[0] % PALETTE.length] : '#e8e8e8');
    const text = document.createElementNS(NS, 'text');
    text.setAttribute('x', v.x);
    text.setAttribute('y', v.y + 4);
    text.setAttribute('text-anchor', 'middle');
    text.textContent = v.label;
    const info = `%${n.id} = ${n.op}${n.name ? ' "' + n.name + '"' : ''} : ${shapeStr(n.type)}` +
      (ks.length ? ` · kernel ${ks.map((k) => kernels[k].name).join(', ')}` : ' · no kernel (input, constant, view or dead)');
    const title = document.createElementNS(NS, 'title');
    title.textContent = info;
    group.append(title, rect, text);
    group.addEventListener('mouseenter', () => { $('hover').textContent = info; });
    svg.append(group);
  }
  $('diagram').replaceChildren(svg);
}

function download() {
  const r = state.report;
  const blob = new Blob([r.plan], { type: 'application/json' });
  const a = el('a', { href: URL.createObjectURL(blob), download: `${(state.graphName || 'graph').replace(/\.json$/, '')}.${r.target}.plan.json` });
  document.body.append(a);
  a.click();
  a.remove();
}

// A graph file of samples/graphs, or "js:<name>": a program of programs.js traced here.
async function pickSample(name) {
  state.graphName = name;
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
  try {
    state.hljs = await loadHighlighter();
  } catch (e) {
    console.warn('no syntax highlighting:', e);
  }
  try {
    state.kiln = await Kiln.load();
  } catch (e) {
    $('status').textContent = 'could not load the module: ' + e.message;
    return;
  }
  const samples = await (await fetch('/samples/index.json')).json();
  const programs = Object.keys(KilnPrograms).filter((n) => n.includes('(JavaScript)')).map((n) => 'js:' + n);
  $('sample').replaceChildren(...samples.map((s) => el('option', { value: s }, s.replace(/\.json$/, ''))),
    ...programs.map((p) => el('option', { value: p }, p.slice(3))));
  const wanted = decodeURIComponent(location.hash.slice(1));
  $('sample').value = [...samples, ...programs].includes(wanted) ? wanted : samples[0];
  $('sample').addEventListener('change', () => pickSample($('sample').value));
  for (const id of ['target', 'mode']) $(id).addEventListener('change', compile);
  $('view').addEventListener('change', () => state.report && show(state.report));
  $('options').addEventListener('change', compile);
  $('compile').addEventListener('click', compile);
  $('download').addEventListener('click', download);
  $('use-paste').addEventListener('click', () => {
    state.graphName = 'pasted';
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
  $('status').textContent = `module ${state.kiln.version} loaded`;
  await pickSample($('sample').value);
  document.body.dataset.ready = '1';
}

main();
