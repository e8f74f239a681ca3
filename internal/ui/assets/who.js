// Who a connection is, said as `car-server approvals watch` says it
// (protocol.ApprovalRequester's String): "agent planner (Planner) via
// my-ide, connection c1", "plain client my-ide, connection c1" or "host,
// connection c1".

import { short } from './dom.js';

const KEEP = 1000; // connections remembered after they close

// principalText names a requester ({principal, agent_id, agent_name,
// client_name, connection}).
export function principalText(r) {
  return r ? `${principalName(r)}, connection ${r.connection}` : '';
}

// principalName is principalText without the connection.
export function principalName(r) {
  let who;
  switch (r.principal) {
    case 'agent': who = `agent ${r.agent_id}${r.agent_name ? ` (${r.agent_name})` : ''}`; break;
    case 'host': who = 'host'; break;
    default: who = `plain client${r.client_name ? ` ${r.client_name}` : ''}`;
  }
  if (r.client_name && (r.principal === 'agent' || r.principal === 'host')) who += ` via ${r.client_name}`;
  return who;
}

// Directory remembers who each connection the page has heard of is: from
// server.connections (which tells a host-role page every principal) and
// from the requested_by of approvals, which also carries an agent's name.
// A person's decision is stamped person:NAME and shown as it is; a plain
// client's is stamped conn:<id>, which the directory turns back into a
// principal while it remembers the connection.
export class Directory {
  constructor() {
    this.byConn = new Map();
    this.self = '';
  }

  // learn records a requester, keeping what an earlier sighting knew and
  // this one does not (an agent's name); it reports whether that changed
  // how the connection is named.
  learn(r) {
    if (!r || !r.connection || !r.principal) return false;
    const had = this.byConn.get(r.connection);
    const now = { ...had, ...Object.fromEntries(Object.entries(r).filter(([, v]) => v)) };
    this.byConn.delete(r.connection); // the newest last: the oldest go first
    this.byConn.set(r.connection, now);
    while (this.byConn.size > KEEP) this.byConn.delete(this.byConn.keys().next().value);
    return !had || principalText(had) !== principalText(now);
  }

  // learnConnections reads a server.connections reply; it reports whether
  // a connection is now named otherwise.
  learnConnections(res) {
    let changed = this.self !== (res.self || '');
    this.self = res.self || '';
    for (const c of res.connections || []) {
      if (this.learn({ principal: c.principal, agent_id: c.agent_id, client_name: c.client_name, connection: c.id })) changed = true;
    }
    return changed;
  }

  // knows reports whether a reviewer stamp can be named by more than it
  // says: a conn:<id> the directory has seen.
  knows(stamp) {
    const s = String(stamp ?? '');
    return !s.startsWith('conn:') || this.byConn.has(s.slice(5));
  }

  // conn names a connection id, shortened: its principal when known, else
  // the id; this page's own is "(this page)".
  conn(id) {
    if (!id) return '';
    const r = this.byConn.get(id);
    if (id === this.self) return `${r ? principalName(r) : 'connection'} (this page)`;
    return r ? `${principalName(r)}, connection ${short(id)}` : `connection ${short(id)}`;
  }

  // reviewer names who a decision is recorded as: conn:<id> as conn does,
  // anything else (person:NAME, daemon:<node>) as it is.
  reviewer(stamp) {
    const s = String(stamp ?? '');
    return s.startsWith('conn:') ? this.conn(s.slice(5)) : s;
  }
}
