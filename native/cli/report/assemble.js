// node assemble.js DATA.json OUT.html: the page `kiln report` writes (html_page in
// native/cli/cmd_report.cpp) from report.html, report.css, report.js and a kiln.report JSON file,
// for working on the viewer without a build and for the browser test's fixtures.
'use strict';
const fs = require('fs');
const path = require('path');

const [dataPath, outPath] = process.argv.slice(2);
if (!dataPath || !outPath) {
  console.error('usage: node assemble.js DATA.json OUT.html');
  process.exit(2);
}
const read = (name) => fs.readFileSync(path.join(__dirname, name), 'utf8');
// As the C++ writes it: compact, every '<' escaped so no string can end the script element.
const data = JSON.stringify(JSON.parse(fs.readFileSync(dataPath, 'utf8'))).replace(/</g, '\\u003c');
let page = read('report.html');
// The data last, as the C++ does (it may hold the other markers' text); slices, not
// String.replace, whose replacement text gives '$' a meaning.
for (const [marker, value] of [['/*@KILN_REPORT_CSS@*/', read('report.css')], ['/*@KILN_REPORT_JS@*/', read('report.js')],
  ['@KILN_REPORT_DATA@', data]]) {
  const at = page.indexOf(marker);
  if (at < 0) throw new Error(`report.html lacks ${marker}`);
  page = page.slice(0, at) + value + page.slice(at + marker.length);
}
fs.writeFileSync(outPath, page);
