// The diagram's layout: dagre (from npm, loaded before this file) places the items of
// {nodes: [{id, width, height, parent}], groups: [{id, parent}], edges: [[from, to]]} and routes
// the edges, giving {width, height, nodes: {id: {x, y}}, groups: {id: {x, y, width, height}},
// edges: [{from, to, points}], ms, laidOut}. Run in layout_worker.js, or on the page where no
// worker starts.
//
// Hierarchical, as Model Explorer lays out: a group (an expanded module scope, drawn as a frame
// around its items; parent '' or absent is the top) is laid out on its own, its inner groups
// first as boxes of their laid-out size, so dagre never sees more than one scope's items at a
// time: a 10,000-node model is hundreds of small layouts, not one (dagre's recursion overflows
// the stack on a flat chain of a few thousand nodes). An edge between items of different groups
// is routed in the innermost group holding both, between the items or frames it runs from and
// to, and drawn from its node to that route. `cache` (a Map kept across calls) keeps each
// group's layout by what it was made from, so expanding a scope lays out only it and the groups
// around it again.
'use strict';
const GROUP_PAD = 10, GROUP_HEAD = 18;

function kilnLayOut(graph, cache = null) {
  const t0 = performance.now();
  const parentOf = new Map(), size = new Map(), members = new Map([['', []]]);
  for (const gr of graph.groups || []) members.set(gr.id, []);
  for (const gr of graph.groups || []) {
    parentOf.set(gr.id, gr.parent || '');
    members.get(gr.parent || '').push(gr.id);
  }
  for (const n of graph.nodes) {
    parentOf.set(n.id, n.parent || '');
    size.set(n.id, { width: n.width, height: n.height });
    members.get(n.parent || '').push(n.id);
  }
  const depth = (id) => { let d = 0; for (let at = id; at; at = parentOf.get(at)) ++d; return d; };
  // Each edge goes to the innermost group holding both ends, between that group's members
  // that hold them (themselves, or the frames around them).
  const routed = new Map();  // group -> Map("a\nb" -> [a, b])
  const lifted = [];
  for (const [from, to] of graph.edges) {
    let x = from, y = to, dx = depth(x), dy = depth(y);
    while (dx > dy) { x = parentOf.get(x); --dx; }
    while (dy > dx) { y = parentOf.get(y); --dy; }
    if (x === y) continue;  // one end inside the other's frame: not drawn
    while (parentOf.get(x) !== parentOf.get(y)) { x = parentOf.get(x); y = parentOf.get(y); }
    const owner = parentOf.get(x);
    if (!routed.has(owner)) routed.set(owner, new Map());
    routed.get(owner).set(x + '\n' + y, [x, y]);
    lifted.push({ from, to, owner, x, y });
  }
  // Groups inside out: deepest first.
  const order = [...members.keys()].sort((p, q) => depth(q) - depth(p));
  const local = new Map();  // group -> {width, height, nodes, edges}
  let laidOut = 0;
  for (const gid of order) {
    const kids = members.get(gid);
    const pairs = [...(routed.get(gid) || new Map()).values()];
    const key = JSON.stringify([kids.map((k) => [k, size.get(k).width, size.get(k).height]), pairs]);
    let r = cache && cache.get(gid);
    if (!r || r.key !== key) {
      r = { key, ...dagreLayOut(kids.map((k) => ({ id: k, ...size.get(k) })), pairs) };
      ++laidOut;
      if (cache) cache.set(gid, r);
    }
    local.set(gid, r);
    if (gid) size.set(gid, { width: r.width + 2 * GROUP_PAD, height: r.height + GROUP_HEAD + GROUP_PAD });
  }
  // Outside in: each group's members placed within its frame.
  const nodes = {}, groups = {};
  const place = (gid, ox, oy) => {
    const r = local.get(gid);
    for (const k of members.get(gid)) {
      const p = r.nodes[k], x = ox + p.x, y = oy + p.y;
      if (members.has(k)) {
        const s = size.get(k);
        groups[k] = { x, y, width: s.width, height: s.height };
        place(k, x - s.width / 2 + GROUP_PAD, y - s.height / 2 + GROUP_HEAD);
      } else {
        nodes[k] = { x, y };
      }
    }
  };
  place('', 0, 0);
  const origin = (gid) => (gid ? { x: groups[gid].x - groups[gid].width / 2 + GROUP_PAD, y: groups[gid].y - groups[gid].height / 2 + GROUP_HEAD } : { x: 0, y: 0 });
  const edges = [];
  for (const e of lifted) {
    const o = origin(e.owner);
    const route = local.get(e.owner).edges.get(e.x + '\n' + e.y) || [];
    const points = route.map((p) => ({ x: o.x + p.x, y: o.y + p.y }));
    // From a node inside a frame: from the node to the route leaving the frame.
    if (e.x !== e.from) points.unshift({ x: nodes[e.from].x, y: nodes[e.from].y + size.get(e.from).height / 2 });
    if (e.y !== e.to) points.push({ x: nodes[e.to].x, y: nodes[e.to].y - size.get(e.to).height / 2 });
    edges.push({ from: e.from, to: e.to, points });
  }
  const top = local.get('');
  return { width: top.width, height: top.height, nodes, groups, edges, ms: performance.now() - t0, laidOut };
}

// One group's members and edges through dagre: positions relative to the group's corner.
function dagreLayOut(items, pairs) {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: 'TB', nodesep: 14, ranksep: 24, marginx: 8, marginy: 8 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const n of items) g.setNode(n.id, { width: n.width, height: n.height });
  for (const [from, to] of pairs) g.setEdge(from, to);
  dagre.layout(g);
  const nodes = {};
  for (const id of g.nodes()) nodes[id] = { x: g.node(id).x, y: g.node(id).y };
  const edges = new Map(g.edges().map((e) => [e.v + '\n' + e.w, g.edge(e).points]));
  return { width: items.length ? g.graph().width : 16, height: items.length ? g.graph().height : 16, nodes, edges };
}
