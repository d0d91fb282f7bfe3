// Shared by tests/web/*.test.js: where the module, the native twin and the samples are.
'use strict';
const path = require('path');
const fs = require('fs');
const { execFileSync } = require('child_process');

const root = path.resolve(__dirname, '../..');
const wasmDir = path.resolve(process.env.KILN_WASM_DIR || path.join(root, 'build/wasm/dist'));
const native = process.env.KILN_WEB_NATIVE ? path.resolve(process.env.KILN_WEB_NATIVE) : path.join(root, 'build/web-native/tests/web/kiln_web_native');
const cli = process.env.KILN_CLI ? path.resolve(process.env.KILN_CLI) : '';
const samplesDir = path.join(root, 'samples/graphs');
const samples = fs.readdirSync(samplesDir).filter((f) => f.endsWith('.json')).sort();

let loaded;
function kiln() {
  // The wasm bytes handed over directly: Node 20's fetch cannot load a file path (the loader
  // would try it), so this works with or without --no-experimental-fetch.
  if (!loaded) loaded = require(path.join(wasmDir, 'kiln.js')).load({ wasmBinary: fs.readFileSync(path.join(wasmDir, 'kiln_wasm.wasm')) });
  return loaded;
}

// Runs the native twin; gives {ok, out} (out without the "error: " prefix on failure).
function runNative(cmd, graphText, arg) {
  const args = [cmd, '-'];
  if (arg !== undefined) args.push(arg);
  try {
    return { ok: true, out: execFileSync(native, args, { input: graphText, maxBuffer: 1 << 28 }).toString() };
  } catch (e) {
    if (e.status !== 1) throw e;
    const out = e.stdout.toString();
    if (!out.startsWith('error: ')) throw new Error(`native twin failed: ${out}${e.stderr}`);
    return { ok: false, out: out.slice('error: '.length) };
  }
}

function readSample(name) { return fs.readFileSync(path.join(samplesDir, name), 'utf8'); }

// The ONNX decoder beside the module (protobufjs from web/node_modules: CTest sets NODE_PATH).
function onnx() { return require(path.join(wasmDir, 'onnx.js')); }
// tests/onnx/real_models: small exports of six architectures, each a folder of model.onnx, its
// external data file and inputs; the files of each as {name: Uint8Array}.
const realModelsDir = path.join(root, 'tests/onnx/real_models');
const realModels = fs.readdirSync(realModelsDir).filter((d) => fs.existsSync(path.join(realModelsDir, d, 'model.onnx'))).sort();
function modelFiles(name) {
  const dir = path.join(realModelsDir, name);
  return Object.fromEntries(fs.readdirSync(dir).map((f) => [f, new Uint8Array(fs.readFileSync(path.join(dir, f)))]));
}

// Headless Debian Chromium through playwright-core (web/node_modules) on the inspector, served
// on a free port: {browser, server, page, url, errors (the page's uncaught errors)}.
async function launchInspector(contextOptions = {}) {
  const chromiumPath = process.env.KILN_CHROMIUM || '/usr/bin/chromium';
  let chromium;
  try {
    ({ chromium } = require(path.join(root, 'web/node_modules/playwright-core')));
  } catch (e) {
    throw new Error(`cannot load playwright-core from web/node_modules (npm ci in web/): ${e}`);
  }
  if (!fs.existsSync(chromiumPath)) throw new Error(`no Chromium at ${chromiumPath} (Debian: chromium)`);
  const { serve } = require(path.join(root, 'web/app/serve.js'));
  const server = await serve(0);
  const url = `http://127.0.0.1:${server.address().port}/`;
  const browser = await chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update'],
  });
  const context = await browser.newContext({ viewport: { width: 1600, height: 1000 }, ...contextOptions });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  return { browser, server, page, url, errors };
}

module.exports = { launchInspector, root, wasmDir, native, cli, samplesDir, samples, kiln, runNative, readSample, onnx, realModelsDir, realModels, modelFiles };
