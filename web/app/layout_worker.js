// The diagram's layout off the page's thread: the page posts {seq, graph, fresh} and gets back
// {seq, ...kilnLayOut(graph)} (layout.js) or {seq, error}. A graph of hundreds of nodes takes a
// second or more to lay out; meanwhile the page keeps answering. Each group's layout is kept
// until a new graph comes (fresh), so expanding a scope lays out only the groups it changed.
'use strict';
importScripts('/npm/@dagrejs/dagre/dist/dagre.min.js', 'layout.js');

const cache = new Map();
self.onmessage = (e) => {
  try {
    if (e.data.fresh) cache.clear();
    self.postMessage({ seq: e.data.seq, ...kilnLayOut(e.data.graph, cache) });
  } catch (err) {
    self.postMessage({ seq: e.data.seq, error: String((err && err.message) || err) });
  }
};
