// An MCP client in front of car-server, on the official TypeScript SDK: what
// Claude Code, Claude Desktop or Cursor do, in a script.
//
//   node client.mjs demo                  list the tools, read a file through the gateway
//   node client.mjs list                  the tools this principal may call, as JSON
//   node client.mjs call TOOL [ARGS_JSON] one governed call; prints a "waiting" line per
//                                         approval it waits for, then the result, as JSON
//
// Over Streamable HTTP: CAR_MCP_URL (default http://127.0.0.1:9102/mcp) and
// CAR_MCP_TOKEN (the daemon's token, or an agent's). Over stdio, as a client
// that only launches stdio servers: CAR_MCP_STDIO=1 runs `$CAR_SERVER mcp`
// (CAR_SERVER default car-server; CAR_MCP_AGENT adds --agent, with the
// agent's token in CAR_AGENT_TOKEN).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const out = (v) => process.stdout.write(JSON.stringify(v) + "\n");

function transport() {
  if (process.env.CAR_MCP_STDIO === "1") {
    const args = ["mcp"];
    if (process.env.CAR_MCP_AGENT) args.push("--agent", process.env.CAR_MCP_AGENT);
    return new StdioClientTransport({
      command: process.env.CAR_SERVER || "car-server",
      args,
      env: { ...process.env },
      stderr: "inherit",
    });
  }
  const url = new URL(process.env.CAR_MCP_URL || "http://127.0.0.1:9102/mcp");
  const headers = {};
  if (process.env.CAR_MCP_TOKEN) headers.Authorization = `Bearer ${process.env.CAR_MCP_TOKEN}`;
  return new StreamableHTTPClientTransport(url, { requestInit: { headers } });
}

async function connect() {
  const client = new Client({ name: "car-server-example", version: "1.0.0" });
  await client.connect(transport());
  return client;
}

// call runs one tool; a wait for a person arrives as progress, which also
// keeps the request's timeout from running out while the person decides.
async function call(client, name, args) {
  const result = await client.callTool({ name, arguments: args }, undefined, {
    onprogress: (p) => out({ waiting: p._meta?.["car-server/approval_id"] ?? null, message: p.message }),
    resetTimeoutOnProgress: true,
    timeout: 120_000,
  });
  const text = (result.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("");
  return { isError: result.isError === true, text, structuredContent: result.structuredContent ?? null };
}

async function main() {
  const [cmd = "demo", tool, rawArgs] = process.argv.slice(2);
  let client;
  try {
    client = await connect();
  } catch (err) {
    out({ error: String(err?.message ?? err), code: err?.code ?? null });
    process.exit(3);
  }
  try {
    if (cmd === "list") {
      const { tools } = await client.listTools();
      out({ tools: tools.map((t) => ({ name: t.name, tier: t._meta?.["car-server/tier"], annotations: t.annotations ?? null })) });
    } else if (cmd === "call") {
      out({ result: await call(client, tool, rawArgs ? JSON.parse(rawArgs) : {}) });
    } else if (cmd === "demo") {
      const { tools } = await client.listTools();
      for (const t of tools) console.log(`tool ${t.name} (${t._meta?.["car-server/tier"]})`);
      const file = process.env.CAR_DEMO_FILE || "hello.txt";
      const read = await call(client, "mcp_files_read_text_file", { path: file });
      console.log(read.isError ? `refused: ${read.text}` : `read ${file}: ${read.text}`);
    } else {
      throw new Error(`unknown command ${cmd}: use demo, list or call`);
    }
  } finally {
    await client.close();
  }
}

main().catch((err) => {
  out({ error: String(err?.message ?? err), code: err?.code ?? null });
  process.exit(1);
});
