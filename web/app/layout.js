// The diagram's layout: dagre (from npm, loaded before this file) places the nodes and routes
// the edges of {nodes: [{id, width, height}], edges: [[from, to]]}, giving {width, height,
// nodes: {id: {x, y}}, edges: [{from, to, points}], ms}. Run in layout_worker.js, or on the page
// where no worker starts.
'use strict';
function kilnLayOut(graph) {
  const t0 = performance.now();
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: 'TB', nodesep: 14, ranksep: 24, marginx: 8, marginy: 8 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const n of graph.nodes) g.setNode(n.id, { width: n.width, height: n.height });
  for (const [from, to] of graph.edges) g.setEdge(from, to);
  dagre.layout(g);
  const nodes = {};
  for (const id of g.nodes()) nodes[id] = { x: g.node(id).x, y: g.node(id).y };
  const edges = g.edges().map((e) => ({ from: e.v, to: e.w, points: g.edge(e).points }));
  return { width: g.graph().width, height: g.graph().height, nodes, edges, ms: performance.now() - t0 };
}
