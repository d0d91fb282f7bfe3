// What the diagram's fills say (the "fill" menu), and the figures beside each kernel: by kernel
// (each its own colour), by arithmetic intensity (FLOPs per byte, from the compiler's per-kernel
// bytes and FLOPs: plan::kernel_costs), or by measured time (a kiln.profile file that
// `kiln run --profile` wrote on any target, opened like any file). Intensity and time are drawn
// light to dark on a log scale between the smallest and largest kernel's value; a collapsed
// scope takes its kernels' sum (time) or their FLOPs over their bytes (intensity). Loaded
// before app.js and diagram.js use it; uses their globals at call time.
'use strict';

const RAMP = [[255, 247, 214], [253, 190, 112], [240, 100, 60], [165, 15, 40]];  // light to dark
function rampColour(t) {
  const x = Math.min(1, Math.max(0, t)) * (RAMP.length - 1), i = Math.min(RAMP.length - 2, Math.floor(x)), f = x - i;
  return '#' + RAMP[i].map((c, j) => Math.round(c + (RAMP[i + 1][j] - c) * f).toString(16).padStart(2, '0')).join('');
}

// The loaded profile when it was measured on this report's plan (same target, kernels and
// names in order), else null.
function profileFor(r) {
  const p = state.profile;
  return p && r && profileMismatch(p.doc, r) === null ? p.doc : null;
}

// Why a kiln.profile document does not belong to report r, or null when it does.
function profileMismatch(doc, r) {
  if (doc.target !== r.target) return `it was measured on ${doc.target}, the graph is compiled for ${r.target}`;
  if (doc.kernels.length !== r.kernels.length) return `it times ${doc.kernels.length} kernels, this plan has ${r.kernels.length}`;
  const k = doc.kernels.findIndex((x, i) => x.name !== r.kernels[i].name);
  if (k >= 0) return `its kernel ${k} is ${doc.kernels[k].name}, this plan's is ${r.kernels[k].name} (another graph, target options or Kiln version)`;
  return null;
}

// Per kernel of report r, the value the fill shows (null: by kernel colour).
function overlayValues(r, mode) {
  if (mode === 'intensity') return r.kernels.map((k) => ({ flops: k.flops, bytes: k.bytes }));
  const prof = mode === 'time' ? profileFor(r) : null;
  return prof ? prof.kernels.map((k) => ({ ms: k.median_ms })) : null;
}

// The fill of a drawn item with kernels `ks` under overlay o (overlayFor), or null.
function overlayFill(o, ks) {
  if (!o || !ks.length) return null;
  let v;
  if (o.mode === 'intensity') {
    let f = 0, b = 0;
    for (const k of ks) { f += o.values[k].flops; b += o.values[k].bytes; }
    v = b > 0 ? f / b : 0;
  } else {
    v = 0;
    for (const k of ks) v += o.values[k].ms;
  }
  return rampColour(v > 0 && o.hi > o.lo ? (Math.log(v) - o.lo) / (o.hi - o.lo) : 0);
}

// The overlay of a drawing of report r: its per-kernel values and their log range.
function overlayFor(r, mode) {
  const values = r && overlayValues(r, mode);
  if (!values) return null;
  const of = (x) => (mode === 'intensity' ? (x.bytes > 0 ? x.flops / x.bytes : 0) : x.ms);
  const logs = values.map(of).filter((v) => v > 0).map(Math.log);
  if (!logs.length) return null;
  return { mode, values, lo: Math.min(...logs), hi: Math.max(...logs) };
}

function si(v, unit) {
  const steps = [[1e12, 'T'], [1e9, 'G'], [1e6, 'M'], [1e3, 'k']];
  for (const [s, p] of steps) if (Math.abs(v) >= s) return `${(v / s).toPrecision(3)} ${p}${unit}`;
  return `${+v.toPrecision(3)} ${unit}`;
}

// The figures shown beside kernel i of report r: bytes, FLOPs, intensity, and the measured time.
function kernelFigures(r, i) {
  const k = r.kernels[i];
  let t = `${si(k.bytes, 'B')} · ${si(k.flops, 'FLOP')} · ${(k.bytes > 0 ? k.flops / k.bytes : 0).toPrecision(3)} FLOP/B`;
  const prof = profileFor(r);
  if (prof) t += ` · ${prof.kernels[i].median_ms.toPrecision(3)} ms (${(100 * prof.kernels[i].share).toFixed(1)}%, measured)`;
  return t;
}

function showFigures(r) {
  for (const span of document.querySelectorAll('#kernels .figures')) span.textContent = kernelFigures(r, Number(span.dataset.kernel));
}

// The legend of the fill under the diagram's bar.
function showLegend(d) {
  const o = d && d.overlay;
  if (!o && $('fill').value === 'time' && state.profile) {
    $('legend').textContent = `fill: by kernel (${state.profile.name} is not a profile of this plan)`;
    return;
  }
  $('legend').textContent = !o ? '' : o.mode === 'intensity'
    ? `fill: FLOPs per byte of the node's kernels, ${Math.exp(o.lo).toPrecision(2)} (light) to ${Math.exp(o.hi).toPrecision(2)} (dark), log scale`
    : `fill: measured time of the node's kernels (${state.profile.name}), ${Math.exp(o.lo).toPrecision(2)} ms (light) to ${Math.exp(o.hi).toPrecision(2)} ms (dark), log scale`;
}

// A kiln.profile file opened: kept, and drawn when it belongs to the graph shown.
async function openProfile(name, text) {
  let doc;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    notice(`${name}: not valid JSON: ${e.message}`, true);
    return;
  }
  if (doc.version !== 1 || !Array.isArray(doc.kernels) || !doc.kernels.every((k) => typeof k.name === 'string' && typeof k.median_ms === 'number')) {
    notice(`${name}: a kiln.profile of version ${doc.version} without the kernels' names and median_ms this page reads`, true);
    return;
  }
  const r = state.report;
  if (!r) {
    notice(`${name}: open the graph it was measured on first, then the profile`, true);
    return;
  }
  const why = profileMismatch(doc, r);
  if (why) {
    notice(`${name} is not a profile of this plan: ${why}`, true);
    return;
  }
  state.profile = { name, doc };
  $('fill').querySelector('option[value="time"]').disabled = false;
  $('fill').value = 'time';
  notice(`${name}: ${doc.kernels.length} kernels measured on ${doc.device}, ${doc.total_ms.toPrecision(4)} ms a call in all ` +
    `(medians over ${doc.first_call_left_out ? doc.calls - 1 : doc.calls} calls); the fill shows each node's kernels' time`);
  showFigures(r);
  await redraw();
}
