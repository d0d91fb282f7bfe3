'use strict';
// The viewer of `kiln report` (native/cli/cmd_report.cpp): the kiln.report data in the page's
// JSON script element, drawn without libraries or network. Everything is built on demand (a
// compile's page when first shown, each tab's panel when first opened): a BERT-size compile holds
// ~25 passes of ~1,000-line graphs, most of which nobody looks at.
(() => {
  const t0 = performance.now();
  const data = JSON.parse(document.getElementById('kiln-report-data').textContent);
  const parseMs = performance.now() - t0;
  const compiles = data.compiles || [];
  const functions = data.functions || [];
  const TABS = [['overview', 'Overview'], ['guards', 'Guards'], ['graphs', 'Graphs'], ['passes', 'Passes'],
    ['fusion', 'Fusion'], ['kernels', 'Kernels'], ['plan', 'Plan']];
  const VIEWS = [['input', 'Captured'], ['optimized', 'Optimised'], ['scheduled', 'Scheduled']];
  const VIEW_LABEL = Object.fromEntries(VIEWS);
  const FILTERED = new Set(['graphs', 'kernels']);
  const LANGUAGE = { cpu: 'LLVM IR', cuda: 'CUDA C++', vulkan: 'GLSL', llvm: 'LLVM IR (a module of its own)' };
  const perf = { parseMs, tabMs: {} };
  window.kilnReport = perf;  // for the browser test

  function h(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v == null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : v);
    }
    for (const kid of kids.flat(Infinity)) if (kid != null && kid !== false) e.append(kid instanceof Node ? kid : String(kid));
    return e;
  }
  const section = (title, ...body) => h('section', { class: 'sec' }, h('h3', null, title), ...body);
  const muted = (text) => h('p', { class: 'muted' }, text);
  const pre = (text, cls) => h('pre', { class: cls || 'text' }, text);
  const badge = (kind) => h('span', { class: `badge k-${kind}` }, kind);
  const plural = (n, word) => `${n} ${word}${n === 1 ? '' : word.endsWith('s') ? 'es' : 's'}`;
  const num = (v) => typeof v === 'number' && isFinite(v);

  function si(v, unit) {
    if (!num(v)) return '—';
    const prefix = ['', 'k', 'M', 'G', 'T', 'P'];
    let i = 0;
    for (; Math.abs(v) >= 1000 && i < prefix.length - 1; i++) v /= 1000;
    return `${i ? v.toPrecision(3) : +v.toFixed(2)} ${prefix[i]}${unit}`;
  }
  function bytes(v) {
    if (!num(v)) return '—';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    for (; v >= 1024 && i < units.length - 1; i++) v /= 1024;
    return `${i ? v.toPrecision(3) : +v.toFixed(2)} ${units[i]}`;
  }
  const ms = (v) => (!num(v) ? '—' : v >= 1000 ? `${(v / 1000).toFixed(2)} s` : `${v.toFixed(v < 10 ? 2 : 1)} ms`);
  // Program-side compile time where measured, else the time this report took to compile it again.
  const compileMs = (c) => (num((c.timing_ms || {}).compile) ? c.timing_ms.compile : c.report && c.report.timing_ms ? c.report.timing_ms.total : undefined);

  function debounce(fn, wait) {
    let timer;
    return () => { clearTimeout(timer); timer = setTimeout(fn, wait); };
  }

  // ---- Places: #c=F/C&tab=TAB&k=KERNEL or &n=VIEW:NODE. A compile or tab change is a history
  // entry (back and forward walk them); a selection replaces the current one.
  let cur = { c: null, tab: 'overview', k: null, n: null, missing: null };

  function readHash() {
    const q = new URLSearchParams(location.hash.slice(1));
    const s = { c: null, tab: 'overview', k: null, n: null, missing: null };
    if (q.has('c')) {
      const ci = compiles.findIndex((c) => c.id === q.get('c'));
      if (ci < 0) s.missing = q.get('c');
      else s.c = ci;
    }
    if (TABS.some(([t]) => t === q.get('tab'))) s.tab = q.get('tab');
    const n = /^(input|optimized|scheduled):(\d+)$/.exec(q.get('n') || '');
    if (n) s.n = { view: n[1], id: Number(n[2]) };
    else if (/^\d+$/.test(q.get('k') || '')) s.k = Number(q.get('k'));
    return s;
  }

  function hashOf(s) {
    if (s.c == null) return '#';
    const parts = [`c=${compiles[s.c].id}`];
    if (s.tab !== 'overview') parts.push(`tab=${s.tab}`);
    if (s.n) parts.push(`n=${s.n.view}:${s.n.id}`);
    else if (s.k != null) parts.push(`k=${s.k}`);
    return '#' + parts.join('&');
  }

  let revealNext = false;  // scroll the selection into view on the next show
  function go(s, push) {
    const hash = hashOf(s);
    if (push && hash !== (location.hash || '#')) location.hash = hash;  // 'hashchange' shows it
    else {
      history.replaceState(null, '', hash);
      show(s);
    }
  }
  const sameSelection = (a, b) => a.c === b.c && a.k === b.k && (a.n && a.n.view) === (b.n && b.n.view) && (a.n && a.n.id) === (b.n && b.n.id);
  const selectNode = (view, id) => { revealNext = true; go({ ...cur, n: { view, id }, k: null }, false); };
  const selectKernel = (k) => { revealNext = true; go({ ...cur, k, n: null }, false); };
  const openTab = (tab) => { revealNext = true; go({ ...cur, tab }, true); };

  // ---- The index (left) and header.
  function buildChrome() {
    const counts = { recompile: 0, breaks: 0, errors: 0 };
    for (const c of compiles) {
      counts.recompile += c.kind === 'recompile';
      counts.breaks += (c.graph_breaks || []).length;
      counts.errors += c.report == null;
    }
    document.getElementById('meta').append(...[
      h('span', { class: 'src', title: data.source }, data.source || '(no source recorded)'),
      h('span', null, `Kiln ${data.kiln_version || '?'}`), h('span', null, `made ${data.created || '?'}`),
      h('span', null, `${plural(compiles.length, 'compile')} of ${plural(functions.length, 'function')}`),
      counts.recompile ? h('span', { class: 'warn' }, plural(counts.recompile, 'recompile')) : null,
      counts.breaks ? h('span', { class: 'warn' }, plural(counts.breaks, 'graph break')) : null,
      counts.errors ? h('span', { class: 'bad' }, `${counts.errors} without a report`) : null].filter(Boolean));
    const nav = document.getElementById('index');
    nav.append(h('a', { href: '#', class: 'summary-link' }, 'Summary'));
    functions.forEach((f, fi) => {
      nav.append(h('div', { class: 'ifn' }, h('div', { class: 'ifname', title: f.name }, `${fi} `, f.name),
        (f.compiles || []).map((ci) => {
          const c = compiles[ci];
          return h('a', { href: `#c=${c.id}`, 'data-c': ci, title: c.reason || c.error || '' }, h('span', { class: 'cid' }, `[${c.id}]`), ' ',
            badge(c.kind), c.report == null ? h('span', { class: 'bad' }, ' no report') : null);
        })));
    });
  }

  let summary;
  function summaryPage() {
    if (summary) return summary;
    const rows = compiles.map((c, ci) => {
      const f = functions[c.function] || {};
      const breaks = c.graph_breaks || [];
      return h('tr', { class: c.report == null ? 'noreport' : null, onclick: (e) => { if (!e.target.closest('a')) go({ ...cur, c: ci, tab: 'overview', k: null, n: null }, true); } },
        h('td', null, h('a', { href: `#c=${c.id}`, class: 'cid' }, c.id)), h('td', { class: 'fname', title: f.name }, f.name || ''),
        h('td', null, badge(c.kind)), h('td', { class: 'why', title: c.reason || c.error || '' }, c.reason || (c.error ? h('span', { class: 'bad' }, c.error) : '')),
        h('td', { class: 'n', title: breaks.join('\n') }, breaks.length), h('td', null, c.target || ''), h('td', null, c.mode || ''),
        h('td', { class: 'n' }, c.report ? (c.report.kernels || []).length : '—'), h('td', { class: 'n' }, ms(compileMs(c))));
    });
    summary = h('div', { class: 'panel scroll summary' }, h('div', { class: 'notice', hidden: true }),
      section('Compiles', compiles.length
        ? h('table', { class: 'compiles' }, h('thead', null, h('tr', null, ['id', 'function', 'kind', 'reason', 'graph breaks', 'target', 'mode', 'kernels', 'compile time']
          .map((t) => h('th', null, t)))), h('tbody', null, rows))
        : h('div', { class: 'callout' }, h('b', null, 'No compiles were recorded. '),
          'A debug directory gets one folder per graph a compiled function compiles, so it stays empty when the program called no compiled ' +
          'function while KILN_DEBUG_DIR was set, or when every call reused a graph the function had already compiled.')),
      section('Functions', functions.length ? functions.map((f, fi) => h('div', { class: 'fn' },
        h('h4', null, `${fi}: `, h('code', null, f.name)),
        h('p', null, plural((f.compiles || []).length, 'compile'), ': ', (f.compiles || []).map((ci) => [h('a', { href: `#c=${compiles[ci].id}` }, `[${compiles[ci].id}]`), ' '])),
        f.stats ? pre(f.stats) : muted('no stats recorded'))) : muted('none')));
    return summary;
  }

  // ---- A compile's page.
  const pages = new Map();
  function page(ci) {
    if (pages.has(ci)) return pages.get(ci);
    const c = compiles[ci];
    const r = c.report;
    const f = functions[c.function] || {};
    const p = { ci, c, r, panels: {}, scrolls: {}, lines: {}, rows: {}, cols: {}, counts: {}, cards: null, kitems: null, marked: [], applied: {}, kn: {} };
    p.src = new Map((c.sources || []).map((x) => [x.node, x]));  // captured node -> the program's line that traced it
    const count = { guards: (c.guards || []).length, kernels: r ? (r.kernels || []).length : null,
      passes: r ? `${(r.passes || []).filter((x) => x.changed).length}/${(r.passes || []).length}` : null };
    p.tabs = TABS.map(([id, label]) => h('button', { role: 'tab', 'data-tab': id, onclick: () => openTab(id), class: !r && !['overview', 'guards'].includes(id) ? 'off' : null }, label,
      count[id] != null ? h('span', { class: 'count' }, ` ${count[id]}`) : null));
    p.filter = h('input', { type: 'search', placeholder: 'filter: text or /regex/', 'aria-label': 'filter', oninput: debounce(() => applyFilter(p), 200) });
    p.filterMsg = h('span', { class: 'fmsg' });
    p.fbox = h('span', { class: 'fbox' }, p.filter, p.filterMsg);
    p.selbar = h('div', { class: 'selbar' });
    p.body = h('div', { class: 'panels' });
    const near = (d) => compiles[ci + d] && h('a', { href: `#c=${compiles[ci + d].id}`, class: 'near' }, d < 0 ? `← [${compiles[ci + d].id}]` : `[${compiles[ci + d].id}] →`);
    const time = compileMs(c);
    p.root = h('div', { class: 'cpage' },
      h('div', { class: 'chead' },
        h('h2', null, h('span', { class: 'cid' }, `[${c.id}]`), ' ', badge(c.kind), ' ', h('span', { class: 'fname', title: f.name }, f.name || ''),
          h('span', { class: 'nav' }, near(-1), ' ', near(1))),
        h('div', { class: 'csub' }, [c.target && `target ${c.target}`, c.mode && `mode ${c.mode}`, r && plural((r.kernels || []).length, 'kernel'),
          num(time) && `compiled in ${ms(time)}`, (c.graph_breaks || []).length && plural(c.graph_breaks.length, 'graph break')].filter(Boolean).join(' · ')),
        c.reason || c.kind === 'recompile' ? h('div', { class: 'reason' }, h('b', null, c.kind === 'recompile' ? 'Recompiled because ' : 'Reason: '),
          c.reason ? h('code', null, c.reason) : 'no reason was recorded') : null,
        r ? null : h('div', { class: 'reason bad' }, h('b', null, 'No compile report: '), c.error || 'no reason recorded')),
      h('div', { class: 'bar', role: 'tablist' }, p.tabs, p.fbox), p.selbar, p.body);
    pages.set(ci, p);
    return p;
  }

  function showTab(p, tab) {
    const old = p.panels[p.tab];
    if (old && p.tab !== tab) {
      p.scrolls[p.tab] = [old, ...old.querySelectorAll('.scroll')].map((e) => e.scrollTop);
      old.hidden = true;
    }
    if (!p.panels[tab]) {
      const start = performance.now();
      const needsReport = !['overview', 'guards'].includes(tab);
      p.panels[tab] = h('div', { class: `panel scroll ${tab}` },
        needsReport && !p.r ? h('div', { class: 'callout bad' }, h('b', null, 'This compile has no report: '), p.c.error || 'no reason recorded') : BUILD[tab](p));
      p.body.append(p.panels[tab]);
      perf.tabMs[`${p.c.id} ${tab}`] = performance.now() - start;
    }
    const panel = p.panels[tab];
    panel.hidden = false;
    if (p.scrolls[tab] && p.tab !== tab) [panel, ...panel.querySelectorAll('.scroll')].forEach((e, i) => { e.scrollTop = p.scrolls[tab][i] || 0; });
    p.tab = tab;
    for (const b of p.tabs) b.setAttribute('aria-selected', String(b.dataset.tab === tab));
    p.fbox.hidden = !FILTERED.has(tab) || !p.r;
    applyFilter(p);
  }

  function show(s) {
    const start = performance.now();
    const moved = !sameSelection(s, cur) || s.tab !== cur.tab || revealNext;
    revealNext = false;
    cur = s;
    const main = document.getElementById('main');
    for (const a of document.querySelectorAll('#index a')) a.classList.toggle('active', s.c == null ? a.classList.contains('summary-link') : a.dataset.c === String(s.c));
    if (s.c == null) {
      const sp = summaryPage();
      const notice = sp.querySelector('.notice');
      notice.hidden = !s.missing;
      notice.textContent = s.missing ? `This report holds no compile [${s.missing}]: the link names a compile of another report.` : '';
      main.replaceChildren(sp);
      document.title = 'Kiln compile report';
      return;
    }
    const p = page(s.c);
    if (main.firstChild !== p.root) main.replaceChildren(p.root);
    document.title = `[${p.c.id}] ${TABS.find(([t]) => t === s.tab)[1]} · Kiln compile report`;
    showTab(p, s.tab);
    paint(p);
    if (moved) reveal(p);
    perf.showMs = performance.now() - start;
  }

  // ---- Provenance: a node selected in a view, or a kernel; what it lights up everywhere.
  // Kernel -> its nodes in a view: the inverse of node_kernels, and in the scheduled view the
  // kernel's provenance too (node_kernels also names nodes a kernel recomputes inline).
  function kernelNodes(p, view) {
    if (p.kn[view]) return p.kn[view];
    const out = (p.r.kernels || []).map((k) => new Set(view === 'scheduled' ? (k.provenance || []).filter((n) => n >= 0) : []));
    ((p.r.node_kernels || {})[view] || []).forEach((list, id) => { for (const k of list) if (out[k]) out[k].add(id); });
    return (p.kn[view] = out);
  }

  function lit(p) {
    if (!p.r || (!cur.n && cur.k == null)) return null;
    const ks = cur.n ? ((p.r.node_kernels || {})[cur.n.view] || [])[cur.n.id] || [] : cur.k < (p.r.kernels || []).length ? [cur.k] : [];
    const nodes = {};
    for (const [v] of VIEWS) {
      const set = new Set();
      for (const k of ks) for (const id of kernelNodes(p, v)[k] || []) set.add(id);
      nodes[v] = set;
    }
    if (cur.n) nodes[cur.n.view].add(cur.n.id);
    return { ks, nodes };
  }

  function paint(p) {
    for (const e of p.marked) e.classList.remove('hl', 'sel');
    p.marked = [];
    const L = lit(p);
    const mark = (e, sel) => {
      if (!e) return;
      e.classList.add('hl');
      if (sel) e.classList.add('sel');
      p.marked.push(e);
    };
    if (L) {
      for (const [v] of VIEWS) if (p.lines[v]) for (const id of L.nodes[v]) mark(p.lines[v][id], cur.n && cur.n.view === v && cur.n.id === id);
      if (p.cards) for (const k of L.ks) mark(p.cards[k], cur.k === k);
      if (p.decisionLines) decisionIds(p).forEach((ids, i) => { if (concerns(ids, L.nodes.scheduled)) mark(p.decisionLines[i], false); });
    }
    selbar(p, L);
  }

  const decisionsAbout = (p, L) => decisionIds(p).filter((ids) => concerns(ids, L.nodes.scheduled)).length;

  function selbar(p, L) {
    p.selbar.hidden = !L;
    if (!L) return;
    const ks = p.r.kernels || [];
    const kernelLink = (k) => h('button', { class: 'klink', onclick: () => selectKernel(k) }, `#${k} ${ks[k].name}`);
    const what = cur.n ? [h('b', null, `%${cur.n.id}`), ` of the ${VIEW_LABEL[cur.n.view].toLowerCase()} graph `, L.ks.length
      ? ['is computed by ', L.ks.map((k, i) => [i ? ', ' : '', kernelLink(k)])] : h('span', { class: 'muted' }, 'is computed by no kernel (an input, a constant, a view, or dead)')]
      : L.ks.length ? ['kernel ', h('b', null, `#${cur.k} ${ks[cur.k].name}`), ` (${ks[cur.k].kind})`] : h('span', { class: 'bad' }, `this compile has no kernel #${cur.k}`);
    const srcs = litSources(p, L);
    const traced = srcs.length ? h('span', { class: 'srcsel' }, ' · traced at ', srcs.slice(0, 3).map((x, i) => [i ? ', ' : '', h('code', { title: sourceTitle(x) }, sourceShort(x))]),
      srcs.length > 3 ? ` and ${srcs.length - 3} more lines` : '') : null;
    p.selbar.replaceChildren(h('span', null, what, traced, h('span', { class: 'muted' }, ` · lit: ${VIEWS.map(([v, label]) => `${L.nodes[v].size} ${label.toLowerCase()}`).join(', ')} nodes · `),
      h('button', { onclick: () => openTab('graphs') }, 'show in graph'), ' ',
      L.ks.length ? h('button', { onclick: () => openTab('kernels') }, 'show kernel' + (L.ks.length > 1 ? 's' : '')) : null, ' ',
      decisionsAbout(p, L) ? h('button', { onclick: () => openTab('fusion') }, `show ${plural(decisionsAbout(p, L), 'fusion decision')}`) : null, ' ',
      h('button', { onclick: () => go({ ...cur, k: null, n: null }, false), title: 'Esc' }, 'clear')));
  }

  // Scrolls `box` to `first` unless one of `all` is already in view.
  function bring(box, first, all) {
    if (!box || !first) return;
    const b = box.getBoundingClientRect();
    const inView = (e) => { const r = e.getBoundingClientRect(); return r.height > 0 && r.bottom > b.top && r.top < b.bottom; };
    if (all.slice(0, 200).some(inView)) return;
    box.scrollTop += first.getBoundingClientRect().top - b.top - b.height / 4;
  }

  function reveal(p) {
    const L = lit(p);
    if (!L) return;
    if (p.tab === 'graphs') {
      for (const [v] of VIEWS) {
        const els = [...L.nodes[v]].sort((a, b) => a - b).map((id) => p.lines[v][id]).filter(Boolean);
        const own = cur.n && cur.n.view === v ? p.lines[v][cur.n.id] : null;
        bring(p.cols[v], own || els[0], own ? [own] : els);
      }
    } else if (p.tab === 'kernels' && p.cards && L.ks.length) {
      const card = p.cards[cur.k != null ? cur.k : Math.min(...L.ks)];
      bring(p.panels.kernels, card, [card]);
    }
  }

  // ---- Filter (Graphs and Kernels): a substring in any case, or /regex/flags.
  function matcher(text) {
    if (!text) return null;
    const m = /^\/(.+)\/([a-z]*)$/.exec(text);
    if (!m) {
      const t = text.toLowerCase();
      return { test: (s) => s.toLowerCase().includes(t) };
    }
    try {
      const re = new RegExp(m[1], m[2].replace(/[gy]/g, ''));
      return { test: (s) => re.test(s) };
    } catch (e) {
      return { error: `bad regular expression: ${e.message.replace(/^Invalid regular expression: /, '')}` };
    }
  }

  function applyFilter(p) {
    const tab = p.tab;
    if (!FILTERED.has(tab) || !p.r || !p.panels[tab]) return;
    const text = p.filter.value.trim();
    const m = matcher(text);
    p.filter.classList.toggle('bad', !!(m && m.error));
    if (m && m.error) {
      p.filterMsg.textContent = m.error;  // the last good filter stays applied
      return;
    }
    if (p.applied[tab] !== text) {
      const start = performance.now();
      p.applied[tab] = text;
      const groups = tab === 'graphs' ? VIEWS.map(([v]) => [p.rows[v], p.counts[v]]) : [[p.kitems, null]];
      for (const [items, out] of groups) {
        let shown = 0;
        for (const it of items) {
          const on = !m || m.test(it.text);
          if (it.el.hidden === on) it.el.hidden = !on;
          shown += on;
        }
        if (out) out.textContent = m ? `${shown} of ${items.length} lines match` : '';
      }
      perf.filterMs = performance.now() - start;
    }
    const shown = tab === 'kernels' ? p.kitems.filter((it) => !it.el.hidden).length : 0;
    p.filterMsg.textContent = !m ? '' : tab === 'kernels' ? `${shown} of ${plural(p.kitems.length, 'kernel')} match (name, kind, ops)` : 'lines of each graph that match';
  }

  // ---- The tabs.
  function kvTable(rows) {
    return h('table', { class: 'kv' }, rows.filter((r) => r[1] != null && r[1] !== '').map(([k, v]) => h('tr', null, h('th', null, k), h('td', null, v))));
  }

  // Durations as bars on one scale; `groups`: [title, [[label, ms], ...]].
  function bars(groups) {
    const all = groups.flatMap(([, rows]) => rows).filter(([, v]) => num(v));
    if (!all.length) return muted('no timings recorded');
    const max = Math.max(...all.map(([, v]) => v), 1e-9);
    return h('div', { class: 'bars' }, groups.map(([title, rows]) => {
      rows = rows.filter(([, v]) => num(v));
      return rows.length ? [h('div', { class: 'bgroup' }, title), rows.map(([label, v]) => h('div', { class: 'brow' },
        h('span', { class: 'blabel' }, label), h('span', { class: 'btrack' }, h('span', { class: 'bfill', style: `width:${Math.max(0.3, (100 * v) / max).toFixed(2)}%` })),
        h('span', { class: 'bval' }, ms(v))))] : null;
    }));
  }

  function overview(p) {
    const { c, r } = p;
    const t = c.timing_ms || {};
    const rt = (r && r.timing_ms) || {};
    const breaks = c.graph_breaks || [];
    const nodes = (v) => (r && r[v] && r[v].nodes ? r[v].nodes.length : null);
    const passes = (r && r.passes) || [];
    return [
      section(`Graph breaks (${breaks.length})`, breaks.length ? h('ol', { class: 'breaks' }, breaks.map((b) => h('li', null, h('code', null, b))))
        : muted('none: this graph was traced without a break')),
      section('Timing', bars([['in the program', [['trace', t.trace], ['compile', t.compile]]],
        ['its stages, run again for this report', [['passes', rt.passes], ['schedule', rt.schedule], ['codegen', rt.codegen], ['serialize', rt.serialize], ['total', rt.total]]]])),
      section('Compile', kvTable([['kind', badge(c.kind)], ['reason', c.reason && h('code', null, c.reason)], ['function', (functions[c.function] || {}).name], ['target', c.target], ['mode', c.mode],
        ['backend', c.backend], ['segment', c.segment], ['dump', c.dump], ['plan', c.plan_check], ['cache key', r && h('code', null, r.cache_key)],
        ['peak intermediate memory', r && `${bytes(r.peak_intermediate_bytes)} (${r.peak_intermediate_bytes} bytes)`],
        ['nodes', r && `${nodes('input')} captured, ${nodes('optimized')} after the passes, ${nodes('scheduled')} scheduled`],
        ['passes', r && `${passes.filter((x) => x.changed).length} of ${passes.length} changed the graph`], ['kernels', r && (r.kernels || []).length]])),
      r ? section('Codegen options', Object.keys(r.codegen_options || {}).length ? kvTable(Object.entries(r.codegen_options).map(([k, v]) => [k, h('code', null, String(v))]))
        : muted('none')) : null,
      sourceSection(p),
    ];
  }

  // The program's lines that traced this graph, each with its captured nodes (a click selects
  // the first). Only a program's debug directory has them (compile.json's "sources").
  function sourceSection(p) {
    const list = p.c.sources || [];
    if (!list.length) {
      return p.c.sources_recorded === false && p.c.dump ? section('Source lines', muted('not recorded: this Kiln was built without libbacktrace')) : null;
    }
    const byLine = new Map();
    for (const x of list) {
      const key = sourceTitle(x);
      if (!byLine.has(key)) byLine.set(key, { x, nodes: [] });
      byLine.get(key).nodes.push(x.node);
    }
    return section(`Source lines (${byLine.size})`, h('p', { class: 'note' }, 'Where the program traced each captured node: the innermost frame outside Kiln and the system headers. Click one to select its first node.'),
      h('ol', { class: 'lines-list sources' }, [...byLine.values()].map(({ x, nodes }) => h('li', null,
        h('button', { class: 'ref', title: sourceTitle(x), onclick: () => selectNode('input', nodes[0]) }, sourceShort(x)), ' ',
        h('span', { class: 'muted' }, `${plural(nodes.length, 'node')}: ${nodes.slice(0, 12).map((n) => `%${n}`).join(' ')}${nodes.length > 12 ? ' …' : ''}`),
        x.function ? h('div', { class: 'fn muted' }, x.function) : null))));
  }

  const lineList = (lines, cls, none, item = (g) => g) => (lines && lines.length ? h('ol', { class: `lines-list ${cls}` }, lines.map((g) => h('li', null, h('code', null, item(g))))) : muted(none));

  // A fusion decision with its scheduled nodes (%N) as links ("kernel N" there counts the
  // schedule's kernels, which need not be the plan's).
  const decision = (text) => text.split(/(%\d+)/).map((part, i) => (i % 2 === 0 ? part
    : h('button', { class: 'ref', onclick: () => selectNode('scheduled', Number(part.slice(1))) }, part)));

  function guards(p) {
    const { c, r } = p;
    const fn = c.guards || [];
    return [
      section(`Guards of the compiled function (${fn.length})`, h('p', { class: 'note' }, 'As the program recorded them: a call whose arguments fail one of these compiles again.'),
        lineList(fn, 'guards-fn', 'none recorded')),
      r && JSON.stringify(r.guards || []) !== JSON.stringify(fn) ? section(`Guards of the captured graph (${(r.guards || []).length})`,
        h('p', { class: 'note' }, 'What a function compiled from this graph checks, derived when this report was made.'), lineList(r.guards, 'guards-graph', 'none')) : null,
      r ? section(`Plan guards (${(r.plan_guards || []).length})`, h('p', { class: 'note' }, 'What the kernel plan itself assumes of its inputs.'),
        lineList(r.plan_guards, 'guards-plan', 'none')) : null,
    ];
  }

  const graphText = (r, view) => (view === 'input' ? r.input_text : view === 'scheduled' ? r.scheduled_text
    : r.passes && r.passes.length ? r.passes[r.passes.length - 1].after : r.input_text) || '';

  // One line per node, its id an anchor (a link to this node), %N operands clickable, the
  // kernels the node ends up in as tags.
  // A source line as the page shows it: the file's name and line (the function where the program
  // has no line tables); the whole path and function on hover.
  const baseName = (f) => f.slice(f.lastIndexOf('/') + 1);
  const sourceShort = (x) => x.file ? `${baseName(x.file)}${x.line ? `:${x.line}` : ''}` : (x.function || '?');
  const sourceTitle = (x) => [x.file && `${x.file}${x.line ? `:${x.line}` : ''}`, x.function && `in ${x.function}`].filter(Boolean).join('\n');

  // The program's lines that traced the lit captured nodes (the selected one's first), at most 3.
  function litSources(p, L) {
    const ids = cur.n && cur.n.view === 'input' ? [cur.n.id, ...L.nodes.input] : [...L.nodes.input];
    const seen = new Map();
    for (const id of ids) {
      const x = p.src.get(id);
      if (x && !seen.has(sourceTitle(x))) seen.set(sourceTitle(x), x);
    }
    return [...seen.values()];
  }

  function graphColumn(p, view, label) {
    const r = p.r;
    const nk = (r.node_kernels || {})[view] || [];
    const names = new Map(((r[view] || {}).nodes || []).filter((n) => n.name && n.op !== 'input').map((n) => [n.id, n.name]));
    const ks = r.kernels || [];
    const lines = graphText(r, view).split('\n');
    if (lines[lines.length - 1] === '') lines.pop();
    const byId = (p.lines[view] = []);
    const rows = (p.rows[view] = []);
    const list = h('div', { class: 'lines scroll' });
    const frag = document.createDocumentFragment();
    let gutter = 0;  // the widest kernel tags, in ch: node ids line up after them
    for (const line of lines) {
      const m = /^%(\d+) = /.exec(line);
      const row = document.createElement('div');
      row.className = 'ln';
      let rest = line;
      let text = line;
      if (m) {
        const id = Number(m[1]);
        row.dataset.n = id;
        // A node many kernels recompute (an attention mask) shows two; a click on it shows them all.
        const kernels = nk[id] || [];
        gutter = Math.max(gutter, kernels.slice(0, 2).reduce((n, k) => n + String(k).length + 2.6, 0) + (kernels.length > 2 ? 3.5 : 0));
        row.append(h('span', { class: 'kg' }, kernels.slice(0, 2).map((k) => h('span', { class: 'kt', 'data-k': k, title: ks[k] ? ks[k].name : '' }, `k${k}`)),
          kernels.length > 2 ? h('span', { class: 'more', title: kernels.slice(2).map((k) => `k${k}`).join(' ') }, `+${kernels.length - 2}`) : null));
        row.append(h('a', { class: 'nid', href: hashOf({ c: p.ci, tab: 'graphs', n: { view, id }, k: null }) }, `%${id}`), ' = ');
        rest = line.slice(m[0].length);
        byId[id] = row;
        if (names.has(id)) text += ' ' + names.get(id);
        text += kernels.map((k) => ` k${k} ${ks[k] ? ks[k].name : ''}`).join('');
      }
      rest.split(/(%\d+)/).forEach((part, i) => row.append(i % 2 ? h('span', { class: 'ref', 'data-ref': part.slice(1) }, part) : part));
      if (m && names.has(Number(m[1]))) row.append(h('span', { class: 'nm' }, `  ${names.get(Number(m[1]))}`));
      const src = m && view === 'input' ? p.src.get(Number(m[1])) : null;
      if (src) {
        row.append(h('span', { class: 'src', title: sourceTitle(src) }, `  @ ${sourceShort(src)}`));
        text += ` @ ${sourceShort(src)} ${src.file || ''} ${src.function || ''}`;
      }
      rows.push({ el: row, text });
      frag.append(row);
    }
    list.append(frag);
    list.style.setProperty('--kg', `${Math.max(gutter, 2)}ch`);
    list.addEventListener('click', (e) => {
      const kt = e.target.closest('.kt');
      const ref = e.target.closest('.ref');
      const row = e.target.closest('.ln[data-n]');
      if (e.target.closest('a')) e.preventDefault();  // the anchor is for copying; a click selects
      if (kt) selectKernel(Number(kt.dataset.k));
      else if (ref && byId[Number(ref.dataset.ref)]) selectNode(view, Number(ref.dataset.ref));
      else if (row) selectNode(view, Number(row.dataset.n));
    });
    p.cols[view] = list;
    p.counts[view] = h('span', { class: 'fcount' });
    return h('div', { class: 'gcol', 'data-view': view }, h('div', { class: 'ghead' }, h('b', null, label), ` ${plural(byId.filter(Boolean).length, 'node')} `, p.counts[view]), list);
  }

  function graphs(p) {
    return [h('p', { class: 'note' }, 'As captured (before the passes), after the passes, and as scheduled (composites decomposed). ',
      'Tags name the kernels a node ends up in. Click a node to light up its kernels and their nodes in every view, or a %id operand to go to it.'),
    h('div', { class: 'gviews' }, VIEWS.map(([v, label]) => graphColumn(p, v, label)))];
  }

  // A line diff (a longest common subsequence past the common head and tail); null when too
  // large to compute at once. Lines are [op, text], op '=', '-' or '+'.
  function diffLines(a, b) {
    let s = 0;
    while (s < a.length && s < b.length && a[s] === b[s]) s++;
    let e = 0;
    while (e < a.length - s && e < b.length - s && a[a.length - 1 - e] === b[b.length - 1 - e]) e++;
    const A = a.slice(s, a.length - e);
    const B = b.slice(s, b.length - e);
    if ((A.length + 1) * (B.length + 1) > 9e6) return null;
    const w = B.length + 1;
    const L = new Uint32Array((A.length + 1) * w);
    for (let i = A.length - 1; i >= 0; i--)
      for (let j = B.length - 1; j >= 0; j--) L[i * w + j] = A[i] === B[j] ? L[(i + 1) * w + j + 1] + 1 : Math.max(L[(i + 1) * w + j], L[i * w + j + 1]);
    const out = a.slice(0, s).map((t) => ['=', t]);
    let i = 0, j = 0;
    while (i < A.length || j < B.length) {
      if (i < A.length && j < B.length && A[i] === B[j]) out.push(['=', A[i++]]), j++;
      else if (i < A.length && (j === B.length || L[(i + 1) * w + j] >= L[i * w + j + 1])) out.push(['-', A[i++]]);
      else out.push(['+', B[j++]]);
    }
    return out.concat(a.slice(a.length - e).map((t) => ['=', t]));
  }

  function passDiff(before, after) {
    const d = diffLines(before.split('\n'), after.split('\n'));
    if (!d) return muted('(too large to diff here: see the whole graphs below)');
    const CONTEXT = 2;
    const keep = d.map((x, i) => d.slice(Math.max(0, i - CONTEXT), i + CONTEXT + 1).some((y) => y[0] !== '='));
    const out = h('pre', { class: 'diff' });
    for (let i = 0; i < d.length;) {
      if (keep[i]) {
        out.append(h('span', { class: d[i][0] === '+' ? 'add' : d[i][0] === '-' ? 'del' : null }, `${d[i][0] === '=' ? ' ' : d[i][0]} ${d[i][1]}\n`));
        i++;
      } else {
        let j = i;
        while (j < d.length && !keep[j]) j++;
        out.append(h('span', { class: 'skip' }, `  … ${plural(j - i, 'unchanged line')}\n`));
        i = j;
      }
    }
    return out;
  }

  function passes(p) {
    const ps = p.r.passes || [];
    const changed = ps.filter((x) => x.changed).length;
    const row = (x) => [h('span', { class: 'pname' }, x.name), x.changed ? h('span', { class: 'badge k-changed' }, 'changed') : h('span', { class: 'badge k-same' }, 'no change'),
      h('span', { class: 'ops' }, x.ops_before === x.ops_after ? `${x.ops_before} ops` : `${x.ops_before} → ${x.ops_after} ops`), h('span', { class: 'psum' }, x.summary || '')];
    return [
      h('p', { class: 'note' }, `${plural(ps.length, 'pass')} in order, ${changed} changed the graph`, ps.length ? `: ${ps[0].ops_before} → ${ps[ps.length - 1].ops_after} ops. ` : '. ',
        'Open a changed pass for its diff and the whole graphs before and after.'),
      h('div', { class: 'passes' }, ps.map((x) => {
        if (!x.changed) return h('div', { class: 'pass same' }, row(x));
        const d = h('details', { class: 'pass changed' }, h('summary', null, row(x)));
        d.addEventListener('toggle', () => {
          if (!d.open || d.dataset.built) return;
          d.dataset.built = '1';
          d.append(passDiff(x.before || '', x.after || ''), h('details', { class: 'whole' }, h('summary', null, 'the whole graph before and after'),
            h('div', { class: 'pair' }, h('div', null, h('h4', null, 'before'), pre(x.before)), h('div', null, h('h4', null, 'after'), pre(x.after)))));
        });
        return d;
      })),
    ];
  }

  // The decisions that name a node: the selection lights those naming a lit scheduled node.
  function decisionIds(p) {
    if (!p.decisionIds) p.decisionIds = (p.r.decisions || []).map((d) => new Set((d.match(/%\d+/g) || []).map((m) => Number(m.slice(1)))));
    return p.decisionIds;
  }
  const concerns = (ids, lit) => [...ids].some((id) => lit.has(id));

  function fusion(p) {
    const d = p.r.decisions || [];
    const list = lineList(d, 'decisions', 'none recorded', decision);
    p.decisionLines = list.tagName === 'OL' ? [...list.children] : [];
    return [section(`Fusion decisions (${d.length})`, h('p', { class: 'note' }, "The scheduler's log, in order: which nodes it fused into one kernel and why, and what it kept apart (%N: a node of the scheduled graph; click one to select it). A selection lights the decisions about its scheduled nodes."),
      list),
    section('Schedule', h('p', { class: 'note' }, 'Buffers, kernels with their loops, and the peak intermediate memory.'), pre(p.r.schedule_text || ''))];
  }

  function noSource(k, target) {
    if (k.kind === 'matmul') return `no generated source: ${{ cuda: 'cuBLASLt', cpu: 'the BLAS library' }[target] || "the target's gemm library"} computes the matrix product (and the ops listed with it, as its epilogue)`;
    if (k.kind === 'convolution') return 'no generated source: a library convolution (cuDNN) computes it';
    if (k.kind === 'reference') return 'no generated source: the reference interpreter runs these ops on this target';
    return `no source (${k.kind})`;
  }

  function kernels(p) {
    const r = p.r;
    const ks = r.kernels || [];
    const total = (f) => ks.reduce((s, k) => s + (num(k[f]) ? k[f] : 0), 0);
    p.cards = ks.map((k, i) => {
      const src = k.source || '';
      const prov = (k.provenance || []).filter((n) => n >= 0);
      return h('section', { class: 'kernel', 'data-k': i },
        h('div', { class: 'khead' }, h('button', { class: 'kname', onclick: () => selectKernel(i), title: 'light up its nodes' }, h('span', { class: 'kidx' }, `#${i} `), k.name),
          ' ', badge(k.kind || '?'), ' ', h('button', { class: 'show', onclick: () => { selectKernel(i); openTab('graphs'); } }, 'show in graph')),
        h('div', { class: 'figs' }, [['ops', (k.ops || []).join(', ') || '—'], ['bytes', bytes(k.bytes)], ['FLOPs', si(k.flops, '')],
          ['FLOPs/byte', k.bytes > 0 && num(k.flops) ? (k.flops / k.bytes).toPrecision(3) : '—'], ['parallel over', k.parallel_extent], ['entry', k.entry],
          ['variants', (k.variants || []).join(', ')], ['reads', (k.reads || []).map((b) => 'b' + b).join(' ')], ['writes', (k.writes || []).map((b) => 'b' + b).join(' ')]]
          .filter(([, v]) => v != null && v !== '').map(([label, v]) => h('span', null, h('i', null, label), ' ', v))),
        h('div', { class: 'prov' }, h('i', null, 'scheduled nodes '), prov.map((n) => [h('button', { class: 'ref', onclick: () => selectNode('scheduled', n) }, `%${n}`), ' '])),
        src ? h('details', { class: 'src', open: ks.length <= 12 }, h('summary', null, `source · ${LANGUAGE[k.language || r.target] || k.language || r.target} · ${plural(src.split('\n').length, 'line')}`),
          pre(src, 'code')) : h('p', { class: 'nosrc' }, noSource(k, r.target)));
    });
    p.kitems = ks.map((k, i) => ({ el: p.cards[i], text: [`#${i}`, k.name, k.kind, (k.ops || []).join(' '), k.entry, k.language].join(' ') }));
    return [h('p', { class: 'note' }, `${plural(ks.length, 'kernel')}, moving ${bytes(total('bytes'))} and computing ${si(total('flops'), 'FLOPs')} in all `,
      '(bytes: the buffers each reads and writes, once each, at the example sizes). Click a name to light up its nodes.'),
    r.prelude ? h('details', { class: 'prelude' }, h('summary', null, `prelude: the code every kernel shares (${plural(r.prelude.split('\n').length, 'line')})`), pre(r.prelude, 'code')) : null,
    h('div', { class: 'kernels' }, p.cards)];
  }

  function plan(p) {
    const r = p.r;
    const json = r.plan ? h('details', { class: 'planjson' }, h('summary', null, `the plan as JSON (${bytes(r.plan.length)})`)) : null;
    if (json) json.addEventListener('toggle', () => { if (json.open && json.children.length < 2) json.append(pre(r.plan, 'code')); });
    return [h('p', { class: 'note' }, `Peak intermediate memory ${bytes(r.peak_intermediate_bytes)}.`), pre(r.plan_text || '', 'code'), json];
  }

  const BUILD = { overview, guards, graphs, passes, fusion, kernels, plan };

  // ---- Start.
  buildChrome();
  window.addEventListener('hashchange', () => show(readHash()));
  document.addEventListener('keydown', (e) => {
    if (e.target.closest && e.target.closest('input, textarea')) return;
    const p = cur.c != null && pages.get(cur.c);
    if (e.key === 'Escape' && (cur.k != null || cur.n)) go({ ...cur, k: null, n: null }, false);
    else if (e.key === '/' && p && !p.fbox.hidden) {
      e.preventDefault();
      p.filter.focus();
    }
  });
  const s = readHash();
  // Opened without a place: one compile shows itself; several start on the summary.
  if (!location.hash && compiles.length === 1) s.c = 0;
  revealNext = true;
  show(s);
  perf.firstRenderMs = performance.now() - t0;
  perf.sinceNavigationMs = performance.now();
})();
