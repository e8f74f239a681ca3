// Generates generated/car-server.d.ts from ../../openrpc.json with
// @open-rpc/typings. The server → client methods (x-server-to-client) are
// added as methods taking their x-params-schema, so that their params get
// named types too; one whose name is also a client → server method (the
// tools.cancel notification) is suffixed ToClient.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const doc = JSON.parse(readFileSync(new URL("../../openrpc.json", import.meta.url)));
const clientMethods = new Set(doc.methods.map((m) => m.name));
for (const m of doc["x-server-to-client"]) {
  doc.methods.push({
    name: clientMethods.has(m.name) ? `${m.name}.to_client` : m.name,
    params: [{ name: "params", required: true, schema: m["x-params-schema"] }],
    result: m.result ?? { name: "result", schema: { type: "null" } },
  });
}
const path = join(mkdtempSync(join(tmpdir(), "car-openrpc-")), "openrpc.json");
writeFileSync(path, JSON.stringify(doc));
execFileSync("open-rpc-typings", ["--document", path, "--output-ts", "generated", "--name-ts", "car-server"], { stdio: "inherit" });
// The output holds only types: a declaration file says so.
renameSync("generated/car-server.ts", "generated/car-server.d.ts");
