// The rtgs operator console (served by every node under /console; see node/api/src/console.rs).
// Plain JavaScript, no library. Every data request is signed here as node/api/src/auth.rs
// requires: HMAC-SHA256(secret, METHOD "\n" PATH_AND_QUERY "\n" TIMESTAMP "\n" BODY), the secret
// imported once as a non-extractable WebCrypto key and kept in this closure only.
'use strict';
(() => {
  const $ = (id) => document.getElementById(id);
  const utf8 = new TextEncoder();
  const POLL_MS = 1000; // the cluster, at most once a second
  const PLUGINS_MS = 5000; // plugin panels
  let operator = null; // { key, hmac }
  let participant = null; // the test screen's
  let nonce = 0;
  let running = 0; // bumps on sign-out: stale loops stop

  // ---- signing -------------------------------------------------------------------------------
  async function credential(key, secret) {
    const hmac = await crypto.subtle.importKey('raw', utf8.encode(secret), { name: 'HMAC', hash: 'SHA-256' },
      false, ['sign']);
    return { key, hmac };
  }

  function hex(buf) {
    return Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, '0')).join('');
  }

  // A signed request; the answer's status and JSON body (null if none).
  async function call(cred, method, path, body) {
    const text = body === undefined ? '' : JSON.stringify(body);
    nonce += 1;
    const ts = `${Math.floor(Date.now() / 1000)}.c${nonce.toString(36)}${Math.random().toString(36).slice(2, 8)}`;
    const mac = await crypto.subtle.sign('HMAC', cred.hmac, utf8.encode(`${method}\n${path}\n${ts}\n${text}`));
    const headers = { 'x-rtgs-key': cred.key, 'x-rtgs-timestamp': ts, 'x-rtgs-signature': hex(mac) };
    if (text) headers['content-type'] = 'application/json';
    const r = await fetch(path, { method, headers, body: text || undefined, cache: 'no-store',
      credentials: 'omit', referrerPolicy: 'no-referrer' });
    let data = null;
    try { data = await r.json(); } catch (_) { data = null; }
    return { status: r.status, data };
  }

  const bmi = (kind) => `${kind}-${Date.now().toString(36)}-${(nonce++).toString(36)}`.toUpperCase();
  const seg = (text) => encodeURIComponent(String(text).trim());

  // ---- DOM helpers (text only: nothing from the server is ever parsed as HTML) -----------------
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'class') e.className = v; else if (k.startsWith('data-')) e.setAttribute(k, v); else e[k] = v;
    }
    for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(c == null ? '–' : String(c)));
    return e;
  }
  function fill(tbody, rows) { tbody.replaceChildren(...rows); }
  const num = (v) => (v == null ? '–' : Number(v).toLocaleString('en-US'));
  const ms = (v) => (v == null ? '–' : v >= 1000 ? `${(v / 1000).toFixed(2)} s` : `${Math.round(v)} ms`);
  const ago = (unixMs) => (unixMs ? `${new Date(unixMs).toLocaleTimeString('en-GB')}` : '–');

  function sparkline(values) {
    const NS = 'http://www.w3.org/2000/svg';
    const svg = document.createElementNS(NS, 'svg');
    svg.setAttribute('width', '120'); svg.setAttribute('height', '24'); svg.setAttribute('viewBox', '0 0 120 24');
    svg.setAttribute('class', 'spark');
    const v = (values || []).slice(-60);
    if (v.length > 1) {
      const max = Math.max(1, ...v);
      const pts = v.map((y, i) => `${(i * 120 / (v.length - 1)).toFixed(1)},${(23 - (y / max) * 22).toFixed(1)}`);
      const line = document.createElementNS(NS, 'polyline');
      line.setAttribute('points', pts.join(' '));
      line.setAttribute('fill', 'none'); line.setAttribute('stroke', 'currentColor'); line.setAttribute('stroke-width', '1.5');
      svg.append(line);
    }
    return svg;
  }

  // ---- the cluster ---------------------------------------------------------------------------
  function renderCluster(r) {
    // For the figures (bench/README.md): sign-in → the first report drawn.
    if (!performance.getEntriesByName('rtgs-first-data').length) performance.mark('rtgs-first-data');
    $('served-by').textContent = `served by ${r.served_by}`;
    $('updated').textContent = `updated ${ago(r.unix_ms)}`;
    fill($('centers').tBodies[0], r.centers.map((c) => {
      const m = c.last_minute || {};
      const state = c.up ? (c.halted ? 'HALTED' : 'up') : 'DOWN';
      const tr = el('tr', { 'data-center': c.id, 'data-up': String(c.up), 'data-leader': String(c.leader),
        'data-halted': String(c.halted === true), class: c.halted ? 'halted' : c.up ? '' : 'down' },
      el('td', {}, c.id), el('td', { class: 'state' }, state), el('td', {}, c.leader ? '★ leader' : ''),
      el('td', {}, c.epoch ? c.epoch : '–'), el('td', {}, num(c.seq_applied)), el('td', {}, num(c.seq_committed)),
      el('td', {}, num(c.seq_final)), el('td', {}, num(c.lag_entries)),
      el('td', {}, m.finality_per_s == null ? '–' : num(m.finality_per_s)), el('td', {}, ms(m.final_p99_ms)),
      el('td', {}, sparkline(m.finalized_per_s)), el('td', {}, num(c.gap_pulls)),
      el('td', {}, c.halted ? `HALTED: ${c.halted_reason || 'divergence'}` : c.up ? 'ok' : (c.error || 'down')));
      tr.title = c.address;
      return tr;
    }));
    const halted = r.centers.filter((c) => c.halted);
    const down = r.centers.filter((c) => !c.up);
    const banner = $('banner');
    if (halted.length || down.length) {
      banner.hidden = false;
      banner.className = halted.length ? 'halted' : 'down';
      banner.textContent = [
        halted.length ? `FINALITY HALTED at ${halted.map((c) => `${c.id} (${c.halted_reason || 'divergence'})`).join(', ')} — an operator must intervene` : '',
        down.length ? `DOWN: ${down.map((c) => c.id).join(', ')}` : '',
      ].filter(Boolean).join(' · ');
    } else {
      banner.hidden = true;
    }
    $('cluster-line').textContent = `Leader ${r.leader || 'none'} at epoch ${r.epoch ?? '–'} · ` +
      `${r.centers_up} of ${r.centers.length} centers up · highest seq ${num(r.seq_highest)}`;
    $('cluster-line').dataset.leader = r.leader || '';
    const t = r.last_takeover;
    $('takeover-line').textContent = !t ? 'Last takeover: none seen since the nodes started'
      : t.previous_leader == null ? `First leader: ${t.center} at epoch ${t.epoch}, ${ago(t.at_unix_ms)}`
        : `Last takeover: ${t.center} from ${t.previous_leader} at epoch ${t.epoch}, ${ago(t.at_unix_ms)}, ` +
          `took ${ms(t.took_ms)} (leader silent ${ms(t.leader_silent_ms)} + rebuild ${ms(t.rebuild_ms)})`;
    const source = r.centers.find((c) => c.up);
    const alerts = source ? source.alerts : [];
    $('alert-count').textContent = String(alerts.length);
    fill($('alerts').tBodies[0], alerts.length ? alerts.map((a) => el('tr', {},
      el('td', {}, a.plugin), el('td', {}, a.kind), el('td', {}, a.subject),
      el('td', {}, a.since_us ? ago(a.since_us / 1000) : '–')))
      : [el('tr', {}, el('td', { colSpan: 4, class: 'note' }, 'none'))]);
    renderFigures(source && source.plugins);
  }

  async function pollCluster(run) {
    while (run === running) {
      const started = Date.now();
      try {
        const r = await call(operator, 'GET', '/v1/operator/console/cluster');
        if (run !== running) return;
        if (r.status === 200) renderCluster(r.data);
        else if (r.status === 401) { signOut(`signed out: ${r.data ? r.data.message : r.status}`); return; }
        else showBanner(`cluster report: ${r.data ? `${r.data.code}: ${r.data.message}` : r.status}`);
      } catch (e) {
        showBanner(`this node does not answer (${e.message}); open the console of another center`);
      }
      await new Promise((ok) => setTimeout(ok, Math.max(0, POLL_MS - (Date.now() - started))));
    }
  }

  function showBanner(text) {
    const b = $('banner'); b.hidden = false; b.className = 'down'; b.textContent = text;
  }

  // ---- plugin panels -------------------------------------------------------------------------
  function kv(obj, keys) {
    return keys.filter((k) => obj[k] !== undefined).map((k) => el('tr', {}, el('th', {}, k), el('td', {}, num(obj[k]))));
  }
  function renderFigures(p) {
    if (!p) return;
    $('plugins-owner').textContent = p.owner_center ? `effects run at DC${p.owner_center} (term ${p.owner_term})` : '';
    const keys = Object.keys(p).filter((k) => k.startsWith('matching_sessions') || k.startsWith('matching_awaiting')
      || k === 'matching_payment_in_progress' || k.startsWith('matching_escalat') || k.startsWith('matching_orders_'));
    fill($('m-figures').tBodies[0], kv(p, keys));
  }
  const rows = (list, f) => (list && list.length ? list.map(f) : [el('tr', {}, el('td', { class: 'note' }, 'none'))]);
  const WAITING = ['SUBMITTED', 'PENDING_AML_SCREENING', 'PENDING_AUTHORIZATION', 'PENDING_SIGNATURE', 'SIGNED',
    'QUEUED', 'BROADCASTING', 'CONFIRMING', 'STALE'];
  const DONE = ['COMPLETED', 'CANCELLED', 'BLOCKED', 'REJECTED', 'FAILED'];

  async function pollPlugins(run) {
    while (run === running) {
      try { await refreshPlugins(); } catch (_) { /* the next round */ }
      await new Promise((ok) => setTimeout(ok, PLUGINS_MS));
    }
  }

  async function refreshPlugins() {
    const list = await call(operator, 'GET', '/v1/operator/plugins');
    const names = list.status === 200 ? (list.data.plugins || []).map((p) => p.plugin) : [];
    $('plugins-none').hidden = names.length > 0;
    for (const name of ['collection', 'withdrawal', 'matching']) $(`plugin-${name}`).hidden = !names.includes(name);
    if (names.includes('collection')) {
      const [stale, skipped, relayers] = await Promise.all(['stale', 'skipped', 'relayers']
        .map((what) => call(operator, 'GET', `/v1/operator/collection/${what}`)));
      fill($('c-stale').tBodies[0], rows(stale.data && stale.data.batches, (b) => el('tr', {},
        el('td', {}, `batch ${b.batch ?? b.id}`), el('td', {}, `relayer ${b.relayer ?? '–'}`),
        el('td', {}, `gas ${b.gas_price_wei ?? '–'}`))));
      fill($('c-skipped').tBodies[0], rows(skipped.data && skipped.data.groups, (g) => el('tr', {},
        el('td', {}, `wallet ${g.wallet}`), el('td', {}, g.reason), el('td', {}, `${g.skips_total} skips`))));
      fill($('c-relayers').tBodies[0], rows(relayers.data && relayers.data.relayers, (r) => el('tr', {},
        el('td', {}, `relayer ${r.relayer ?? r.id}`), el('td', {}, `chain ${r.chain ?? '–'}`),
        el('td', {}, `next nonce ${r.next_nonce ?? '–'}`))));
    }
    if (names.includes('withdrawal')) {
      const states = WAITING.concat(DONE);
      const answers = await Promise.all(states.map((s) => call(operator, 'GET', `/v1/operator/withdrawals?status=${s}&limit=1`)));
      fill($('w-states').tBodies[0], states.map((s, i) => {
        const d = answers[i].data || {};
        const oldest = WAITING.includes(s) && d.withdrawals && d.withdrawals[0];
        return el('tr', { class: s === 'STALE' && d.count ? 'warn' : '' }, el('td', {}, s), el('td', {}, num(d.count)),
          el('td', {}, oldest ? `#${oldest.withdrawal} since ${ago(oldest.status_since_us / 1000)}` : ''));
      }));
    }
    if (names.includes('matching')) {
      const esc = await call(operator, 'GET', '/v1/operator/matching/escalations');
      fill($('m-escalations').tBodies[0], rows(esc.data && esc.data.escalations, (e) => el('tr', {},
        el('td', {}, `session ${e.session ?? '–'}`), el('td', {}, e.reason ?? e.kind ?? ''),
        el('td', {}, e.resolved ? 'resolved' : 'open'))));
    }
  }

  // ---- search --------------------------------------------------------------------------------
  const SEARCH = {
    bmi: (t) => [`/v1/operator/entries/${seg(t)}`],
    account: (t) => [`/v1/operator/accounts/${seg(t)}`, `/v1/operator/accounts/${seg(t)}/statement?limit=20`],
    deposit: (t) => [`/v1/operator/collection/deposits/${seg(t)}`],
    withdrawal: (t) => [`/v1/operator/withdrawals/${seg(t)}`],
    tx: (t) => [`/v1/operator/collection/transactions/${seg(t)}`],
    session: (t) => [`/v1/operator/matching/sessions/${seg(t)}`],
    batch: (t) => [`/v1/operator/collection/batches/${seg(t)}`],
  };
  async function search(ev) {
    ev.preventDefault();
    const paths = SEARCH[$('search-kind').value]($('search-text').value);
    const out = [];
    for (const p of paths) {
      const r = await call(operator, 'GET', p);
      out.push(`GET ${p} → ${r.status}\n${JSON.stringify(r.data, null, 2)}`);
    }
    $('search-result').textContent = out.join('\n\n');
  }

  // ---- operator actions (the same routes as rtgs ops) ----------------------------------------
  const ACTIONS = {
    open: (f) => ['/v1/operator/accounts', { bmi: bmi('OPEN'), account: Number(f.account), currency: f.currency }],
    fund: (f) => [`/v1/operator/accounts/${seg(f.account)}/fund`, { bmi: bmi('FUND'), amount: f.amount, currency: f.currency }],
    close: (f) => [`/v1/operator/accounts/${seg(f.account)}/close`, { bmi: bmi('CLOSE') }],
    fail: (f) => [`/v1/operator/collection/batches/${seg(f.id)}/fail`, { bmi: bmi('FAIL') }],
    bump: (f) => [`/v1/operator/collection/batches/${seg(f.id)}/bump-gas`, { bmi: bmi('BUMP'), gas_price_wei: Number(f.gas) }],
    withdrawal: (f) => [`/v1/operator/withdrawals/${seg(f.id)}/operations`, Object.assign({ bmi: bmi('WOP'), operation: f.operation },
      f.fee ? { fee: Number(f.fee) } : {}, f.reason ? { reason: f.reason } : {})],
    resolve: (f) => [`/v1/operator/matching/sessions/${seg(f.id)}/resolve`, { bmi: bmi('RES'), resolution: f.resolution }],
  };
  async function act(ev) {
    ev.preventDefault();
    const form = ev.target;
    const [path, body] = ACTIONS[form.dataset.action](Object.fromEntries(new FormData(form)));
    const out = $('action-result');
    out.textContent = `POST ${path} …`;
    const r = await call(operator, 'POST', path, body);
    out.textContent = `POST ${path} ${JSON.stringify(body)}\n→ ${r.status} ${JSON.stringify(r.data)}`;
    out.dataset.status = String(r.status);
  }

  // ---- test screen: one transfer or a bounded burst, ACSP → ACCC ------------------------------
  async function test(ev) {
    ev.preventDefault();
    if ($('t-secret').value) {
      participant = await credential($('t-key').value.trim(), $('t-secret').value);
      $('t-secret').value = '';
      $('t-secret').required = false;
    }
    const count = Math.min(100, Math.max(1, Number($('t-count').value) || 1));
    const rate = Math.min(50, Math.max(1, Number($('t-rate').value) || 1));
    const tbody = $('t-results').tBodies[0];
    const base = { debtor: Number($('t-debtor').value), creditor: Number($('t-creditor').value),
      amount: $('t-amount').value.trim(), currency: $('t-currency').value.trim() };
    const waits = [];
    for (let i = 0; i < count; i++) {
      const id = bmi('T');
      const cells = [el('td', {}, id), el('td', { class: 'status' }, 'sending'), el('td', {}, ''), el('td', {}, ''), el('td', {}, '')];
      const tr = el('tr', { 'data-bmi': id, 'data-status': 'sending' }, ...cells);
      tbody.prepend(tr);
      while (tbody.rows.length > 200) tbody.deleteRow(-1);
      const set = (status, seq) => { tr.dataset.status = status; cells[1].textContent = status; if (seq != null) cells[2].textContent = seq; };
      const sent = performance.now();
      waits.push(call(participant, 'POST', '/v1/transfers', Object.assign({ bmi: id }, base)).then(async (r) => {
        if (r.status !== 202) { set(`${r.status} ${r.data ? r.data.code : ''}`); tr.className = 'rjct'; return; }
        set(r.data.status, r.data.seq);
        cells[3].textContent = ms(performance.now() - sent);
        for (let k = 0; k < 6 && tr.dataset.status === 'ACSP'; k++) {
          const s = await call(participant, 'GET', `/v1/transfers/${seg(id)}?wait_s=10`);
          if (s.status === 200) set(s.data.status + (s.data.reason ? ` ${s.data.reason}` : ''), s.data.seq);
        }
        cells[4].textContent = ms(performance.now() - sent);
        tr.className = tr.dataset.status === 'ACCC' ? 'accc' : tr.dataset.status === 'ACSP' ? '' : 'rjct';
      }).catch((e) => set(`error ${e.message}`)));
      if (i + 1 < count) await new Promise((ok) => setTimeout(ok, 1000 / rate));
    }
    await Promise.all(waits);
    const all = Array.from(tbody.rows).slice(0, count);
    $('t-summary').textContent = `${count} sent at ≤ ${rate}/s: ${all.filter((r) => r.dataset.status === 'ACCC').length} ACCC`;
  }

  // ---- sign-in -------------------------------------------------------------------------------
  async function signIn(ev) {
    ev.preventDefault();
    $('login-error').textContent = '';
    performance.clearMarks();
    performance.mark('rtgs-sign-in');
    const cred = await credential($('op-key').value.trim(), $('op-secret').value);
    $('op-secret').value = '';
    const probe = await call(cred, 'GET', '/v1/operator/console/cluster');
    if (probe.status === 401 || probe.status === 403) {
      $('login-error').textContent = `refused: ${probe.data ? probe.data.message : probe.status}`;
      return;
    }
    operator = cred;
    $('login').hidden = true; $('app').hidden = false; $('sign-out').hidden = false;
    if (probe.status === 200) renderCluster(probe.data);
    running += 1;
    pollCluster(running);
    pollPlugins(running);
  }

  function signOut(why) {
    running += 1;
    operator = null; participant = null;
    $('app').hidden = true; $('login').hidden = false; $('sign-out').hidden = true;
    $('login-error').textContent = typeof why === 'string' ? why : '';
  }

  $('login-form').addEventListener('submit', signIn);
  $('sign-out').addEventListener('click', signOut);
  $('search-form').addEventListener('submit', search);
  $('test-form').addEventListener('submit', test);
  for (const f of document.querySelectorAll('form[data-action]')) f.addEventListener('submit', act);
})();
