// Register two tools, submit a three-action proposal whose later actions use
// the earlier ones' output, answer tools.execute, stop a tool call on
// tools.cancel, and print the result. Types come from openrpc.json
// (make ts-types).
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import WebSocket from "ws";
import type {
  Action, ProposalResult, ToolCancelParams, ToolExecuteParams, ToolSchema,
} from "./generated/car-server.js";

// tokenPath finds the token file as the daemon writes it.
function tokenPath(): string {
  if (process.env.CAR_TOKEN_FILE) return process.env.CAR_TOKEN_FILE;
  const dir = "ai.parslee.car";
  if (process.env.CAR_HOME) return join(process.env.CAR_HOME, dir, "auth-token");
  if (process.platform === "darwin") return join(homedir(), "Library", "Application Support", dir, "auth-token");
  const xdg = process.env.XDG_RUNTIME_DIR;
  if (xdg && xdg.startsWith("/")) return join(xdg, dir, "auth-token");
  return join(homedir(), ".config", dir, "auth-token");
}

type Message = { id?: number | string; method?: string; params?: any; result?: any; error?: { code: number; message: string } };

// Client is a minimal JSON-RPC 2.0 peer over one WebSocket.
class Client {
  private nextId = 1;
  private pending = new Map<number, { resolve: (v: any) => void; reject: (e: Error) => void }>();
  private requests = new Map<string, (params: any) => Promise<unknown>>();
  private notifications = new Map<string, (params: any) => void>();

  private constructor(private ws: WebSocket) {
    ws.on("message", (data) => this.receive(JSON.parse(data.toString()) as Message));
    ws.on("close", () => {
      for (const p of this.pending.values()) p.reject(new Error("the daemon closed the connection"));
    });
  }

  static connect(url: string): Promise<Client> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url);
      ws.once("open", () => resolve(new Client(ws)));
      ws.once("error", reject);
    });
  }

  onRequest(method: string, handler: (params: any) => Promise<unknown>) { this.requests.set(method, handler); }
  onNotification(method: string, handler: (params: any) => void) { this.notifications.set(method, handler); }

  call<T>(method: string, params?: unknown): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
    });
  }

  close() { this.ws.close(); }

  private receive(msg: Message) {
    if (msg.method === undefined) {
      const p = this.pending.get(msg.id as number);
      this.pending.delete(msg.id as number);
      if (msg.error) p?.reject(new Error(`${msg.error.code}: ${msg.error.message}`));
      else p?.resolve(msg.result);
    } else if (msg.id !== undefined) {
      const handler = this.requests.get(msg.method);
      const reply = (body: object) => this.ws.send(JSON.stringify({ jsonrpc: "2.0", id: msg.id, ...body }));
      if (!handler) return reply({ error: { code: -32601, message: `no handler for ${msg.method}` } });
      handler(msg.params).then(
        (result) => reply({ result }),
        (err: Error) => reply({ error: { code: -32603, message: err.message } }),
      );
    } else {
      this.notifications.get(msg.method)?.(msg.params);
    }
  }
}

const prices: Record<string, number> = { CAR: 42.5 };
const tools: Record<string, (p: Record<string, any>, signal: AbortSignal) => Promise<unknown>> = {
  fetch_price: async (p) => ({ symbol: p.symbol, price: prices[p.symbol] }),
  format_quote: async (p) => `${p.symbol} at ${Number(p.price).toFixed(2)}`,
};

const client = await Client.connect(process.env.CAR_URL ?? "ws://127.0.0.1:9100/");
const running = new Map<string, AbortController>();
client.onRequest("tools.execute", async (call: ToolExecuteParams) => {
  const abort = new AbortController();
  running.set(call.request_id, abort);
  try {
    return await tools[call.tool](call.parameters, abort.signal);
  } finally {
    running.delete(call.request_id);
  }
});
client.onNotification("tools.cancel", (note: ToolCancelParams) => {
  console.log(`tools.cancel ${note.action_id}: ${note.reason}`);
  running.get(note.request_id)?.abort();
});

await client.call("session.auth", { token: readFileSync(tokenPath(), "utf8").trim() });
await client.call("server.handshake", { protocol_version: 2, client_version: "typescript-example" });
const definitions: ToolSchema[] = [
  { name: "fetch_price", description: "price of a symbol", idempotent: true,
    parameters: { type: "object", properties: { symbol: { type: "string" } }, required: ["symbol"] } },
  { name: "format_quote", description: "a quote line", idempotent: false,
    parameters: { type: "object", properties: { symbol: { type: "string" }, price: {} } } },
];
console.log(`registered ${await client.call<number>("tools.register", definitions)} tools`);

// The daemon fills the proposal's id and timestamp and each action's
// defaults (reversibility, max_retries, ...), so a client sends only these.
type ActionInput = Pick<Action, "id" | "type" | "parameters"> & Partial<Action>;
const proposal: { source: string; actions: ActionInput[] } = {
  source: "typescript-example",
  actions: [
    { id: "a1", type: "tool_call", tool: "fetch_price", parameters: { symbol: "CAR" } },
    { id: "a2", type: "tool_call", tool: "format_quote", dependencies: ["a1"],
      parameters: { symbol: "$a1.output.symbol", price: "$a1.output.price" } },
    { id: "a3", type: "state_write", dependencies: ["a2"], parameters: { key: "quote", value: "$a2.output" } },
  ],
};
const result = await client.call<ProposalResult>("proposal.submit", { proposal });
for (const r of result.results) console.log(`${r.action_id} ${r.status} ${JSON.stringify(r.output)}`);
console.log(`state quote = ${JSON.stringify(await client.call("state.get", { key: "quote" }))}`);
client.close();
