// The diagram's layout off the page's thread: the page posts {seq, graph} and gets back
// {seq, ...kilnLayOut(graph)} (layout.js) or {seq, error}. A graph of hundreds of nodes takes a
// second or more to lay out; meanwhile the page keeps answering.
'use strict';
importScripts('/npm/@dagrejs/dagre/dist/dagre.min.js', 'layout.js');

self.onmessage = (e) => {
  try {
    self.postMessage({ seq: e.data.seq, ...kilnLayOut(e.data.graph) });
  } catch (err) {
    self.postMessage({ seq: e.data.seq, error: String((err && err.message) || err) });
  }
};
