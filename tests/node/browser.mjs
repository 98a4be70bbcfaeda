// A browser page on one origin using the gateway on another, in headless Chromium driven by
// playwright-core: what a web frontend does, with CORS preflights, credentials and TLS.
//
// node browser.mjs --gateway https://localhost:PORT --page-port N --spki BASE64 \
//   --agui-path /agui --api-key KEY --aap-path /aap --jwt TOKEN [--streams 8] [--timeout MS]
//
// Serves a page on http://127.0.0.1:N (its own origin), opens it in Chromium, and has the page
// (1) stream one AG-UI run with `Authorization: Bearer KEY`, (2) open `--streams` AG-UI runs at
// once, (3) create an AAP session and stream a turn with the JWT, (4) try the AG-UI route with a
// wrong key. Chromium trusts the gateway's certificate by its public key only
// (`--ignore-certificate-errors-spki-list`), nothing else. The HTTP version and connection of
// every response from the gateway come from the DevTools protocol. Prints one JSON line:
// {page: {...what the page saw}, responses: [{url, status, protocol, connectionId}]} and exits 0
// when the page script finished (the Rust test judges the result).

import http from "node:http";
import { chromium } from "playwright-core";

const args = {};
for (let i = 2; i < process.argv.length; i += 2) {
  args[process.argv[i].replace(/^--/, "")] = process.argv[i + 1];
}
const required = ["gateway", "page-port", "spki", "agui-path", "api-key", "aap-path", "jwt"];
for (const key of required) {
  if (!args[key]) {
    console.error(`missing --${key}`);
    process.exit(2);
  }
}
const streams = Number(args.streams ?? 8);
const timeout = Number(args.timeout ?? 60000);

// The page: plain fetch and ReadableStream, as a frontend without an SDK would use the gateway.
const pageScript = `
async function sse(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  const events = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\\n\\n")) >= 0) {
      const frame = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const lines = frame.split("\\n");
      const data = lines.filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).join("\\n");
      const name = lines.filter((l) => l.startsWith("event:")).map((l) => l.slice(6).trim())[0];
      // AG-UI names an event in its data; AAP in the SSE event field.
      if (data) events.push(name ?? JSON.parse(data).type);
    }
  }
  return events;
}
function runInput(i) {
  return JSON.stringify({
    threadId: "browser-thread-" + i, runId: "browser-run-" + i,
    messages: [{ id: "u" + i, role: "user", content: "héllo from a page " + i }],
    tools: [], context: [], state: {}, forwardedProps: {},
  });
}
async function agui(cfg, i, key) {
  const response = await fetch(cfg.gateway + cfg.aguiPath, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: "Bearer " + key },
    body: runInput(i),
  });
  if (!response.ok) return { status: response.status, body: await response.json() };
  const events = await sse(response);
  return { status: response.status, types: events };
}
async function aap(cfg) {
  const headers = { "content-type": "application/json", authorization: "Bearer " + cfg.jwt };
  const created = await fetch(cfg.gateway + cfg.aapPath + "/sessions", {
    method: "POST", headers, body: JSON.stringify({ agent: { name: "demo" } }),
  });
  const session = await created.json();
  if (!created.ok) return { status: created.status, body: session };
  const turn = await fetch(cfg.gateway + cfg.aapPath + "/sessions/" + session.sessionId + "/turns", {
    method: "POST", headers,
    body: JSON.stringify({ stream: "delta", messages: [{ role: "user", content: "héllo" }] }),
  });
  if (!turn.ok) return { status: turn.status, body: await turn.json() };
  const events = await sse(turn);
  return { status: turn.status, sessionId: session.sessionId, types: events };
}
window.runAll = async (cfg) => {
  const out = {};
  out.single = await agui(cfg, 0, cfg.apiKey);
  out.parallel = await Promise.all(Array.from({ length: cfg.streams }, (_, i) => agui(cfg, i + 1, cfg.apiKey)));
  out.aap = await aap(cfg);
  out.wrongKey = await agui(cfg, 99, "not-the-key");
  return out;
};
`;
const page = `<!doctype html><meta charset="utf-8"><title>frontend</title><script>${pageScript}</script>`;

const server = http.createServer((req, res) => {
  res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
  res.end(page);
});
await new Promise((resolve) => server.listen(Number(args["page-port"]), "127.0.0.1", resolve));

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  args: [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    `--ignore-certificate-errors-spki-list=${args.spki}`,
  ],
});
let result;
try {
  const context = await browser.newContext();
  const tab = await context.newPage();
  const consoleLines = [];
  tab.on("console", (m) => consoleLines.push(`${m.type()}: ${m.text()}`));
  const cdp = await context.newCDPSession(tab);
  await cdp.send("Network.enable");
  const responses = [];
  cdp.on("Network.responseReceived", (e) => {
    if (e.response.url.startsWith(args.gateway)) {
      responses.push({
        url: e.response.url,
        method: e.type,
        status: e.response.status,
        protocol: e.response.protocol,
        connectionId: e.response.connectionId,
      });
    }
  });
  await tab.goto(`http://127.0.0.1:${args["page-port"]}/`);
  const seen = await Promise.race([
    tab.evaluate((cfg) => window.runAll(cfg), {
      gateway: args.gateway,
      aguiPath: args["agui-path"],
      aapPath: args["aap-path"],
      apiKey: args["api-key"],
      jwt: args.jwt,
      streams,
    }),
    new Promise((_, reject) => setTimeout(() => reject(new Error(`page timed out after ${timeout} ms`)), timeout)),
  ]);
  result = { page: seen, responses, console: consoleLines };
} catch (error) {
  result = { error: String(error) };
} finally {
  await browser.close();
  server.close();
}
console.log(JSON.stringify(result));
process.exit(result.error ? 1 : 0);
