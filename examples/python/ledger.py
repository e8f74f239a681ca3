#!/usr/bin/env python3
"""A fenced tool: a toy ledger that keeps, per idempotency key, the highest
fencing epoch it has seen and refuses a call with a lower one.

Every idempotent call the daemon makes carries fence: {key, epoch}. A call
whose claim was taken over (its daemon stalled past claim_lease, or a second
identical call was claimed while it ran) carries an older epoch than the one
that replaced it; the ledger refuses it, so the stale call's write never
lands after the newer one's. It also treats the key as its own idempotency
key: a call for a key it already applied returns that entry, so the effect
happens once.

The demo submits the same idempotent entry twice at once on one daemon. The
first call is held until the second (a newer claim, epoch 2) has posted;
then the first posts at epoch 1 and is refused."""

import asyncio
import json
import sqlite3

from carrpc import Client, read_token


class StaleEpoch(Exception):
    pass


class Ledger:
    """Entries in SQLite; the epoch check and the write are one transaction."""

    def __init__(self, path=":memory:"):
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("CREATE TABLE IF NOT EXISTS fences (key TEXT PRIMARY KEY, epoch INTEGER NOT NULL)")
        self.db.execute("CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, account TEXT, amount REAL, epoch INTEGER)")

    def post(self, fence, account, amount):
        if not fence:
            raise ValueError("the ledger takes only fenced calls: mark the action or the tool idempotent")
        key, epoch = fence["key"], int(fence["epoch"])
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            row = db.execute("SELECT epoch FROM fences WHERE key = ?", (key,)).fetchone()
            if row and epoch < row[0]:
                raise StaleEpoch(f"stale epoch {epoch}: the ledger has seen epoch {row[0]} for this key")
            db.execute("INSERT INTO fences (key, epoch) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET epoch = excluded.epoch", (key, epoch))
            entry = db.execute("SELECT account, amount, epoch FROM entries WHERE key = ?", (key,)).fetchone()
            if entry is None:
                entry = (account, amount, epoch)
                db.execute("INSERT INTO entries (key, account, amount, epoch) VALUES (?, ?, ?, ?)", (key, *entry))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return {"account": entry[0], "amount": entry[1], "epoch": entry[2]}

    def balance(self, account):
        n, total = self.db.execute("SELECT count(*), coalesce(sum(amount), 0) FROM entries WHERE account = ?", (account,)).fetchone()
        return n, total


async def main():
    ledger = Ledger()
    client = await Client.connect()
    first_arrived, second_posted = asyncio.Event(), asyncio.Event()
    calls = 0

    async def execute(call):
        nonlocal calls
        calls += 1
        params = call["parameters"]
        if calls == 1:  # the older claim: held until the newer one posted
            first_arrived.set()
            await second_posted.wait()
            return ledger.post(call.get("fence"), params["account"], params["amount"])
        try:
            return ledger.post(call.get("fence"), params["account"], params["amount"])
        finally:
            second_posted.set()

    client.on_request("tools.execute", execute)
    await client.call("session.auth", {"token": read_token()})
    await client.call("server.handshake", {"protocol_version": 2, "client_version": "python-ledger-example"})
    await client.call("tools.register", [
        {"name": "ledger_entry", "description": "post an entry to the ledger", "idempotent": True,
         "parameters": {"type": "object", "properties": {"account": {"type": "string"}, "amount": {"type": "number"}},
                        "required": ["account", "amount"]}},
    ])
    proposal = {"actions": [{"id": "e1", "type": "tool_call", "tool": "ledger_entry",
                             "parameters": {"account": "acme", "amount": 5}}]}

    older = asyncio.create_task(client.call("proposal.submit", {"proposal": proposal}))
    await first_arrived.wait()
    newer = await client.call("proposal.submit", {"proposal": proposal})
    older = await older
    for name, result in (("newer", newer), ("older", older)):
        r = result["results"][0]
        if r["status"] == "succeeded":
            print(f"{name} {r['status']} {json.dumps(r['output'], sort_keys=True)}")
        else:
            print(f"{name} {r['status']}: {r['error']}")
    again = (await client.call("proposal.submit", {"proposal": proposal}))["results"][0]
    print(f"again {again['status']} cache_hit={again.get('cache_hit')} {json.dumps(again['output'], sort_keys=True)}")
    n, total = ledger.balance("acme")
    print(f"ledger acme: {n} entry, {total:g}")
    await client.close()


if __name__ == "__main__":
    asyncio.run(main())
