// The inspector's diagram: a view's graph laid out (layout.js, in a worker), grouped by module
// scope, drawn, and what the user does with it (select, search, zoom, pan, minimap). Loaded
// before app.js, whose state, $, el, colour and shapeStr it uses.
//
// What is drawn is a model, state.drawn: its items (a node, or a collapsed scope: one box for
// all its nodes) and frames (an expanded scope around its items), each placed by the layout;
// selection, kernel outlines and search matches are sets of item keys (state.marks) that a
// renderer shows. Two renderers: SVG, an element per item (hover, click and CSS do the work),
// and past CANVAS_PAST items a canvas the size of the view, which draws only what is in view
// on each frame (a 10,000-node graph expanded is too many elements to move smoothly).
'use strict';

const CANVAS_PAST = 1500;  // items and frames drawn: above it, the canvas
const NODE_HEIGHT = 24, SCOPE_HEIGHT = 30;
const MARK_STYLE = { match: ['#e08a00', 4], inKernel: ['#05a', 3], selected: ['#d00', 3] };  // drawn in this order

// ---- selection and search ----------------------------------------------------------------------
function mark(nodeIds, kernelIds) {
  const d = state.drawn, m = state.marks;
  m.selected.clear();
  m.inKernel.clear();
  for (const it of d.leaves.values()) {
    if (it.members.some((x) => nodeIds.has(String(x)))) m.selected.add(it.key);
    if (it.kernels.some((k) => kernelIds.has(String(k)))) m.inKernel.add(it.key);
  }
  paintMarks();
  for (const li of document.querySelectorAll('#kernels > li')) li.classList.toggle('selected', kernelIds.has(li.dataset.kernel));
}

// A node clicked: it and the kernels it ends up in (their nodes outlined, the first kernel shown).
function selectNode(id) {
  const it = state.drawn && state.drawn.leaves.get(String(id));
  if (!it && state.scopes && visibleItem(Number(id)) !== String(id)) {
    // Inside a collapsed scope: expand the scopes it lies in, then select it.
    for (const c of state.scopes.chains.get(Number(id))) state.scopes.expanded.add(c);
    return redraw().then((drawn) => {
      if (!drawn) return;
      selectNode(id);
      reveal(String(id));
    });
  }
  const ks = it ? it.kernels.map(String) : [];
  mark(new Set([String(id)]), new Set(ks));
  const about = decisionsAboutNode(state.report, state.drawn.view, Number(id), ks.map(Number));
  state.selection = { node: Number(id), kernels: ks.map(Number), decisions: about };
  showProperties(String(id), about);
  markDecisions(about);
  if (ks.length) document.querySelector(`#kernels > li[data-kernel="${ks[0]}"]`)?.scrollIntoView({ block: 'nearest' });
}

// The selected node's properties: type, attributes (long values cut), inputs, users, kernels,
// and the fusion decisions about it (`about`: decisionsAboutNode).
function showProperties(id, about) {
  const d = state.drawn, n = d && d.byId.get(id);
  if (!n) return;
  const typeOf = (m) => (m ? shapeStr(m.type) : '?');
  const attr = (v) => {
    const t = JSON.stringify(v);
    return t.length > 200 ? t.slice(0, 200) + `… (${t.length} characters)` : t;
  };
  const users = d.g.nodes.filter((m) => (m.inputs || []).includes(n.id));
  const lines = [`%${n.id} = ${n.op}${n.name ? ' "' + n.name + '"' : ''} : ${shapeStr(n.type)}`];
  const chain = state.scopes && state.scopes.chains.get(n.id);
  if (chain && chain.length) lines.push(`  scope: ${chain[chain.length - 1]}`);
  const sources = sourceLines(d.view, n.id);
  if (sources.length) {
    const where = (x) => `${x.file ? x.file + (x.line ? ':' + x.line : '') : '?'}${x.function ? ' in ' + x.function : ''}`;
    if (d.view === 'input') lines.push(`  source: ${where(sources[0])}`);
    else lines.push(`  sources (of the captured nodes it computes): ${sources.slice(0, 3).map(where).join('; ')}${sources.length > 3 ? `; and ${sources.length - 3} more` : ''}`);
  }
  for (const [k, v] of Object.entries(n.attrs || {})) lines.push(`  ${k}: ${attr(v)}`);
  (n.inputs || []).forEach((i, j) => lines.push(`  input ${j}: %${i} ${d.byId.get(String(i))?.op ?? ''} ${typeOf(d.byId.get(String(i)))}`));
  lines.push(`  users: ${users.length ? users.map((m) => `%${m.id} ${m.op}`).join(', ') : 'none'}${d.g.outputs.includes(n.id) ? ' (a graph output)' : ''}`);
  // The decisions come before the kernels line, which stays the last one (web_browser reads it there).
  const ks = d.kernelsOf.get(n.id) || [], names = ks.map((k) => d.kernels[k].name).join(', ');
  const decisions = state.report.decisions;
  if (about.scheduled < 0) lines.push('  fusion decisions: none name it (no node of the scheduled graph computes its value)');
  else {
    const own = d.view === 'scheduled' ? 'it' : `%${about.scheduled}, its node in the scheduled graph`;
    lines.push(`  fusion decisions naming ${own}:${about.node.length ? '' : ' none'}`, ...about.node.map((i) => '    ' + decisions[i]));
  }
  if (ks.length) lines.push(`  fusion decisions about its kernel${ks.length === 1 ? '' : 's'} ${names}:${about.kernel.length ? '' : ' none'}`, ...about.kernel.map((i) => '    ' + decisions[i]));
  lines.push(`  kernels: ${ks.length ? names : 'none (input, constant, view or dead)'}`);
  $('props').textContent = lines.join('\n');
  $('props').hidden = false;
}

// The program's lines that traced a node, where the page shows a compile of a program's report
// (compile.json's "sources", by captured node, as `kiln report` keeps them): a captured node's
// own; in another view those of the captured nodes mapped to the same scheduled node.
function sourceLines(view, id) {
  const o = state.opened, c = o && o.index >= 0 ? o.doc.compiles[o.index] : null;
  const r = state.report;
  if (!c || !Array.isArray(c.sources) || !c.sources.length || !r) return [];
  const byNode = new Map(c.sources.map((x) => [x.node, x]));
  let ids = [id];
  if (view !== 'input') {
    const s = view === 'scheduled' ? id : (r.node_scheduled[view] || [])[id];
    ids = s == null || s < 0 ? [] : (r.node_scheduled.input || []).flatMap((t, i) => (t === s ? [i] : []));
  }
  const seen = new Map();
  for (const i of ids) {
    const x = byNode.get(i);
    if (x) seen.set(`${x.file}:${x.line}:${x.function}`, x);
  }
  return [...seen.values()];
}

// ---- a selection's fusion decisions ----------------------------------------------------------------
// The fusion log (report.decisions, one line each) names nodes of the scheduled graph as %N and
// the scheduler's kernels as "kernel K" and "kernels A and B". Those numbers count the groups
// the scheduler formed, before horizontal fusion merged some and a target split some (vulkan
// computes a gemm's epilogue in a kernel of its own), not the plan's kernels, so a plan kernel is
// matched to the groups its provenance nodes joined, as the log says ("kernel K: starts at %N",
// "kernel K: %N (gemm template)", "fused %N into kernel K").
const decisionIndexes = new WeakMap();  // report -> its log parsed
function decisionIndex(r) {
  let x = decisionIndexes.get(r);
  if (x) return x;
  const groupOf = new Map();  // scheduled node -> the log's kernel it joined
  const lines = r.decisions.map((text) => {
    let m;
    if ((m = text.match(/^kernel (\d+): (?:starts at )?%(\d+)/))) groupOf.set(Number(m[2]), Number(m[1]));
    else if ((m = text.match(/^fused %(\d+) .*into kernel (\d+)$/))) groupOf.set(Number(m[1]), Number(m[2]));
    return {
      nodes: new Set((text.match(/%\d+/g) || []).map((t) => Number(t.slice(1)))),
      groups: new Set([...text.matchAll(/\bkernels? (\d+)(?: and (\d+))?/g)].flatMap((t) => t.slice(1).filter(Boolean).map(Number))),
    };
  });
  const groupsOf = r.kernels.map((k) => new Set(k.provenance.filter((n) => groupOf.has(n)).map((n) => groupOf.get(n))));
  x = { lines, groupsOf };
  decisionIndexes.set(r, x);
  return x;
}

// The decisions (indices into report.decisions) about plan kernels `ks`: naming one of the
// scheduler's kernels they came from, or a node they store or reduce; `skip`: leave those out.
function decisionsAboutKernels(r, ks, skip = new Set()) {
  const x = decisionIndex(r);
  const groups = new Set(ks.flatMap((k) => [...x.groupsOf[k]]));
  const nodes = new Set(ks.flatMap((k) => r.kernels[k].provenance));
  const out = [];
  x.lines.forEach((l, i) => {
    if (!skip.has(i) && ([...l.groups].some((g) => groups.has(g)) || [...l.nodes].some((n) => nodes.has(n)))) out.push(i);
  });
  return out;
}

// The decisions about node `id` of a view with kernels `ks`: {scheduled: the scheduled node
// computing its value (node_scheduled, as for its kernels; -1: none), node: those naming it,
// kernel: the others about its kernels}.
function decisionsAboutNode(r, view, id, ks) {
  const scheduled = view === 'scheduled' ? id : r.node_scheduled[view][id];
  const node = [];
  if (scheduled >= 0) decisionIndex(r).lines.forEach((l, i) => { if (l.nodes.has(scheduled)) node.push(i); });
  return { scheduled, node, kernel: decisionsAboutKernels(r, ks, new Set(node)) };
}

// Marks decisions in the fusion decisions tab (about: {node, kernel} index lists, or null to
// clear), the first one scrolled into view, and counts them on the tab.
function markDecisions(about) {
  const items = $('decisions').children;
  const node = new Set(about ? about.node : []), kernel = new Set(about ? about.kernel : []);
  for (let i = 0; i < items.length; ++i) {
    items[i].classList.toggle('about-node', node.has(i));
    items[i].classList.toggle('about-kernel', kernel.has(i));
  }
  $('decision-count').textContent = node.size + kernel.size ? `(${node.size + kernel.size} of ${items.length} marked)` : '';
  const first = Math.min(...node, ...kernel);
  if (Number.isFinite(first)) items[first].scrollIntoView({ block: 'nearest' });
}

// Search the view's nodes by op, name, %id, dtype[shape] and kernel names (a substring, any case,
// or /regex/): matches outlined; Enter steps through them, selecting each.
function search(step = false) {
  const q = $('search').value.trim();
  state.marks.match.clear();
  if (!q || !state.drawn) {
    paintMarks();
    $('search-count').textContent = '';
    return;
  }
  let test;
  const re = q.match(/^\/(.+)\/([a-z]*)$/);
  try {
    test = re ? ((t) => new RegExp(re[1], re[2].includes('i') ? re[2] : re[2] + 'i').test(t)) : ((t) => t.toLowerCase().includes(q.toLowerCase()));
    test('');
  } catch (e) {
    paintMarks();
    $('search-count').textContent = 'bad expression: ' + e.message;
    return;
  }
  // Every node of the view is searched; a match inside a collapsed scope outlines the scope's box.
  const d = state.drawn;
  const hits = d.g.nodes.filter((n) => {
    const ks = (d.kernelsOf.get(n.id) || []).map((k) => d.kernels[k].name).join(' ');
    return test(`%${n.id} ${n.op} ${n.name || ''} ${shapeStr(n.type)} ${ks}`);
  });
  for (const n of hits) state.marks.match.add(visibleItem(n.id));
  paintMarks();
  state.matches = hits.map((n) => n.id);
  if (step && hits.length) {
    state.matchAt = ((state.matchAt ?? -1) + 1) % hits.length;
    const id = hits[state.matchAt].id;
    const selected = selectNode(String(id));
    if (!selected) reveal(visibleItem(id));
  } else {
    state.matchAt = -1;
  }
  $('search-count').textContent = `${hits.length} match${hits.length === 1 ? '' : 'es'}` +
    (step && hits.length ? ` (${state.matchAt + 1} of ${hits.length})` : '');
}

// A kernel clicked: the nodes of the current view it computes.
function selectKernel(k) {
  mark(new Set(), new Set([String(k)]));
  const nodes = [...state.drawn.leaves.values()].filter((it) => it.node && state.marks.inKernel.has(it.key));
  const about = { node: [], kernel: decisionsAboutKernels(state.report, [Number(k)]) };
  state.selection = { kernel: k, nodes: nodes.map((it) => it.node.id), decisions: about };
  markDecisions(about);
  if (nodes.length) reveal(nodes[0].key);
}

// Scrolls the view so that item `key` is in its middle.
function reveal(key) {
  const it = state.drawn && state.drawn.leaves.get(key), box = $('diagram');
  if (!it) return;
  box.scrollLeft = it.x * state.scale - box.clientWidth / 2;
  box.scrollTop = it.y * state.scale - box.clientHeight / 2;
  viewMoved();
}

// ---- zoom, pan and the minimap -------------------------------------------------------------------
// The drawing's size is its layout's times state.scale; the box scrolls (pan).
function sizeDrawing() {
  const d = state.drawn, s = state.scale;
  const drawn = d && $('diagram').firstElementChild;
  if (!drawn) return;
  drawn.style.width = `${d.width * s}px`;
  drawn.style.height = `${d.height * s}px`;
}

function zoomTo(scale, cx, cy) {
  const box = $('diagram');
  if (!state.drawn) return;
  const old = state.scale;
  state.scale = Math.min(4, Math.max(0.0005, scale));
  sizeDrawing();
  // Keep the point under (cx, cy) of the box where it was.
  const px = cx ?? box.clientWidth / 2, py = cy ?? box.clientHeight / 2;
  box.scrollLeft = (box.scrollLeft + px) * (state.scale / old) - px;
  box.scrollTop = (box.scrollTop + py) * (state.scale / old) - py;
  viewMoved();
}

// The view moved or zoomed: the canvas and the minimap follow on the next frame.
function viewMoved() {
  paintCanvas();
  drawMinimap();
}

// The minimap: the whole laid-out graph small in the diagram's corner, the part in view outlined;
// a click or drag there moves the view. Hidden while the whole graph is in view. The graph is
// drawn small once per drawing; a frame only copies it and outlines the view.
const MINIMAP = { width: 200, height: 150 };
let minimapFrame = 0;
function drawMinimap() {
  if (minimapFrame) return;
  minimapFrame = requestAnimationFrame(() => {
    minimapFrame = 0;
    const m = state.minimap, box = $('diagram'), canvas = $('minimap');
    const inView = !m || (m.width * state.scale <= box.clientWidth + 1 && m.height * state.scale <= box.clientHeight + 1);
    canvas.hidden = inView;
    if (inView) return;
    const k = Math.min(MINIMAP.width / m.width, MINIMAP.height / m.height);
    if (!m.image || m.k !== k) {
      m.k = k;
      m.image = document.createElement('canvas');
      m.image.width = Math.max(1, Math.round(m.width * k));
      m.image.height = Math.max(1, Math.round(m.height * k));
      const c = m.image.getContext('2d');
      for (const r of m.rects) {
        c.fillStyle = r.fill;
        c.fillRect((r.x - r.w / 2) * k, (r.y - r.h / 2) * k, Math.max(1, r.w * k), Math.max(1, r.h * k));
      }
    }
    canvas.width = m.image.width;
    canvas.height = m.image.height;
    const c = canvas.getContext('2d');
    c.drawImage(m.image, 0, 0);
    c.strokeStyle = '#d00';
    c.lineWidth = 1.5;
    c.strokeRect(box.scrollLeft / state.scale * k, box.scrollTop / state.scale * k,
      box.clientWidth / state.scale * k, box.clientHeight / state.scale * k);
  });
}

// Centres the view on the minimap's point (x, y) (canvas pixels).
function minimapGo(x, y) {
  const m = state.minimap, box = $('diagram');
  if (!m || !m.k) return;
  box.scrollLeft = (x / m.k) * state.scale - box.clientWidth / 2;
  box.scrollTop = (y / m.k) * state.scale - box.clientHeight / 2;
  viewMoved();
}

function fit() {
  const box = $('diagram'), d = state.drawn;
  if (!d) return;
  zoomTo(Math.min(box.clientWidth / d.width, box.clientHeight / d.height, 1));
  box.scrollLeft = box.scrollTop = 0;
  viewMoved();
}

// The diagram takes the window's height below what sits above it (the header, the report bar, an
// error or notice, the legend, the scope bar, a node's properties; at least 320 px), so that its
// bottom edge stays in the window as those come and go (a node just selected and centred stays
// in the centre when its properties push the diagram down).
function fitDiagramHeight() {
  const box = $('diagram');
  const fitHeight = () => {
    const top = box.getBoundingClientRect().top + window.scrollY;
    const height = `${Math.max(320, Math.floor(window.innerHeight - top - 14))}px`;  // 14: main's padding and the border
    if (box.style.height === height) return;
    const before = box.clientHeight;
    box.style.height = height;
    box.scrollTop += (before - box.clientHeight) / 2;  // the point at the view's centre stays there
    viewMoved();
  };
  const above = [document.querySelector('header'), $('paste-box'), $('report-bar'), $('error'), $('notice'),
    ...[...$('left').children].filter((e) => !e.classList.contains('diagram-wrap'))];
  const watch = new ResizeObserver(fitHeight);
  for (const e of above) if (e) watch.observe(e);
  window.addEventListener('resize', fitHeight);
  fitHeight();
}

function initPanZoom() {
  const box = $('diagram');
  box.addEventListener('wheel', (e) => {
    e.preventDefault();
    const r = box.getBoundingClientRect();
    zoomTo(state.scale * Math.exp(-e.deltaY * 0.0015), e.clientX - r.left, e.clientY - r.top);
  }, { passive: false });
  let drag = null;
  box.addEventListener('mousedown', (e) => { drag = { x: e.clientX, y: e.clientY, left: box.scrollLeft, top: box.scrollTop, moved: false }; });
  window.addEventListener('mousemove', (e) => {
    if (!drag) return;
    drag.moved = drag.moved || Math.abs(e.clientX - drag.x) + Math.abs(e.clientY - drag.y) > 3;
    box.scrollLeft = drag.left - (e.clientX - drag.x);
    box.scrollTop = drag.top - (e.clientY - drag.y);
  });
  window.addEventListener('mouseup', () => { state.dragged = !!(drag && drag.moved); drag = null; });
  box.addEventListener('scroll', viewMoved);
  window.addEventListener('resize', viewMoved);
  fitDiagramHeight();
  // The canvas renderer's hover and clicks: the item (or frame header) under the pointer.
  box.addEventListener('mousemove', (e) => {
    if (drag || !state.drawn || state.drawn.renderer !== 'canvas') return;
    const hit = hitTest(e);
    $('hover').textContent = hit && hit.info ? hit.info : $('hover').textContent;
    box.style.cursor = hit ? (hit.frame ? 'zoom-out' : hit.scope ? 'zoom-in' : 'pointer') : '';
  });
  box.addEventListener('click', (e) => {
    if (state.dragged || !state.drawn || state.drawn.renderer !== 'canvas') return;
    const hit = hitTest(e);
    if (hit) activate(hit);
  });
  const mini = $('minimap');
  let miniDrag = false;
  const miniAt = (e) => { const r = mini.getBoundingClientRect(); minimapGo(e.clientX - r.left, e.clientY - r.top); };
  mini.addEventListener('mousedown', (e) => { miniDrag = true; miniAt(e); e.preventDefault(); });
  window.addEventListener('mousemove', (e) => { if (miniDrag) miniAt(e); });
  window.addEventListener('mouseup', () => { miniDrag = false; });
  $('fit').addEventListener('click', fit);
  $('zoom-in').addEventListener('click', () => zoomTo(state.scale * 1.25));
  $('zoom-out').addEventListener('click', () => zoomTo(state.scale / 1.25));
}

// What a click on an item does: a node is selected, a collapsed scope expands, a frame's header
// collapses its scope.
function activate(it) {
  if (it.frame) return collapseScope(it.scope);
  if (it.scope) return expandScope(it.scope);
  return selectNode(it.key);
}

// ---- layout (layout.js, in layout_worker.js; on the page's thread where no worker starts) --------
let worker = null, layoutSeq = 0;
const pending = new Map();  // seq -> resolve
const pageLayouts = new Map();  // each group's layout, where the page lays out
function layoutWorker() {
  if (worker === null) {
    try {
      worker = new Worker('layout_worker.js');
      worker.onmessage = (e) => {
        const done = pending.get(e.data.seq);
        pending.delete(e.data.seq);
        if (done) done(e.data);
      };
      worker.onerror = (e) => {
        console.warn('layout worker failed, laying out on the page:', e.message);
        worker = false;
        for (const [seq, done] of pending) done({ seq, retry: true });
        pending.clear();
      };
    } catch (e) {
      worker = false;
    }
  }
  return worker;
}

// `fresh`: a graph other than the last one laid out (the kept group layouts are dropped).
async function layOut(graph, seq, fresh) {
  const w = layoutWorker();
  if (w) {
    const r = await new Promise((done) => { pending.set(seq, done); w.postMessage({ seq, graph, fresh }); });
    if (!r.retry) {
      if (r.error) throw new Error('layout: ' + r.error);
      state.layoutIn = 'worker';
      return r;
    }
  }
  state.layoutIn = 'page';
  // dagre loads on the page only here: the worker has its own.
  await loadScript('/npm/@dagrejs/dagre/dist/dagre.min.js', 'the diagram\'s layout');
  if (fresh) pageLayouts.clear();
  return kilnLayOut(graph, pageLayouts);
}

// ---- module scopes ------------------------------------------------------------------------------
// A node named "a/b/c/op" (the ONNX importer names each node after its exporter's module scopes)
// lies in the scopes "a", "a/b" and "a/b/c". Grouped, a collapsed scope is drawn as one box (a
// click expands it; the bar above the diagram collapses it again), so a real model's thousands
// of nodes show as its top modules; an expanded one is a frame around its items (a click on its
// header collapses it). Inputs and constants without a scope of their own (a model's weights)
// lie in the deepest scope all their users share: a collapsed layer holds its weights. A big
// graph without scopes is cut into runs of CHUNK computing nodes in graph order, its scopes.
const CHUNK = 400, CHUNK_PAST = 1000;
function scopeChains(g) {
  const chains = new Map();
  for (const n of g.nodes) {
    const parts = (n.name || '').split('/');
    parts.pop();
    chains.set(n.id, parts.filter(Boolean).map((_, i, a) => a.slice(0, i + 1).join('/')));
  }
  const common = (ids) => {
    let at = null;
    for (const id of ids) {
      const c = chains.get(id);
      if (!c.length) continue;
      if (at === null) at = c;
      let k = 0;
      while (k < at.length && k < c.length && at[k] === c[k]) ++k;
      at = at.slice(0, k);
    }
    return at || [];
  };
  const leaf = (n) => !(n.inputs || []).length;
  if (g.nodes.length > CHUNK_PAST && ![...chains.values()].some((c) => c.length)) {
    const computing = g.nodes.filter((n) => !leaf(n));
    for (let i = 0; i < computing.length; i += CHUNK) {
      const run = computing.slice(i, i + CHUNK);
      const name = `nodes %${run[0].id}–%${run[run.length - 1].id}`;
      for (const n of run) chains.set(n.id, [name]);
    }
  }
  // Nodes a pass or the decomposition made (no name) lie in the scope their inputs share, in
  // graph order so that it carries through chains of them; nodes without inputs (inputs,
  // constants, fills) in the scope their users share.
  for (const n of g.nodes) if (!leaf(n) && !chains.get(n.id).length) chains.set(n.id, common(n.inputs || []));
  const users = new Map();
  for (const n of g.nodes) for (const i of n.inputs || []) (users.get(i) || users.set(i, []).get(i)).push(n.id);
  for (const n of g.nodes) if (leaf(n) && !chains.get(n.id).length && users.has(n.id)) chains.set(n.id, common(users.get(n.id)));
  return chains;
}

// The graph's scopes, and which are expanded: all of them where grouping is off (frames around
// every scope); else those a click expanded, starting from the chain of lone top scopes (a
// model's wrapper and its one inner model) opened.
function scopesFor(g) {
  const s = state.scopes;
  if (s && s.g === g && s.mode === $('group').value) return s;
  const chains = scopeChains(g);
  const mode = $('group').value;
  const scoped = [...chains.values()].some((c) => c.length);
  const grouped = scoped && (mode === 'on' || (mode === 'auto' && g.nodes.length > 300));
  const next = { g, mode, chains, scoped, grouped, expanded: new Set(), count: new Set([...chains.values()].flat()).size };
  state.scopes = next;
  if (scoped && !grouped) {
    for (const c of chains.values()) for (const p of c) next.expanded.add(p);
  } else if (grouped) {
    for (let depth = 0; depth < 64; ++depth) {
      const items = new Set(g.nodes.map((n) => visibleItem(n.id)));
      const scopes = [...items].filter((v) => v.startsWith('scope:'));
      if (scopes.length !== 1 || items.size - 1 > 8) break;
      next.expanded.add(scopes[0].slice(6));
    }
  }
  return next;
}

// What stands for node id in the drawing: the node itself ("%id") or its outermost collapsed scope.
function visibleItem(id) {
  const s = state.scopes;
  if (s.scoped) for (const c of s.chains.get(id) || []) if (!s.expanded.has(c)) return 'scope:' + c;
  return String(id);
}

// Expands a scope, and on down while what it opens to is one scope alone (a stack of one layer).
function expandScope(path) {
  const s = state.scopes;
  for (let at = path; at; ) {
    s.expanded.add(at);
    const inner = new Set();
    for (const [id, chain] of s.chains) if (chain.includes(at)) inner.add(visibleItem(id));
    const only = inner.size === 1 ? [...inner][0] : '';
    at = only.startsWith('scope:') ? only.slice(6) : '';
  }
  return redraw();
}

function collapseScope(path) {
  for (const e of [...state.scopes.expanded]) if (e === path || e.startsWith(path + '/')) state.scopes.expanded.delete(e);
  return redraw();
}

function redraw() {
  const d = state.drawn;
  return drawGraph(d.g, d.kernelsOf, d.kernels, d.view).then((drawn) => {
    const at = state.matchAt;  // stepping through matches goes on from where it was
    if (drawn) search();
    state.matchAt = at;
    return drawn;
  });
}

// The bar of expanded scopes: each collapses again on a click (the first 24; a frame's header
// collapses any). With every scope expanded (grouping off), a line saying so.
function showScopeBar() {
  const s = state.scopes;
  const bar = $('scopes');
  if (!s.scoped) {
    bar.replaceChildren();
    return;
  }
  const open = [...s.expanded].sort((a, b) => a.localeCompare(b, undefined, { numeric: true }));
  if (!s.grouped) {
    bar.replaceChildren(el('span', {}, `${open.length} of ${s.count} scopes expanded: a click on a frame's header collapses it`));
    return;
  }
  const shown = open.slice(0, 24);
  bar.replaceChildren(el('span', {}, open.length ? 'expanded scopes (click one, or its frame\'s header, to collapse it): ' : 'module scopes collapsed: click a dashed box to expand it'),
    ...shown.map((p) => {
      const b = el('button', { title: 'collapse ' + p }, '− ' + p);
      b.dataset.scope = p;
      b.addEventListener('click', () => collapseScope(p));
      return b;
    }), ...(open.length > shown.length ? [el('span', {}, ` and ${open.length - shown.length} more`)] : []));
}

// ---- drawing ------------------------------------------------------------------------------------
// Draws graph g; false when a newer drawing started while this one's layout ran.
async function drawGraph(g, kernelsOf, kernels, view) {
  const seq = ++layoutSeq;
  const scopes = scopesFor(g);
  const fresh = state.laidOutGraph !== g;
  state.laidOutGraph = g;
  // The drawn items: visible nodes, and collapsed scopes with their members and kernels; each in
  // the frame of the innermost expanded scope around it.
  const items = new Map();
  const frameAt = (chain, n) => (n > 0 ? 'frame:' + chain[n - 1] : '');
  for (const n of g.nodes) {
    const key = visibleItem(n.id);
    const chain = scopes.scoped ? scopes.chains.get(n.id) || [] : [];
    if (key === String(n.id)) {
      const label = `%${n.id} ${n.op}`;
      items.set(key, { key, node: n, members: [n.id], kernels: kernelsOf.get(n.id) || [], label,
        width: Math.max(70, label.length * 7 + 12), height: NODE_HEIGHT, parent: frameAt(chain, chain.length) });
      continue;
    }
    let it = items.get(key);
    if (!it) items.set(key, it = { key, scope: key.slice(6), members: [], kset: new Set(), height: SCOPE_HEIGHT, parent: frameAt(chain, chain.indexOf(key.slice(6))) });
    it.members.push(n.id);
    for (const k of kernelsOf.get(n.id) || []) it.kset.add(k);
  }
  for (const it of items.values()) {
    if (!it.scope) continue;
    it.kernels = [...it.kset].sort((a, b) => a - b);
    it.label = `${it.scope.split('/').pop()} ▸ ${it.members.length} nodes`;
    it.width = Math.max(90, it.label.length * 7 + 16);
  }
  const frames = new Map();
  for (const it of items.values()) {
    for (let f = it.parent; f && !frames.has(f); ) {
      const path = f.slice(6), cut = path.lastIndexOf('/');
      const parent = cut < 0 ? '' : 'frame:' + path.slice(0, cut);
      frames.set(f, { key: f, scope: path, parent, frame: true });
      f = parent;
    }
  }
  const edges = new Set();
  for (const n of g.nodes) {
    const to = visibleItem(n.id);
    for (const i of n.inputs || []) {
      const from = visibleItem(i);
      if (from !== to) edges.add(from + '\n' + to);
    }
  }
  const laid = await layOut({
    nodes: [...items.values()].map((it) => ({ id: it.key, width: it.width, height: it.height, parent: it.parent })),
    groups: [...frames.values()].map((f) => ({ id: f.key, parent: f.parent })),
    edges: [...edges].map((e) => e.split('\n')),
  }, seq, fresh);
  if (seq !== layoutSeq) return false;
  state.layoutMs = laid.ms;
  state.layoutGroups = laid.laidOut;
  const overlay = overlayFor(state.report, $('fill').value);
  for (const it of items.values()) {
    Object.assign(it, laid.nodes[it.key]);
    it.fill = overlayFill(overlay, it.kernels) ??
      (it.node ? (it.kernels.length ? colour(it.kernels[0]) : '#e8e8e8') : (it.kernels.length === 1 ? colour(it.kernels[0]) : '#f4f1e8'));
    it.info = it.node
      ? `%${it.node.id} = ${it.node.op}${it.node.name ? ' "' + it.node.name + '"' : ''} : ${shapeStr(it.node.type)}` +
        (it.kernels.length ? ` · kernel ${it.kernels.map((k) => kernels[k].name).join(', ')}` : ' · no kernel (input, constant, view or dead)')
      : `scope ${it.scope}: ${it.members.length} nodes, ${it.kernels.length} kernel${it.kernels.length === 1 ? '' : 's'} · click to expand`;
  }
  for (const f of frames.values()) {
    Object.assign(f, laid.groups[f.key]);
    f.info = `scope ${f.scope} (expanded) · click its header to collapse it`;
  }
  const d = {
    g, kernelsOf, kernels, view, byId: new Map(g.nodes.map((n) => [String(n.id), n])), items: items.size, frames: [...frames.values()],
    leaves: items, edges: laid.edges, width: laid.width + 16, height: laid.height + 16,
    renderer: items.size + frames.size > CANVAS_PAST ? 'canvas' : 'svg', overlay,
  };
  state.drawn = d;
  state.marks = { selected: new Set(), inKernel: new Set(), match: new Set() };
  markDecisions(null);
  if (d.renderer === 'svg') drawSvg(d);
  else drawCanvas(d);
  state.minimap = { width: d.width, height: d.height, rects: [...items.values()].map((it) => ({ x: it.x, y: it.y, w: it.width, h: it.height,
    fill: it.node ? (it.kernels.length ? it.fill : '#ccc') : '#b9b3a0' })) };
  viewMoved();
  showScopeBar();
  showLegend(d);
  return true;
}

// ---- the SVG renderer: an element per item -------------------------------------------------------
function drawSvg(d) {
  $('diagram-canvas').hidden = true;
  const NS = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(NS, 'svg');
  svg.setAttribute('viewBox', `0 0 ${d.width} ${d.height}`);
  svg.dataset.width = d.width;
  svg.dataset.height = d.height;
  svg.innerHTML = '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" orient="auto"><path d="M0,0L10,5L0,10z" fill="#888"/></marker></defs>';
  const make = (tag, attrs) => {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    return e;
  };
  // Frames first, outer ones under inner ones: a rectangle, the scope's name, a header to click.
  for (const f of [...d.frames].sort((a, b) => a.scope.split('/').length - b.scope.split('/').length)) {
    const group = make('g', { class: 'frame', 'data-scope': f.scope });
    const x = f.x - f.width / 2, y = f.y - f.height / 2;
    const head = make('rect', { class: 'head', x, y, width: f.width, height: GROUP_HEAD });
    const text = make('text', { x: x + 6, y: y + 13 });
    text.textContent = f.scope.split('/').pop();
    const title = make('title', {});
    title.textContent = f.info;
    group.append(make('rect', { class: 'box', x, y, width: f.width, height: f.height, rx: 6 }), text, head, title);
    head.addEventListener('click', () => collapseScope(f.scope));
    svg.append(group);
  }
  for (const e of d.edges) svg.append(make('path', { class: 'edge', d: 'M' + e.points.map((p) => `${p.x},${p.y}`).join('L') }));
  for (const it of d.leaves.values()) {
    const group = make('g', { class: it.node ? 'node' : 'scope', 'data-kernel': it.kernels.join(' ') });
    if (it.node) group.setAttribute('data-node', it.key);
    else {
      group.setAttribute('data-scope', it.scope);
      group.setAttribute('data-nodes', it.members.join(' '));
    }
    group.dataset.key = it.key;
    const title = make('title', {});
    title.textContent = it.info;
    const text = make('text', { x: it.x, y: it.y + 4, 'text-anchor': 'middle' });
    text.textContent = it.label;
    group.append(title, make('rect', { x: it.x - it.width / 2, y: it.y - it.height / 2, width: it.width, height: it.height, rx: 4, fill: it.fill }), text);
    group.addEventListener('click', () => activate(it));
    group.addEventListener('mouseenter', () => { $('hover').textContent = it.info; });
    svg.append(group);
  }
  $('diagram').replaceChildren(svg);
  sizeDrawing();
}

function paintMarks() {
  const d = state.drawn;
  if (!d) return;
  if (d.renderer === 'canvas') return paintCanvas();
  const m = state.marks;
  for (const g of document.querySelectorAll('#diagram g.node, #diagram g.scope')) {
    g.classList.toggle('selected', m.selected.has(g.dataset.key));
    g.classList.toggle('in-kernel', m.inKernel.has(g.dataset.key));
    g.classList.toggle('match', m.match.has(g.dataset.key));
  }
}

// ---- the canvas renderer: the part in view, drawn each frame -------------------------------------
// The box scrolls over a spacer of the drawing's size (so pan, zoom and the minimap work as for
// SVG); the canvas lies over the box and draws what is in view from a grid of cells.
const CELL = 512;  // layout units a grid cell spans
function drawCanvas(d) {
  const space = el('div', { class: 'canvas-space' });
  $('diagram').replaceChildren(space);
  sizeDrawing();
  $('diagram-canvas').hidden = false;
  // Each leaf, frame and edge in the cells its bounds touch.
  const grid = new Map();
  const add = (list, i, x0, y0, x1, y1) => {
    for (let cx = Math.floor(x0 / CELL); cx <= Math.floor(x1 / CELL); ++cx)
      for (let cy = Math.floor(y0 / CELL); cy <= Math.floor(y1 / CELL); ++cy) {
        const k = cx + ',' + cy;
        let cell = grid.get(k);
        if (!cell) grid.set(k, cell = { leaves: [], frames: [], edges: [] });
        cell[list].push(i);
      }
  };
  d.leafList = [...d.leaves.values()];
  d.leafList.forEach((it, i) => add('leaves', i, it.x - it.width / 2, it.y - it.height / 2, it.x + it.width / 2, it.y + it.height / 2));
  d.frames.forEach((f, i) => add('frames', i, f.x - f.width / 2, f.y - f.height / 2, f.x + f.width / 2, f.y + f.height / 2));
  d.edgeBounds = d.edges.map((e, i) => {
    const xs = e.points.map((p) => p.x), ys = e.points.map((p) => p.y);
    const b = [Math.min(...xs), Math.min(...ys), Math.max(...xs), Math.max(...ys)];
    add('edges', i, ...b);
    return b;
  });
  d.grid = grid;
  d.frameDepth = d.frames.map((f) => f.scope.split('/').length);
}

// What lies in layout rectangle [x0, x1] x [y0, y1]: indices of leaves, frames and edges.
function inView(d, x0, y0, x1, y1) {
  const cells = (Math.floor(x1 / CELL) - Math.floor(x0 / CELL) + 1) * (Math.floor(y1 / CELL) - Math.floor(y0 / CELL) + 1);
  if (cells > d.grid.size) return { leaves: d.leafList.keys(), frames: d.frames.keys(), edges: d.edges.keys() };
  const out = { leaves: new Set(), frames: new Set(), edges: new Set() };
  for (let cx = Math.floor(x0 / CELL); cx <= Math.floor(x1 / CELL); ++cx)
    for (let cy = Math.floor(y0 / CELL); cy <= Math.floor(y1 / CELL); ++cy) {
      const cell = d.grid.get(cx + ',' + cy);
      if (!cell) continue;
      for (const list of ['leaves', 'frames', 'edges']) for (const i of cell[list]) out[list].add(i);
    }
  return out;
}

let canvasFrame = 0;
function paintCanvas() {
  if (canvasFrame || !state.drawn || state.drawn.renderer !== 'canvas') return;
  canvasFrame = requestAnimationFrame(() => {
    canvasFrame = 0;
    const t0 = performance.now();
    const d = state.drawn;
    if (!d || d.renderer !== 'canvas') return;
    paintView(d);
    const ms = performance.now() - t0;
    state.paint = { ms, frames: (state.paint?.frames ?? 0) + 1, worst: Math.max(state.paint?.worst ?? 0, ms) };
  });
}

function paintView(d) {
  const box = $('diagram'), canvas = $('diagram-canvas');
  const dpr = window.devicePixelRatio || 1, W = box.clientWidth, H = box.clientHeight, s = state.scale;
  canvas.style.left = `${box.offsetLeft + box.clientLeft}px`;
  canvas.style.top = `${box.offsetTop + box.clientTop}px`;
  canvas.style.width = `${W}px`;
  canvas.style.height = `${H}px`;
  if (canvas.width !== Math.round(W * dpr) || canvas.height !== Math.round(H * dpr)) {
    canvas.width = Math.round(W * dpr);
    canvas.height = Math.round(H * dpr);
  }
  const c = canvas.getContext('2d');
  c.setTransform(1, 0, 0, 1, 0, 0);
  c.clearRect(0, 0, canvas.width, canvas.height);
  c.setTransform(dpr * s, 0, 0, dpr * s, -box.scrollLeft * dpr, -box.scrollTop * dpr);
  const x0 = box.scrollLeft / s, y0 = box.scrollTop / s, x1 = x0 + W / s, y1 = y0 + H / s;
  const seen = inView(d, x0, y0, x1, y1);
  const px = 1 / s;  // one screen pixel in layout units
  const overlaps = (x, y, w, h) => x + w / 2 >= x0 && x - w / 2 <= x1 && y + h / 2 >= y0 && y - h / 2 <= y1;
  // Frames, outer under inner.
  const frames = [...seen.frames].filter((i) => overlaps(d.frames[i].x, d.frames[i].y, d.frames[i].width, d.frames[i].height))
    .sort((a, b) => d.frameDepth[a] - d.frameDepth[b]);
  c.lineWidth = px;
  c.setLineDash(s > 0.2 ? [4, 3] : []);
  for (const i of frames) {
    const f = d.frames[i];
    c.fillStyle = d.frameDepth[i] % 2 ? '#faf8f2' : '#f3f0e6';
    c.fillRect(f.x - f.width / 2, f.y - f.height / 2, f.width, f.height);
    c.strokeStyle = '#b9b3a0';
    c.strokeRect(f.x - f.width / 2, f.y - f.height / 2, f.width, f.height);
  }
  c.setLineDash([]);
  // Edges as one path (arrowheads once they are big enough to see).
  c.strokeStyle = '#999';
  c.beginPath();
  const heads = [];
  for (const i of seen.edges) {
    const b = d.edgeBounds[i];
    if (b[2] < x0 || b[0] > x1 || b[3] < y0 || b[1] > y1) continue;
    const pts = d.edges[i].points;
    if (pts.length < 2) continue;
    c.moveTo(pts[0].x, pts[0].y);
    for (let k = 1; k < pts.length; ++k) c.lineTo(pts[k].x, pts[k].y);
    if (s > 0.3) heads.push(pts);
  }
  c.stroke();
  c.fillStyle = '#888';
  c.beginPath();
  for (const pts of heads) {
    const a = pts[pts.length - 2], b = pts[pts.length - 1], len = Math.hypot(b.x - a.x, b.y - a.y) || 1;
    const ux = (b.x - a.x) / len, uy = (b.y - a.y) / len;
    c.moveTo(b.x, b.y);
    c.lineTo(b.x - 6 * ux - 3 * uy, b.y - 6 * uy + 3 * ux);
    c.lineTo(b.x - 6 * ux + 3 * uy, b.y - 6 * uy - 3 * ux);
    c.closePath();
  }
  c.fill();
  // Items, by fill colour (few style changes), then their outlines, marks and labels.
  const shown = [];
  for (const i of seen.leaves) {
    const it = d.leafList[i];
    if (overlaps(it.x, it.y, it.width, it.height)) shown.push(it);
  }
  const byFill = new Map();
  for (const it of shown) (byFill.get(it.fill) || byFill.set(it.fill, []).get(it.fill)).push(it);
  for (const [fill, list] of byFill) {
    c.fillStyle = fill;
    c.beginPath();
    for (const it of list) c.rect(it.x - it.width / 2, it.y - it.height / 2, it.width, it.height);
    c.fill();
  }
  if (s > 0.08) {
    c.strokeStyle = '#333';
    c.lineWidth = px;
    c.beginPath();
    for (const it of shown) if (it.node) c.rect(it.x - it.width / 2, it.y - it.height / 2, it.width, it.height);
    c.stroke();
    c.strokeStyle = '#555';
    c.setLineDash([5, 3]);
    c.lineWidth = 1.5 * px;
    c.beginPath();
    for (const it of shown) if (!it.node) c.rect(it.x - it.width / 2, it.y - it.height / 2, it.width, it.height);
    c.stroke();
    c.setLineDash([]);
  }
  for (const [name, [colourOf, width]] of Object.entries(MARK_STYLE)) {
    const keys = state.marks[name];
    if (!keys.size) continue;
    c.strokeStyle = colourOf;
    c.lineWidth = Math.max(width, width * px);
    c.beginPath();
    for (const it of shown) if (keys.has(it.key)) c.rect(it.x - it.width / 2, it.y - it.height / 2, it.width, it.height);
    c.stroke();
  }
  if (s >= 0.45) {
    c.fillStyle = '#222';
    c.font = '11px monospace';
    c.textAlign = 'center';
    for (const it of shown) c.fillText(it.label, it.x, it.y + 4);
    c.textAlign = 'left';
    c.fillStyle = '#776';
    for (const i of frames) {
      const f = d.frames[i];
      c.fillText(f.scope.split('/').pop(), f.x - f.width / 2 + 6, f.y - f.height / 2 + 13);
    }
  }
}

// The item under a mouse event on the box, or the innermost frame whose header it is on.
function hitTest(e) {
  const d = state.drawn, box = $('diagram'), r = box.getBoundingClientRect();
  const x = (e.clientX - r.left - box.clientLeft + box.scrollLeft) / state.scale, y = (e.clientY - r.top - box.clientTop + box.scrollTop) / state.scale;
  const seen = inView(d, x, y, x, y);
  for (const i of seen.leaves) {
    const it = d.leafList[i];
    if (Math.abs(x - it.x) <= it.width / 2 && Math.abs(y - it.y) <= it.height / 2) return it;
  }
  let best = null;
  for (const i of seen.frames) {
    const f = d.frames[i], top = f.y - f.height / 2;
    if (Math.abs(x - f.x) <= f.width / 2 && y >= top && y <= top + GROUP_HEAD && (!best || d.frameDepth[i] > best.depth)) best = { f, depth: d.frameDepth[i] };
  }
  return best && best.f;
}
