// The dashboard: what agents are doing, and a person's yes or no.
import { Daemon } from './rpc.js';
import { el, fill, dl, short, clock } from './dom.js';
import { drawBars } from './chart.js';
import { RunningTools } from './tools.js';
import { Directory, principalName, principalText } from './who.js';

const TOKEN_KEY = 'car.host_token';
const SUPERVISE_KEY = 'car.supervise';
const POLL_MS = 5000;        // metrics, connections, policies: nothing faster
const MAX_EVENTS = 500;      // rows kept in the log
const MAX_PROPOSALS = 50;    // finished proposals kept
const BUCKET_MS = 10000;     // chart: events per 10 s
const BUCKETS = 30;          // over 5 minutes
// The link template to a proposal's trace (otel_trace_url), naming
// {trace_id}; without it a traced proposal shows its trace id only.
const TRACE_URL = document.querySelector('meta[name="car-trace-url"]')?.content || '';

const $ = (id) => document.getElementById(id);

const state = {
  daemon: null,
  identity: null,        // the daemon instance the page last saw (pid, started_at)
  cursor: 0,             // the last events.event cursor seen
  approvals: new Map(),  // id → host approval (pending)
  intents: new Map(),    // id → supervision intent
  agents: new Map(),
  proposals: new Map(),  // proposal id → view model
  events: [],            // newest last
  seen: new Set(),       // event seqs held
  kinds: new Set(),
  paused: false,
  unseen: 0,
  buckets: [],           // [{t, n}] event counts
  supervising: false,
  who: new Directory(),  // who each connection the page heard of is
  loaded: new Set(),     // the panels that have had their first data
  pollTimer: 0,
  healthTimer: 0,
  rosterTimer: 0,
  tools: null,           // the running tools panel
  toolsBusy: false,      // a tools.handles call is in flight
  toolsAgain: false,     // and another was asked for meanwhile
};

// takeToken moves the token from the fragment to sessionStorage and out of
// the address bar and history.
function takeToken() {
  const frag = new URLSearchParams(location.hash.slice(1));
  const t = frag.get('host_token');
  if (t) {
    sessionStorage.setItem(TOKEN_KEY, t);
    history.replaceState(null, '', location.pathname + location.search);
  }
  return sessionStorage.getItem(TOKEN_KEY);
}

function showHelp(reason) {
  $('main').hidden = true;
  $('help').hidden = false;
  $('help-reason').textContent = reason;
  $('help-retry').hidden = !sessionStorage.getItem(TOKEN_KEY);
}

function setStatus(kind, text) {
  const s = $('status');
  s.textContent = text;
  s.className = `status ${kind}`;
  if (kind !== 'live') delete document.body.dataset.ready;
}

function wsURL() {
  return `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/`;
}

function start() {
  const token = takeToken();
  if (!token) {
    setStatus('down', 'Not signed in');
    showHelp('This page was opened without a host token.');
    return;
  }
  state.daemon = new Daemon(wsURL(), token, {
    onStatus: setStatus,
    onReady: ready,
    onNotify: notify,
    onRefused: (msg) => {
      setStatus('down', 'Token refused');
      showHelp(`The daemon refused this page's host token (${msg}). It has probably restarted and minted a new one: run car-server dashboard again for a fresh link.`);
    },
  });
  state.tools = new RunningTools({ list: $('tools'), count: $('tools-count'), empty: $('tools-empty'), call, refresh: refreshTools, who: (id) => state.who.conn(id) });
  wireControls();
  $('main').hidden = false; // each panel says it is loading until its first data
  state.daemon.start();
}

const call = (method, params) => state.daemon.call(method, params);

// loaded marks a panel as holding its first data: it stops saying it is
// loading.
function loaded(panel) {
  if (state.loaded.has(panel)) return;
  state.loaded.add(panel);
  $(panel).removeAttribute('aria-busy');
}

// ready runs after every (re)connection: subscribe again, re-read what a
// subscription does not replay, and backfill the event log's gap. The
// polled panels are read at once, beside the subscriptions.
async function ready() {
  $('help').hidden = true;
  $('main').hidden = false;
  const polled = poll();
  const snap = await call('host.subscribe');
  const id = snap.identity || {};
  const same = state.identity && state.identity.pid === id.pid && state.identity.started_at === id.started_at;
  if (!same) resetEvents();
  state.identity = id;
  $('identity').textContent = `${id.version || ''} · pid ${id.pid ?? '?'} · ${id.home || ''} · approvals by ${id.approver_role || 'any'}`;
  setApprovals(snap.approvals);
  setAgents(snap.agents);

  const sub = await call('events.subscribe', {});
  if (same && state.cursor < sub.cursor) {
    await backfill(state.cursor, sub.cursor + 1);
  } else if (!same) {
    const hist = await call('events.query', { limit: 200 });
    for (const e of (hist.events || []).slice().reverse()) ingest(e);
  }
  state.cursor = Math.max(state.cursor, sub.cursor);

  if (sessionStorage.getItem(SUPERVISE_KEY)) {
    await supervise(JSON.parse(sessionStorage.getItem(SUPERVISE_KEY)));
  } else {
    renderSupervising();
  }
  renderEvents();
  renderProposals();
  loaded('proposals-panel');
  loaded('events-panel');
  await call('tools.stream.subscribe');
  await polled;
  document.body.dataset.ready = 'true';
}

function resetEvents() {
  state.cursor = 0;
  state.events = [];
  state.seen.clear();
  state.proposals.clear();
  state.intents.clear();
  renderIntents();
}

// backfill reads the events after `after` and before `before` that the feed
// dropped.
async function backfill(after, before) {
  const got = await call('events.query', { after_cursor: after, limit: 10000 });
  for (const e of (got.events || []).slice().reverse()) {
    if (e.seq < before) ingest(e);
  }
}

function notify(method, p) {
  switch (method) {
    case 'host.event': hostEvent(p); break;
    case 'events.event': feedEvent(p); break;
    case 'supervision.intent': intentArrived(p); break;
    case 'tools.stream.event': state.tools.event(p); break;
  }
}

async function hostEvent(ev) {
  if (ev.dropped > 0) {
    const [ap, ag] = await Promise.all([call('host.approvals'), call('host.agents')]);
    setApprovals(ap.approvals);
    setAgents(ag);
    return;
  }
  const p = ev.payload || {};
  if (p.approval) {
    state.who.learn(p.approval.requested_by);
    if (p.approval.status === 'pending') state.approvals.set(p.approval.id, p.approval);
    else state.approvals.delete(p.approval.id);
    renderApprovals();
  }
  if (p.agent) {
    if (ev.kind === 'agent.unregistered') state.agents.delete(p.agent.id);
    else state.agents.set(p.agent.id, p.agent);
    renderAgents();
  }
}

async function feedEvent(p) {
  if (p.missed && p.missed.count > 0) {
    try {
      await backfill(p.missed.after_cursor, p.cursor);
    } catch { /* the next reconnect backfills again */ }
  }
  ingest(p.event);
  state.cursor = Math.max(state.cursor, p.cursor);
  renderEvents();
  renderProposals();
  renderChart();
  if (p.event?.kind === 'proposal_finished' || p.event?.kind === 'proposal_rejected') refreshHealthSoon();
  if (p.event?.kind === 'tool_stream_started' || p.event?.kind === 'tool_stream_ended') refreshTools();
  if (p.event?.data?.reviewer && !state.who.knows(p.event.data.reviewer)) refreshRosterSoon();
}

// refreshRosterSoon re-reads server.connections once a decision names a
// reviewer the page has not seen, at most once a second, so that a
// reviewer still connected is named by its principal.
function refreshRosterSoon() {
  if (state.rosterTimer) return;
  state.rosterTimer = setTimeout(async () => {
    try {
      renderConnections(await call('server.connections'));
    } catch { /* the next poll tries again */ }
    state.rosterTimer = 0;
  }, 1000);
}

// refreshHealthSoon re-reads metrics.summary once a proposal ends, at most
// once a second, so the counts follow the work without polling faster.
function refreshHealthSoon() {
  if (state.healthTimer) return;
  state.healthTimer = setTimeout(async () => {
    try {
      renderHealth(await call('metrics.summary'));
    } catch { /* the next poll tries again */ }
    state.healthTimer = 0;
  }, 1000);
}

// ingest adds one event to the log and to the proposal it belongs to.
function ingest(e) {
  if (!e || state.seen.has(e.seq)) return;
  state.seen.add(e.seq);
  state.events.push(e);
  if (state.events.length > 1 && state.events[state.events.length - 2].seq > e.seq) state.events.sort((a, b) => a.seq - b.seq);
  while (state.events.length > MAX_EVENTS) state.seen.delete(state.events.shift().seq);
  if (state.paused) state.unseen++;
  if (!state.kinds.has(e.kind)) {
    state.kinds.add(e.kind);
    const sel = $('filter-kind');
    const opts = [...state.kinds].sort();
    const cur = sel.value;
    fill(sel, el('option', { value: '' }, 'all'), opts.map((k) => el('option', { value: k }, k)));
    sel.value = cur;
  }
  count(Date.parse(e.timestamp) || Date.now());
  track(e);
  if (e.kind === 'supervision_decision' && e.data?.intent_id) {
    if (state.intents.delete(e.data.intent_id)) renderIntents();
  }
}

function count(t) {
  const b = Math.floor(t / BUCKET_MS);
  const last = state.buckets[state.buckets.length - 1];
  if (last && last.t === b) last.n++;
  else if (!last || last.t < b) state.buckets.push({ t: b, n: 1 });
  state.buckets = state.buckets.filter((x) => x.t > Math.floor(Date.now() / BUCKET_MS) - BUCKETS);
}

const FINAL = { action_succeeded: 'succeeded', action_failed: 'failed', action_rejected: 'rejected', action_skipped: 'skipped' };

function track(e) {
  if (!e.proposal_id) return;
  let p = state.proposals.get(e.proposal_id);
  if (e.kind === 'proposal_received' && p && p.status !== 'running') {
    state.proposals.delete(e.proposal_id);
    p = undefined;
  }
  if (!p) {
    p = { id: e.proposal_id, connection: e.connection, source: '', trace: '', status: 'running', started: e.timestamp, finished: '', duration: null, actions: new Map(), note: '', rejection: null };
    state.proposals.set(e.proposal_id, p);
    while (state.proposals.size > MAX_PROPOSALS) {
      const old = [...state.proposals.values()].find((x) => x.status !== 'running');
      if (!old) break;
      state.proposals.delete(old.id);
    }
  }
  const d = e.data || {};
  const act = (id) => {
    if (!p.actions.has(id)) p.actions.set(id, { id, tool: '', status: 'pending', duration: null, error: '' });
    return p.actions.get(id);
  };
  switch (e.kind) {
    case 'proposal_received':
      p.source = d.source || '';
      p.trace = /^[0-9a-f]{32}$/.test(d.trace_id || '') ? d.trace_id : '';
      break;
    case 'action_started': { const a = act(e.action_id); a.status = 'running'; a.tool = d.tool || d.type || ''; break; }
    case 'approval_waiting':
      if (e.action_id) {
        const a = act(e.action_id);
        a.status = 'waiting for approval';
        a.tool = a.tool || d.tool || '';
      }
      break;
    // A person's no: who said it, and why. The first one names the proposal.
    case 'approval_settled':
    case 'supervision_decision':
      if ((d.decision === 'rejected' || d.decision === 'deny') && !p.rejection) p.rejection = { by: d.reviewer || '', reason: d.reason || '' };
      break;
    case 'proposal_rejected':
      p.status = 'rejected';
      if (!p.rejection) p.note = d.reason || '';
      p.finished = e.timestamp;
      break;
    case 'proposal_cancelled': p.note = `cancelled: ${d.reason || ''}`; p.cancelled = true; break;
    case 'proposal_finished':
      if (p.status === 'running') p.status = finalStatus(p, d);
      if (p.status === 'rejected' && !p.rejection && !p.note) p.note = [...p.actions.values()].find((a) => a.status === 'rejected' && a.error)?.error || '';
      p.finished = e.timestamp;
      p.duration = d.duration_ms;
      break;
    default:
      if (FINAL[e.kind] && e.action_id) {
        const a = act(e.action_id);
        a.status = FINAL[e.kind];
        a.tool = a.tool || d.tool || d.type || '';
        a.duration = d.duration_ms;
        a.error = d.error || '';
      }
  }
}

// finalStatus is how a finished proposal ended: cancelled; failed when an
// action failed; rejected when an action was rejected (by a person, a
// policy or a gate) and none failed; else succeeded.
function finalStatus(p, d) {
  const acts = [...p.actions.values()];
  if (p.cancelled) return 'cancelled';
  if (acts.some((a) => a.status === 'failed')) return 'failed';
  if (d.rejected > 0 || p.rejection || acts.some((a) => a.status === 'rejected')) return 'rejected';
  return 'succeeded';
}

// rejectionText says who turned a proposal down and why.
function rejectionText(p) {
  if (!p.rejection) return '';
  const by = state.who.reviewer(p.rejection.by) || 'a reviewer';
  return `rejected by ${by}${p.rejection.reason ? `: ${p.rejection.reason}` : ''}`;
}

function intentArrived(p) {
  if (p.dropped > 0) {
    refreshIntents();
    return;
  }
  state.intents.set(p.id, p);
  renderIntents();
}

async function refreshIntents() {
  const got = await call('supervision.pending');
  state.intents = new Map((got.intents || []).map((i) => [i.id, i]));
  renderIntents();
}

// refreshTools re-reads tools.handles, one call at a time: a call asked
// for while one is in flight runs once after it.
async function refreshTools() {
  if (state.toolsBusy) {
    state.toolsAgain = true;
    return;
  }
  state.toolsBusy = true;
  try {
    do {
      state.toolsAgain = false;
      state.tools.set((await call('tools.handles')).handles);
    } while (state.toolsAgain);
  } catch { /* the next poll tries again */ } finally {
    state.toolsBusy = false;
  }
}

async function poll() {
  clearTimeout(state.pollTimer);
  try {
    const [m, conns, pol] = await Promise.all([call('metrics.summary'), call('server.connections'), call('policy.list', {}), refreshTools()]);
    renderHealth(m);
    renderConnections(conns);
    renderPolicies(pol);
    loaded('tools-panel');
  } catch { /* the status line says why; the next poll tries again */ }
  renderChart();
  state.pollTimer = setTimeout(() => { if (state.daemon.connected) poll(); }, POLL_MS);
}

// ---- approvals ----

function setApprovals(list) {
  for (const a of list || []) state.who.learn(a.requested_by);
  state.approvals = new Map((list || []).filter((a) => a.status === 'pending').map((a) => [a.id, a]));
  renderApprovals();
  loaded('approvals-panel');
}

function renderApprovals() {
  const ol = $('approvals');
  const want = [...state.approvals.values()].sort((a, b) => String(b.created_at).localeCompare(String(a.created_at)));
  $('approvals-count').textContent = want.length ? `(${want.length})` : '';
  $('approvals-empty').hidden = want.length > 0;
  syncCards(ol, want, approvalCard);
}

// syncCards keeps one card per item, in order, reusing the cards already
// shown so that a half-typed reason survives an update.
function syncCards(ol, items, make) {
  const have = new Map([...ol.children].map((li) => [li.dataset.id, li]));
  const keep = new Set(items.map((i) => i.id));
  for (const [id, li] of have) if (!keep.has(id)) li.remove();
  let prev = null;
  for (const it of items) {
    let li = have.get(it.id);
    if (!li) li = make(it);
    const want = prev ? prev.nextSibling : ol.firstChild;
    if (want !== li) ol.insertBefore(li, want);
    prev = li;
  }
}

// whoAsked names the principal behind an approval (requested_by) as
// car-server approvals watch does: an agent by its id and name, a plain
// client by the name it gave in server.handshake, or the host, each with
// its connection; a row that names nobody, by the connection its context
// names, else as the daemon's own.
function whoAsked(a) {
  if (a.requested_by) return principalText(a.requested_by);
  const conn = a.context?.connection;
  return conn ? state.who.conn(conn) : 'the daemon';
}

function approvalCard(a) {
  const c = a.context || {};
  const li = el('li', { class: `card approval tier-${c.required_tier || ''}`, 'data-id': a.id });
  const signals = Array.isArray(c.signals) ? c.signals : [];
  li.append(
    el('h3', {}, c.tool ? `${c.tool}` : a.title),
    dl([
      ['asked by', whoAsked(a)],
      ['request', a.title],
      ['tier', c.required_tier ? `${c.required_tier} (granted ${c.granted_tier || '?'})` : ''],
      ['reversibility', c.reversibility],
      ['proposal', c.proposal_id],
      ['action', Array.isArray(c.action_ids) ? c.action_ids.join(', ') : c.action_id],
      ['connection', c.connection],
      ['agent', a.agent_id],
      ['asked at', clock(a.created_at)],
    ]),
  );
  if (signals.length) li.append(el('ul', { class: 'chips', 'aria-label': 'signals' }, signals.map((s) => el('li', {}, typeof s === 'string' ? s : JSON.stringify(s)))));
  if (a.description) li.append(el('p', {}, a.description));
  if (c.preview !== undefined) li.append(el('pre', { class: 'preview', 'aria-label': 'parameters (redacted)' }, JSON.stringify(c.preview, null, 2)));
  const err = el('p', { class: 'error', role: 'alert' });
  if (a.client_id) {
    li.append(el('p', { class: 'muted' }, 'Raised by a client: only that client can resolve it.'));
    return li;
  }
  const reason = el('input', { class: 'reason', 'aria-label': 'reason for denying', placeholder: 'reason (required to deny)', autocomplete: 'off' });
  const approve = el('button', { type: 'button', class: 'approve' }, 'Approve');
  const deny = el('button', { type: 'button', class: 'deny', disabled: true }, 'Deny');
  reason.addEventListener('input', () => { deny.disabled = reason.value.trim() === ''; });
  const decide = async (approved) => {
    approve.disabled = deny.disabled = true;
    err.textContent = '';
    try {
      await call('host.resolve_approval', { approval_id: a.id, approved, notes: approved ? reason.value.trim() : reason.value.trim() });
      state.approvals.delete(a.id);
      renderApprovals();
    } catch (e) {
      err.textContent = e.message;
      approve.disabled = false;
      deny.disabled = reason.value.trim() === '';
    }
  };
  approve.addEventListener('click', () => decide(true));
  deny.addEventListener('click', () => decide(false));
  reason.addEventListener('keydown', (ev) => { if (ev.key === 'Enter' && !deny.disabled) decide(false); });
  li.append(el('div', { class: 'actions' }, approve, el('label', {}, 'Reason', reason), deny), err);
  return li;
}

// ---- supervision ----

async function supervise(filter) {
  await call('supervision.subscribe', { filter });
  state.supervising = true;
  sessionStorage.setItem(SUPERVISE_KEY, JSON.stringify(filter));
  renderSupervising();
  await refreshIntents();
}

function renderSupervising() {
  const b = $('supervise-toggle');
  b.textContent = state.supervising ? 'Stop supervising' : 'Supervise';
  b.setAttribute('aria-pressed', String(state.supervising));
  $('supervise-note').textContent = state.supervising
    ? 'Supervising: matching proposals wait here for Allow, Deny or Escalate.'
    : 'Not supervising. While you supervise, every matching proposal waits for your Allow, Deny or Escalate.';
}

function renderIntents() {
  const list = [...state.intents.values()].sort((a, b) => String(b.created_at).localeCompare(String(a.created_at)));
  $('intents-count').textContent = list.length ? `(${list.length})` : '';
  syncCards($('intents'), list, intentCard);
}

function intentCard(i) {
  const li = el('li', { class: 'card intent', 'data-id': i.id });
  li.append(
    el('h3', {}, `proposal ${i.proposal_id}`),
    dl([['from', i.source || i.session_id], ['reversibility', i.reversibility], ['parked at', clock(i.created_at)]]),
    el('ul', { class: 'chips', 'aria-label': 'actions' }, (i.actions || []).map((a) =>
      el('li', {}, `${a.id}: ${a.tool || a.action_type} (${a.reversibility}) keys ${(a.parameter_keys || []).join(', ') || '—'}`))),
  );
  const reason = el('input', { class: 'reason', 'aria-label': 'reason for deny or escalate', placeholder: 'reason (deny, escalate)', autocomplete: 'off' });
  const allow = el('button', { type: 'button', class: 'allow' }, 'Allow');
  const deny = el('button', { type: 'button', class: 'deny', disabled: true }, 'Deny');
  const esc = el('button', { type: 'button', class: 'escalate', disabled: true }, 'Escalate');
  const err = el('p', { class: 'error', role: 'alert' });
  reason.addEventListener('input', () => { deny.disabled = esc.disabled = reason.value.trim() === ''; });
  const decide = async (kind) => {
    err.textContent = '';
    try {
      await call('supervision.decide', { intent_id: i.id, decision: { kind, reason: reason.value.trim() || undefined } });
      state.intents.delete(i.id);
      renderIntents();
    } catch (e) {
      err.textContent = e.message;
    }
  };
  allow.addEventListener('click', () => decide('allow'));
  deny.addEventListener('click', () => decide('deny'));
  esc.addEventListener('click', () => decide('escalate'));
  li.append(el('div', { class: 'actions' }, allow, el('label', {}, 'Reason', reason), deny, esc), err);
  return li;
}

// ---- proposals ----

function renderProposals() {
  const list = [...state.proposals.values()].reverse().sort((a, b) => (a.status === 'running' ? 0 : 1) - (b.status === 'running' ? 0 : 1));
  $('proposals-empty').hidden = list.length > 0;
  const ol = $('proposals');
  syncCards(ol, list, (p) => el('li', { class: 'card proposal', 'data-id': p.id }));
  for (const p of list) {
    const li = ol.querySelector(`li[data-id="${CSS.escape(p.id)}"]`);
    if (li) proposalCard(li, p);
  }
}

function proposalCard(li, p) {
  li.className = `card proposal ${p.status}`;
  li.dataset.status = p.status;
  const rows = [...p.actions.values()].map((a) =>
    el('tr', {}, el('td', {}, a.id), el('td', {}, a.tool), el('td', { class: `st-${a.status.split(' ')[0]}` }, a.status),
      el('td', {}, a.duration == null ? '' : `${Number(a.duration).toFixed(1)} ms`)));
  const head = el('h3', {}, `${p.id} `, el('span', { class: 'muted' }, p.status));
  const rejected = p.status === 'rejected' ? rejectionText(p) : '';
  const parts = [head];
  if (rejected) parts.push(el('p', { class: 'verdict', title: `recorded as ${p.rejection.by}` }, rejected));
  parts.push(
    dl([['from', `${state.who.conn(p.connection)}${p.source && p.source !== 'unknown' ? ` (${p.source})` : ''}`], ['started', clock(p.started)],
      ['took', p.duration == null ? '' : `${Number(p.duration).toFixed(1)} ms`], ['trace', traceLink(p.trace)], ['note', p.note]]),
    el('div', { class: 'scroll' }, el('table', {}, el('thead', {}, el('tr', {}, el('th', {}, 'action'), el('th', {}, 'tool'), el('th', {}, 'status'), el('th', {}, 'duration'))), el('tbody', {}, rows))));
  let keepFocus = false;
  if (p.status === 'running') {
    const old = li.querySelector('button.cancel');
    keepFocus = old !== null && document.activeElement === old;
    const b = old || el('button', { type: 'button', class: 'cancel', 'aria-label': `Cancel proposal ${p.id}` }, 'Cancel');
    if (!old) {
      b.addEventListener('click', async () => {
        b.disabled = true;
        try {
          const r = await call('proposal.cancel', { proposal_id: p.id, reason: 'cancelled from the dashboard' });
          if (!r.cancelled) p.note = 'it had already finished';
        } catch (e) {
          p.note = e.message;
        }
        renderProposals();
      });
    }
    parts.push(el('div', { class: 'actions' }, b));
  }
  fill(li, parts);
  if (keepFocus) li.querySelector('button.cancel').focus();
}

// traceLink is a proposal's trace: a link to it through otel_trace_url,
// else its id; '' when the proposal was not traced.
function traceLink(id) {
  if (!id) return '';
  if (!TRACE_URL) return el('code', { class: 'trace-id' }, id);
  const href = TRACE_URL.split('{trace_id}').join(id);
  return el('a', { class: 'trace', href, target: '_blank', rel: 'noopener noreferrer', title: `trace ${id}` }, short(id, 16));
}

// ---- health, roster, policies ----

function pct(x) { return typeof x === 'number' ? `${(x * 100).toFixed(1)} %` : '—'; }
function ms(x) { return typeof x === 'number' ? `${x.toFixed(1)} ms` : '—'; }

function renderHealth(m) {
  const items = [
    ['success rate', pct(m.success_rate)],
    ['proposals', m.proposals_received],
    ['actions ok', m.actions_succeeded],
    ['actions failed', m.actions_failed],
    ['rejections', (m.gate_rejections || 0) + (m.actions_rejected || 0)],
    ['cancellations', m.tool_cancellations],
    ['policy violations', m.policy_violations],
    ['callback p50', ms(m.callback_p50_ms)],
    ['callback p99', ms(m.callback_p99_ms)],
  ];
  fill($('health'), items.map(([k, v]) => el('div', {}, el('dt', {}, k), el('dd', {}, String(v ?? '—')))));
  loaded('health-panel');
}

function renderChart() {
  const now = Math.floor(Date.now() / BUCKET_MS);
  const by = new Map(state.buckets.map((b) => [b.t, b.n]));
  const values = [];
  for (let t = now - BUCKETS + 1; t <= now; t++) values.push(by.get(t) || 0);
  drawBars($('chart'), values, `events per 10 seconds, last 5 minutes; latest ${values[values.length - 1]}`);
}

// renderConnections shows each connection by its short id over its remote
// address, who it is (its principal and client, which wrap, so that a long
// client name does not widen the table) and its standing tier.
function renderConnections(r) {
  if (state.who.learnConnections(r)) renderProposals();
  const tb = $('connections').tBodies[0];
  fill(tb, (r.connections || []).map((c) => el('tr', { 'data-id': c.id },
    el('td', { title: c.id }, short(c.id), el('div', { class: 'muted' }, c.remote || '')),
    el('td', { class: 'wrap' }, c.principal ? principalName(c) : c.role, c.id === r.self ? ' (this page)' : ''),
    el('td', {}, c.tier))));
  loaded('roster-panel');
}

function setAgents(list) {
  state.agents = new Map((list || []).map((a) => [a.id, a]));
  renderAgents();
}

function renderAgents() {
  const list = [...state.agents.values()].sort((a, b) => a.name.localeCompare(b.name));
  $('agents-empty').hidden = list.length > 0;
  fill($('agents').tBodies[0], list.map((a) => el('tr', { 'data-id': a.id },
    el('td', { title: a.id }, a.name), el('td', {}, a.kind), el('td', { class: `st-${a.status}` }, a.status),
    el('td', {}, a.current_task || a.message || ''))));
}

function renderPolicies(r) {
  loaded('policies-panel');
  const groups = new Map();
  for (const p of r.policies || []) {
    if (!groups.has(p.layer)) groups.set(p.layer, []);
    groups.get(p.layer).push(p);
  }
  const host = $('policies');
  if (groups.size === 0) {
    fill(host, el('p', { class: 'muted' }, 'No policy is in force.'));
    return;
  }
  fill(host, [...groups].map(([layer, ps]) => [el('h3', {}, layer),
    el('ul', {}, ps.map((p) => el('li', {}, el('code', {}, p.name), p.description ? ` — ${p.description}` : '')))]));
}

// ---- event log ----

function renderEvents() {
  if (state.paused) {
    $('paused-note').textContent = state.unseen ? `${state.unseen} new while paused` : 'paused';
    return;
  }
  const kind = $('filter-kind').value;
  const prop = $('filter-proposal').value.trim();
  const rows = [];
  for (let i = state.events.length - 1; i >= 0 && rows.length < 200; i--) {
    const e = state.events[i];
    if (kind && e.kind !== kind) continue;
    if (prop && e.proposal_id !== prop) continue;
    rows.push(el('tr', { 'data-seq': e.seq, 'data-kind': e.kind },
      el('td', {}, e.seq), el('td', {}, clock(e.timestamp)), el('td', {}, e.kind),
      el('td', {}, e.proposal_id || ''), el('td', {}, e.action_id || ''),
      el('td', { class: 'mono' }, e.data ? JSON.stringify(e.data) : '')));
  }
  fill($('events').tBodies[0], rows);
  $('paused-note').textContent = '';
}

function wireControls() {
  $('filter-kind').addEventListener('change', renderEvents);
  $('filter-proposal').addEventListener('input', renderEvents);
  $('pause').addEventListener('click', () => {
    state.paused = !state.paused;
    state.unseen = 0;
    $('pause').textContent = state.paused ? 'Resume' : 'Pause';
    $('pause').setAttribute('aria-pressed', String(state.paused));
    renderEvents();
  });
  $('supervise-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    try {
      if (state.supervising) {
        await call('supervision.unsubscribe');
        state.supervising = false;
        sessionStorage.removeItem(SUPERVISE_KEY);
        renderSupervising();
        return;
      }
      const tools = $('supervise-tools').value.split(',').map((s) => s.trim()).filter(Boolean);
      const filter = {};
      if (tools.length) filter.tools = tools;
      if ($('supervise-rev').value) filter.min_reversibility = $('supervise-rev').value;
      await supervise(filter);
    } catch (e) {
      $('supervise-note').textContent = e.message;
    }
  });
  $('help-retry').addEventListener('click', () => {
    $('help').hidden = true;
    state.daemon.retry();
  });
}

start();
