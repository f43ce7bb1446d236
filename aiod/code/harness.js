// aiod's JavaScript REPL harness. Requests arrive as JSON lines on stdin
// ({code, timeout_ms, max_chars}); each answer is one JSON line on fd 3
// ({stdout, stderr, streams, result, error, timed_out}). Cells run in
// this process's own context, so globals persist between them.
// Everything is inside one function, so that the harness's own names
// (vm, fs, run, …) are not globals a cell would collide with.
(() => {
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

// ---- top-level await ----
// A cell with a top-level await runs as the body of an async function.
// With no parser at hand, a small tokenizer (strings, templates,
// comments, regular expressions, bracket depth and the usual ASI
// cases) splits the cell into its top-level statements, so that
//  - the last one, when it is an expression, becomes the function's
//    return value: the cell's result, as in a plain cell;
//  - top-level var/let/const declarations become assignments to
//    globals (`const x = 1` runs as `x = 1`), class declarations too,
//    and function declarations are copied onto globalThis: they persist
//    for later cells as a plain cell's do. (Assigning a name a plain
//    cell declared with const throws, as redeclaring it would.)
// A rewrite is only used when it compiles; otherwise the cell runs in
// the plain wrapper (no value, nothing persists).

const PUNCT = ['>>>=', '...', '===', '!==', '**=', '<<=', '>>=', '>>>', '&&=', '||=', '??=', '=>', '==', '!=',
  '<=', '>=', '&&', '||', '??', '?.', '++', '--', '+=', '-=', '*=', '/=', '%=', '&=', '|=', '^=', '**', '<<', '>>'];
// words after which an expression (so a regular expression) may start
const BEFORE_EXPR = new Set(['return', 'typeof', 'instanceof', 'in', 'of', 'new', 'delete', 'void', 'throw',
  'case', 'do', 'else', 'yield', 'await', 'extends']);
// words after which a line break does not end the statement
const CONT_PREV = new Set(['await', 'typeof', 'void', 'delete', 'new', 'in', 'instanceof', 'else', 'do', 'yield',
  'case', 'extends']);
// words before which a line break does not end the statement
const CONT_NEXT = new Set(['in', 'instanceof', 'else', 'catch', 'finally']);
// words starting a statement that is not an expression
const STATEMENT = new Set(['var', 'let', 'const', 'function', 'class', 'if', 'for', 'while', 'do', 'switch', 'try',
  'return', 'throw', 'break', 'continue', 'export', 'else', 'catch', 'finally', 'with', 'debugger']);
const HEADER = new Set(['if', 'for', 'while', 'with', 'switch', 'catch']);
const NEWLINE = /[\n\r\u2028\u2029]/;
const WORD = /(?:[\p{ID_Continue}$\u200c\u200d]|\\u[0-9a-fA-F]{4}|\\u\{[0-9a-fA-F]+\})+/uy;

// tokenize returns src's tokens: {type: word|str|tmpl|tmplcont|regex|punct,
// value, start, end, depth (brackets open around it; a bracket counts
// outside itself), nl (a line break before it)}. It throws on what it
// cannot follow.
function tokenize(src) {
  const toks = [];
  const opens = []; // open bracket tokens
  const tmpl = []; // depths at which a `}` resumes a template
  let i = 0;
  let depth = 0;
  let nl = false;
  const push = (t) => { t.nl = nl; nl = false; toks.push(t); return t; };
  const template = (type, start, d) => { // from i inside template text
    for (; i < src.length; i++) {
      if (src[i] === '\\') { i++; continue; }
      if (src[i] === '`') { i++; push({ type, value: '', start, end: i, depth: d, open: false }); return; }
      if (src[i] === '$' && src[i + 1] === '{') {
        i += 2;
        push({ type, value: '', start, end: i, depth: d, open: true });
        depth++;
        tmpl.push(depth);
        return;
      }
    }
    throw new SyntaxError('unterminated template');
  };
  const regexOK = () => {
    const p = toks[toks.length - 1];
    if (!p) return true;
    if (p.type === 'word') return BEFORE_EXPR.has(p.value);
    if (p.type === 'punct') return ![')', ']', '++', '--'].includes(p.value);
    if (p.type === 'tmpl' || p.type === 'tmplcont') return p.open;
    return false;
  };
  while (i < src.length) {
    const c = src[i];
    const start = i;
    if (NEWLINE.test(c)) { nl = true; i++; continue; }
    if (/\s/.test(c)) { i++; continue; }
    if (c === '/' && src[i + 1] === '/') {
      while (i < src.length && !NEWLINE.test(src[i])) i++;
      continue;
    }
    if (c === '/' && src[i + 1] === '*') {
      const end = src.indexOf('*/', i + 2);
      if (end < 0) throw new SyntaxError('unterminated comment');
      if (NEWLINE.test(src.slice(i, end))) nl = true;
      i = end + 2;
      continue;
    }
    if (c === '"' || c === "'") {
      for (i++; src[i] !== c; i++) {
        if (i >= src.length || NEWLINE.test(src[i])) throw new SyntaxError('unterminated string');
        if (src[i] === '\\') i++;
      }
      i++;
      push({ type: 'str', value: '', start, end: i, depth });
      continue;
    }
    if (c === '`') { i++; template('tmpl', start, depth); continue; }
    if (c === '/' && regexOK()) {
      let cls = false;
      for (i++; cls || src[i] !== '/'; i++) {
        if (i >= src.length || NEWLINE.test(src[i])) throw new SyntaxError('unterminated regular expression');
        if (src[i] === '\\') i++;
        else if (src[i] === '[') cls = true;
        else if (src[i] === ']') cls = false;
      }
      i++;
      while (i < src.length && /[a-z]/.test(src[i])) i++;
      push({ type: 'regex', value: '', start, end: i, depth });
      continue;
    }
    WORD.lastIndex = i;
    const w = WORD.exec(src);
    if (w) {
      i += w[0].length;
      push({ type: 'word', value: w[0], start, end: i, depth });
      continue;
    }
    if (c === '}' && tmpl.length && tmpl[tmpl.length - 1] === depth) {
      tmpl.pop();
      depth--;
      i++;
      template('tmplcont', start, depth);
      continue;
    }
    const value = PUNCT.find((op) => src.startsWith(op, i)) || c;
    i += value.length;
    if (value === '(' || value === '[' || value === '{') {
      const p = toks[toks.length - 1];
      const q = toks[toks.length - 2];
      const header = value === '(' && p && p.type === 'word' &&
        (HEADER.has(p.value) || (p.value === 'await' && q && q.value === 'for'));
      opens.push(push({ type: 'punct', value, start, end: i, depth, header }));
      depth++;
    } else if (value === ')' || value === ']' || value === '}') {
      if (!opens.length) throw new SyntaxError('unbalanced ' + value);
      depth--;
      push({ type: 'punct', value, start, end: i, depth, header: opens.pop().header });
    } else {
      push({ type: 'punct', value, start, end: i, depth });
    }
  }
  if (opens.length || tmpl.length) throw new SyntaxError('unbalanced brackets');
  return toks;
}

// startsStatement reports whether toks[k] starts a top-level statement.
function startsStatement(toks, k) {
  const t = toks[k];
  const p = toks[k - 1];
  if (k === 0) return true;
  if (t.depth !== 0 || t.type === 'tmplcont') return false;
  if (t.type === 'punct' && [')', ']', '}'].includes(t.value)) return false;
  if (p.type === 'punct' && p.value === ';' && p.depth === 0) return true;
  if (p.header) return false; // `if (…)` and the like: the body follows
  // what the next token continues
  if (t.type === 'punct' && !['{', '!', '~', '++', '--', ';'].includes(t.value)) return false;
  if (t.type === 'tmpl') return false; // a tagged template
  if (t.type === 'word' && (CONT_NEXT.has(t.value) || (t.value === 'while' && p.value === '}'))) return false;
  // what the previous token leaves open
  if (p.type === 'punct' && !['}', ')', ']', '++', '--'].includes(p.value)) return false;
  if (p.type === 'word' && CONT_PREV.has(p.value)) return false;
  return t.nl || (p.type === 'punct' && p.value === '}');
}

// statements splits toks into top-level statements [first, last]
// (token indexes, trailing semicolons left out), empty ones dropped.
function statements(toks) {
  const starts = [];
  for (let k = 0; k < toks.length; k++) if (startsStatement(toks, k)) starts.push(k);
  const out = [];
  starts.forEach((first, n) => {
    let last = (n + 1 < starts.length ? starts[n + 1] : toks.length) - 1;
    while (last >= first && toks[last].type === 'punct' && toks[last].value === ';' && toks[last].depth === 0) last--;
    if (last >= first) out.push({ first, last });
  });
  return out;
}

const isPunct = (t, v) => t && t.type === 'punct' && t.value === v;

// declaration rewrites a top-level var/let/const statement as
// assignments, or returns null.
function declaration(src, toks, s) {
  const kw = toks[s.first].value;
  const pieces = [];
  let a = s.first + 1;
  while (a <= s.last) {
    let b = a;
    while (b <= s.last && !(isPunct(toks[b], ',') && toks[b].depth === 0)) b++;
    let eq = a;
    while (eq < b && !(isPunct(toks[eq], '=') && toks[eq].depth === 0)) eq++;
    const simple = eq === a + 1 && toks[a].type === 'word';
    if (eq === b) { // no initializer
      if (b !== a + 1 || toks[a].type !== 'word') return null;
      const x = toks[a].value;
      pieces.push(kw === 'var' ? `void (typeof ${x} === 'undefined' && (${x} = void 0))` : `${x} = void 0`);
    } else if (eq + 1 >= b) {
      return null;
    } else {
      const init = src.slice(toks[eq + 1].start, toks[b - 1].end);
      if (simple) pieces.push(`${toks[a].value} = ${init}`);
      else if (isPunct(toks[a], '{') || isPunct(toks[a], '[')) pieces.push(`(${src.slice(toks[a].start, toks[eq - 1].end)} = ${init})`);
      else return null;
    }
    a = b + 1;
  }
  return pieces.length ? ';' + pieces.join(', ') + ';' : null;
}

// awaitBody rewrites an await cell into the body of an async function
// (see above); withReturn makes its last expression the return value.
function awaitBody(src, withReturn) {
  const toks = tokenize(src);
  const stmts = statements(toks);
  const edits = []; // [start, end, text], not overlapping
  const prelude = [];
  for (const s of stmts) {
    const t = toks[s.first];
    const u = toks[s.first + 1];
    if (t.type !== 'word') continue;
    if ((t.value === 'var' || t.value === 'let' || t.value === 'const') && u &&
        ((u.type === 'word' && !CONT_NEXT.has(u.value)) || isPunct(u, '{') || isPunct(u, '['))) {
      const text = declaration(src, toks, s);
      if (text !== null) edits.push([t.start, toks[s.last].end, text]);
    } else if (t.value === 'function' || (t.value === 'async' && u && u.value === 'function' && !u.nl)) {
      let k = s.first + (t.value === 'async' ? 2 : 1);
      if (isPunct(toks[k], '*')) k++;
      if (toks[k] && toks[k].type === 'word') prelude.push(`globalThis.${toks[k].value} = ${toks[k].value};`);
    } else if (t.value === 'class' && u && u.type === 'word' && u.value !== 'extends') {
      let open = s.first + 2;
      while (open <= s.last && !(isPunct(toks[open], '{') && toks[open].depth === 0)) open++;
      let close = open + 1;
      while (close <= s.last && !(isPunct(toks[close], '}') && toks[close].depth === 0)) close++;
      if (close <= s.last) edits.push([t.start, toks[close].end, `;${u.value} = ${src.slice(t.start, toks[close].end)};`]);
    }
  }
  const last = stmts[stmts.length - 1];
  if (withReturn && last) {
    const t = toks[last.first];
    const u = toks[last.first + 1];
    const statement = (t.type === 'word' && (STATEMENT.has(t.value) ||
        (t.value === 'async' && u && u.value === 'function' && !u.nl) ||
        (t.value === 'import' && !isPunct(u, '(')) || isPunct(u, ':'))) || isPunct(t, '{');
    if (!statement) edits.push([t.start, toks[last.last].end, 'return (' + src.slice(t.start, toks[last.last].end) + '\n);']);
  }
  let out = src;
  for (const [start, end, text] of edits.sort((x, y) => y[0] - x[0])) out = out.slice(0, start) + text + out.slice(end);
  return prelude.join(' ') + out;
}

const script = (src) => new vm.Script(src, { filename: 'evalmachine.<anonymous>' });

function compile(code) {
  try {
    return { script: script(code), wrapped: false };
  } catch (e) {
    if (!(e instanceof SyntaxError) || !/\bawait\b/.test(code)) throw e;
    const forms = [
      () => '(async () => (' + code + '\n))()',
      () => '(async () => {' + awaitBody(code, true) + '\n})()',
      () => '(async () => {' + awaitBody(code, false) + '\n})()',
      () => '(async () => {' + code + '\n})()',
    ];
    for (const form of forms) {
      try {
        return { script: script(form()), wrapped: true };
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
})();
