#!/usr/bin/env python3
"""A person's approver on the host surface: authenticate with the host token,
host.subscribe, and answer each approval.requested host.event with
host.resolve_approval. --once stops after the first decision; --deny
rejects instead of approving."""

import argparse
import asyncio

from carrpc import Client, read_token


async def main(once, deny):
    client = await Client.connect()
    requests = asyncio.Queue()

    def on_event(note):
        if note["kind"] == "approval.requested":
            requests.put_nowait(note["payload"]["approval"])

    client.on_notification("host.event", on_event)
    await client.call("session.auth", {"host_token": read_token("host-token")})
    await client.call("server.handshake", {"protocol_version": 2, "client_version": "python-approver"})
    snapshot = await client.call("host.subscribe")
    for row in snapshot["approvals"]:
        if row["status"] == "pending":
            requests.put_nowait(row)
    print("waiting for approval requests", flush=True)

    while True:
        row = await requests.get()
        ctx = row.get("context", {})
        print(f"request {row['id']}: {row['title']} (tool {ctx.get('tool')}, needs {ctx.get('required_tier')})", flush=True)
        decided = await client.call("host.resolve_approval", {
            "approval_id": row["id"], "approved": not deny, "notes": "decided by the python approver"})
        print(f"{decided['status']} {row['id']}", flush=True)
        if once:
            break
    await client.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--once", action="store_true", help="stop after the first decision")
    parser.add_argument("--deny", action="store_true", help="reject instead of approving")
    args = parser.parse_args()
    asyncio.run(main(args.once, args.deny))
