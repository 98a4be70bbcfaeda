#!/usr/bin/env node
// Hop check: the real @ag-ui/client 1.0.0 runs every case on several routes and what it
// reconstructs must agree.
//
//   node hops.mjs --cases CASES.jsonl --route NAME=URL [--route NAME=URL ...] [--timeout MS]
//                 [--concurrency N]
//
// CASES.jsonl: one RunAgentInput per line. Each case is run once on every route, each time on a
// fresh HttpAgent (threadId, messages and state from the case). The first route is the
// reference; for every other route the client's messages, state, run outcomes (one per
// RUN_FINISHED: type, result, interrupts, pendingToolCallIds) and run errors (message, code) must
// equal the reference's, ids included (key order aside). Any console warning or error from the
// client fails the check, as does a rejected runAgent() or a run that does not settle.
//
// stdout: ONE JSON line {verdict: "ok"|"dirty", cases, runs, differences, warnings}.
// Exit 0 only for "ok" (1 otherwise, 2 on usage errors).

import { readFileSync } from "node:fs";
import { captureConsole, errorText, finish } from "./lib.mjs";

const captured = captureConsole();
const { HttpAgent } = await import("@ag-ui/client");

function usage(msg) {
  process.stderr.write(
    (msg ? `hops.mjs: ${msg}\n` : "") +
      "usage: node hops.mjs --cases CASES.jsonl --route NAME=URL [--route NAME=URL ...] [--timeout MS] [--concurrency N]\n",
  );
  process.exit(2);
}

const opts = { routes: [], timeout: 30000, concurrency: 4 };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const value = () => (i + 1 < argv.length ? argv[++i] : usage(`${argv[i]} needs a value`));
  const a = argv[i];
  if (a === "--cases") opts.cases = value();
  else if (a === "--route") {
    const r = value();
    const eq = r.indexOf("=");
    if (eq <= 0) usage(`bad --route '${r}', expected NAME=URL`);
    opts.routes.push({ name: r.slice(0, eq), url: r.slice(eq + 1) });
  } else if (a === "--timeout") opts.timeout = Number(value());
  else if (a === "--concurrency") opts.concurrency = Number(value());
  else usage(`unknown argument '${a}'`);
}
if (!opts.cases) usage("--cases is required");
if (opts.routes.length < 2) usage("at least two --route are needed");

const cases = readFileSync(opts.cases, "utf8")
  .split("\n")
  .filter((l) => l.trim())
  .map((l) => JSON.parse(l));

// The same value with object keys sorted, so that key order never counts.
function sorted(value) {
  if (Array.isArray(value)) return value.map(sorted);
  if (value && typeof value === "object") {
    const out = {};
    for (const k of Object.keys(value).sort()) out[k] = sorted(value[k]);
    return out;
  }
  return value;
}

async function runOnce(url, input) {
  const agent = new HttpAgent({
    url,
    threadId: input.threadId,
    initialMessages: input.messages ?? [],
    initialState: input.state ?? {},
  });
  const outcomes = [];
  const errors = [];
  const subscriber = {
    onRunErrorEvent: ({ event }) => {
      errors.push({ message: event.message, code: event.code });
    },
    onRunFinishedEvent: ({ outcome, result, interrupts, pendingToolCallIds }) => {
      outcomes.push({
        type: outcome,
        ...(result !== undefined && { result }),
        ...(interrupts !== undefined && { interrupts }),
        ...(pendingToolCallIds !== undefined && { pendingToolCallIds }),
      });
    },
  };
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => {
      reject(new Error(`run did not settle within ${opts.timeout} ms`));
      try {
        agent.abortRun();
      } catch {
        /* ignore */
      }
    }, opts.timeout);
  });
  let rejection;
  try {
    await Promise.race([
      agent.runAgent(
        {
          runId: input.runId,
          tools: input.tools ?? [],
          context: input.context ?? [],
          forwardedProps: input.forwardedProps ?? {},
        },
        subscriber,
      ),
      timeout,
    ]);
  } catch (err) {
    rejection = errorText(err);
  } finally {
    clearTimeout(timer);
  }
  return { ...sorted({ messages: agent.messages, outcomes, errors, state: agent.state }), rejection };
}

function firstDifference(a, b, path = "") {
  if (JSON.stringify(a) === JSON.stringify(b)) return null;
  if (a && b && typeof a === "object" && typeof b === "object") {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    for (const k of keys) {
      const d = firstDifference(a[k], b[k], `${path}/${k}`);
      if (d) return d;
    }
  }
  return `${path || "/"}: want ${JSON.stringify(a)} got ${JSON.stringify(b)}`;
}

const differences = [];
let runs = 0;

async function checkCase(input) {
  const results = [];
  for (const route of opts.routes) {
    results.push(await runOnce(route.url, input));
    runs++;
  }
  const [reference, ...others] = results;
  if (reference.rejection) differences.push(`${input.threadId} on ${opts.routes[0].name}: ${reference.rejection}`);
  others.forEach((got, i) => {
    const route = opts.routes[i + 1].name;
    if (got.rejection) differences.push(`${input.threadId} on ${route}: ${got.rejection}`);
    const d = firstDifference(reference, got);
    if (d) differences.push(`${input.threadId} on ${route}: ${d}`);
  });
}

// A few cases at a time: each run waits mostly on the gateways. The console is shared, so a
// warning is not tied to its case; any warning fails the check (rerun one case to place it).
let next = 0;
await Promise.all(
  Array.from({ length: opts.concurrency }, async () => {
    while (next < cases.length) await checkCase(cases[next++]);
  }),
);
for (const line of captured) differences.push(`client said: ${line.replace(/\s*\n\s*/g, " ")}`);

finish(
  {
    verdict: differences.length ? "dirty" : "ok",
    cases: cases.length,
    runs,
    differences: differences.slice(0, 20),
    differenceCount: differences.length,
    warnings: captured.slice(0, 20),
  },
  differences.length ? 1 : 0,
);
