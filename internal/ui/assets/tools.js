// The running tools panel: streaming and long-running tool handles with
// their latest progress, fed by tools.handles and tools.stream.event, each
// with a Cancel that sends tools.cancel {handle}.
import { el, fill, dl, clock } from './dom.js';

const MAX_TEXT = 200; // characters of the latest text chunk shown

// elapsed is a duration in whole seconds, minutes and hours.
function elapsed(since) {
  const s = Math.max(0, Math.floor((Date.now() - Date.parse(since)) / 1000));
  if (Number.isNaN(s)) return '';
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  if (h) return `${h} h ${m} min`;
  return m ? `${m} min ${s % 60} s` : `${s} s`;
}

export class RunningTools {
  // call sends a request to the daemon; refresh asks for tools.handles;
  // who names a connection id by its principal.
  constructor({ list, count, empty, call, refresh, who }) {
    this.who = who;
    this.list = list;
    this.count = count;
    this.empty = empty;
    this.call = call;
    this.refresh = refresh;
    this.handles = new Map(); // handle → tools.handles entry, plus text
    this.gone = new Set();    // handles seen ending, which an older reply may still list as running
    this.timer = 0;
  }

  // set replaces what is shown with a tools.handles reply; a handle keeps
  // the latest text seen on the stream.
  set(handles) {
    const next = new Map();
    const running = new Set();
    for (const h of handles || []) {
      if (h.status !== 'running') continue;
      running.add(h.handle);
      if (this.gone.has(h.handle)) continue;
      next.set(h.handle, { ...h, text: this.handles.get(h.handle)?.text || '' });
    }
    for (const id of this.gone) if (!running.has(id)) this.gone.delete(id);
    this.handles = next;
    this.render();
  }

  // event takes a tools.stream.event; a handle not yet known, or events
  // dropped before this one, ask for a fresh tools.handles.
  event(p) {
    const h = this.handles.get(p?.handle);
    if (!h || p.dropped > 0) this.refresh();
    if (!h) return;
    const c = p.chunk || {};
    h.last_chunk_at = new Date().toISOString();
    switch (c.kind) {
      case 'progress': h.progress = c; break;
      case 'text': h.text = String(c.text ?? '').slice(-MAX_TEXT); break;
      case 'done':
      case 'error':
        this.ended(p.handle);
        break;
    }
    this.render();
  }

  ended(handle) {
    this.handles.delete(handle);
    this.gone.add(handle);
  }

  render() {
    const items = [...this.handles.values()].map((h) => ({ ...h, id: h.handle }));
    this.count.textContent = items.length ? `(${items.length})` : '';
    this.empty.hidden = items.length > 0;
    const have = new Map([...this.list.children].map((li) => [li.dataset.id, li]));
    for (const [id, li] of have) if (!this.handles.has(id)) li.remove();
    let prev = null;
    for (const h of items) {
      let li = have.get(h.id);
      if (!li) li = this.card(h);
      const want = prev ? prev.nextSibling : this.list.firstChild;
      if (want !== li) this.list.insertBefore(li, want);
      prev = li;
      this.fillCard(li, h);
    }
    clearInterval(this.timer);
    this.timer = items.length ? setInterval(() => this.tick(), 1000) : 0;
  }

  // tick moves the elapsed times on.
  tick() {
    for (const li of this.list.children) {
      const h = this.handles.get(li.dataset.id);
      const span = li.querySelector('.elapsed');
      if (h && span) span.textContent = elapsed(h.started_at);
    }
  }

  // card makes a handle's card once; its Cancel button and error line
  // survive every update, so focus stays where it was.
  card(h) {
    const li = el('li', { class: 'card tool-handle running', 'data-id': h.handle, 'data-status': 'running' });
    const body = el('div', { class: 'body' });
    const err = el('p', { class: 'error', role: 'alert' });
    const b = el('button', { type: 'button', class: 'cancel', 'aria-label': `Cancel ${h.tool} (handle ${h.handle})` }, 'Cancel');
    b.addEventListener('click', async () => {
      b.disabled = true;
      err.textContent = '';
      try {
        const r = await this.call('tools.cancel', { handle: h.handle });
        if (r.cancelled) {
          this.ended(h.handle);
          this.render();
          return;
        }
        err.textContent = 'It had already ended.';
        this.refresh();
      } catch (e) {
        err.textContent = e.message;
        b.disabled = false;
      }
    });
    li.append(body, el('div', { class: 'actions' }, b), err);
    return li;
  }

  fillCard(li, h) {
    const p = h.progress;
    let now;
    if (p && typeof p.fraction === 'number') {
      const pct = `${Math.round(p.fraction * 100)} %`;
      now = el('div', { class: 'progress' },
        el('progress', { max: 1, value: p.fraction, 'aria-label': `progress of ${h.tool}` }, pct),
        el('span', { class: 'pct' }, pct), p.message ? el('span', { class: 'message' }, p.message) : null);
    } else if (h.text) {
      now = el('pre', { class: 'latest', 'aria-label': 'latest output' }, h.text);
    } else {
      now = el('p', { class: 'muted latest' }, 'No progress reported yet.');
    }
    if (p && h.text) now = [now, el('pre', { class: 'latest', 'aria-label': 'latest output' }, h.text)];
    fill(li.querySelector('.body'),
      el('h3', {}, `${h.tool} `, el('span', { class: 'muted' }, h.mode)),
      dl([
        ['owner', el('span', { title: h.owner_connection }, this.who(h.owner_connection))],
        ['proposal', h.proposal_id ? `${h.proposal_id}${h.action_id ? ` · action ${h.action_id}` : ''}` : ''],
        ['running for', el('span', { class: 'elapsed' }, elapsed(h.started_at))],
        ['last chunk', h.last_chunk_at ? clock(h.last_chunk_at) : ''],
        ['dropped', h.dropped_chunks > 0 ? `${h.dropped_chunks} chunks (buffer full)` : ''],
      ]),
      now);
  }
}
