#!/usr/bin/env python3
"""multi.subtask: the daemon asks this client to run a main agent
(multi.run_agent) and lends it the spawn_subtask tool while it runs. The
main agent, played here by a script instead of a model, spawns two
sub-agents at once by submitting one proposal of two spawn_subtask calls on
the same connection; each call comes back as another multi.run_agent, and
each sub-agent may use only a subset of the main agent's tools."""

import asyncio

from carrpc import Client, read_token


def output(name, answer):
    return {"name": name, "answer": answer, "turns": 1, "tool_calls": 0,
            "duration_ms": 1.0, "error": None}


async def main():
    client = await Client.connect()

    async def run_main(spec, task):
        print(f"main agent {spec['name']} has tools {', '.join(spec['tools'])}")
        # What a model's turn with two spawn_subtask calls becomes: one
        # proposal, its two calls running at once.
        spawns = [
            {"id": "docs", "type": "tool_call", "tool": "spawn_subtask",
             "parameters": {"name": "doc-reader", "task": "read the docs for: " + task,
                            "tools": ["read_file"]}},
            {"id": "code", "type": "tool_call", "tool": "spawn_subtask",
             "parameters": {"name": "code-searcher", "task": "search the code for: " + task,
                            "tools": ["search", "read_file"]}},
        ]
        result = await client.call("proposal.submit", {"proposal": {"actions": spawns}})
        answers = [r["output"]["answer"] for r in result["results"]]
        # A sub-agent may only get the main agent's tools: this call is
        # rejected before anything runs.
        refused = await client.call("proposal.submit", {"proposal": {"actions": [
            {"id": "root", "type": "tool_call", "tool": "spawn_subtask",
             "parameters": {"name": "escalator", "task": task, "tools": ["shell"]}}]}})
        print(f"spawn with shell: {refused['results'][0]['status']}")
        return output(spec["name"], " / ".join(answers))

    async def run_sub(spec, task):
        print(f"sub-agent {spec['name']} has tools {', '.join(spec['tools'])}")
        return output(spec["name"], f"{spec['name']} is done")

    async def run_agent(params):
        if params["spec"]["name"] == "lead":
            return await run_main(params["spec"], params["task"])
        return await run_sub(params["spec"], params["task"])

    client.on_request("multi.run_agent", run_agent)
    await client.call("session.auth", {"token": read_token()})
    await client.call("server.handshake", {"protocol_version": 2, "client_version": "python-example"})

    lead = {"name": "lead", "system_prompt": "split the work", "tools": ["read_file", "search"],
            "max_turns": 4, "metadata": {}}
    result = await client.call("multi.subtask", {"main": lead, "task": "why does the build fail",
                                                 "budget": {"max_agents": 4}})
    print(f"final answer: {result['final_answer']}")
    for s in sorted(result["subtasks"], key=lambda s: s["name"]):
        print(f"subtask {s['name']} ({s['action_id']}): {s['output']['answer']}")
    print(f"agents spawned: {result['spend']['agents']}")
    await client.close()


if __name__ == "__main__":
    asyncio.run(main())
