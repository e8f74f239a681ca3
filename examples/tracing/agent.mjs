// An agent that traces: it starts a span, submits a proposal under it (the
// span's traceparent in params._meta), and its tool handler continues the
// trace from the traceparent each tools.execute carries, so the agent's
// span, car-server's spans and the tool's span are one trace.
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import WebSocket from "ws";
import { ROOT_CONTEXT, propagation, trace, SpanKind, SpanStatusCode } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { BasicTracerProvider, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";

// The agent's own spans go where the daemon's go: OTEL_EXPORTER_OTLP_ENDPOINT
// (http/protobuf's base URL; the exporter adds /v1/traces).
const provider = new BasicTracerProvider({
  resource: resourceFromAttributes({ "service.name": process.env.OTEL_SERVICE_NAME ?? "car-agent-example" }),
  spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter())],
});
trace.setGlobalTracerProvider(provider);
propagation.setGlobalPropagator(new W3CTraceContextPropagator());
const tracer = trace.getTracer("car-agent-example");

// tokenPath finds the token file as the daemon writes it.
function tokenPath() {
  if (process.env.CAR_TOKEN_FILE) return process.env.CAR_TOKEN_FILE;
  const dir = "ai.parslee.car";
  if (process.env.CAR_HOME) return join(process.env.CAR_HOME, dir, "auth-token");
  const xdg = process.env.XDG_RUNTIME_DIR;
  if (xdg && xdg.startsWith("/")) return join(xdg, dir, "auth-token");
  return join(homedir(), ".config", dir, "auth-token");
}

// A minimal JSON-RPC 2.0 peer over one WebSocket.
function connect(url, handlers) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    const pending = new Map();
    let nextId = 1;
    ws.on("message", async (data) => {
      const msg = JSON.parse(data.toString());
      if (msg.method === undefined) {
        const p = pending.get(msg.id);
        pending.delete(msg.id);
        if (msg.error) p?.reject(new Error(`${msg.error.code}: ${msg.error.message}`));
        else p?.resolve(msg.result);
        return;
      }
      if (msg.id === undefined) return; // notifications: none needed here
      const handler = handlers[msg.method];
      const reply = (body) => ws.send(JSON.stringify({ jsonrpc: "2.0", id: msg.id, ...body }));
      if (!handler) return reply({ error: { code: -32601, message: `no handler for ${msg.method}` } });
      try {
        reply({ result: await handler(msg.params) });
      } catch (err) {
        reply({ error: { code: -32603, message: err.message } });
      }
    });
    ws.once("error", reject);
    ws.once("open", () => resolve({
      call: (method, params) => new Promise((res, rej) => {
        const id = nextId++;
        pending.set(id, { resolve: res, reject: rej });
        ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
      }),
      close: () => ws.close(),
    }));
  });
}

const prices = { CAR: 42.5 };
const client = await connect(process.env.CAR_URL ?? "ws://127.0.0.1:9100/", {
  // The tool continues the trace: its span is a child of the daemon's
  // execute_tool span, named by the call's _meta.traceparent.
  "tools.execute": async (call) => {
    const parent = propagation.extract(ROOT_CONTEXT, call._meta ?? {});
    const span = tracer.startSpan(`tool ${call.tool}`, { kind: SpanKind.SERVER, attributes: { "gen_ai.tool.call.id": call.request_id } }, parent);
    try {
      return { symbol: call.parameters.symbol, price: prices[call.parameters.symbol] };
    } finally {
      span.end();
    }
  },
});
await client.call("session.auth", { token: readFileSync(tokenPath(), "utf8").trim() });
await client.call("server.handshake", { protocol_version: 2, client_version: "tracing-example" });
await client.call("tools.register", [{ name: "fetch_price", description: "price of a symbol", idempotent: true,
  parameters: { type: "object", properties: { symbol: { type: "string" } }, required: ["symbol"] } }]);

// The agent's step: a span of its own, whose traceparent goes with the
// proposal, so car-server's proposal span is its child.
// (Contexts are passed by hand: no context manager is registered here.)
const step = tracer.startSpan("agent step");
const meta = {};
propagation.inject(trace.setSpan(ROOT_CONTEXT, step), meta); // {traceparent, tracestate?}
const result = await client.call("proposal.submit", {
  _meta: meta,
  proposal: { actions: [{ id: "price", type: "tool_call", tool: "fetch_price", parameters: { symbol: "CAR" } }] },
});
for (const r of result.results) console.log(`${r.action_id} ${r.status} ${JSON.stringify(r.output)}`);
if (result.results.some((r) => r.status !== "succeeded")) step.setStatus({ code: SpanStatusCode.ERROR });
console.log(`trace ${step.spanContext().traceId}`);
step.end();
client.close();
await provider.shutdown(); // sends the agent's spans before exiting
