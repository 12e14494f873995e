// bondd's status page: reads api/stream (server-sent events, one JSON
// message a second) and draws the edge view (cards, charts, bond, rules,
// events) or the concentrator's table of edges. No library; every value
// goes into the DOM through textContent, never as HTML.
'use strict';

const HIST = 300; // samples kept per series: five minutes at one a second
const $ = (id) => document.getElementById(id);

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

// ---- formatting -----------------------------------------------------------

function fmtRate(bps) {
  if (bps === undefined || bps === null || bps < 0) return '–';
  if (bps >= 1e9) return (bps / 1e9).toFixed(2) + ' Gbit/s';
  if (bps >= 1e6) return (bps / 1e6).toFixed(2) + ' Mbit/s';
  if (bps >= 1e3) return (bps / 1e3).toFixed(0) + ' kbit/s';
  return bps.toFixed(0) + ' bit/s';
}
function fmtMs(ms) { return ms === undefined || ms < 0 ? '–' : (ms >= 100 ? ms.toFixed(0) : ms.toFixed(1)) + ' ms'; }
function fmtPct(x) { return x === undefined || x === null || x < 0 ? '–' : (100 * x).toFixed(x >= 0.1 ? 1 : 2) + ' %'; }
function fmtBytes(n) {
  if (!n) return '0 B';
  const u = ['B', 'kB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (n >= 1000 && i < u.length - 1) { n /= 1000; i++; }
  return (n >= 100 || i === 0 ? n.toFixed(0) : n.toFixed(1)) + ' ' + u[i];
}
function fmtDur(s) {
  if (s === undefined) return '–';
  s = Math.floor(s);
  if (s < 60) return s + ' s';
  if (s < 3600) return Math.floor(s / 60) + ' min ' + (s % 60) + ' s';
  if (s < 86400) return Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' min';
  return Math.floor(s / 86400) + ' d ' + Math.floor((s % 86400) / 3600) + ' h';
}
function fmtTime(ms) { return new Date(ms).toLocaleTimeString([], { hour12: false }); }
function fmtInt(n) { return n === undefined ? '–' : n.toLocaleString('en-US'); }

// ---- charts ---------------------------------------------------------------

const COLORS = ['#2c6fbb', '#16a085', '#8e44ad', '#c47f00'];

// drawChart draws series (arrays of numbers, -1 = no value) right-aligned
// on a HIST-sample x axis, with a y axis from 0 to a rounded maximum.
function drawChart(cv, series, fmt, fixedMax) {
  const dpr = window.devicePixelRatio || 1;
  const w = cv.clientWidth, h = cv.clientHeight;
  if (!w || !h) return;
  if (cv.width !== Math.round(w * dpr) || cv.height !== Math.round(h * dpr)) {
    cv.width = Math.round(w * dpr); cv.height = Math.round(h * dpr);
  }
  const g = cv.getContext('2d');
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, w, h);
  let max = fixedMax || 0;
  for (const s of series) for (const v of s.data) if (v > max) max = v;
  max = niceMax(max);
  const left = 2, top = 10, bottom = h - 12, right = w - 2;
  g.strokeStyle = '#e3e7ec'; g.lineWidth = 1;
  g.fillStyle = '#5f6b7a'; g.font = '10px system-ui, sans-serif';
  for (const f of [0, 0.5, 1]) {
    const y = Math.round(bottom - f * (bottom - top)) + 0.5;
    g.beginPath(); g.moveTo(left, y); g.lineTo(right, y); g.stroke();
  }
  // The x axis grows with the data from one minute to five.
  let n = 0;
  for (const s of series) n = Math.max(n, s.data.length);
  const win = Math.min(HIST, Math.max(60, n));
  g.fillText(fmt(max), left + 2, top - 1);
  g.fillText('−' + (win < 120 ? win + ' s' : Math.round(win / 60) + ' min'), left + 2, h - 1);
  g.fillText('now', right - 20, h - 1);
  const dx = (right - left) / (win - 1);
  series.forEach((s, k) => {
    g.strokeStyle = s.color || COLORS[k % COLORS.length];
    g.lineWidth = s.width || 1.5;
    g.beginPath();
    let pen = false;
    const off = win - s.data.length;
    s.data.forEach((v, i) => {
      if (v === null || v < 0) { pen = false; return; }
      const x = left + (off + i) * dx, y = bottom - Math.min(v / max, 1) * (bottom - top);
      if (pen) g.lineTo(x, y); else g.moveTo(x, y);
      pen = true;
    });
    g.stroke();
  });
}

function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

function drawSpark(cv, data) {
  const dpr = window.devicePixelRatio || 1;
  const w = 60, h = 16;
  if (cv.width !== w * dpr) { cv.width = w * dpr; cv.height = h * dpr; }
  const g = cv.getContext('2d');
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, w, h);
  let max = 0;
  for (const v of data) if (v > max) max = v;
  if (max <= 0) max = 1;
  g.strokeStyle = '#2c6fbb'; g.lineWidth = 1; g.beginPath();
  let pen = false;
  data.forEach((v, i) => {
    if (v < 0) { pen = false; return; }
    const x = i * (w - 1) / (data.length - 1), y = h - 1 - (v / max) * (h - 2);
    if (pen) g.lineTo(x, y); else g.moveTo(x, y);
    pen = true;
  });
  g.stroke();
}

function legend(items) {
  const d = el('div', 'legend');
  items.forEach(([name, color]) => {
    const s = el('span');
    const i = el('i');
    i.style.background = color;
    s.append(i, name);
    d.append(s);
  });
  return d;
}

// ---- state ----------------------------------------------------------------

const params = new URLSearchParams(location.search);
const state = {
  edge: params.get('edge') || '',
  lastTick: 0,
  hist: {},      // path name → {allowed, sent, delivered, rtt, queue, loss}
  bondHist: { delivered: [], sum: [] },
  cards: {},     // path name → card DOM refs
  fleet: { sort: params.get('sort') || 'loss', desc: params.get('desc') !== '0', page: 0, size: 50, q: '' },
  es: null,
};

function push(arr, v) { arr.push(v); if (arr.length > HIST) arr.shift(); }

// ---- stream ---------------------------------------------------------------

function streamURL() {
  const q = new URLSearchParams();
  if (state.edge) { q.set('view', 'edge'); q.set('edge', state.edge); }
  else {
    q.set('view', 'auto');
    const f = state.fleet;
    q.set('sort', f.sort); q.set('desc', f.desc ? '1' : '0');
    q.set('page', String(f.page)); q.set('size', String(f.size));
    if (f.q) q.set('q', f.q);
  }
  return 'api/stream?' + q.toString();
}

function connect() {
  if (state.es) state.es.close();
  state.lastTick = 0;
  const es = new EventSource(streamURL());
  state.es = es;
  const conn = $('conn');
  es.onopen = () => { conn.textContent = 'live'; conn.className = 'conn ok'; };
  es.onerror = () => { conn.textContent = 'reconnecting…'; conn.className = 'conn bad'; };
  es.onmessage = (ev) => {
    let m;
    try { m = JSON.parse(ev.data); } catch (e) { return; }
    conn.textContent = 'live · ' + fmtTime(m.t); conn.className = 'conn ok';
    if (m.kind === 'edge') onEdge(m);
    else if (m.kind === 'fleet') onFleet(m);
  };
}

// ---- edge view ------------------------------------------------------------

function onEdge(m) {
  state.role = m.role;
  $('fleet').hidden = true;
  $('edge').hidden = false;
  $('back').hidden = m.role !== 'concentrator';
  $('who').textContent = (m.role === 'concentrator' ? 'concentrator · edge ' : 'edge ') + m.edge + ' · ' + m.version + ' · up ' + fmtDur(m.uptime_s);
  document.title = 'bondd · ' + m.edge;
  const err = $('error');
  err.hidden = !m.error;
  err.textContent = m.error || '';
  if (!m.bond) return;
  if (m.hist) seed(m.hist);
  const fresh = m.tick !== state.lastTick;
  state.lastTick = m.tick;
  for (const p of m.paths) {
    const h = state.hist[p.name] || (state.hist[p.name] = { allowed: [], sent: [], delivered: [], rtt: [], queue: [], loss: [] });
    if (fresh && !m.hist) {
      push(h.allowed, p.allowed_bps); push(h.sent, p.sent_bps); push(h.delivered, p.delivered_bps);
      push(h.rtt, p.rtt_ms); push(h.queue, p.queue_delay_ms); push(h.loss, p.link_loss);
    }
  }
  if (fresh && !m.hist) { push(state.bondHist.delivered, m.bond.delivered_bps); push(state.bondHist.sum, m.bond.sum_rate_bps); }
  drawBond(m);
  drawCards(m);
  drawRules(m);
  drawEvents($('events'), m.events, 'Events', true);
}

function seed(h) {
  state.hist = {};
  for (const [name, s] of Object.entries(h.paths || {})) {
    state.hist[name] = { allowed: s.allowed_bps, sent: s.sent_bps, delivered: s.delivered_bps, rtt: s.rtt_ms, queue: s.queue_delay_ms, loss: s.link_loss };
  }
  state.bondHist = { delivered: h.bond.delivered_bps || [], sum: h.bond.sum_rate_bps || [] };
}

function kv(parent, key, label) {
  const d = el('div');
  d.append(el('span', 'k', label));
  const v = el('span', 'num');
  v.dataset.k = key;
  d.append(v);
  parent.append(d);
  return v;
}

function setNum(refs, key, text, sub) {
  const v = refs[key];
  if (!v) return;
  v.textContent = text;
  if (sub) v.append(el('span', 'sub', ' ' + sub));
}

function drawBond(m) {
  const b = m.bond;
  let s = state.bondDom;
  if (!s) {
    const root = $('bond');
    root.textContent = '';
    const left = el('div');
    left.append(el('h2', '', 'Bond'));
    const grid = el('div', 'kv');
    left.append(grid);
    const refs = {};
    for (const [k, label] of [['delivered', 'delivered / Σ rates'], ['e2e', 'loss after FEC, received here'], ['link', 'worst link loss'],
      ['fec', 'FEC'], ['parity', 'parity / rebuilt per s'], ['reseq', 'resequencer holds'], ['mtu', 'MTU'], ['paths', 'paths up'], ['frames', 'video frames hit in queues']]) {
      refs[k] = kv(grid, k, label);
    }
    const bar = el('div', 'bar');
    const fill = el('span');
    bar.append(fill);
    left.append(bar);
    const drops = el('div', 'drops');
    left.append(drops);
    const right = el('div');
    right.append(el('h2', '', 'Delivered against Σ of the paths\' rates (up to 5 minutes)'));
    const cv = el('canvas', 'chart wide');
    right.append(cv, legend([['delivered', COLORS[1]], ['Σ rates allowed', COLORS[0]]]));
    root.append(left, right);
    s = state.bondDom = { refs, fill, drops, cv };
  }
  const r = s.refs;
  setNum(r, 'delivered', fmtRate(b.delivered_bps), '/ ' + fmtRate(b.sum_rate_bps));
  s.fill.style.width = (b.sum_rate_bps > 0 ? Math.min(100, 100 * b.delivered_bps / b.sum_rate_bps) : 0) + '%';
  setNum(r, 'e2e', fmtPct(b.e2e_loss), b.e2e_loss < 0 ? 'no traffic to this end' : '');
  setNum(r, 'link', fmtPct(b.link_loss));
  const f = b.fec;
  setNum(r, 'fec', f ? f.mode : 'off', f ? 'coding rate ' + f.coding_rate.toFixed(3) : '');
  setNum(r, 'parity', f ? f.parity_per_s.toFixed(0) + ' / ' + f.recovered_per_s.toFixed(0) : '–', f ? '(' + fmtInt(f.parity_sent) + ' / ' + fmtInt(f.recovered) + ')' : '');
  const q = b.reseq;
  setNum(r, 'reseq', q ? fmtInt(q.held_now) + ' now' : '–', q ? fmtInt(q.held) + ' held, ' + fmtInt(q.released_timeout) + ' timed out' : '');
  setNum(r, 'mtu', String(b.mtu), b.mtu_reason ? '(configured ' + b.mtu_configured + ': ' + b.mtu_reason + ')' : '');
  setNum(r, 'paths', b.paths + ' of ' + m.paths.length);
  setNum(r, 'frames', fmtInt(b.frames_hit));
  s.drops.textContent = '';
  const nz = Object.entries(b.drops || {}).filter(([, n]) => n > 0).sort((a, c) => c[1] - a[1]);
  s.drops.append(el('span', 'k muted', 'drops by reason: '));
  s.drops.append(el('span', '', nz.length ? nz.map(([k, n]) => k + ' ' + fmtInt(n)).join(', ') : 'none'));
  drawChart(s.cv, [{ data: state.bondHist.delivered, color: COLORS[1] }, { data: state.bondHist.sum, color: COLORS[0] }], fmtRate);
}

function makeCard(name) {
  const card = el('article', 'card');
  card.dataset.path = name;
  const head = el('div', 'head');
  const title = el('h2', '', name);
  const badge = el('span', 'badge state');
  const reason = el('span', 'reason');
  const labels = el('span', 'labels');
  head.append(title, badge, reason, labels);
  const grid = el('div', 'kv');
  const refs = {};
  for (const [k, label] of [['allowed', 'rate allowed'], ['delivered', 'delivered'], ['sent', 'sent'], ['received', 'received'], ['rtt', 'RTT (min)'],
    ['queue', 'one-way queueing delay'], ['loss', 'link loss (peer-seen)'], ['pmtu', 'path MTU'], ['budget', 'budget']]) {
    refs[k] = kv(grid, k, label);
  }
  const extra = el('div', 'kv');
  const charts = {};
  const rateCv = el('canvas', 'chart');
  const delayCv = el('canvas', 'chart');
  const lossCv = el('canvas', 'chart');
  card.append(head, grid, extra,
    rateCv, legend([['allowed', COLORS[0]], ['delivered', COLORS[1]], ['sent', COLORS[2]]]),
    delayCv, legend([['RTT', COLORS[0]], ['one-way queueing delay', COLORS[3]]]),
    lossCv, legend([['link loss (QUIC, per second)', COLORS[2]]]));
  charts.rate = rateCv; charts.delay = delayCv; charts.loss = lossCv;
  $('cards').append(card);
  return { card, badge, reason, labels, refs, extra, charts, budgetKey: refs.budget.parentElement };
}

function drawCards(m) {
  const seen = {};
  for (const p of m.paths) {
    seen[p.name] = true;
    const c = state.cards[p.name] || (state.cards[p.name] = makeCard(p.name));
    c.card.className = 'card ' + p.state;
    c.badge.textContent = p.state;
    c.badge.className = 'badge state ' + p.state;
    c.reason.textContent = p.reason && p.reason.toUpperCase() !== p.state ? '(' + p.reason + ')' : '';
    c.labels.textContent = Object.entries(p.labels || {}).map(([k, v]) => k + '=' + v).join(' ');
    const r = c.refs;
    setNum(r, 'allowed', fmtRate(p.allowed_bps));
    setNum(r, 'delivered', fmtRate(p.delivered_bps));
    setNum(r, 'sent', fmtRate(p.sent_bps));
    setNum(r, 'received', fmtRate(p.in_bps));
    setNum(r, 'rtt', fmtMs(p.rtt_ms), '(' + fmtMs(p.min_rtt_ms) + ')');
    setNum(r, 'queue', fmtMs(p.queue_delay_ms));
    setNum(r, 'loss', fmtPct(p.link_loss), '(' + fmtPct(p.peer_loss) + ')');
    setNum(r, 'pmtu', p.pmtu ? p.pmtu + ' B' : '–', p.pmtu_state || '');
    drawBudget(c, p);
    const h = state.hist[p.name];
    if (h) {
      drawChart(c.charts.rate, [{ data: h.allowed }, { data: h.delivered }, { data: h.sent, width: 1 }], fmtRate);
      drawChart(c.charts.delay, [{ data: h.rtt }, { data: h.queue, color: COLORS[3] }], fmtMs);
      drawChart(c.charts.loss, [{ data: h.loss, color: COLORS[2] }], fmtPct, 0.01);
    }
  }
  for (const name of Object.keys(state.cards)) {
    if (!seen[name]) { state.cards[name].card.remove(); delete state.cards[name]; }
  }
}

// drawBudget shows the budget when the path has one, and any other
// budget_* field of the status report (a projection, when the daemon
// reports one) under it.
function drawBudget(c, p) {
  const raw = p.raw || {};
  const u = p.usage;
  c.extra.textContent = '';
  if (u && u.budget_bytes > 0) {
    c.budgetKey.hidden = false;
    setNum(c.refs, 'budget', fmtBytes(u.used_bytes) + ' of ' + fmtBytes(u.budget_bytes), fmtPct(u.share) + ' (' + u.budget + ', ' + (u.direction || 'both') + ')');
    const d = el('div');
    d.append(el('span', 'k', 'projected at the period\'s end (' + (u.period_end || '').slice(0, 10) + ')'));
    d.append(el('span', 'num', fmtBytes(u.projected_bytes)), el('span', 'sub' + (u.projected_share > 1 ? ' err' : ''), ' ' + fmtPct(u.projected_share)));
    c.extra.append(d);
    const bar = el('div', 'bar' + (u.projected_share > 1 ? ' hot' : ''));
    const fill = el('span');
    fill.style.width = Math.min(100, 100 * (u.share || 0)) + '%';
    bar.append(fill);
    c.extra.append(bar);
    return;
  }
  if (u && u.period) {
    c.budgetKey.hidden = false;
    setNum(c.refs, 'budget', 'none', 'this period: up ' + fmtBytes(u.period.up_bytes) + ', down ' + fmtBytes(u.period.down_bytes));
    return;
  }
  c.budgetKey.hidden = !(p.budget_bytes > 0);
  if (p.budget_bytes > 0) {
    setNum(c.refs, 'budget', fmtBytes(p.budget_used_bytes) + ' of ' + fmtBytes(p.budget_bytes), 'this ' + (p.budget_period || 'period'));
  }
  for (const [k, v] of Object.entries(raw)) {
    if (!k.startsWith('budget_') || ['budget_bytes', 'budget_used_bytes', 'budget_period'].includes(k)) continue;
    const d = el('div');
    d.append(el('span', 'k', k.replace(/_/g, ' ')));
    d.append(el('span', 'num', typeof v === 'number' && /bytes/.test(k) ? fmtBytes(v) : typeof v === 'object' ? JSON.stringify(v) : String(v)));
    c.extra.append(d);
  }
}

function drawRules(m) {
  const root = $('rules');
  root.textContent = '';
  root.append(el('h2', '', 'Rules'));
  const r = m.rules;
  if (!r) { root.append(el('p', 'muted', 'No rule file: every packet takes the scheduler\'s path.')); return; }
  if (r.file) {
    root.append(el('p', '', r.file + ' · version ' + r.version + ' · ' + r.rules + ' rules · ' + fmtInt(r.reloads) + ' reloads, ' + fmtInt(r.reload_failures) + ' rejected'));
    if (r.last_error) root.append(el('p', 'err', 'last rejected reload: ' + r.last_error));
  }
  const t = el('table');
  const hr = el('tr');
  for (const h of ['rule', 'packets, last minute', 'bytes, last minute', 'packets, this set', 'bytes, this set']) hr.append(el('th', '', h));
  t.append(hr);
  for (const h of r.hits || []) {
    const tr = el('tr');
    tr.append(el('td', '', h.id), el('td', '', fmtInt(h.last_min)), el('td', '', fmtBytes(h.bytes_last_min)),
      el('td', '', fmtInt(h.total)), el('td', '', fmtBytes(h.bytes)));
    t.append(tr);
  }
  root.append(t);
  root.append(el('p', 'muted', 'Video frames of which a send queue dropped a packet: ' + fmtInt(m.bond.frames_hit) + ' (bond strip).'));
}

function drawEvents(root, events, title) {
  root.textContent = '';
  root.append(el('h2', '', title));
  if (!events || !events.length) { root.append(el('p', 'muted', 'Nothing yet: path state changes, MTU changes, rule reloads and fleet moves appear here.')); return; }
  const ul = el('ul', 'events');
  for (const e of events) {
    const li = el('li');
    const t = el('time', '', fmtTime(e.t));
    li.append(t, el('span', 'kind', e.kind), ' ');
    if (e.edge && !state.edge && state.role === 'concentrator') li.append(el('b', '', e.edge + ' '));
    if (e.path) li.append(el('b', '', e.path + ': '));
    li.append(el('span', e.text.includes('rejected') ? 'err' : '', e.text));
    ul.append(li);
  }
  root.append(ul);
}

// ---- concentrator view ----------------------------------------------------

const SORTS = [['edge', 'edge'], ['loss', 'e2e loss'], ['linkloss', 'link loss'], ['rate', 'rate'], ['paths', 'paths up']];

function setupFleet() {
  const sorts = $('sorts');
  for (const [k, label] of SORTS) {
    const b = el('button', '', label);
    b.type = 'button';
    b.dataset.sort = k;
    b.addEventListener('click', () => {
      const f = state.fleet;
      if (f.sort === k) f.desc = !f.desc; else { f.sort = k; f.desc = k !== 'edge'; }
      f.page = 0;
      connect();
    });
    sorts.append(b);
  }
  let timer = 0;
  $('filter').addEventListener('input', (e) => {
    clearTimeout(timer);
    timer = setTimeout(() => { state.fleet.q = e.target.value.trim().slice(0, 64); state.fleet.page = 0; connect(); }, 300);
  });
  $('prev').addEventListener('click', () => { if (state.fleet.page > 0) { state.fleet.page--; connect(); } });
  $('next').addEventListener('click', () => { if ((state.fleet.page + 1) * state.fleet.size < (state.fleet.matched || 0)) { state.fleet.page++; connect(); } });
}

function onFleet(m) {
  state.role = m.role;
  $('edge').hidden = true;
  $('fleet').hidden = false;
  $('back').hidden = true;
  $('who').textContent = 'concentrator · ' + m.version + ' · up ' + fmtDur(m.uptime_s) + ' · ' + m.up + ' of ' + m.total + ' edges up';
  state.fleet.matched = m.matched;
  for (const b of $('sorts').children) b.className = b.dataset.sort === m.sort ? 'on' : '';
  const lo = m.matched ? m.page * m.size + 1 : 0;
  $('pageinfo').textContent = lo + '–' + Math.min((m.page + 1) * m.size, m.matched) + ' of ' + m.matched + (m.q ? ' matching' : '');
  const tb = $('edges').tBodies[0];
  tb.textContent = '';
  for (const r of m.rows) {
    const tr = el('tr', r.up ? '' : 'down');
    const a = el('a', '', r.edge);
    a.href = '?edge=' + encodeURIComponent(r.edge);
    const td0 = el('td');
    td0.append(a);
    const tdp = el('td');
    for (const p of r.paths) {
      const sp = el('span', 'sp');
      sp.title = p.name + ': ' + p.state + (p.reason ? ' (' + p.reason + ')' : '');
      const cv = el('canvas', 'spark');
      sp.append(el('span', 'dot ' + p.state), p.name, cv);
      tdp.append(sp);
      drawSpark(cv, p.spark);
    }
    tr.append(td0, tdp, el('td', '', fmtRate(r.in_bps)), el('td', '', fmtRate(r.out_bps)), el('td', '', fmtPct(r.e2e_loss)),
      el('td', '', fmtPct(r.link_loss)), el('td', '', fmtDur(r.uptime_s)), el('td', 'muted', (r.addresses || []).join(' ')));
    tb.append(tr);
  }
  drawBGP(m);
  drawEvents($('fevents'), m.events, 'Events');
}

function drawBGP(m) {
  const root = $('bgp');
  root.textContent = '';
  root.append(el('h2', '', 'BGP'));
  const b = m.bgp;
  if (!b) { root.append(el('p', 'muted', 'No BGP speaker (concentrator.bgp is not set).')); }
  else {
    const st = b.draining ? 'draining' : b.running ? 'running' : 'stopped';
    root.append(el('p', '', st + ' · ' + b.edges + ' edges · ' + b.prefixes + ' prefixes announced · ' + fmtInt(b.announced_total) + ' announced, ' + fmtInt(b.withdrawn_total) + ' withdrawn, ' + fmtInt(b.errors) + ' errors in total'));
    const t = el('table');
    const hr = el('tr');
    for (const h of ['neighbour', 'AS', 'state', 'up for', 'drops', 'last error']) hr.append(el('th', '', h));
    t.append(hr);
    for (const n of b.neighbors || []) {
      const tr = el('tr');
      tr.append(el('td', '', n.address), el('td', '', String(n.as)), el('td', '', n.state), el('td', '', fmtDur(n.uptime_ns / 1e9)),
        el('td', '', fmtInt(n.drops)), el('td', 'err', n.last_error || ''));
      t.append(tr);
    }
    root.append(t);
  }
  root.append(el('p', 'muted', 'Packets with no edge: ' + fmtInt(m.no_route) + ' · refused connections: ' + fmtInt(m.auth_failures)));
}

// ---- start ----------------------------------------------------------------

setupFleet();
connect();
