// What the gateway adds to a tools/call: the same read_text_file of the same
// filesystem server, called directly (stdio) and through car-server's MCP
// endpoint (Streamable HTTP; car-server calls the server as a connector over
// stdio), alternating, in one run. It starts its own daemon on a temporary
// state root, and stops it.
//
//   go build -o /tmp/car-server ./cmd/car-server
//   CAR_SERVER=/tmp/car-server node examples/mcp/bench.mjs [CALLS]
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const calls = Number(process.argv[2] || 2000);
const here = dirname(fileURLToPath(import.meta.url));
const server = join(here, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
const home = mkdtempSync(join(tmpdir(), "car-mcp-bench-home-"));
const root = mkdtempSync(join(tmpdir(), "car-mcp-bench-root-"));
const file = join(root, "note.txt");
writeFileSync(file, "x".repeat(256));
writeFileSync(join(home, "connectors.toml"),
  `[[connector]]\nname = "files"\ncommand = "node"\nargs = [${JSON.stringify(server)}, ${JSON.stringify(root)}]\nenable = ["read_text_file"]\n`);

// The daemon, on free ports; its log says where the endpoint is once the
// connector is up.
const daemon = spawn(process.env.CAR_SERVER || "car-server", ["--port", "0", "--mcp-bind", "127.0.0.1:0", "--socket", "off", "--log-level", "info"], {
  env: { ...process.env, CAR_HOME: home }, stdio: ["ignore", "ignore", "pipe"],
});
const ready = await new Promise((resolve, reject) => {
  let addr, tokenFile;
  const rl = createInterface({ input: daemon.stderr });
  rl.on("line", (line) => {
    let v;
    try { v = JSON.parse(line); } catch { return; }
    if (v.msg === "car-server listening") ({ mcp_addr: addr, token_file: tokenFile } = v);
    if (v.msg === "connector connected" && addr) resolve({ addr, token: readFileSync(tokenFile, "utf8").trim() });
  });
  daemon.on("exit", (code) => reject(new Error(`the daemon exited (${code}) before it was ready`)));
});

const direct = new Client({ name: "bench-direct", version: "1" });
await direct.connect(new StdioClientTransport({ command: "node", args: [server, root], stderr: "ignore" }));
const gateway = new Client({ name: "bench-gateway", version: "1" });
await gateway.connect(new StreamableHTTPClientTransport(new URL(`http://${ready.addr}/mcp`), {
  requestInit: { headers: { Authorization: `Bearer ${ready.token}` } },
}));

async function time(client, name) {
  const t0 = performance.now();
  const r = await client.callTool({ name, arguments: { path: file } });
  const ms = performance.now() - t0;
  if (r.isError) throw new Error(`${name}: ${JSON.stringify(r.content)}`);
  return ms;
}

const quantile = (xs, q) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(q * s.length))]; };
const d = [], g = [];
for (let i = 0; i < 200; i++) { await time(direct, "read_text_file"); await time(gateway, "mcp_files_read_text_file"); } // warm-up
for (let i = 0; i < calls; i++) {
  // Alternating, in one run: whatever the machine does meanwhile, both see it.
  d.push(await time(direct, "read_text_file"));
  g.push(await time(gateway, "mcp_files_read_text_file"));
}
const row = (xs) => ({ median_ms: +quantile(xs, 0.5).toFixed(3), p99_ms: +quantile(xs, 0.99).toFixed(3) });
const out = { calls, direct: row(d), gateway: row(g) };
out.added = { median_ms: +(out.gateway.median_ms - out.direct.median_ms).toFixed(3), p99_ms: +(out.gateway.p99_ms - out.direct.p99_ms).toFixed(3) };
console.log(JSON.stringify(out));
await direct.close();
await gateway.close();
daemon.kill("SIGTERM");
await new Promise((r) => daemon.on("exit", r));
