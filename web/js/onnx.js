// Decodes ONNX models for the WebAssembly module: protobufjs (npm) reads the ModelProto with
// ONNX's schema (onnx.proto, which the build copies beside this file from Debian's libonnx-dev,
// the schema the native importer's classes come from), and the result goes to the module as
// JSON plus one blob of tensor bytes (kiln::onnx::load_decoded; kiln.js's importOnnx).
//   Node:    const KilnOnnx = require('./onnx.js'); const d = await KilnOnnx.decode(bytes, files);
//   Browser: <script src="/npm/protobufjs/dist/protobuf.min.js"></script><script src="onnx.js">,
//            then KilnOnnx.decode(bytes, files)
// `bytes` is the .onnx file (a Uint8Array); `files` maps the names of the files beside it to
// their bytes: a tensor whose data is external (data_location EXTERNAL) is read from
// files[location] and travels in the blob like any other.
(function (root, factory) {
  if (typeof module === 'object' && module.exports) {
    module.exports = factory(() => require('protobufjs'),
      async () => require('fs').readFileSync(require('path').join(__dirname, 'onnx.proto'), 'utf8'));
  } else {
    const here = root.document && root.document.currentScript ? root.document.currentScript.src : 'onnx.js';
    root.KilnOnnx = factory(() => root.protobuf, async () => {
      const r = await fetch(new URL('onnx.proto', new URL(here, root.location.href)));
      if (!r.ok) throw new Error(`could not load ONNX's schema (onnx.proto): HTTP ${r.status}`);
      return r.text();
    });
  }
})(typeof self !== 'undefined' ? self : this, function (protobufjs, schemaText) {
  'use strict';

  const EXTERNAL = 1;  // TensorProto.DataLocation
  const SCOPES_KEY = 'pkg.torch.onnx.name_scopes';  // model_proto.h's proto::Node::name_scopes
  let modelType = null;

  async function modelProto() {
    if (!modelType) {
      const pb = protobufjs();
      const root = pb.parse(await schemaText()).root;
      // NodeProto.metadata_props (field 9, ONNX 1.16) is where PyTorch's exporter writes each
      // node's module scopes; Debian's schema predates it, so it is declared here (as ONNX declares it).
      const node = root.lookupType('onnx.NodeProto');
      if (!node.fieldsById[9]) node.add(new pb.Field('metadataProps', 9, 'StringStringEntryProto', 'repeated'));
      modelType = root.lookupType('onnx.ModelProto');
    }
    return modelType;
  }

  // Bytes that look like an ONNX model: a ModelProto starts with ir_version (field 1, a varint).
  function looksLikeOnnx(bytes) { return bytes.length > 2 && bytes[0] === 0x08; }

  // Decodes `bytes` (an .onnx file) into {json, parts, blob, tensors, bytes}: the ModelProto as
  // protobufjs's toObject gives it (longs as strings, NaN and infinities as strings), each
  // tensor's raw data replaced by {blob: [offset, length]} into the blob, string attributes as
  // text. The blob is `parts` (views of the files' bytes, not copies) one after another; the
  // module copies the parts in, and `blob` concatenates them only when read. Throws an Error with
  // a sentence for bytes that are no ModelProto or a missing file.
  async function decode(bytes, files = {}) {
    const T = await modelProto();
    let message;
    try {
      message = T.decode(bytes);
    } catch (e) {
      throw new Error(`not a valid ONNX protobuf (malformed or truncated ModelProto, ${bytes.length} bytes): ${e.message}`);
    }
    const model = T.toObject(message, { longs: String, enums: Number, json: true });
    const chunks = [];
    let size = 0;
    const take = (data) => {
      chunks.push(data);
      size += data.length;
      return { blob: [size - data.length, data.length] };
    };
    const text = (data) => new TextDecoder().decode(data);
    function tensor(t) {
      if (t.dataLocation === EXTERNAL) {
        const entries = Object.fromEntries((t.externalData || []).map((e) => [e.key, e.value]));
        const where = `tensor '${t.name || ''}'`;
        const file = files[entries.location];
        if (!file) {
          throw new Error(`${where} has its data in the file '${entries.location}', which was not opened with the model ` +
            '(pick or drop the model and its data files together)');
        }
        const offset = Number(entries.offset || 0);
        const length = entries.length !== undefined ? Number(entries.length) : file.length - offset;
        if (!(Number.isSafeInteger(offset) && Number.isSafeInteger(length) && offset >= 0 && length >= 0 &&
              offset + length <= file.length)) {
          throw new Error(`${where}: its external data (offset ${entries.offset}, length ${entries.length}) lies outside ` +
            `'${entries.location}' (${file.length} bytes)`);
        }
        t.rawData = take(file.subarray(offset, offset + length));
        delete t.dataLocation;
        delete t.externalData;
      } else if (t.rawData instanceof Uint8Array) {
        t.rawData = take(t.rawData);
      }
    }
    const graph = model.graph || {};
    for (const t of graph.initializer || []) tensor(t);
    for (const n of graph.node || []) {
      // Of a node's metadata the importer reads its module scopes only (the exporter's stack
      // traces would be most of the JSON).
      if (n.metadataProps) n.metadataProps = n.metadataProps.filter((e) => e.key === SCOPES_KEY);
      for (const a of n.attribute || []) {
        if (a.t) tensor(a.t);
        if (a.s instanceof Uint8Array) a.s = text(a.s);
        if (a.strings) a.strings = a.strings.map(text);
      }
    }
    // Bytes the importer never reads (subgraphs', sparse tensors', string tensors') stay out.
    const json = JSON.stringify(model, (key, value) => (value instanceof Uint8Array ? undefined : value));
    return {
      json, parts: chunks, tensors: chunks.length, bytes: size,
      get blob() {
        const blob = new Uint8Array(size);
        let at = 0;
        for (const c of chunks) {
          blob.set(c, at);
          at += c.length;
        }
        return blob;
      },
    };
  }

  // The external data files a model's tensors name (their `location`s), in order of first use:
  // what to fetch beside a model opened from an address.
  async function externalFiles(bytes) {
    const T = await modelProto();
    let message;
    try {
      message = T.decode(bytes);
    } catch (e) {
      return [];  // decode() says what is wrong with it
    }
    const names = new Set();
    const visit = (t) => {
      if (t && t.dataLocation === EXTERNAL)
        for (const e of t.externalData || []) if (e.key === 'location') names.add(e.value);
    };
    const graph = message.graph || {};
    for (const t of graph.initializer || []) visit(t);
    for (const n of graph.node || []) for (const a of n.attribute || []) visit(a.t);
    return [...names];
  }

  return { decode, externalFiles, looksLikeOnnx };
});
