// The page's connection to the daemon: JSON-RPC 2.0 over the WebSocket it was
// served beside, authenticated with the host token, reconnecting with backoff.

const FIRST_DELAY_MS = 250;
const MAX_DELAY_MS = 8000;

export class RPCError extends Error {
  constructor(err) {
    super(err?.message || 'the daemon answered with an error');
    this.code = err?.code;
  }
}

export class Daemon {
  // handlers: onStatus(state, text), onReady(), onNotify(method, params),
  // onRefused(message).
  constructor(url, token, handlers) {
    this.url = url;
    this.token = token;
    this.h = handlers;
    this.ws = null;
    this.nextID = 1;
    this.pending = new Map();
    this.failures = 0;
    this.stopped = false;
    this.timer = 0;
  }

  start() { this.connect(); }

  // retry starts over after a refusal (the person may have pinned the token).
  retry() {
    this.stopped = false;
    this.failures = 0;
    clearTimeout(this.timer);
    this.connect();
  }

  connect() {
    this.h.onStatus('connecting', 'Connecting…');
    let ws;
    try {
      ws = new WebSocket(this.url);
    } catch (e) {
      this.scheduleReconnect(String(e));
      return;
    }
    this.ws = ws;
    ws.onopen = () => this.authenticate(ws);
    ws.onmessage = (m) => this.receive(m.data);
    ws.onclose = (ev) => {
      if (this.ws !== ws) return;
      this.ws = null;
      for (const p of this.pending.values()) p.reject(new Error('the connection to the daemon closed'));
      this.pending.clear();
      if (!this.stopped) this.scheduleReconnect(ev.reason);
    };
  }

  async authenticate(ws) {
    try {
      await this.call('session.auth', { host_token: this.token });
    } catch (e) {
      if (this.ws !== ws) return;
      this.stopped = true;
      ws.close();
      this.h.onRefused(e.message);
      return;
    }
    try {
      await this.call('server.handshake', { protocol_version: 2, client_version: 'dashboard' });
      this.failures = 0;
      this.h.onStatus('live', 'Live');
      await this.h.onReady();
    } catch (e) {
      if (this.ws === ws) ws.close(4000, 'setup failed');
    }
  }

  scheduleReconnect(why) {
    const delay = Math.min(MAX_DELAY_MS, FIRST_DELAY_MS * 2 ** this.failures);
    this.failures++;
    const secs = (delay / 1000).toFixed(delay < 1000 ? 2 : 0);
    this.h.onStatus('down', `Disconnected${why ? ` (${why})` : ''}: reconnecting in ${secs} s…`);
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.connect(), delay);
  }

  receive(data) {
    let msg;
    try {
      msg = JSON.parse(data);
    } catch {
      return;
    }
    if (msg.method && msg.id === undefined) {
      this.h.onNotify(msg.method, msg.params);
      return;
    }
    if (msg.method) { // a request to us: the dashboard serves no tools
      this.send({ jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: `the dashboard does not serve ${msg.method}` } });
      return;
    }
    const p = this.pending.get(msg.id);
    if (!p) return;
    this.pending.delete(msg.id);
    if (msg.error) p.reject(new RPCError(msg.error));
    else p.resolve(msg.result);
  }

  send(obj) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) throw new Error('not connected to the daemon');
    this.ws.send(JSON.stringify(obj));
  }

  // call sends a request and resolves with its result.
  call(method, params) {
    return new Promise((resolve, reject) => {
      const id = this.nextID++;
      try {
        this.send({ jsonrpc: '2.0', id, method, params: params ?? {} });
      } catch (e) {
        reject(e);
        return;
      }
      this.pending.set(id, { resolve, reject });
    });
  }

  get connected() { return this.ws !== null && this.ws.readyState === WebSocket.OPEN; }
}
