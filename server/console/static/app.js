// a2c console: the hub's web console (see server/console/doc.go for the
// HTTP contract). Plain JavaScript, no framework, no build step: hash
// routes render pages into <main>; every page gets an AbortSignal that
// ends its requests, timers and streams when the user leaves it.
'use strict';

(() => {
  // ---------------------------------------------------------------- DOM

  // h builds an element: h('a', {href: '#/x', class: 'c'}, 'text', child).
  // Text is always set as text, never parsed as HTML.
  function h(tag, props, ...kids) {
    const el = document.createElement(tag);
    if (props) {
      for (const [k, v] of Object.entries(props)) {
        if (v == null || v === false) continue;
        if (k === 'class') el.className = v;
        else if (k === 'text') el.textContent = v;
        else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
        else if (k === 'value' || k === 'checked' || k === 'srcdoc') el[k] = v;
        else el.setAttribute(k, v === true ? '' : String(v));
      }
    }
    add(el, kids);
    return el;
  }

  function add(el, kids) {
    for (const k of kids) {
      if (k == null || k === false) continue;
      if (Array.isArray(k)) add(el, k);
      else el.append(k instanceof Node ? k : document.createTextNode(String(k)));
    }
  }

  let uid = 0;
  const nextID = (p) => `${p}-${++uid}`;

  const announcer = () => document.getElementById('announce');
  // announce tells screen readers something changed (the page-wide live
  // region; pages have their own for results).
  function announce(msg) {
    const a = announcer();
    a.textContent = '';
    setTimeout(() => { a.textContent = msg; }, 30);
  }

  const enc = encodeURIComponent;

  // ---------------------------------------------------------------- format

  function fmtTime(iso) {
    if (!iso) return '';
    const d = new Date(iso);
    if (Number.isNaN(d.getTime())) return iso;
    const now = new Date();
    const t = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });
    if (d.toDateString() === now.toDateString()) return t;
    return `${d.toLocaleDateString([], { month: 'short', day: 'numeric' })} ${t}`;
  }

  function timeEl(iso) {
    if (!iso) return h('span', { class: 'muted' }, '—');
    return h('time', { datetime: iso, title: new Date(iso).toString() }, fmtTime(iso));
  }

  function fmtAgo(iso) {
    const ms = Date.now() - new Date(iso).getTime();
    if (!(ms >= 0)) return '';
    const s = Math.round(ms / 1000);
    if (s < 60) return `${s} s ago`;
    const m = Math.round(s / 60);
    if (m < 60) return `${m} min ago`;
    const hr = Math.floor(m / 60);
    if (hr < 48) return `${hr} h ${m % 60} min ago`;
    return `${Math.floor(hr / 24)} days ago`;
  }

  // tsMS is an RFC 3339 time in milliseconds since the epoch, keeping the
  // sub-millisecond digits that Date.parse drops (spans are microseconds
  // apart).
  function tsMS(iso) {
    const m = /\.(\d+)/.exec(iso || '');
    if (!m) return Date.parse(iso);
    return Date.parse(iso.replace(m[0], '')) + Number(`0.${m[1]}`) * 1000;
  }

  function fmtMS(ms) {
    if (ms == null || Number.isNaN(ms)) return '';
    if (ms < 1) return `${ms.toFixed(2)} ms`;
    if (ms < 100) return `${ms.toFixed(1)} ms`;
    if (ms < 10000) return `${Math.round(ms)} ms`;
    if (ms < 600000) return `${(ms / 1000).toFixed(1)} s`;
    return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
  }

  function fmtBytes(n) {
    if (n == null) return '';
    if (n < 1024) return `${n} B`;
    const u = ['KB', 'MB', 'GB', 'TB'];
    let v = n / 1024;
    let i = 0;
    while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
    return `${v < 10 ? v.toFixed(1) : Math.round(v)} ${u[i]}`;
  }

  function outcomeBadge(call) {
    if (!call || call.state === 'running') return h('span', { class: 'badge running' }, 'running');
    const o = call.outcome || 'ok';
    return h('span', { class: `badge ${o}` }, o);
  }

  const consoleBadge = () => h('span', { class: 'badge console', title: "Called from this console" }, 'console');

  // ---------------------------------------------------------------- HTTP

  class HTTPError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  function toLogin() {
    // GET / answers the login form when the session is gone.
    location.reload();
  }

  // api calls the console's API: JSON in and out, errors as HTTPError
  // with the server's message.
  async function api(path, { method = 'GET', body, signal } = {}) {
    const init = { method, signal, credentials: 'same-origin', headers: { Accept: 'application/json' } };
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    const r = await fetch(path, init);
    const text = await r.text();
    let data = null;
    if (text) {
      try { data = JSON.parse(text); } catch { data = null; }
    }
    if (r.status === 401 && path.startsWith('/api/console/') && !path.startsWith('/api/console/sandboxes/')) {
      toLogin();
      throw new HTTPError(401, 'Your session has ended; sign in again.');
    }
    if (!r.ok) {
      throw new HTTPError(r.status, errorText(data) || `${r.status} ${r.statusText}`);
    }
    return data;
  }

  function errorText(data) {
    if (!data || typeof data !== 'object') return '';
    if (data.error && typeof data.error === 'object') return data.error.message || '';
    if (typeof data.error === 'string') return data.error;
    if (typeof data.message === 'string' && data.success === false) return data.message;
    if (typeof data.detail === 'string') return data.detail;
    if (Array.isArray(data.detail) && data.detail[0] && data.detail[0].msg) return data.detail[0].msg;
    return data.message || '';
  }

  // sandboxPath is the console's proxy to a sandbox's own API.
  const sandboxPath = (name, path) => `/api/console/sandboxes/${enc(name)}/api/${path}`;

  // sbx calls a sandbox's API and answers its envelope's data; a
  // refusal (success false) is an error with the sandbox's message.
  async function sbx(name, path, opts) {
    const env = await api(sandboxPath(name, path), opts);
    if (env && env.success === false) throw new HTTPError(200, env.message || 'The sandbox refused.');
    return env ? env.data : null;
  }

  function errorBox(err) {
    if (err && err.name === 'AbortError') return null;
    return h('div', { class: 'error-box', role: 'alert' }, String((err && err.message) || err));
  }

  // ---------------------------------------------------------------- router

  const routes = [
    [/^\/offices$/, pageOffices, 'offices'],
    [/^\/offices\/([^/]+)$/, pageOffice, 'offices'],
    [/^\/offices\/([^/]+)\/computers\/([^/]+)(?:\/tools\/([^/]+))?$/, pageComputer, 'offices'],
    [/^\/calls$/, pageCalls, 'calls'],
    [/^\/calls\/([^/]+)\/([^/]+)$/, pageCall, 'calls'],
    [/^\/sandboxes$/, pageSandboxes, 'sandboxes'],
    [/^\/sandboxes\/([^/]+)(?:\/(files|command|python))?$/, pageSandbox, 'sandboxes'],
  ];

  let current = null; // the page shown: {ctl}

  function parseHash() {
    const raw = location.hash.replace(/^#/, '');
    const q = raw.indexOf('?');
    const path = q < 0 ? raw : raw.slice(0, q);
    const query = new URLSearchParams(q < 0 ? '' : raw.slice(q + 1));
    return { path, query };
  }

  function route() {
    const { path, query } = parseHash();
    if (!path.startsWith('/')) {
      if (path === '' || current === null) {
        history.replaceState(null, '', '#/offices');
        route();
      }
      return; // an in-page anchor (the skip link)
    }
    for (const [re, fn, nav] of routes) {
      const m = re.exec(path);
      if (!m) continue;
      show(fn, m.slice(1).map((s) => (s === undefined ? undefined : decodeURIComponent(s))), query, nav);
      return;
    }
    show(pageNotFound, [], query, '');
  }

  function show(fn, args, query, nav) {
    if (current) current.ctl.abort();
    const ctl = new AbortController();
    const main = document.getElementById('main');
    const first = current === null;
    current = { ctl };
    main.replaceChildren();
    for (const a of document.querySelectorAll('[data-nav]')) {
      if (a.dataset.nav === nav) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    const pg = {
      main,
      query,
      signal: ctl.signal,
      // every registers a timer that ends with the page.
      every(ms, f) {
        const id = setInterval(f, ms);
        ctl.signal.addEventListener('abort', () => clearInterval(id));
      },
      onLeave(f) { ctl.signal.addEventListener('abort', f); },
      focusTitle: !first,
    };
    Promise.resolve()
      .then(() => fn(pg, ...args))
      .catch((err) => {
        if (ctl.signal.aborted || (err && err.name === 'AbortError')) return;
        main.append(errorBox(err));
      });
  }

  // head renders a page's title block: breadcrumbs, h1, subtitle,
  // actions; the h1 takes focus after navigation, so screen readers
  // announce the new page.
  function head(pg, { crumbs = [], title, sub, actions, titleClass }) {
    document.title = `${title} · a2c console`;
    const h1 = h('h1', { tabindex: '-1', class: titleClass }, title);
    const block = h('div', { class: 'page-head' },
      h('div', null,
        crumbs.length ? h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' },
          crumbs.map(([label, href], i) => [i ? h('span', { 'aria-hidden': 'true' }, '/') : null,
            href ? h('a', { href }, label) : h('span', null, label)])) : null,
        h1,
        sub ? h('p', { class: 'sub' }, sub) : null),
      actions ? h('div', { class: 'toolbar' }, actions) : null);
    pg.main.append(block);
    if (pg.focusTitle) h1.focus({ preventScroll: false });
    return block;
  }

  function pageNotFound(pg) {
    head(pg, { title: 'Not found', sub: 'No page at this address.' });
    pg.main.append(h('p', null, h('a', { href: '#/offices' }, 'Go to the offices')));
  }

  // ---------------------------------------------------------------- offices

  const roleOrder = { computer: 0, agent: 1 };

  function membersTable(office) {
    const members = [...(office.members || [])].sort((a, b) =>
      (roleOrder[a.role] ?? 2) - (roleOrder[b.role] ?? 2) || String(a.name).localeCompare(String(b.name)));
    if (!members.length) return h('p', { class: 'empty' }, 'Nobody is in this office.');
    const anyNode = members.some((m) => m.node);
    return h('div', { class: 'table-wrap' }, h('table', null,
      h('caption', { class: 'visually-hidden' }, `Members of office ${office.office_id}`),
      h('thead', null, h('tr', null,
        h('th', { scope: 'col' }, 'Role'), h('th', { scope: 'col' }, 'Name'),
        h('th', { scope: 'col' }, 'Protocol'), anyNode ? h('th', { scope: 'col' }, 'Node') : null,
        h('th', { scope: 'col' }, 'Connected since'))),
      h('tbody', null, members.map((m) => h('tr', null,
        h('td', null, h('span', { class: `badge ${m.role}` }, m.role || '?')),
        h('td', null, m.role === 'computer'
          ? h('a', { href: `#/offices/${enc(office.office_id)}/computers/${enc(m.name)}` }, m.name)
          : m.name),
        h('td', { class: 'mono' }, m.a2c_version || '—'),
        anyNode ? h('td', { class: 'mono' }, m.node || '—') : null,
        h('td', null, m.connected_since
          ? [timeEl(m.connected_since), h('span', { class: 'muted small' }, ` · ${fmtAgo(m.connected_since)}`)]
          : h('span', { class: 'muted' }, '—')))))));
  }

  function officeCard(office, link) {
    const n = (office.members || []).length;
    const comps = (office.members || []).filter((m) => m.role === 'computer').length;
    const id = nextID('office');
    return h('section', { class: 'card', 'aria-labelledby': id },
      h('div', { class: 'card-head' },
        h('h2', { id }, link ? h('a', { href: `#/offices/${enc(office.office_id)}` }, office.office_id) : office.office_id),
        h('span', { class: 'muted small' }, `${n} member${n === 1 ? '' : 's'} · ${comps} Computer${comps === 1 ? '' : 's'}`),
        h('span', { class: 'spacer' }),
        h('a', { href: `#/calls?office=${enc(office.office_id)}`, class: 'small' }, 'Calls in this office →')),
      membersTable(office));
  }

  // poll renders load()'s answer now and every ms while the page is
  // shown, touching the DOM only when the answer changed (focus stays).
  async function poll(pg, ms, load, render) {
    let last = '';
    const once = async () => {
      const data = await load();
      const key = JSON.stringify(data);
      if (key !== last && !pg.signal.aborted) {
        last = key;
        render(data);
      }
    };
    await once();
    pg.every(ms, () => { once().catch(() => {}); });
  }

  async function pageOffices(pg) {
    head(pg, { title: 'Offices', sub: 'The offices on this hub and who is in them. Updates every few seconds.' });
    const box = h('div', { class: 'stack' });
    pg.main.append(box);
    await poll(pg, 4000, () => api('/api/console/offices', { signal: pg.signal }), (d) => {
      const offices = (d.offices || []).slice().sort((a, b) => a.office_id.localeCompare(b.office_id));
      box.replaceChildren(...(offices.length ? offices.map((o) => officeCard(o, true))
        : [h('div', { class: 'card empty' }, 'No office has members yet. Start a Computer (a2c computer) or an Agent and it shows here.')]));
    });
  }

  async function pageOffice(pg, office) {
    head(pg, { crumbs: [['Offices', '#/offices']], title: office, sub: 'Members of this office.' });
    const box = h('div', { class: 'stack' });
    pg.main.append(box);
    await poll(pg, 4000, () => api(`/api/console/offices/${enc(office)}`, { signal: pg.signal }),
      (o) => box.replaceChildren(officeCard(o, false)));
  }

  // ---------------------------------------------------------------- computer

  function toolSchema(t) {
    return t.inputSchema || t.input_schema || t.params_schema || { type: 'object', properties: {} };
  }

  function toolMeta(t, servers) {
    let meta = t.meta || {};
    if (typeof meta.a2c_tool_meta === 'string') {
      try { meta = { ...meta, ...JSON.parse(meta.a2c_tool_meta) }; } catch { /* keep */ }
    }
    let auto = meta.auto_apply;
    if (auto == null) {
      const s = servers.find((x) => x.bundle_id === t.bundle_id);
      auto = s ? !!s.auto_apply : false;
    }
    return { tags: Array.isArray(meta.tags) ? meta.tags : [], auto: !!auto };
  }

  function policyBadge(auto) {
    return auto
      ? h('span', { class: 'badge auto', title: 'Runs without asking a human' }, 'auto_apply')
      : h('span', { class: 'badge approval', title: 'Not auto_apply: the Computer\'s approval policy decides (all: it runs; ask: a human confirms first; none: refused)' }, 'approval: Computer policy');
  }

  async function pageComputer(pg, office, computer, toolName) {
    const base = `#/offices/${enc(office)}/computers/${enc(computer)}`;
    head(pg, {
      crumbs: [['Offices', '#/offices'], [office, `#/offices/${enc(office)}`], ['Computer', null]],
      title: computer,
      sub: toolName ? null : 'The tools this Computer offers, their schemas and approval policy.',
    });
    const d = await api(`/api/console/offices/${enc(office)}/computers/${enc(computer)}`, { signal: pg.signal });
    const tools = (d.tools || []).slice().sort((a, b) => a.name.localeCompare(b.name));
    const servers = d.servers || [];
    const mgmt = d.management || null; // null: the Computer runs no management plane
    const selected = toolName ? tools.find((t) => t.name === toolName) : null;

    // the tool list, with a filter
    const filterID = nextID('filter');
    const list = h('ul', null, tools.map((t) => h('li', { 'data-name': t.name.toLowerCase() },
      h('a', { href: `${base}/tools/${enc(t.name)}`, 'aria-current': t === selected ? 'page' : null }, t.name))));
    const filter = h('input', {
      id: filterID, type: 'search', placeholder: 'Filter', autocomplete: 'off',
      oninput: () => {
        const q = filter.value.trim().toLowerCase();
        for (const li of list.children) li.hidden = q !== '' && !li.dataset.name.includes(q);
      },
    });
    const nav = h('nav', { class: 'card tool-nav', 'aria-label': 'Tools' },
      h('div', { class: 'card-body' }, h('div', { class: 'field' },
        h('label', { for: filterID }, `Tools (${tools.length})`), filter)),
      list);

    const pane = h('div', { class: 'stack' });
    pg.main.append(h('div', { class: 'split' }, nav, pane));

    if (selected) {
      pane.append(toolDetail(pg, office, computer, selected, servers));
      return;
    }
    if (toolName) pane.append(h('div', { class: 'error-box', role: 'alert' }, `This Computer has no tool named ${toolName}.`));
    pane.append(toolsOverview(base, tools, servers));
    if (servers.length) pane.append(serversCard(servers, mgmt));
    if (mgmt) pane.append(pluginsCard(mgmt));
  }

  function toolsOverview(base, tools, servers) {
    const id = nextID('tools');
    return h('section', { class: 'card', 'aria-labelledby': id },
      h('div', { class: 'card-head' }, h('h2', { id }, 'Tools'),
        h('span', { class: 'muted small' }, `${tools.length} tool${tools.length === 1 ? '' : 's'}`)),
      tools.length ? h('div', { class: 'table-wrap' }, h('table', null,
        h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'Name'), h('th', { scope: 'col' }, 'Description'),
          h('th', { scope: 'col' }, 'Tags'), h('th', { scope: 'col' }, 'Approval'))),
        h('tbody', null, tools.map((t) => {
          const m = toolMeta(t, servers);
          const desc = (t.description || '').split('\n')[0];
          return h('tr', null,
            h('td', null, h('a', { class: 'mono', href: `${base}/tools/${enc(t.name)}` }, t.name)),
            h('td', { class: 'small' }, desc.length > 160 ? `${desc.slice(0, 157)}…` : desc),
            h('td', null, h('div', { class: 'meta-row' }, m.tags.map((g) => h('span', { class: 'badge tag' }, g)))),
            h('td', null, policyBadge(m.auto)));
        }))))
        : h('p', { class: 'empty' }, 'This Computer offers no tools.'));
  }

  // serverOrigin is what the Origin column says of a server: its scope,
  // or "plugin <id>" for a plugin's, from the management state's
  // declaration of it (the served one, else the first, as the API's
  // origin); '—' when unknown.
  function serverOrigin(s, mgmt) {
    if (!s.origin) return h('span', { class: 'muted', title: 'The Computer did not say (it runs without the management plane)' }, '—');
    const decls = ((mgmt && mgmt.servers) || []).filter((x) => x.bundle_id === s.bundle_id);
    const d = decls.find((x) => x.served) || decls[0];
    if (s.origin === 'plugin' && d && d.plugin) return h('span', null, 'plugin ', h('span', { class: 'mono' }, d.plugin));
    return s.origin;
  }

  function serversCard(servers, mgmt) {
    const id = nextID('servers');
    return h('section', { class: 'card', 'aria-labelledby': id },
      h('div', { class: 'card-head' }, h('h2', { id }, 'MCP servers')),
      h('div', { class: 'table-wrap' }, h('table', null,
        h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'Bundle'), h('th', { scope: 'col' }, 'Name'),
          h('th', { scope: 'col' }, 'Type'), h('th', { scope: 'col' }, 'Origin'), h('th', { scope: 'col' }, 'Approval'), h('th', { scope: 'col' }, 'State'))),
        h('tbody', null, servers.map((s) => h('tr', { 'data-bundle': s.bundle_id },
          h('td', { class: 'mono' }, s.bundle_id), h('td', null, s.name || ''), h('td', null, s.type || ''),
          h('td', { class: 'origin' }, serverOrigin(s, mgmt)),
          h('td', null, policyBadge(!!s.auto_apply)),
          h('td', null, s.disabled ? h('span', { class: 'badge' }, 'disabled') : h('span', { class: 'badge ok' }, 'enabled'))))))));
  }

  // pluginStateBadge: an active plugin is ok; an enabled one that is not
  // active (its reason says why) is a warning; the others plain.
  function pluginStateBadge(p) {
    const label = (p.state || 'unknown').replace(/_/g, ' ');
    if (p.active) return h('span', { class: 'badge ok' }, label);
    if (p.enabled) return h('span', { class: 'badge down', title: 'Enabled but not active' }, label);
    return h('span', { class: 'badge' }, label);
  }

  function pluginsCard(mgmt) {
    const id = nextID('plugins');
    const plugins = (mgmt.plugins || []).slice().sort((a, b) => a.id.localeCompare(b.id));
    const yes = (v) => (v ? 'yes' : 'no');
    return h('section', { class: 'card', 'aria-labelledby': id },
      h('div', { class: 'card-head' }, h('h2', { id }, 'Plugins'),
        h('span', { class: 'muted small' }, `${plugins.length} plugin${plugins.length === 1 ? '' : 's'}`)),
      plugins.length ? h('div', { class: 'table-wrap' }, h('table', null,
        h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'Plugin'), h('th', { scope: 'col' }, 'State'),
          h('th', { scope: 'col' }, 'Enabled'), h('th', { scope: 'col' }, 'Active'), h('th', { scope: 'col' }, 'MCP servers'),
          h('th', { scope: 'col' }, 'Reason'))),
        h('tbody', null, plugins.map((p) => h('tr', { 'data-plugin': p.id },
          h('td', { class: 'mono' }, p.id), h('td', null, pluginStateBadge(p)),
          h('td', null, yes(p.enabled)), h('td', null, yes(p.active)),
          (p.mcpServers || []).length ? h('td', { class: 'mono small' }, p.mcpServers.join(', ')) : h('td', null, h('span', { class: 'muted' }, '—')),
          h('td', { class: 'small' }, p.reason || h('span', { class: 'muted' }, '—')))))))
        : h('p', { class: 'empty' }, 'This Computer has no plugin installed.'));
  }

  function toolDetail(pg, office, computer, t, servers) {
    const m = toolMeta(t, servers);
    const schema = toolSchema(t);
    const titleID = nextID('tool');
    const out = h('div', { class: 'stack' });
    const result = h('section', { class: 'card result-card', 'aria-labelledby': nextID('x'), hidden: true });
    const status = h('p', { role: 'status', 'aria-live': 'polite', class: 'small muted' });

    const form = schemaForm(schema, async (args, timeout, submit) => {
      submit.setAttribute('aria-disabled', 'true');
      status.textContent = `Calling ${t.name}…`;
      const started = performance.now();
      try {
        const ans = await api(`/api/console/offices/${enc(office)}/computers/${enc(computer)}/call`,
          { method: 'POST', body: { tool: t.name, arguments: args, timeout }, signal: pg.signal });
        const ms = performance.now() - started;
        const res = ans.result || {};
        const code = errorCode(res);
        status.textContent = res.isError
          ? `Call failed${code ? ` with error code ${code}` : ''} after ${fmtMS(ms)}.`
          : `Call finished in ${fmtMS(ms)}.`;
        renderResult(result, ans, ms);
      } catch (err) {
        if (err.name === 'AbortError') return;
        status.textContent = `Call failed: ${err.message}`;
        result.hidden = false;
        result.replaceChildren(h('div', { class: 'card-body' }, errorBox(err)));
      } finally {
        submit.removeAttribute('aria-disabled');
      }
    });

    out.append(
      h('section', { class: 'card', 'aria-labelledby': titleID },
        h('div', { class: 'card-head' },
          h('h2', { id: titleID, class: 'tool-title' }, t.name),
          h('span', { class: 'spacer' }),
          h('div', { class: 'meta-row' }, policyBadge(m.auto), m.tags.map((g) => h('span', { class: 'badge tag' }, g)))),
        h('div', { class: 'card-body stack' },
          t.description ? h('p', { class: 'desc' }, t.description) : h('p', { class: 'muted' }, 'No description.'),
          h('details', null, h('summary', null, 'Input schema'), h('pre', { class: 'json' }, JSON.stringify(schema, null, 2))))),
      h('section', { class: 'card', 'aria-labelledby': `${titleID}-form` },
        h('div', { class: 'card-head' }, h('h2', { id: `${titleID}-form` }, 'Call this tool'),
          h('span', { class: 'muted small' }, 'Goes through the hub like any Agent\'s call, marked as the console\'s.')),
        h('div', { class: 'card-body stack' }, form, status)),
      result);
    return out;
  }

  function errorCode(res) {
    const meta = res.meta || res._meta || {};
    return meta.error_code || 0;
  }

  // ---------------------------------------------------------------- schema form

  // fieldType resolves a property schema to one of: enum, boolean,
  // integer, number, string, json (arrays, objects, anything else).
  function fieldType(p) {
    let s = p || {};
    for (const k of ['anyOf', 'oneOf']) {
      if (Array.isArray(s[k])) {
        const alts = s[k].filter((x) => x && x.type !== 'null');
        if (alts.length === 1) s = { ...alts[0], ...s, [k]: undefined, type: alts[0].type };
      }
    }
    if (Array.isArray(s.enum) && s.enum.length) return { kind: 'enum', s };
    let t = s.type;
    if (Array.isArray(t)) t = t.find((x) => x !== 'null');
    if (t === 'boolean' || t === 'integer' || t === 'number' || t === 'string') return { kind: t, s };
    return { kind: 'json', s, jsonType: t };
  }

  function typeLabel(kind, s, jsonType) {
    if (kind === 'enum') return 'one of';
    if (kind === 'json') return jsonType || 'JSON';
    let l = kind;
    if (s.minimum != null && s.maximum != null) l += ` ${s.minimum}–${s.maximum}`;
    else if (s.minimum != null) l += ` ≥ ${s.minimum}`;
    else if (s.maximum != null) l += ` ≤ ${s.maximum}`;
    return l;
  }

  const multiline = /^(code|content|script|text|body|source|old_str|new_str|file_text|html|markdown|prompt|query)$/i;

  // schemaForm builds a form from a JSON Schema object: one labelled
  // control per property, help text and errors tied to it with
  // aria-describedby, validation before submit(args, timeout, button).
  function schemaForm(schema, submit) {
    const props = (schema && schema.properties) || {};
    const required = new Set((schema && schema.required) || []);
    const fields = [];
    const form = h('form', { class: 'form-grid', novalidate: true });
    const argSet = h('fieldset', { class: 'form-grid' }, h('legend', null, 'Arguments'));
    form.append(argSet);

    for (const [name, p] of Object.entries(props)) {
      const { kind, s, jsonType } = fieldType(p);
      const id = nextID('f');
      const helpID = `${id}-help`;
      const errID = `${id}-err`;
      const req = required.has(name);
      const def = s.default !== undefined ? s.default : p.default;
      const described = [s.description || p.description ? helpID : null, errID].filter(Boolean).join(' ');
      let control;
      if (kind === 'enum') {
        control = h('select', { id, name, 'aria-describedby': described, required: req },
          (!req || def === undefined) ? h('option', { value: '' }, req ? 'Choose…' : '(not set)') : null,
          s.enum.map((v, i) => h('option', { value: String(i), selected: def !== undefined && JSON.stringify(v) === JSON.stringify(def) }, String(v))));
      } else if (kind === 'boolean') {
        control = h('input', { id, name, type: 'checkbox', checked: def === true, 'aria-describedby': described });
      } else if (kind === 'integer' || kind === 'number') {
        control = h('input', {
          id, name, type: 'number', inputmode: kind === 'integer' ? 'numeric' : 'decimal',
          step: kind === 'integer' ? '1' : 'any', min: s.minimum, max: s.maximum,
          value: def != null ? String(def) : '', required: req, 'aria-describedby': described,
        });
      } else if (kind === 'string') {
        const big = multiline.test(name) || (s.maxLength || 0) > 500 || s.format === 'textarea';
        control = big
          ? h('textarea', { id, name, rows: 5, spellcheck: 'false', required: req, 'aria-describedby': described, value: def != null ? String(def) : '' })
          : h('input', { id, name, type: 'text', autocomplete: 'off', spellcheck: 'false', required: req, 'aria-describedby': described, value: def != null ? String(def) : '' });
      } else {
        control = h('textarea', {
          id, name, rows: 4, spellcheck: 'false', required: req, 'aria-describedby': described,
          placeholder: jsonType === 'array' ? '[ ]' : jsonType === 'object' ? '{ }' : 'JSON value',
          value: def !== undefined ? JSON.stringify(def, null, 2) : '',
        });
      }
      const labelKids = [name, req ? h('span', { class: 'req', 'aria-hidden': 'true' }, '*') : null,
        h('span', { class: 'type', 'aria-hidden': 'true' }, typeLabel(kind, s, jsonType))];
      const help = s.description || p.description ? h('p', { id: helpID, class: 'help' }, s.description || p.description) : null;
      const err = h('p', { id: errID, class: 'err', hidden: true });
      const wrap = kind === 'boolean'
        ? h('div', { class: 'field' }, h('div', { class: 'check' }, control, h('label', { for: id }, labelKids)), help, err)
        : h('div', { class: 'field' }, h('label', { for: id }, labelKids), control, help, err);
      argSet.append(wrap);
      fields.push({ name, kind, s, jsonType, req, def, control, err });
    }

    if (!fields.length) argSet.append(h('p', { class: 'muted' }, 'This tool takes no arguments.'));

    const timeoutID = nextID('timeout');
    const timeout = h('input', { id: timeoutID, type: 'number', min: '1', max: '3600', step: '1', value: '60', inputmode: 'numeric', 'aria-describedby': `${timeoutID}-help` });
    const timeoutErr = h('p', { id: `${timeoutID}-err`, class: 'err', hidden: true });
    form.append(h('fieldset', { class: 'form-grid call-opts' }, h('legend', null, 'Call'),
      h('div', { class: 'field narrow' },
        h('label', { for: timeoutID }, 'Call timeout', h('span', { class: 'type', 'aria-hidden': 'true' }, 'seconds')),
        timeout, h('p', { id: `${timeoutID}-help`, class: 'help' }, 'How long the hub waits for the Computer\'s answer (1–3600 s).'), timeoutErr)));

    const button = h('button', { type: 'submit', class: 'primary' }, 'Call tool');
    form.append(h('div', { class: 'form-actions' }, button,
      fields.some((f) => f.req) ? h('span', { class: 'form-note' }, h('span', { class: 'req', 'aria-hidden': 'true' }, '*'), ' required') : null));

    const fail = (f, msg) => {
      f.err.textContent = msg;
      f.err.hidden = false;
      f.control.setAttribute('aria-invalid', 'true');
    };

    form.addEventListener('submit', (e) => {
      e.preventDefault();
      if (button.getAttribute('aria-disabled') === 'true') return;
      const args = {};
      const bad = [];
      for (const f of fields) {
        f.err.hidden = true;
        f.err.textContent = '';
        f.control.removeAttribute('aria-invalid');
        const msg = collect(f, args);
        if (msg) { fail(f, msg); bad.push(f); }
      }
      const tf = { control: timeout, err: timeoutErr };
      timeoutErr.hidden = true;
      timeout.removeAttribute('aria-invalid');
      const secs = Number(timeout.value || '60');
      if (!Number.isInteger(secs) || secs < 1 || secs > 3600) { fail(tf, 'Enter whole seconds from 1 to 3600.'); bad.push(tf); }
      if (bad.length) {
        bad[0].control.focus();
        announce(`${bad.length} field${bad.length === 1 ? ' needs' : 's need'} attention.`);
        return;
      }
      submit(args, secs, button);
    });
    return form;
  }

  // collect puts field f's value into args; it answers an error message
  // or ''.
  function collect(f, args) {
    const c = f.control;
    const { s } = f;
    switch (f.kind) {
      case 'boolean':
        if (c.checked || f.req || f.def !== undefined) args[f.name] = c.checked;
        return '';
      case 'enum': {
        if (c.value === '') return f.req ? 'Choose a value.' : '';
        args[f.name] = s.enum[Number(c.value)];
        return '';
      }
      case 'integer':
      case 'number': {
        const raw = c.value.trim();
        if (raw === '') {
          if (c.validity && c.validity.badInput) return 'Enter a number.';
          return f.req ? 'Enter a value.' : '';
        }
        const n = Number(raw);
        if (!Number.isFinite(n)) return 'Enter a number.';
        if (f.kind === 'integer' && !Number.isInteger(n)) return 'Enter a whole number.';
        if (s.minimum != null && n < s.minimum) return `Must be at least ${s.minimum}.`;
        if (s.maximum != null && n > s.maximum) return `Must be at most ${s.maximum}.`;
        if (s.exclusiveMinimum != null && typeof s.exclusiveMinimum === 'number' && n <= s.exclusiveMinimum) return `Must be more than ${s.exclusiveMinimum}.`;
        if (s.exclusiveMaximum != null && typeof s.exclusiveMaximum === 'number' && n >= s.exclusiveMaximum) return `Must be less than ${s.exclusiveMaximum}.`;
        args[f.name] = n;
        return '';
      }
      case 'string': {
        const v = c.value;
        if (v === '') {
          if (f.req) return 'Enter a value.';
          return '';
        }
        if (s.minLength != null && v.length < s.minLength) return `At least ${s.minLength} characters.`;
        if (s.maxLength != null && v.length > s.maxLength) return `At most ${s.maxLength} characters.`;
        if (s.pattern) {
          try {
            if (!new RegExp(s.pattern, 'u').test(v)) return `Must match ${s.pattern}.`;
          } catch { /* a pattern JavaScript cannot read is left to the tool */ }
        }
        args[f.name] = v;
        return '';
      }
      default: {
        const raw = c.value.trim();
        if (raw === '') return f.req ? 'Enter a JSON value.' : '';
        let v;
        try { v = JSON.parse(raw); } catch (err) { return `Not valid JSON: ${err.message}`; }
        if (f.jsonType === 'array' && !Array.isArray(v)) return 'Enter a JSON array, like ["a", "b"].';
        if (f.jsonType === 'object' && (v === null || typeof v !== 'object' || Array.isArray(v))) return 'Enter a JSON object, like {"key": "value"}.';
        args[f.name] = v;
        return '';
      }
    }
  }

  // ---------------------------------------------------------------- results

  function renderResult(box, ans, ms) {
    const res = ans.result || {};
    const code = errorCode(res);
    const titleID = nextID('result');
    box.setAttribute('aria-labelledby', titleID);
    box.classList.toggle('is-error', !!res.isError);
    const items = (res.content || []).map(contentItem);
    if (!items.length) items.push(h('p', { class: 'muted' }, 'The result has no content.'));
    const link = ans.agent && ans.req_id ? h('a', { href: `#/calls/${enc(ans.agent)}/${enc(ans.req_id)}` }, 'Call detail and trace →') : null;
    box.replaceChildren(
      h('div', { class: 'card-head' },
        h('h2', { id: titleID }, 'Result'),
        res.isError ? h('span', { class: 'badge error' }, 'error') : h('span', { class: 'badge ok' }, 'ok'),
        code ? h('span', { class: 'badge error', title: 'A2C error code' }, `error_code ${code}`) : null,
        h('span', { class: 'muted small' }, fmtMS(ms)),
        h('span', { class: 'spacer' }), link),
      h('div', { class: 'card-body result' },
        res.isError ? h('p', { class: 'error-box', role: 'alert' }, `The tool reported an error${code ? ` (error_code ${code})` : ''}.`) : null,
        items,
        res.structuredContent != null ? h('details', null, h('summary', null, 'Structured content'),
          h('pre', { class: 'json' }, JSON.stringify(res.structuredContent, null, 2))) : null,
        h('p', { class: 'muted small mono' }, `req_id ${ans.req_id || '?'} · trace ${ans.trace_id || '—'}`)));
    box.hidden = false;
  }

  function prettyText(t) {
    const s = String(t == null ? '' : t);
    const x = s.trim();
    if ((x.startsWith('{') && x.endsWith('}')) || (x.startsWith('[') && x.endsWith(']'))) {
      try { return JSON.stringify(JSON.parse(x), null, 2); } catch { /* plain text */ }
    }
    return s;
  }

  // printable are the multi-line string fields of a JSON object answer
  // (a command's output, say), to show as they print.
  function printable(t) {
    const x = String(t == null ? '' : t).trim();
    if (!x.startsWith('{')) return [];
    let v;
    try { v = JSON.parse(x); } catch { return []; }
    if (!v || typeof v !== 'object' || Array.isArray(v)) return [];
    return Object.entries(v).filter(([, s]) => typeof s === 'string' && s.includes('\n'));
  }

  function contentItem(it) {
    switch (it && it.type) {
      case 'text': {
        const pre = h('pre', { class: 'text' }, prettyText(it.text));
        const fields = printable(it.text);
        if (!fields.length) return pre;
        return h('div', { class: 'stack' }, fields.map(([k, v]) => h('div', { class: 'field' },
          h('p', { class: 'small muted' }, k), h('pre', { class: 'text' }, v))),
        h('details', null, h('summary', null, 'Whole answer'), pre));
      }
      case 'image':
        return h('img', { src: `data:${it.mimeType || 'image/png'};base64,${it.data || ''}`, alt: `Image result (${it.mimeType || 'image'})` });
      case 'audio':
        return h('p', { class: 'item-note' }, `Audio (${it.mimeType || '?'}), ${fmtBytes(Math.floor(((it.data || '').length * 3) / 4))}`);
      case 'resource': {
        const r = it.resource || {};
        const size = r.text != null ? `${r.text.length} characters of text` : r.blob != null ? `${fmtBytes(Math.floor((r.blob.length * 3) / 4))} of binary data` : 'no content';
        return h('div', { class: 'item-note' },
          h('strong', null, 'Resource '), h('span', { class: 'mono' }, r.uri || ''), ` · ${r.mimeType || 'unknown type'} · ${size}`,
          r.text != null ? h('details', null, h('summary', null, 'Show text'), h('pre', { class: 'text' }, r.text)) : null);
      }
      case 'resource_link':
        return h('p', { class: 'item-note' }, h('strong', null, 'Resource link '), h('span', { class: 'mono' }, it.uri || ''),
          it.mimeType ? ` · ${it.mimeType}` : '', it.size != null ? ` · ${fmtBytes(it.size)}` : '');
      default:
        return h('pre', { class: 'text' }, JSON.stringify(it, null, 2));
    }
  }

  // ---------------------------------------------------------------- calls

  const maxRows = 500;

  async function pageCalls(pg) {
    let office = pg.query.get('office') || '';
    const statusID = nextID('stream');
    const state = h('span', { class: 'badge down' }, 'connecting');
    const count = h('strong', null, '0');
    const dropped = h('strong', null, '0');
    const srStatus = h('span', { id: statusID, class: 'visually-hidden', role: 'status', 'aria-live': 'polite' });
    const selID = nextID('office');
    const sel = h('select', { id: selID }, h('option', { value: '' }, 'All offices'));
    if (office) sel.append(h('option', { value: office, selected: true }, office));

    head(pg, {
      title: 'Calls',
      sub: 'Tool calls through this hub as they happen: the running ones and the last ones that ended.',
    });
    const tbody = h('tbody');
    const emptyRow = h('tr', null, h('td', { colspan: '8', class: 'empty' }, 'No calls yet. Call a tool from a Computer\'s page, or from an Agent.'));
    const table = h('table', { class: 'calls' },
      h('caption', { class: 'visually-hidden' }, 'Tool calls, newest first'),
      h('thead', null, h('tr', null, ['Tool', 'Agent', 'Computer', 'Office', 'Start', 'Duration', 'Outcome', 'Error code']
        .map((c, i) => h('th', { scope: 'col', class: i === 5 || i === 7 ? 'num' : null }, c)))),
      tbody);
    pg.main.append(h('section', { class: 'card', 'aria-label': 'Calls' },
      h('div', { class: 'card-head live-bar' },
        h('div', { class: 'field' }, h('label', { for: selID }, 'Office'), sel),
        h('span', { class: 'spacer' }),
        h('span', { class: 'stat' }, 'Stream ', state),
        h('span', { class: 'stat' }, 'Shown ', count),
        h('span', { class: 'stat', title: 'Events the hub dropped because this page read too slowly' }, 'Dropped events ', dropped),
        srStatus),
      h('div', { class: 'table-wrap' }, table)));

    const rows = new Map(); // agent/req_id -> {call, tr}
    let droppedBase = 0; // lost by earlier connections of this page
    let droppedNow = 0; // lost by this connection (the server's running total)
    let es = null;
    let ready = false; // after the first fill; later rows flash

    const key = (c) => `${c.agent}\u0000${c.req_id}`;
    const setStatus = (cls, text) => {
      state.className = `badge ${cls}`;
      state.textContent = text;
      srStatus.textContent = `Live stream ${text}`;
    };
    const refreshCount = () => {
      count.textContent = String(rows.size);
      if (!rows.size) tbody.replaceChildren(emptyRow);
      else if (emptyRow.isConnected) emptyRow.remove();
    };

    const cells = (c) => {
      const dur = c.state === 'running' ? Math.max(c.duration_ms || 0, Date.now() - new Date(c.start).getTime()) : c.duration_ms;
      return [
        h('td', { class: 'tool' }, h('a', { href: `#/calls/${enc(c.agent)}/${enc(c.req_id)}` }, c.tool || '(unknown)')),
        h('td', null, c.console ? [consoleBadge(), ' '] : null, c.console ? h('span', { class: 'muted small' }, c.agent) : c.agent),
        h('td', null, c.computer),
        h('td', null, c.office),
        h('td', null, timeEl(c.start)),
        h('td', { class: 'num', 'data-dur': '' }, fmtMS(dur)),
        h('td', null, outcomeBadge(c)),
        h('td', { class: 'num mono' }, c.error_code ? String(c.error_code) : ''),
      ];
    };

    const upsert = (c, fresh) => {
      if (office && c.office !== office) return;
      const k = key(c);
      const have = rows.get(k);
      if (have) {
        if (have.call.state === 'done' && c.state !== 'done') return; // an older event
        have.call = c;
        have.tr.replaceChildren(...cells(c));
        have.tr.dataset.state = c.state;
        return;
      }
      const tr = h('tr', { 'data-state': c.state, 'data-key': k, class: fresh && ready ? 'new' : null }, cells(c));
      rows.set(k, { call: c, tr });
      // newest first: place by start time
      const t = new Date(c.start).getTime();
      let before = null;
      for (const other of tbody.children) {
        const r = rows.get(other.dataset.key);
        if (r && new Date(r.call.start).getTime() <= t) { before = other; break; }
      }
      tbody.insertBefore(tr, before);
      while (rows.size > maxRows) {
        const last = tbody.lastElementChild;
        if (!last || !last.dataset.key) break;
        rows.delete(last.dataset.key);
        last.remove();
      }
    };

    const fill = async () => {
      const q = office ? `?office=${enc(office)}` : '';
      const d = await api(`/api/console/calls${q}`, { signal: pg.signal });
      const list = (d.calls || []).slice(0, maxRows).reverse(); // oldest first, so each lands on top
      for (const c of list) upsert(c, false);
      refreshCount();
      ready = true;
    };

    const pending = new Map(); // key -> the newest event of the call, not drawn yet
    let flushTimer = 0;
    const flush = () => {
      flushTimer = 0;
      const batch = [...pending.values()];
      pending.clear();
      for (const c of batch) upsert(c, true);
      refreshCount();
    };
    pg.onLeave(() => clearTimeout(flushTimer));

    const connect = () => {
      if (es) es.close();
      const q = office ? `?office=${enc(office)}` : '';
      es = new EventSource(`/api/console/calls/stream${q}`);
      setStatus('down', 'connecting');
      es.addEventListener('open', () => {
        droppedBase += droppedNow; // a new connection counts from 0
        droppedNow = 0;
        setStatus('live', 'live');
        fill().catch(() => {}); // a reconnect may have missed calls
      });
      es.addEventListener('call', (e) => {
        let c;
        try { c = JSON.parse(e.data); } catch { return; }
        // batched: a busy hub sends thousands a second; the page draws
        // the latest state of each call every 50 ms, and keeps at most
        // a few times the rows it shows waiting
        const k = key(c);
        pending.delete(k);
        pending.set(k, c);
        while (pending.size > maxRows * 4) pending.delete(pending.keys().next().value);
        if (!flushTimer) flushTimer = setTimeout(flush, 50);
      });
      es.addEventListener('dropped', (e) => {
        try { droppedNow = Number(JSON.parse(e.data).dropped) || 0; } catch { return; }
        dropped.textContent = String(droppedBase + droppedNow);
      });
      es.addEventListener('error', () => {
        if (es.readyState === EventSource.CLOSED) {
          setStatus('down', 'disconnected');
          // the session may have ended: the API says so (and api() goes to the login page)
          api('/api/console/session', { signal: pg.signal }).then(() => {
            if (!pg.signal.aborted) setTimeout(() => { if (!pg.signal.aborted) connect(); }, 2000);
          }).catch(() => {});
        } else {
          setStatus('down', 'reconnecting');
        }
      });
    };
    pg.onLeave(() => { if (es) es.close(); });

    sel.addEventListener('change', () => {
      office = sel.value;
      history.replaceState(null, '', office ? `#/calls?office=${enc(office)}` : '#/calls');
      rows.clear();
      pending.clear();
      tbody.replaceChildren();
      droppedBase = 0;
      droppedNow = 0;
      dropped.textContent = '0';
      ready = false;
      refreshCount();
      connect();
      announce(office ? `Showing calls in office ${office}` : 'Showing calls in all offices');
    });

    refreshCount();
    connect();
    // the office choices
    api('/api/console/offices', { signal: pg.signal }).then((d) => {
      for (const o of (d.offices || []).map((x) => x.office_id).sort()) {
        if (o !== office) sel.append(h('option', { value: o }, o));
      }
    }).catch(() => {});
    // running rows show their time so far
    pg.every(500, () => {
      for (const tr of tbody.querySelectorAll('tr[data-state="running"]')) {
        const r = rows.get(tr.dataset.key);
        const td = tr.querySelector('[data-dur]');
        if (r && td) td.textContent = fmtMS(Math.max(r.call.duration_ms || 0, Date.now() - new Date(r.call.start).getTime()));
      }
    });
  }

  // ---------------------------------------------------------------- call detail

  async function pageCall(pg, agent, reqID) {
    head(pg, { crumbs: [['Calls', '#/calls'], ['Call', null]], title: 'Call', sub: null });
    const h1 = pg.main.querySelector('h1');
    const fieldsBox = h('section', { class: 'card', 'aria-label': 'Call' });
    const traceBox = h('section', { class: 'card', 'aria-labelledby': 'trace-title' });
    const live = h('p', { class: 'visually-hidden', role: 'status', 'aria-live': 'polite' });
    pg.main.append(h('div', { class: 'stack' }, fieldsBox, traceBox, live));

    let last = '';
    let settled = 0;
    const expanded = new Set();
    const load = async () => {
      const d = await api(`/api/console/calls/${enc(agent)}/${enc(reqID)}`, { signal: pg.signal });
      const k = JSON.stringify(d);
      if (k === last) { settled++; return d; }
      last = k;
      settled = 0;
      const c = d.call || {};
      h1.textContent = c.tool || 'Call';
      document.title = `${c.tool || 'Call'} · a2c console`;
      fieldsBox.replaceChildren(h('div', { class: 'card-head' },
        h('h2', null, 'Call'), outcomeBadge(c), c.console ? consoleBadge() : null,
        c.error_code ? h('span', { class: 'badge error' }, `error_code ${c.error_code}`) : null),
      h('div', { class: 'card-body' }, h('dl', { class: 'fields' },
        [['Tool', c.tool, true], ['Agent', c.agent], ['Computer', c.computer], ['Office', c.office],
          ['Started', timeEl(c.start)], ['Duration', c.state === 'running' ? `${fmtMS(c.duration_ms)} so far` : fmtMS(c.duration_ms)],
          ['State', c.state], ['Outcome', c.outcome || '—'], ['Error code', c.error_code ? String(c.error_code) : '—'],
          ['Node', c.node || '—'], ['Request id', c.req_id, true], ['Trace id', c.trace_id || '—', true]]
          .map(([dt, dd, mono]) => h('div', null, h('dt', null, dt), h('dd', { class: mono ? 'mono' : null }, dd))))));
      traceBox.replaceChildren(...timeline(d.trace || [], d.dropped_spans || 0, expanded, c));
      if (c.state === 'done') live.textContent = `Call ${c.outcome || 'done'}; ${(d.trace || []).length} spans.`;
      return d;
    };
    const d = await load();
    // a running call, or spans still arriving: look again until it settles
    if (!(d.call && d.call.state === 'done' && settled >= 2)) {
      let n = 0;
      pg.every(700, () => {
        if (settled >= 3 || n++ > 120) return;
        load().catch(() => {});
      });
    }
  }

  // timeline draws spans as rows of a waterfall: indented by parent,
  // bars placed by start and sized by duration; a row's button shows its
  // attributes. Orphans (parent not recorded) sit at the top level; the
  // hub's span of a console call is not one: no Agent span exists.
  function timeline(spans, droppedSpans, expanded, call) {
    const headKids = [h('h2', { id: 'trace-title' }, 'Trace'),
      h('span', { class: 'muted small' }, `${spans.length} span${spans.length === 1 ? '' : 's'}`),
      droppedSpans ? h('span', { class: 'badge timeout' }, `${droppedSpans} dropped`) : null];
    if (!spans.length) {
      return [h('div', { class: 'card-head' }, headKids),
        h('p', { class: 'empty' }, 'No spans recorded for this call (tracing is off on this hub, or the call is too old).')];
    }
    const byID = new Map(spans.map((s) => [s.span_id, s]));
    const kids = new Map();
    const roots = [];
    for (const s of spans) {
      if (s.parent_id && byID.has(s.parent_id) && s.parent_id !== s.span_id) {
        if (!kids.has(s.parent_id)) kids.set(s.parent_id, []);
        kids.get(s.parent_id).push(s);
      } else {
        roots.push(s);
      }
    }
    const t = (s) => tsMS(s.start);
    const byStart = (a, b) => t(a) - t(b) || b.duration_ms - a.duration_ms;
    const t0 = Math.min(...spans.map(t));
    const end = Math.max(...spans.map((s) => t(s) + (s.duration_ms || 0)));
    const total = Math.max(end - t0, 0.001);

    const rows = [];
    const seen = new Set();
    const walk = (s, depth) => {
      if (seen.has(s.span_id)) return;
      seen.add(s.span_id);
      const firstHop = call && call.console && s.name === 'a2c.hub.relay';
      rows.push({ s, depth, orphan: depth === 0 && !!s.parent_id && !byID.has(s.parent_id) && !firstHop });
      for (const k of (kids.get(s.span_id) || []).sort(byStart)) walk(k, depth + 1);
    };
    roots.sort(byStart).forEach((s) => walk(s, 0));

    const scale = h('div', { class: 'tl-scale', 'aria-hidden': 'true' },
      h('span', null, 'Span'), h('span', null, 'Service'),
      h('div', { class: 'tl-ticks' }, [0, 0.25, 0.5, 0.75, 1].map((f) => {
        const sp = h('span', null, fmtMS(total * f));
        sp.style.left = `${f * 100}%`;
        return sp;
      })),
      h('span', { class: 'tl-dur' }, 'Duration'));

    const list = h('div', { class: 'timeline', role: 'list', 'aria-label': 'Spans' }, rows.map(({ s, depth, orphan }) => {
      const attrsID = `span-${s.span_id}`;
      const open = expanded.has(s.span_id);
      const err = s.status === 'error';
      const bar = h('div', { class: `tl-bar d${depth % 5}${err ? ' is-error' : ''}`, title: `${s.name}: ${fmtMS(s.duration_ms)}` });
      bar.style.left = `${((t(s) - t0) / total) * 100}%`;
      bar.style.width = `${Math.max(((s.duration_ms || 0) / total) * 100, 0.3)}%`;
      const attrs = h('div', { class: 'tl-attrs', id: attrsID, hidden: !open }, spanAttrs(s, t0));
      const btn = h('button', {
        type: 'button', class: 'link', 'aria-expanded': open ? 'true' : 'false', 'aria-controls': attrsID,
        onclick: () => {
          const now = btn.getAttribute('aria-expanded') !== 'true';
          btn.setAttribute('aria-expanded', String(now));
          attrs.hidden = !now;
          if (now) expanded.add(s.span_id); else expanded.delete(s.span_id);
        },
      }, s.name);
      const name = h('div', { class: 'tl-name' }, btn,
        err ? h('span', { class: 'badge error' }, 'error') : null,
        orphan ? h('span', { class: 'badge orphan-note', title: `Parent ${s.parent_id} was not recorded here` }, 'parent not recorded') : null);
      name.style.paddingLeft = `${depth * 18}px`;
      return h('div', { class: 'tl-row', role: 'listitem', 'data-span': s.name, 'data-depth': String(depth) },
        h('div', { class: 'tl-line' }, name,
          h('span', { class: 'tl-service', title: s.service || '' }, s.service || ''),
          h('div', { class: 'tl-track', 'aria-hidden': 'true' }, bar),
          h('span', { class: 'tl-dur' }, fmtMS(s.duration_ms))),
        attrs);
    }));

    const orphans = rows.filter((r) => r.orphan).length;
    return [h('div', { class: 'card-head' }, headKids, h('span', { class: 'spacer' }),
      h('span', { class: 'muted small mono' }, spans[0].trace_id || '')),
    orphans ? h('p', { class: 'card-body small muted' }, `${orphans} span${orphans === 1 ? '' : 's'} whose parent was not recorded here (a hop that did not trace, or sent its spans to a collector only) ${orphans === 1 ? 'is' : 'are'} shown at the top level.`) : null,
    scale, list].filter(Boolean);
  }

  function spanAttrs(s, t0) {
    const rows = [
      ['span_id', s.span_id], ['parent_id', s.parent_id || '(root)'], ['service', s.service || ''],
      ['start', `${s.start} (+${fmtMS(tsMS(s.start) - t0)})`], ['duration', fmtMS(s.duration_ms)],
      ['status', s.status + (s.status_message ? `: ${s.status_message}` : '')],
    ];
    for (const [k, v] of Object.entries(s.attributes || {}).sort(([a], [b]) => a.localeCompare(b))) {
      rows.push([k, typeof v === 'string' ? v : JSON.stringify(v)]);
    }
    return h('table', null, h('tbody', null, rows.map(([k, v]) => h('tr', null, h('td', null, k), h('td', null, v)))));
  }

  // ---------------------------------------------------------------- sandboxes

  // ---------------------------------------------------------------- sandbox pool

  // The pool's sandboxes (GET /api/console/pool/sandboxes, every 2 s
  // while the page is visible) with a CPU and a memory sparkline each,
  // drawn in SVG from the samples this page keeps (the last
  // poolKeep per sandbox, across visits of the page).
  const poolEvery = 2000;
  const poolPoints = 60; // a chart's points: 2 minutes at 2 s
  const poolKeep = poolPoints + 1; // readings: 60 CPU rates need 61
  const poolSamples = new Map(); // sandbox id -> [{t (ms), cpu (ns), mem, limit}]
  const svgNS = 'http://www.w3.org/2000/svg';

  function svgEl(tag, attrs) {
    const el = document.createElementNS(svgNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
    return el;
  }

  // sample keeps a sandbox's new reading (one per sampled_at).
  function poolSample(s) {
    if (!s.metrics || !s.sampled_at) return;
    const list = poolSamples.get(s.id) || [];
    const t = tsMS(s.sampled_at);
    if (list.length && list[list.length - 1].t >= t) return;
    list.push({ t, cpu: Number(s.metrics.cpu_usage_ns) || 0, mem: Number(s.metrics.memory_bytes) || 0, limit: Number(s.metrics.memory_limit_bytes) || 0 });
    while (list.length > poolKeep) list.shift();
    poolSamples.set(s.id, list);
  }

  // cpuRates are the CPU use between readings, in CPUs (1 = one core
  // busy), from the cpu_usage_ns deltas; a counter that went back (a new
  // sandbox under the same id) counts 0.
  function cpuRates(list) {
    const out = [];
    for (let i = 1; i < list.length; i++) {
      const dt = list[i].t - list[i - 1].t;
      if (dt <= 0) continue;
      out.push(Math.max(0, (list[i].cpu - list[i - 1].cpu) / (dt * 1e6)));
    }
    return out;
  }

  // sparkline is a small chart of up to poolPoints values from 0 to a
  // top, the newest on the right edge, one slot per poll; draw's label is
  // its accessible name (the latest value).
  function sparkline(kind) {
    const W = 120;
    const H = 30;
    const el = svgEl('svg', { class: `spark ${kind}`, viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img', 'data-points': 0 });
    const title = svgEl('title');
    const area = svgEl('polygon', { class: 'spark-area', points: '' });
    const line = svgEl('polyline', { class: 'spark-line', points: '' });
    const dot = svgEl('circle', { class: 'spark-dot', r: 2, cx: -10, cy: -10 });
    el.append(title, svgEl('rect', { class: 'spark-bg', x: 0, y: 0, width: W, height: H, rx: 3 }),
      svgEl('line', { class: 'spark-grid', x1: 0, y1: H / 2, x2: W, y2: H / 2 }),
      svgEl('line', { class: 'spark-base', x1: 0, y1: H - 0.5, x2: W, y2: H - 0.5 }), area, line, dot);
    const step = W / (poolPoints - 1);
    return {
      el,
      draw(values, top, label) {
        el.setAttribute('data-points', String(Math.min(values.length, poolPoints)));
        el.setAttribute('aria-label', label);
        title.textContent = label;
        values = values.slice(-poolPoints);
        const n = values.length;
        const pts = values.map((v, i) => {
          const x = W - (n - 1 - i) * step;
          const y = H - 2 - (Math.min(v, top) / (top || 1)) * (H - 4);
          return [Math.round(x * 10) / 10, Math.round(y * 10) / 10];
        });
        line.setAttribute('points', pts.map((p) => p.join(',')).join(' '));
        area.setAttribute('points', n ? `${pts[0][0]},${H} ${pts.map((p) => p.join(',')).join(' ')} ${W},${H}` : '');
        const last = pts[n - 1];
        dot.setAttribute('cx', last ? last[0] : -10);
        dot.setAttribute('cy', last ? last[1] : -10);
      },
    };
  }

  const fmtCPUs = (v) => `${v >= 10 ? Math.round(v) : Math.round(v * 100) / 100}`;

  // confirmDialog asks a yes/no question in a modal dialog (Escape and
  // Cancel: no); it answers whether the user confirmed.
  function confirmDialog({ title, text, yes }) {
    return new Promise((resolve) => {
      const id = nextID('dlg');
      const cancel = h('button', { type: 'button', autofocus: true }, 'Cancel');
      const ok = h('button', { type: 'button', class: 'danger' }, yes);
      const dlg = h('dialog', { class: 'confirm', 'aria-labelledby': `${id}-t`, 'aria-describedby': `${id}-d` },
        h('h2', { id: `${id}-t` }, title),
        h('p', { id: `${id}-d` }, text),
        h('div', { class: 'form-actions' }, cancel, ok));
      cancel.addEventListener('click', () => dlg.close('no'));
      ok.addEventListener('click', () => dlg.close('yes'));
      dlg.addEventListener('close', () => {
        dlg.remove();
        resolve(dlg.returnValue === 'yes');
      });
      document.body.append(dlg);
      dlg.showModal();
    });
  }

  // poolSection renders the pool's card into box and keeps it current;
  // first is the list already fetched, or {error}.
  function poolSection(pg, box, first) {
    const headID = nextID('pool');
    const h2 = h('h2', { id: headID, tabindex: '-1' }, 'Sandbox pool');
    const count = h('span', { class: 'muted small' });
    const status = h('p', { class: 'small muted pool-status', role: 'status', 'aria-live': 'polite' });
    const problem = h('div', { role: 'alert' });
    const tbody = h('tbody');
    const table = h('div', { class: 'table-wrap' }, h('table', { class: 'pool-table' },
      h('caption', { class: 'visually-hidden' }, 'Sandboxes of the pool'),
      h('thead', null, h('tr', null, ['Sandbox', 'State', 'Office', 'Template', 'Created', 'Expires', 'CPU', 'Memory']
        .map((c) => h('th', { scope: 'col' }, c)), h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, 'Actions')))),
      tbody));
    const empty = h('p', { class: 'empty', hidden: true }, 'The pool has no sandbox. One is made for each office an Agent joins, or with a2c sandbox create.');
    box.append(h('section', { class: 'card', 'aria-labelledby': headID },
      h('div', { class: 'card-head' }, h2, count, h('span', { class: 'spacer' }), status),
      problem, table, empty));

    const rows = new Map(); // id -> row
    const pending = new Map(); // id -> the state shown until the action answers
    let order = '';

    const say = (msg) => {
      status.textContent = msg;
      announce(msg);
    };

    function setText(el, s) {
      if (el.textContent !== s) el.textContent = s;
    }

    // showState shows a row's state: the pending action's state, else the
    // pool's.
    function showState(row, state) {
      const shown = pending.get(row.id) || state;
      row.tr.dataset.state = shown;
      setText(row.badge, shown);
      row.badge.className = `badge state st-${shown.replace(/[^a-z]/g, '')}`;
      const busy = pending.has(row.id);
      const hadFocus = document.activeElement;
      row.pause.hidden = shown === 'paused';
      row.resume.hidden = shown !== 'paused';
      for (const [b, can] of [[row.pause, shown === 'running'], [row.resume, shown === 'paused'], [row.del, shown !== 'deleting']]) {
        if (busy || !can) b.setAttribute('aria-disabled', 'true');
        else b.removeAttribute('aria-disabled');
      }
      // the focus follows Pause to Resume and back
      if (hadFocus === row.pause && row.pause.hidden) row.resume.focus();
      if (hadFocus === row.resume && row.resume.hidden) row.pause.focus();
    }

    function newRow(s) {
      const id = s.id;
      const row = { id, badge: h('span', { class: 'badge' }) };
      row.office = h('td');
      row.template = h('td', { class: 'mono small' });
      row.created = h('td', { class: 'small' });
      row.expires = h('td', { class: 'small' });
      row.cpu = sparkline('cpu');
      row.mem = sparkline('mem');
      row.cpuText = h('span', { class: 'spark-val' });
      row.memText = h('span', { class: 'spark-val' });
      row.extra = h('div', { class: 'muted small' });
      row.meta = h('div', { class: 'meta-row' });
      row.pause = h('button', { type: 'button', 'aria-label': `Pause sandbox ${id}`, onclick: () => act(row, 'pause') }, 'Pause');
      row.resume = h('button', { type: 'button', 'aria-label': `Resume sandbox ${id}`, onclick: () => act(row, 'resume'), hidden: true }, 'Resume');
      row.del = h('button', { type: 'button', class: 'danger-ghost', 'aria-label': `Delete sandbox ${id}`, onclick: () => del(row) }, 'Delete');
      row.tr = h('tr', { 'data-id': id },
        h('th', { scope: 'row', class: 'pool-id' }, h('span', { class: 'mono' }, id), row.extra, row.meta),
        h('td', null, row.badge),
        row.office, row.template, row.created, row.expires,
        h('td', { class: 'spark-cell' }, row.cpu.el, row.cpuText),
        h('td', { class: 'spark-cell' }, row.mem.el, row.memText),
        h('td', { class: 'actions' }, row.pause, row.resume, row.del));
      return row;
    }

    // fill writes a sandbox's fields into its row (every string from the
    // pool as text).
    function fill(row, s) {
      row.data = s;
      showState(row, s.state || '?');
      const officeKey = s.office || '';
      if (row.officeKey !== officeKey) {
        row.officeKey = officeKey;
        row.office.replaceChildren(s.office ? h('a', { href: `#/offices/${enc(s.office)}` }, s.office) : h('span', { class: 'muted' }, '—'));
      }
      setText(row.template, s.template || '');
      setText(row.extra, s.computer ? `Computer ${s.computer}` : '');
      const metaKey = JSON.stringify(s.metadata || {});
      if (row.metaKey !== metaKey) {
        row.metaKey = metaKey;
        row.meta.replaceChildren(...Object.entries(s.metadata || {}).map(([k, v]) => h('span', { class: 'badge tag' }, `${k}=${v}`)));
      }
      const createdKey = `${s.created_at}`;
      if (row.createdKey !== createdKey) {
        row.createdKey = createdKey;
        row.created.replaceChildren(timeEl(s.created_at));
      }
      const expKey = `${s.expires_at}|${s.on_timeout}`;
      if (row.expKey !== expKey) {
        row.expKey = expKey;
        row.expires.replaceChildren(...(s.expires_at
          ? [timeEl(s.expires_at), h('span', { class: 'muted' }, ` · then ${s.on_timeout === 'pause' ? 'pause' : 'kill'}`)]
          : [h('span', { class: 'muted' }, 'never')]));
      }
      // the charts
      const list = poolSamples.get(s.id) || [];
      const rates = cpuRates(list);
      const cpus = (s.limits && Number(s.limits.cpus)) || 0;
      const cpuTop = Math.max(cpus || 1, ...rates);
      const lastRate = rates.length ? rates[rates.length - 1] : null;
      const cpuNow = lastRate == null ? 'no reading yet' : `${fmtCPUs(lastRate)} CPU${cpus ? ` of ${fmtCPUs(cpus)}` : ''}`;
      row.cpu.draw(rates, cpuTop, `CPU of sandbox ${s.id}: ${cpuNow}`);
      setText(row.cpuText, lastRate == null ? '—' : `${Math.round(lastRate * 100)}%${cpus ? ` of ${fmtCPUs(cpus)} CPU` : ''}`);
      const last = list[list.length - 1];
      const limit = last ? last.limit : 0;
      const mems = list.map((x) => x.mem);
      const memTop = limit || Math.max(1, ...mems);
      row.mem.draw(mems, memTop, `Memory of sandbox ${s.id}: ${last ? `${fmtBytes(last.mem)}${limit ? ` of ${fmtBytes(limit)}` : ''}` : 'no reading yet'}`);
      setText(row.memText, last ? `${fmtBytes(last.mem)}${limit ? ` / ${fmtBytes(limit)}` : ''}` : '—');
      const err = s.metrics_error ? `metrics: ${s.metrics_error}` : '';
      row.tr.classList.toggle('stale', !!err);
      row.cpuText.title = err;
      row.memText.title = err;
    }

    function render(d) {
      const list = (d && d.sandboxes) || [];
      const seen = new Set();
      for (const s of list) {
        if (!s || typeof s.id !== 'string') continue;
        seen.add(s.id);
        poolSample(s);
        let row = rows.get(s.id);
        if (!row) {
          row = newRow(s);
          rows.set(s.id, row);
        }
        fill(row, s);
      }
      for (const [id, row] of rows) {
        if (seen.has(id) || pending.get(id) === 'deleting') continue;
        row.tr.remove();
        rows.delete(id);
      }
      for (const id of poolSamples.keys()) if (!seen.has(id)) poolSamples.delete(id);
      // rows move only when the order changed (a moved row loses the focus)
      const at = new Map(list.map((s, i) => [s && s.id, i]));
      const ids = [...rows.keys()].sort((a, b) => (at.get(a) ?? -1) - (at.get(b) ?? -1));
      const key = ids.join(' ');
      if (key !== order) {
        order = key;
        tbody.replaceChildren(...ids.map((id) => rows.get(id).tr));
      }
      const n = rows.size;
      setText(count, `${n} sandbox${n === 1 ? '' : 'es'} · updates every ${poolEvery / 1000} s`);
      table.hidden = n === 0;
      empty.hidden = n !== 0;
    }

    let busy = false;
    async function refresh() {
      if (busy || document.hidden || pg.signal.aborted) return;
      busy = true;
      try {
        render(await api('/api/console/pool/sandboxes', { signal: pg.signal }));
        problem.replaceChildren();
      } catch (err) {
        if (err.name === 'AbortError') return;
        problem.replaceChildren(h('div', { class: 'error-box' }, `The pool's sandboxes could not be read: ${err.message}`));
      } finally {
        busy = false;
      }
    }

    const verbs = { pause: ['Pausing', 'paused', 'paused'], resume: ['Resuming', 'resumed', 'running'] };

    // act pauses or resumes: the row shows the new state at once, then
    // the pool's answer (or the old state again, with the error).
    async function act(row, kind) {
      if (pending.has(row.id) || (kind === 'pause' ? row.pause : row.resume).getAttribute('aria-disabled') === 'true') return;
      const [doing, done, state] = verbs[kind];
      pending.set(row.id, state);
      showState(row, row.data.state);
      say(`${doing} sandbox ${row.id}…`);
      try {
        const ans = await api(`/api/console/pool/sandboxes/${enc(row.id)}/${kind}`, { method: 'POST', signal: pg.signal });
        pending.delete(row.id);
        if (ans && ans.id === row.id) fill(row, { ...row.data, ...ans, metrics: row.data.metrics, metrics_error: row.data.metrics_error });
        else showState(row, state);
        say(`Sandbox ${row.id} ${done}.`);
      } catch (err) {
        if (err.name === 'AbortError') return;
        pending.delete(row.id);
        showState(row, row.data.state);
        say(`Could not ${kind} sandbox ${row.id}: ${err.message}`);
      }
      refresh();
    }

    // del asks first, then deletes: the row stays, marked, until the pool
    // answers.
    async function del(row) {
      if (pending.has(row.id)) return;
      const yes = await confirmDialog({
        title: `Delete sandbox ${row.id}?`,
        text: `Its processes end and its workspace is removed${row.data.office ? `; office ${row.data.office} loses its sandbox` : ''}. This cannot be undone.`,
        yes: 'Delete sandbox',
      });
      if (!yes || pg.signal.aborted) return;
      pending.set(row.id, 'deleting');
      showState(row, row.data.state);
      row.tr.classList.add('deleting');
      say(`Deleting sandbox ${row.id}…`);
      try {
        await api(`/api/console/pool/sandboxes/${enc(row.id)}`, { method: 'DELETE', signal: pg.signal });
        pending.delete(row.id);
        const focused = row.tr.contains(document.activeElement);
        row.tr.remove();
        rows.delete(row.id);
        poolSamples.delete(row.id);
        order = '';
        if (focused) h2.focus();
        say(`Sandbox ${row.id} deleted.`);
      } catch (err) {
        if (err.name === 'AbortError') return;
        pending.delete(row.id);
        row.tr.classList.remove('deleting');
        showState(row, row.data.state);
        say(`Could not delete sandbox ${row.id}: ${err.message}`);
      }
      refresh();
    }

    if (first.error) {
      table.hidden = true;
      problem.replaceChildren(errorBox(first.error));
    } else {
      render(first);
    }
    pg.every(poolEvery, refresh);
    // hidden: no polling; visible again: at once
    const onVisible = () => { if (!document.hidden) refresh(); };
    document.addEventListener('visibilitychange', onVisible);
    pg.onLeave(() => document.removeEventListener('visibilitychange', onVisible));
  }

  async function pageSandboxes(pg) {
    const session = await api('/api/console/session', { signal: pg.signal });
    const [first, d] = await Promise.all([
      session.pool ? api('/api/console/pool/sandboxes', { signal: pg.signal }).catch((err) => {
        if (err.name === 'AbortError') throw err;
        return { error: err };
      }) : null,
      api('/api/console/sandboxes', { signal: pg.signal }),
    ]);
    head(pg, {
      title: 'Sandboxes',
      sub: session.pool
        ? 'The sandbox pool\'s sandboxes with their CPU and memory use, and the sandboxes whose files, command line and python kernel this console offers.'
        : 'The sandboxes this hub knows: their files, a command line and a python kernel.',
    });
    const box = h('div', { class: 'stack' });
    pg.main.append(box);
    if (first) poolSection(pg, box, first);
    const list = d.sandboxes || [];
    if (!list.length) {
      if (!first) box.append(h('div', { class: 'card empty' }, 'This hub knows no sandbox. a2c up has one; a2c server can be told about aiod daemons.'));
      return;
    }
    box.append(...list.map((s) => {
      const id = nextID('sbx');
      const base = `#/sandboxes/${enc(s.name)}`;
      return h('section', { class: 'card', 'aria-labelledby': id },
        h('div', { class: 'card-head' }, h('h2', { id }, h('a', { href: `${base}/files` }, s.name)),
          h('span', { class: 'muted small mono' }, s.url || ''), h('span', { class: 'spacer' }),
          h('a', { href: `${base}/files` }, 'Files'), h('a', { href: `${base}/command` }, 'Command'),
          h('a', { href: `${base}/python` }, 'Python')));
    }));
  }

  async function pageSandbox(pg, name, sub) {
    sub = sub || 'files';
    const base = `#/sandboxes/${enc(name)}`;
    const titles = { files: 'Files', command: 'Command', python: 'Python' };
    head(pg, { crumbs: [['Sandboxes', '#/sandboxes'], [name, null]], title: `${name}: ${titles[sub]}` });
    pg.main.append(h('nav', { class: 'subnav', 'aria-label': 'Sandbox' },
      Object.entries(titles).map(([k, l]) => h('a', { href: `${base}/${k}`, 'aria-current': k === sub ? 'page' : null }, l))));
    if (sub === 'files') return sandboxFiles(pg, name, base);
    if (sub === 'command') return sandboxCommand(pg, name);
    return sandboxPython(pg, name);
  }

  const workspaces = new Map(); // sandbox name -> its workspace folder

  async function workspaceOf(pg, name) {
    if (workspaces.has(name)) return workspaces.get(name);
    const d = await sbx(name, 'v2/sandbox', { signal: pg.signal });
    const ws = (d && (d.workspace || d.workspace_dir)) || '/';
    workspaces.set(name, ws);
    return ws;
  }

  const joinPath = (dir, leaf) => (dir.endsWith('/') ? dir + leaf : `${dir}/${leaf}`);
  const parentOf = (p) => {
    const i = p.replace(/\/+$/, '').lastIndexOf('/');
    return i <= 0 ? '/' : p.slice(0, i);
  };

  async function sandboxFiles(pg, name, base) {
    const ws = await workspaceOf(pg, name);
    const dir = pg.query.get('path') || ws;
    const dirHref = (p) => `${base}/files?path=${enc(p)}`;

    // breadcrumb of the folder
    const parts = dir.split('/').filter(Boolean);
    const crumbs = [h('a', { href: dirHref('/') }, '/')];
    parts.forEach((seg, i) => {
      const p = `/${parts.slice(0, i + 1).join('/')}`;
      crumbs.push(i === parts.length - 1 ? h('span', { 'aria-current': 'location' }, seg) : h('a', { href: dirHref(p) }, seg));
      if (i < parts.length - 1) crumbs.push(h('span', { class: 'muted' }, '/'));
    });

    const listStatus = h('p', { class: 'small muted', role: 'status', 'aria-live': 'polite' });
    const tbody = h('tbody');
    const newID = nextID('newfile');
    const newName = h('input', { id: newID, type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'notes.md' });
    const newErr = h('p', { class: 'err small', id: `${newID}-err`, hidden: true });
    newName.setAttribute('aria-describedby', `${newID}-err`);
    const newForm = h('form', { class: 'inline-form', novalidate: true },
      h('div', { class: 'field' }, h('label', { for: newID }, 'New file in this folder'), newName),
      h('button', { type: 'submit' }, 'Create'));

    const editor = h('section', { class: 'card editor', 'aria-labelledby': 'editor-title' },
      h('div', { class: 'card-head' }, h('h2', { id: 'editor-title' }, 'Editor')),
      h('p', { class: 'empty' }, 'Open a file to see and edit it here.'));

    pg.main.append(h('div', { class: 'files' },
      h('section', { class: 'card', 'aria-labelledby': 'folder-title' },
        h('div', { class: 'card-head' }, h('h2', { id: 'folder-title', class: 'visually-hidden' }, 'Folder'),
          h('nav', { class: 'path', 'aria-label': 'Folder path' }, crumbs),
          h('span', { class: 'spacer' }),
          dir !== ws ? h('a', { href: dirHref(ws), class: 'small' }, 'Workspace') : null),
        h('div', { class: 'table-wrap' }, h('table', null,
          h('caption', { class: 'visually-hidden' }, `Files in ${dir}`),
          h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'Name'), h('th', { scope: 'col', class: 'num' }, 'Size'),
            h('th', { scope: 'col' }, 'Modified'))),
          tbody)),
        h('div', { class: 'card-body stack' }, listStatus, newForm, newErr)),
      editor));

    let openPath = '';
    const list = async () => {
      const d = await sbx(name, `v2/fs/list?path=${enc(dir)}`, { signal: pg.signal });
      const files = (d.files || []).slice().sort((a, b) => (b.is_directory - a.is_directory) || a.name.localeCompare(b.name));
      const rows = [];
      if (dir !== '/') {
        rows.push(h('tr', null, h('td', { class: 'name' }, h('span', { class: 'name-cell' },
          h('span', { class: 'icon up', 'aria-hidden': 'true' }, '↰'),
          h('a', { href: dirHref(parentOf(dir)) }, '.. (parent folder)'))), h('td'), h('td')));
      }
      for (const f of files) {
        rows.push(h('tr', { 'data-path': f.path, class: f.path === openPath ? 'selected' : null },
          h('td', { class: 'name' }, h('span', { class: 'name-cell' },
            h('span', { class: `icon ${f.is_directory ? 'dir' : 'file'}`, 'aria-hidden': 'true' }),
            f.is_directory
              ? h('a', { href: dirHref(f.path), 'aria-label': `Folder ${f.name}` }, `${f.name}/`)
              : h('button', { type: 'button', class: 'link', 'aria-label': `Open ${f.name}`, onclick: () => open(f.path) }, f.name))),
          h('td', { class: 'num small' }, f.is_directory ? '' : fmtBytes(f.size)),
          h('td', { class: 'small' }, f.modified_time ? timeEl(f.modified_time) : '')));
      }
      if (!files.length) rows.push(h('tr', null, h('td', { colspan: '3', class: 'empty' }, 'This folder is empty.')));
      tbody.replaceChildren(...rows);
      listStatus.textContent = `${d.directory_count || 0} folders, ${d.file_count || 0} files${d.truncated ? ' (list cut short)' : ''}.`;
    };

    const open = async (path) => {
      openPath = path;
      for (const tr of tbody.querySelectorAll('tr[data-path]')) tr.classList.toggle('selected', tr.dataset.path === path);
      const taID = nextID('content');
      const status = h('p', { class: 'small muted', role: 'status', 'aria-live': 'polite' }, 'Loading…');
      editor.replaceChildren(h('div', { class: 'card-head' }, h('h2', { id: 'editor-title', class: 'path' }, path)), h('div', { class: 'card-body' }, status));
      let d;
      try {
        d = await sbx(name, `v2/fs/read?path=${enc(path)}`, { signal: pg.signal });
      } catch (err) {
        status.textContent = '';
        status.append(errorBox(err.status === 422 ? new Error('This file is not text; the console edits text files only.') : err) || '');
        return;
      }
      const ta = h('textarea', { id: taID, spellcheck: 'false', value: d.content || '', 'aria-describedby': `${taID}-help` });
      const save = h('button', { type: 'button', class: 'primary' }, 'Save');
      const reload = h('button', { type: 'button' }, 'Reload');
      let saved = ta.value;
      const dirty = () => { status.textContent = ta.value === saved ? 'No changes.' : 'Unsaved changes.'; };
      const doSave = async () => {
        status.textContent = 'Saving…';
        try {
          const w = await sbx(name, 'v2/fs/write', { method: 'POST', body: { path, content: ta.value }, signal: pg.signal });
          saved = ta.value;
          status.textContent = `Saved ${fmtBytes(w && w.bytes_written != null ? w.bytes_written : new TextEncoder().encode(ta.value).length)} at ${fmtTime(new Date().toISOString())}.`;
          list().catch(() => {});
        } catch (err) {
          status.textContent = `Not saved: ${err.message}`;
        }
      };
      save.addEventListener('click', doSave);
      reload.addEventListener('click', () => open(path));
      ta.addEventListener('input', dirty);
      ta.addEventListener('keydown', (e) => {
        if ((e.ctrlKey || e.metaKey) && e.key === 's') { e.preventDefault(); doSave(); }
      });
      status.textContent = 'No changes.';
      editor.replaceChildren(
        h('div', { class: 'card-head' }, h('h2', { id: 'editor-title', class: 'path' }, path)),
        h('div', { class: 'card-body stack' },
          h('div', { class: 'field' }, h('label', { for: taID }, 'Contents'), ta,
            h('p', { class: 'help', id: `${taID}-help` }, 'Ctrl+S saves.')),
          h('div', { class: 'form-actions' }, save, reload, status)));
    };

    newForm.addEventListener('submit', async (e) => {
      e.preventDefault();
      const leaf = newName.value.trim();
      newErr.hidden = true;
      newName.removeAttribute('aria-invalid');
      if (!leaf || leaf.includes('/') || leaf === '.' || leaf === '..') {
        newErr.textContent = 'Enter a file name without slashes.';
        newErr.hidden = false;
        newName.setAttribute('aria-invalid', 'true');
        newName.focus();
        return;
      }
      const path = joinPath(dir, leaf);
      try {
        await sbx(name, 'v2/fs/write', { method: 'POST', body: { path, content: '' }, signal: pg.signal });
        newName.value = '';
        await list();
        await open(path);
        announce(`Created ${leaf}`);
      } catch (err) {
        newErr.textContent = `Not created: ${err.message}`;
        newErr.hidden = false;
      }
    });

    await list();
  }

  // b64bytes decodes base64 to bytes.
  function b64bytes(s) {
    const bin = atob(s || '');
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }

  const maxTerm = 1 << 20; // characters of output kept on the page

  function sandboxCommand(pg, name) {
    const cmdID = nextID('cmd');
    const cwdID = nextID('cwd');
    const cmd = h('textarea', { id: cmdID, rows: 3, spellcheck: 'false', 'aria-describedby': `${cmdID}-help`, placeholder: 'ls -la' });
    const cwd = h('input', { id: cwdID, type: 'text', spellcheck: 'false', autocomplete: 'off', placeholder: 'the sandbox\'s default', 'aria-describedby': `${cwdID}-help` });
    const run = h('button', { type: 'submit', class: 'primary' }, 'Run');
    const stop = h('button', { type: 'button', disabled: true }, 'Stop');
    const clear = h('button', { type: 'button' }, 'Clear');
    const status = h('p', { class: 'small muted', role: 'status', 'aria-live': 'polite' }, 'Ready.');
    const term = h('pre', { class: 'term', role: 'log', 'aria-live': 'off', 'aria-label': 'Command output', tabindex: '0' });
    const form = h('form', { class: 'form-grid', novalidate: true },
      h('div', { class: 'field' }, h('label', { for: cmdID }, 'Command'), cmd,
        h('p', { class: 'help', id: `${cmdID}-help` }, 'Runs under bash in the sandbox; output streams as it comes. Ctrl+Enter runs.')),
      h('div', { class: 'field' }, h('label', { for: cwdID }, 'Working folder'), cwd,
        h('p', { class: 'help', id: `${cwdID}-help` }, 'Optional.')),
      h('div', { class: 'form-actions' }, run, stop, clear, status));
    pg.main.append(h('div', { class: 'stack' },
      h('section', { class: 'card', 'aria-label': 'Run a command' }, h('div', { class: 'card-body' }, form)),
      h('section', { class: 'card', 'aria-labelledby': 'out-title' },
        h('div', { class: 'card-head' }, h('h2', { id: 'out-title' }, 'Output')),
        h('div', { class: 'card-body' }, term))));

    let ctl = null;
    pg.onLeave(() => { if (ctl) ctl.abort(); });
    cmd.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); form.requestSubmit(); }
    });
    clear.addEventListener('click', () => term.replaceChildren());
    stop.addEventListener('click', () => { if (ctl) ctl.abort(); });

    const append = (text, cls) => {
      const atEnd = term.scrollTop + term.clientHeight >= term.scrollHeight - 4;
      const last = term.lastChild;
      if (last && last.nodeType === 1 && last.className === (cls || 'out')) last.textContent += text;
      else term.append(h('span', { class: cls || 'out' }, text));
      let total = term.textContent.length;
      while (total > maxTerm && term.firstChild) {
        total -= term.firstChild.textContent.length;
        term.firstChild.remove();
      }
      if (atEnd) term.scrollTop = term.scrollHeight;
    };

    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      if (ctl) return;
      const command = cmd.value;
      if (!command.trim()) { status.textContent = 'Enter a command.'; cmd.focus(); return; }
      ctl = new AbortController();
      run.disabled = true;
      stop.disabled = false;
      if (term.childNodes.length) append('\n');
      append(`$ ${command}\n`, 'note');
      status.textContent = 'Running…';
      const started = performance.now();
      const decoders = { stdout: new TextDecoder(), stderr: new TextDecoder() };
      let exit = null;
      try {
        const body = { command };
        if (cwd.value.trim()) body.cwd = cwd.value.trim();
        const r = await fetch(sandboxPath(name, 'v2/commands'), {
          method: 'POST', signal: ctl.signal, credentials: 'same-origin',
          headers: { 'Content-Type': 'application/json', Accept: 'application/x-ndjson' }, body: JSON.stringify(body),
        });
        if (!r.ok || !(r.headers.get('Content-Type') || '').includes('ndjson')) {
          let data = null;
          try { data = await r.json(); } catch { /* not JSON */ }
          throw new Error(errorText(data) || `${r.status} ${r.statusText}`);
        }
        const reader = r.body.getReader();
        const text = new TextDecoder();
        let buf = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += text.decode(value, { stream: true });
          let nl;
          while ((nl = buf.indexOf('\n')) >= 0) {
            const line = buf.slice(0, nl);
            buf = buf.slice(nl + 1);
            if (!line.trim()) continue;
            let f;
            try { f = JSON.parse(line); } catch { continue; }
            if (f.type === 'started') status.textContent = 'Running…';
            else if (f.type === 'output') {
              const dec = decoders[f.stream] || decoders.stdout;
              append(dec.decode(b64bytes(f.data), { stream: true }), f.stream === 'stderr' ? 'stderr' : 'out');
            } else if (f.type === 'gap') append(`[… output from byte ${f.lost_from} to ${f.resume_offset} was lost …]\n`, 'note');
            else if (f.type === 'exit') exit = f;
            else if (f.type === 'error') throw new Error(f.message || 'the stream failed');
          }
        }
        const secs = ((performance.now() - started) / 1000).toFixed(1);
        if (exit) {
          status.textContent = `Exited with code ${exit.exit_code} after ${secs} s${exit.status && exit.status !== 'completed' ? ` (${exit.status})` : ''}.`;
          if (exit.exit_code !== 0) append(`[exit code ${exit.exit_code}]\n`, 'note');
        } else {
          status.textContent = `The stream ended after ${secs} s without an exit.`;
        }
      } catch (err) {
        if (err.name === 'AbortError') {
          status.textContent = 'Stopped.';
          append('[stopped]\n', 'note');
        } else {
          status.textContent = `Failed: ${err.message}`;
        }
      } finally {
        ctl = null;
        run.disabled = false;
        stop.disabled = true;
      }
    });
  }

  // mime renders one output's MIME bundle: the richest type we show.
  function mime(data) {
    const get = (k) => {
      const v = data[k];
      return Array.isArray(v) ? v.join('') : v;
    };
    if (data['image/png'] != null) return h('img', { src: `data:image/png;base64,${String(get('image/png')).replace(/\s+/g, '')}`, alt: 'PNG output' });
    if (data['image/jpeg'] != null) return h('img', { src: `data:image/jpeg;base64,${String(get('image/jpeg')).replace(/\s+/g, '')}`, alt: 'JPEG output' });
    if (data['image/svg+xml'] != null) return h('img', { src: `data:image/svg+xml;charset=utf-8,${enc(get('image/svg+xml'))}`, alt: 'SVG output' });
    if (data['text/html'] != null) {
      // sandbox="" : no scripts, no forms, its own opaque origin
      return h('iframe', { sandbox: '', srcdoc: String(get('text/html')), title: 'HTML output', referrerpolicy: 'no-referrer' });
    }
    if (data['text/markdown'] != null) return h('pre', { class: 'text' }, get('text/markdown'));
    if (data['application/json'] != null) return h('pre', { class: 'text' }, JSON.stringify(data['application/json'], null, 2));
    if (data['text/plain'] != null) return h('pre', { class: 'text' }, get('text/plain'));
    return h('p', { class: 'item-note' }, `Output of type ${Object.keys(data).join(', ') || 'none'}`);
  }

  const ansi = /\u001b\[[0-9;]*[A-Za-z]/g;

  function cellOutputs(res) {
    const outs = [];
    for (const o of res.outputs || []) {
      if (o.output_type === 'stream') outs.push(h('pre', { class: `text${o.name === 'stderr' ? ' stderr' : ''}` }, o.text));
      else if (o.output_type === 'error') {
        outs.push(h('div', { class: 'error-box' }, h('strong', null, `${o.ename}: ${o.evalue}`),
          (o.traceback || []).length ? h('pre', null, o.traceback.join('\n').replace(ansi, '')) : null));
      } else if (o.data) outs.push(mime(o.data));
    }
    if (!outs.length) outs.push(h('p', { class: 'muted small' }, res.status === 'timeout' ? 'The cell timed out.' : 'No output.'));
    return outs;
  }

  function sandboxPython(pg, name) {
    const session = `console-${Math.random().toString(36).slice(2, 10)}`;
    const codeID = nextID('code');
    const code = h('textarea', { id: codeID, rows: 8, spellcheck: 'false', 'aria-describedby': `${codeID}-help`, placeholder: 'print("hello")' });
    const run = h('button', { type: 'submit', class: 'primary' }, 'Run cell');
    const status = h('p', { class: 'small muted', role: 'status', 'aria-live': 'polite' }, 'Ready.');
    const cells = h('div', { class: 'cells' });
    const form = h('form', { class: 'form-grid', novalidate: true },
      h('div', { class: 'field' }, h('label', { for: codeID }, 'Python cell'), code,
        h('p', { class: 'help', id: `${codeID}-help` }, 'Runs in a Jupyter kernel of the sandbox that keeps its variables while this page is open. Ctrl+Enter runs.')),
      h('div', { class: 'form-actions' }, run, status));
    pg.main.append(h('div', { class: 'stack' },
      h('section', { class: 'card', 'aria-label': 'Run a python cell' }, h('div', { class: 'card-body' }, form)),
      h('section', { class: 'card', 'aria-labelledby': 'cells-title' },
        h('div', { class: 'card-head' }, h('h2', { id: 'cells-title' }, 'Outputs')),
        h('div', { class: 'card-body' }, cells))));
    pg.onLeave(() => {
      fetch(sandboxPath(name, `v2/code/sessions/${enc(session)}`), { method: 'DELETE', credentials: 'same-origin' }).catch(() => {});
    });
    code.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); form.requestSubmit(); }
    });
    let busy = false;
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      if (busy) return;
      const src = code.value;
      if (!src.trim()) { status.textContent = 'Enter some python.'; code.focus(); return; }
      busy = true;
      run.disabled = true;
      status.textContent = 'Running…';
      const started = performance.now();
      const out = h('div', { class: 'cell-out' }, h('p', { class: 'muted small' }, 'Running…'));
      const prompt = h('div', { class: 'prompt' }, 'In [*]:');
      const cell = h('div', { class: 'cell' }, prompt, h('pre', { class: 'code' }, src), h('div', { class: 'prompt out' }, 'Out:'), out);
      cells.append(cell);
      while (cells.children.length > 50) cells.firstElementChild.remove();
      try {
        const env = await api(sandboxPath(name, 'v2/code/execute'), {
          method: 'POST', signal: pg.signal, body: { language: 'python', code: src, session_id: session, timeout: 120 },
        });
        const res = (env && env.data) || {};
        prompt.textContent = `In [${res.execution_count != null ? res.execution_count : ' '}]:`;
        out.replaceChildren(...cellOutputs(res));
        const secs = ((performance.now() - started) / 1000).toFixed(1);
        status.textContent = res.status === 'ok' ? `Done in ${secs} s.` : `Cell ${res.status || 'failed'} after ${secs} s.`;
      } catch (err) {
        if (err.name === 'AbortError') return;
        out.replaceChildren(errorBox(err));
        status.textContent = `Failed: ${err.message}`;
      } finally {
        busy = false;
        run.disabled = false;
      }
    });
  }

  // ---------------------------------------------------------------- start

  async function start() {
    window.addEventListener('hashchange', route);
    document.getElementById('skip').addEventListener('click', (e) => {
      e.preventDefault();
      document.getElementById('main').focus();
    });
    route();
    try {
      const s = await api('/api/console/session');
      const info = document.getElementById('hub-info');
      info.textContent = [s.version ? `a2c ${s.version}` : '', s.node ? `node ${s.node}` : ''].filter(Boolean).join(' · ');
      document.getElementById('logout').hidden = !s.auth;
    } catch { /* the page itself shows what failed */ }
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
