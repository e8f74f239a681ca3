#!/usr/bin/env python3
"""Register two tools, submit a three-action proposal whose later actions use
the earlier ones' output, answer the daemon's tools.execute callbacks, stop a
tool on tools.cancel, and print the result."""

import asyncio
import json

from carrpc import Client, read_token

PRICES = {"CAR": 42.5}


async def main():
    client = await Client.connect()
    running = {}  # request_id -> the task running that tool call

    async def fetch_price(params):
        return {"symbol": params["symbol"], "price": PRICES[params["symbol"]]}

    async def format_quote(params):
        return f"{params['symbol']} at {float(params['price']):.2f}"

    tools = {"fetch_price": fetch_price, "format_quote": format_quote}

    async def execute(call):
        task = asyncio.create_task(tools[call["tool"]](call["parameters"]))
        running[call["request_id"]] = task
        try:
            return await task
        finally:
            running.pop(call["request_id"], None)

    def cancel(note):
        print(f"tools.cancel {note['action_id']}: {note['reason']}")
        task = running.get(note["request_id"])
        if task:
            task.cancel()

    client.on_request("tools.execute", execute)
    client.on_notification("tools.cancel", cancel)

    await client.call("session.auth", {"token": read_token()})
    await client.call("server.handshake", {"protocol_version": 2, "client_version": "python-example"})
    count = await client.call("tools.register", [
        {"name": "fetch_price", "description": "price of a symbol", "idempotent": True,
         "parameters": {"type": "object", "properties": {"symbol": {"type": "string"}}, "required": ["symbol"]}},
        {"name": "format_quote", "description": "a quote line",
         "parameters": {"type": "object", "properties": {"symbol": {"type": "string"}, "price": {}}}},
    ])
    print(f"registered {count} tools")

    proposal = {"source": "python-example", "actions": [
        {"id": "a1", "type": "tool_call", "tool": "fetch_price", "parameters": {"symbol": "CAR"}},
        {"id": "a2", "type": "tool_call", "tool": "format_quote", "dependencies": ["a1"],
         "parameters": {"symbol": "$a1.output.symbol", "price": "$a1.output.price"}},
        {"id": "a3", "type": "state_write", "dependencies": ["a2"],
         "parameters": {"key": "quote", "value": "$a2.output"}},
    ]}
    result = await client.call("proposal.submit", {"proposal": proposal})
    for r in result["results"]:
        print(f"{r['action_id']} {r['status']} {json.dumps(r['output'])}")
    print(f"state quote = {json.dumps(await client.call('state.get', {'key': 'quote'}))}")
    await client.close()


if __name__ == "__main__":
    asyncio.run(main())
