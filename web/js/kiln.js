// Kiln's JavaScript API over the WebAssembly module (kiln_wasm.js + kiln_wasm.wasm).
//   Node:    const Kiln = require('./kiln.js'); const kiln = await Kiln.load();
//   Browser: <script src="kiln_wasm.js"></script><script src="kiln.js"></script>, then Kiln.load()
// docs/web.md describes every call. Errors are JavaScript Errors with native Kiln's messages.
(function (root, factory) {
  if (typeof module === 'object' && module.exports) module.exports = factory(() => require('./kiln_wasm.js'));
  else root.Kiln = factory(() => root.createKilnWasm);
})(typeof self !== 'undefined' ? self : this, function (wasmFactory) {
  'use strict';

  // Attribute defaults by attribute name (as the C++ API's default arguments).
  const ATTR_DEFAULTS = { keepdim: false, correction: 1, approximate: 'none', eps: 1e-5, step: 1 };
  const REDUCTION_DEFAULTS = { dims: [] };

  class Tensor {
    constructor(builder, id) {
      this.builder = builder;
      this.id = id;
      const info = JSON.parse(builder.raw.node(id));
      this.op = info.op;
      this.dtype = info.dtype;
      this.shape = info.shape;
      this.device = info.device;
    }
    get rank() { return this.shape.length; }
    toString() { return `%${this.id} = ${this.op} : ${this.dtype}[${this.shape.join(', ')}]`; }
  }

  class Graph {
    // `json`: graph JSON text (checked and re-serialised by the module).
    constructor(kiln, json) {
      this.kiln = kiln;
      this.json = kiln.M.normalizeGraph(json);
    }
    get text() { return this.kiln.M.graphText(this.json); }
    toJSON() { return JSON.parse(this.json); }
  }

  class Builder {
    constructor(kiln) {
      this.kiln = kiln;
      this.raw = new kiln.M.Builder();
      this.scopes = [];
      for (const def of kiln.ops) {
        if (def.name === 'input' || this[def.name]) continue;
        this[def.name] = (...args) => this.call(def, args);
      }
    }
    // A size symbol: k.symbol('n', {example: 128, min: 2, max: 4096, dynamic: true}).
    symbol(name, opts = {}) {
      const id = this.raw.symbol(name, opts.example ?? 16, opts.min ?? 2, opts.max ?? -1, !!opts.dynamic);
      return 's' + id;
    }
    // A graph input: k.input([1024, 'n'], 'f32', {name: 'x', device: 'cpu'}); a size is an
    // integer or a symbol name (a new name makes a symbol with example 16).
    input(shape, dtype = 'f32', opts = {}) {
      if (typeof opts === 'string') opts = { name: opts };
      return new Tensor(this, this.raw.input(JSON.stringify(shape), dtype, opts.name ?? '', opts.device ?? ''));
    }
    // Any op of the op table by name: tensors (or scalars) then attributes by name.
    op(name, inputs, attrs = {}) {
      const ins = inputs.map((t) => (t instanceof Tensor ? this.own(t) : { scalar: scalarJson(t) }));
      const id = this.raw.op(name, JSON.stringify(ins), JSON.stringify(attrs));
      if (this.scopes.length) this.raw.setName(id, [...this.scopes, name].join('/'));
      return new Tensor(this, id);
    }
    // A module scope, as kiln::scope in C++: the ops fn adds are named "<scopes>/<op>"
    // (k.scope('encoder', () => k.scope('layer.0', () => k.matmul(x, w))): "encoder/layer.0/matmul"),
    // which the page groups the graph by. Gives what fn returns.
    scope(name, fn) {
      if (typeof name !== 'string' || !name || name.includes('/')) {
        throw new Error(`scope: a scope name must be a non-empty string without '/' (got ${JSON.stringify(name)}); nest scopes for a path`);
      }
      this.scopes.push(name);
      try {
        return fn();
      } finally {
        this.scopes.pop();
      }
    }
    // k.softmax(x, -1), k.add(x, 1), k.sum(x, [1], true), k.cat([a, b], 0), k.layer_norm(x, w, b, 1, 1e-5);
    // a trailing plain object gives attributes by name: k.sum(x, {dims: [1], keepdim: true}).
    call(def, args) {
      args = args.slice();
      let named = {};
      const last = args[args.length - 1];
      if (last && typeof last === 'object' && !Array.isArray(last) && !(last instanceof Tensor)) named = args.pop();
      const inputs = [];
      if (def.max_inputs < 0) {
        const list = args.shift();
        if (!Array.isArray(list)) throw new Error(`${def.name}: expected an array of tensors first`);
        inputs.push(...list);
      } else {
        const scalarsOk = def.category === 'binary' || def.category === 'ternary';
        while (inputs.length < def.max_inputs && args.length &&
               (args[0] instanceof Tensor || (scalarsOk && inputs.length < def.min_inputs && isScalar(args[0]))))
          inputs.push(args.shift());
      }
      const attrs = {};
      for (const spec of def.attrs) {
        if (spec.name in named) attrs[spec.name] = named[spec.name];
        else if (args.length) attrs[spec.name] = args.shift();
        else if (spec.name in ATTR_DEFAULTS) attrs[spec.name] = ATTR_DEFAULTS[spec.name];
        else if (def.category === 'reduction' && spec.name in REDUCTION_DEFAULTS) attrs[spec.name] = REDUCTION_DEFAULTS[spec.name];
      }
      if (args.length) throw new Error(`${def.name}: ${args.length} argument(s) too many`);
      return this.op(def.name, inputs, attrs);
    }
    name(t, name) { this.raw.setName(this.own(t), name); return t; }
    // The graph with these outputs (a tensor or an array of tensors).
    build(outputs) {
      const list = (Array.isArray(outputs) ? outputs : [outputs]).map((t) => this.own(t));
      return new Graph(this.kiln, this.raw.finish(JSON.stringify(list)));
    }
    own(t) {
      if (!(t instanceof Tensor) || t.builder !== this) throw new Error('a tensor of another graph builder');
      return t.id;
    }
  }

  function isScalar(v) { return typeof v === 'number' || typeof v === 'boolean'; }
  function scalarJson(v) {
    if (typeof v === 'boolean') return v;
    if (typeof v !== 'number') throw new Error(`expected a tensor or a scalar, got ${typeof v}`);
    if (Number.isNaN(v)) return 'nan';
    if (!Number.isFinite(v)) return v > 0 ? 'inf' : '-inf';
    return v;
  }

  class KilnModule {
    constructor(M) {
      this.M = M;
      this.version = M.version();
      this.ops = JSON.parse(M.opTable());
      this.targets = ['cpu', 'cuda', 'vulkan'];
    }
    builder() { return new Builder(this); }
    // A graph from graph JSON (text or object).
    // An ONNX model decoded by onnx.js (`await KilnOnnx.decode(bytes, files)`) imported as a graph,
    // as kiln::onnx::load imports the file natively for opts.device ('cpu' by default: weights
    // stay constants; 'cuda', 'vulkan': they become inputs, as a compile for such a device has them).
    importOnnx(decoded, opts = {}) {
      const parts = decoded.parts || [decoded.blob];
      if (typeof decoded.json !== 'string' || !Array.isArray(parts) || !parts.every((p) => p instanceof Uint8Array))
        throw new Error('importOnnx takes what KilnOnnx.decode gives: {json: string, parts: [Uint8Array, ...]} (or blob: Uint8Array)');
      return new Graph(this, this.M.onnxGraph(decoded.json, parts, opts.device || 'cpu'));
    }
    loadGraph(json) { return new Graph(this, typeof json === 'string' ? json : JSON.stringify(json)); }
    graphJson(g) { return g instanceof Graph ? g.json : typeof g === 'string' ? g : JSON.stringify(g); }
    // Everything a compile produced (docs/web.md): passes, scheduled graph, decisions, kernels,
    // guards, the plan JSON text (report.plan), timings. opts: {target, mode, options}.
    compile(g, opts = {}) { return JSON.parse(this.M.compile(this.graphJson(g), JSON.stringify(opts))); }
    // Just the KernelPlan JSON text.
    plan(g, opts = {}) { return this.M.planJson(this.graphJson(g), JSON.stringify(opts)); }
    cacheKey(g, opts = {}) { return this.M.cacheKey(this.graphJson(g), JSON.stringify(opts)); }
    // What cacheKey hashes (sdk/cache's KeyInputs), by name.
    cacheKeyInputs(g, opts = {}) { return JSON.parse(this.M.cacheKeyInputs(this.graphJson(g), JSON.stringify(opts))); }
    // The reference interpreter: {inputs: [{shape, data}]} or {random: seed, symbols: {s0: 4}}.
    run(g, req = { random: 0 }) { return JSON.parse(this.M.runReference(this.graphJson(g), JSON.stringify(req))); }
  }

  async function load(moduleArgs = {}) {
    const factory = wasmFactory();
    if (typeof factory !== 'function') throw new Error('kiln_wasm.js is not loaded');
    return new KilnModule(await factory(moduleArgs));
  }

  return { load, Tensor, Graph, Builder };
});
