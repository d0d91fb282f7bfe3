#!/usr/bin/env node
// Serves the inspector page: node web/app/serve.js [PORT] (default 8080; PORT 0 picks a free one).
// /            web/app (index.html, app.js, app.css)
// /wasm/       the built module (KILN_WASM_DIR, else build/release/wasm/dist or build/wasm/dist)
// /npm/        web/node_modules (dagre, highlight.js; `npm ci` in web/)
// /samples/    samples/graphs/*.json
// /models/     tests/onnx/real_models/<name>/ (small ONNX exports, each with its external data)
// Text files and the module go gzipped to clients that accept it.
'use strict';
const http = require('http');
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');

const web = path.resolve(__dirname, '..');
const root = path.resolve(web, '..');
// The module: KILN_WASM_DIR, else the test preset's build, else a hand build in build/wasm.
const wasmDir = path.resolve(process.env.KILN_WASM_DIR ||
  [path.join(root, 'build/release/wasm/dist'), path.join(root, 'build/wasm/dist')]
    .find((d) => fs.existsSync(path.join(d, 'kiln_wasm.js'))) || path.join(root, 'build/release/wasm/dist'));
const mounts = [
  ['/wasm/', wasmDir],
  ['/npm/', path.join(web, 'node_modules')],
  ['/samples/', path.join(root, 'samples/graphs')],
  ['/models/', path.join(root, 'tests/onnx/real_models')],
  ['/', path.join(web, 'app')],
];
const compressible = new Set(['.html', '.js', '.mjs', '.css', '.json', '.wasm', '.map', '.proto', '.onnx', '.data']);
const types = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.css': 'text/css',
  '.json': 'application/json', '.wasm': 'application/wasm', '.map': 'application/json', '.png': 'image/png',
  '.proto': 'text/plain', '.onnx': 'application/octet-stream', '.data': 'application/octet-stream' };

function resolve(urlPath) {
  for (const [prefix, dir] of mounts) {
    if (!urlPath.startsWith(prefix)) continue;
    const file = path.resolve(dir, '.' + path.posix.normalize('/' + urlPath.slice(prefix.length)));
    if (file !== dir && !file.startsWith(dir + path.sep)) return null;  // no escaping the mount
    return file;
  }
  return null;
}

// A file's gzip, made once per version of the file (its modification time), not per request.
const gzips = new Map();
function gzipped(file) {
  const mtime = fs.statSync(file).mtimeMs;
  const kept = gzips.get(file);
  if (kept && kept.mtime === mtime) return kept.bytes;
  const bytes = zlib.gzipSync(fs.readFileSync(file), { level: 6 });
  gzips.set(file, { mtime, bytes });
  return bytes;
}

function serve(port, host = '127.0.0.1') {
  // The module's gzip made before the first page asks (a deployment serves it precompressed).
  const wasm = path.join(wasmDir, 'kiln_wasm.wasm');
  if (fs.existsSync(wasm)) gzipped(wasm);
  const server = http.createServer((req, res) => {
    let urlPath = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    if (urlPath === '/') urlPath = '/index.html';
    if (urlPath === '/samples/index.json') {
      const list = fs.readdirSync(path.join(root, 'samples/graphs')).filter((f) => f.endsWith('.json')).sort();
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end(JSON.stringify(list));
    }
    if (urlPath === '/models/index.json') {
      const dir = path.join(root, 'tests/onnx/real_models');
      const list = fs.existsSync(dir) ? fs.readdirSync(dir).filter((d) => fs.existsSync(path.join(dir, d, 'model.onnx'))).sort() : [];
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end(JSON.stringify(list));
    }
    const file = resolve(urlPath);
    if (!file || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
      res.writeHead(404, { 'content-type': 'text/plain' });
      return res.end('not found: ' + urlPath);
    }
    // no-cache with a validator: the browser keeps each file and asks whether it changed (an ETag
    // from its modification time and size), so a reload moves no bytes for what did not change.
    const stat = fs.statSync(file);
    const etag = `"${Math.floor(stat.mtimeMs).toString(36)}-${stat.size.toString(36)}"`;
    const headers = { 'content-type': types[path.extname(file)] || 'application/octet-stream', 'cache-control': 'no-cache', etag };
    if (req.headers['if-none-match'] === etag) {
      res.writeHead(304, headers);
      return res.end();
    }
    // Text and the module gzipped where the browser takes it: the .wasm is 1.49 MB, 0.57 MB gzipped.
    if (compressible.has(path.extname(file)) && /\bgzip\b/.test(req.headers['accept-encoding'] || '')) {
      res.writeHead(200, { ...headers, 'content-encoding': 'gzip', vary: 'accept-encoding' });
      return res.end(gzipped(file));
    }
    res.writeHead(200, headers);
    fs.createReadStream(file).pipe(res);
  });
  return new Promise((ok) => server.listen(port, host, () => ok(server)));
}

if (require.main === module) {
  const port = Number(process.argv[2] ?? process.env.PORT ?? 8080);
  if (!fs.existsSync(path.join(wasmDir, 'kiln_wasm.js')))
    console.error(`warning: no module in ${wasmDir} (build it: cmake --build --preset release, or set KILN_WASM_DIR)`);
  serve(port).then((s) => console.log(`Kiln inspector: http://127.0.0.1:${s.address().port}/  (module from ${wasmDir})`));
}

module.exports = { serve };
