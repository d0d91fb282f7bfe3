// The diagram's layout off the page's thread: dagre (from npm) lays out the nodes and edges the
// page posts ({seq, graph: {nodes: [{id, width, height}], edges: [[from, to]]}}) and posts back
// {seq, width, height, nodes: {id: {x, y}}, edges: [{from, to, points}], ms}. A graph of hundreds
// of nodes takes a second or more to lay out; meanwhile the page keeps answering.
'use strict';
importScripts('/npm/@dagrejs/dagre/dist/dagre.min.js');

function layOut(graph) {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: 'TB', nodesep: 14, ranksep: 24, marginx: 8, marginy: 8 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const n of graph.nodes) g.setNode(n.id, { width: n.width, height: n.height });
  for (const [from, to] of graph.edges) g.setEdge(from, to);
  dagre.layout(g);
  const nodes = {};
  for (const id of g.nodes()) nodes[id] = { x: g.node(id).x, y: g.node(id).y };
  const edges = g.edges().map((e) => ({ from: e.v, to: e.w, points: g.edge(e).points }));
  return { width: g.graph().width, height: g.graph().height, nodes, edges };
}

self.onmessage = (e) => {
  const t0 = performance.now();
  try {
    self.postMessage({ seq: e.data.seq, ...layOut(e.data.graph), ms: performance.now() - t0 });
  } catch (err) {
    self.postMessage({ seq: e.data.seq, error: String(err && err.message || err) });
  }
};
