// aiod's JavaScript REPL harness. Requests arrive as JSON lines on stdin
// ({code, timeout_ms, max_chars}); each answer is one JSON line on fd 3
// ({stdout, stderr, streams, result, error, timed_out}). Cells run in
// this process's own context, so globals persist between them.
'use strict';
const vm = require('vm');
const fs = require('fs');
const util = require('util');
const readline = require('readline');

let cap = null; // the running cell's capture
const write = (name) => (chunk, enc, cb) => {
  const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
  if (cap) {
    if (cap.size < cap.max) {
      cap.size += text.length;
      const last = cap.streams[cap.streams.length - 1];
      if (last && last[0] === name) last[1] += text; else cap.streams.push([name, text]);
    }
  }
  if (typeof enc === 'function') enc(); else if (typeof cb === 'function') cb();
  return true;
};
process.stdout.write = write('stdout');
process.stderr.write = write('stderr');
process.on('uncaughtException', (e) => { if (cap) write('stderr')('Uncaught ' + (e && e.stack || e) + '\n'); });
process.on('unhandledRejection', (e) => { if (cap) write('stderr')('Unhandled rejection: ' + (e && e.stack || e) + '\n'); });

const TIMEOUT = Symbol('timeout');

// frames is the error's stack without the harness's own frames.
function frames(e) {
  const lines = String(e.stack || e).split('\n');
  const end = lines.findIndex((l) => /at (Script\.runInThisContext|run|new Script) |\[eval\]|node:vm/.test(l));
  return end < 0 ? lines : lines.slice(0, end);
}

function compile(code) {
  try {
    return { script: new vm.Script(code, { filename: 'evalmachine.<anonymous>' }), wrapped: false };
  } catch (e) {
    if (!(e instanceof SyntaxError) || !/\bawait\b/.test(code)) throw e;
    for (const src of ['(async () => (' + code + '\n))()', '(async () => {' + code + '\n})()']) {
      try {
        return { script: new vm.Script(src, { filename: 'evalmachine.<anonymous>' }), wrapped: true };
      } catch (_) { /* try the next form */ }
    }
    throw e;
  }
}

async function run(req) {
  cap = { streams: [], size: 0, max: req.max_chars || 2000000 };
  const out = { result: null, error: null, timed_out: false };
  const ms = Math.max(1, req.timeout_ms | 0);
  try {
    const { script, wrapped } = compile(req.code);
    let v = script.runInThisContext({ timeout: ms, displayErrors: false });
    if (wrapped) {
      let timer;
      v = await Promise.race([v, new Promise((res) => { timer = setTimeout(() => res(TIMEOUT), ms); })]);
      clearTimeout(timer);
      if (v === TIMEOUT) { out.timed_out = true; v = undefined; }
    }
    if (v !== undefined) out.result = util.inspect(v);
  } catch (e) {
    if (e && e.code === 'ERR_SCRIPT_EXECUTION_TIMEOUT') out.timed_out = true;
    else if (e instanceof Error || (e && typeof e === 'object' && 'stack' in e)) {
      out.error = { ename: String(e.name || 'Error'), evalue: String(e.message || ''), traceback: frames(e) };
    } else {
      out.error = { ename: 'Error', evalue: 'Uncaught ' + util.inspect(e), traceback: [] };
    }
  }
  out.streams = cap.streams;
  out.stdout = cap.streams.filter((s) => s[0] === 'stdout').map((s) => s[1]).join('');
  out.stderr = cap.streams.filter((s) => s[0] === 'stderr').map((s) => s[1]).join('');
  cap = null;
  fs.writeSync(3, JSON.stringify(out) + '\n');
}

let queue = Promise.resolve();
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  let req;
  try { req = JSON.parse(line); } catch (_) { return; }
  queue = queue.then(() => run(req));
}).on('close', () => { queue.then(() => process.exit(0)); });
