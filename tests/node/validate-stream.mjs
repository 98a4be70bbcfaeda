#!/usr/bin/env node
// Offline validator: check a recorded AG-UI SSE byte stream with @ag-ui/client 1.0.0's own stages.
//
//   node validate-stream.mjs FILE.sse|- [--request REQUEST.json] [--lenient] [--allow-lone-run-error]
//                            [--emission-rules]
//
// The bytes are decoded and framed exactly like the client's SSE parser (UTF-8, BOM dropped,
// split on "\n\n" only, only "data:" lines used with one optional leading space, several joined
// with "\n"; comments / event: / id: / retry: ignored; each payload must be a JSON object with a
// non-empty string "type"). The event array then goes through the same stages runAgent() uses,
// minus HTTP and user middlewares:
//   CompatibilityBoundary (legacy -> 1.0, "[ag-ui][compat]" warnings)
//   -> enforceEvents() -> transformChunks() -> verifyEvents() -> defaultApplyEvents() (reducer)
// plus the producer protocol-version check runAgent() makes on RUN_STARTED. The reducer starts
// from the messages/state of --request (a RunAgentInput-shaped file, as for run-agent.mjs) or
// from [] / {}, and its result is reported as "messages" / "state". The stream may hold
// several runs back to back; each must start with RUN_STARTED and end with exactly one terminal.
// --emission-rules additionally enforces gateway emission rules the client itself tolerates:
// framing (agui.md §6.1: "data: " + one data line per event, no CR, no event:/id:/retry: fields,
// final blank line present), no *_CHUNK events on the wire (§9.3) and RUN_STARTED carrying
// protocolVersion "1.0" (§9.1).
//
// stdout: ONE JSON line {verdict: "ok"|"rejected"|"dirty", runs: [{events, runError, outcome}],
//   problems, warnings, messages, state, parsedCount}. Exit 0 only for "ok" (1 otherwise, 2 on usage errors).

import { readFileSync } from "node:fs";
import { captureConsole, isAguiWarning, sequenceProblems, errorText, finish } from "./lib.mjs";

const captured = captureConsole();
const { from, lastValueFrom, toArray, tap } = await import("rxjs");
const client = await import("@ag-ui/client");
const { CompatibilityBoundary, enforceEvents, transformChunks, verifyEvents, defaultApplyEvents } = client;

function usage(msg) {
  process.stderr.write(
    (msg ? `validate-stream.mjs: ${msg}\n` : "") +
      "usage: node validate-stream.mjs FILE.sse|- [--request REQUEST.json] [--lenient] [--allow-lone-run-error] [--emission-rules]\n",
  );
  process.exit(2);
}

const opts = { lenient: false, allowLoneRunError: false, emissionRules: false };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a === "--request") {
    if (i + 1 >= argv.length) usage("--request needs a file");
    opts.request = argv[++i];
  } else if (a === "--lenient") opts.lenient = true;
  else if (a === "--allow-lone-run-error") opts.allowLoneRunError = true;
  else if (a === "--emission-rules") opts.emissionRules = true;
  else if (a === "-h" || a === "--help") usage();
  else if (a === "-" || !a.startsWith("--")) {
    if (opts.file !== undefined) usage("only one input file");
    opts.file = a;
  } else usage(`unknown argument '${a}'`);
}
if (opts.file === undefined) usage("missing input file (use - for stdin)");
for (const fn of ["enforceEvents", "transformChunks", "verifyEvents", "CompatibilityBoundary", "defaultApplyEvents"]) {
  if (typeof client[fn] !== "function") usage(`@ag-ui/client does not export ${fn}; wrong version installed?`);
}

let bytes;
try {
  bytes = readFileSync(opts.file === "-" ? 0 : opts.file);
} catch (err) {
  usage(`cannot read ${opts.file}: ${errorText(err)}`);
}

const problems = [];
let rejection;

// --- framing: mirror parseSSEStream() of @ag-ui/client 1.0.0 -----------------------------------
const text = new TextDecoder("utf-8", { fatal: false }).decode(bytes);
const blocks = text.split(/\n\n/);
const tail = blocks.pop() ?? ""; // client: the remainder is parsed at end of stream
if (tail) blocks.push(tail);
const parsed = [];
for (let b = 0; b < blocks.length; b++) {
  const block = blocks[b];
  const lines = block.split("\n");
  const data = [];
  for (const line of lines) {
    if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
    if (opts.emissionRules) {
      if (line.includes("\r")) problems.push(`frame ${b}: CR in stream (LF framing only)`);
      else if (/^(event|id|retry):/.test(line)) problems.push(`frame ${b}: '${line.split(":")[0]}:' field (emit data: lines only)`);
      else if (line.startsWith("data:") && !line.startsWith("data: ")) problems.push(`frame ${b}: 'data:' without the single space`);
    }
  }
  if (opts.emissionRules && data.length > 1) problems.push(`frame ${b}: ${data.length} data: lines (emit one per event)`);
  if (data.length === 0) continue; // comment / heartbeat / field-only block
  let ev;
  try {
    ev = JSON.parse(data.join("\n"));
  } catch (err) {
    rejection = `frame ${b}: invalid JSON: ${errorText(err)}`;
    break;
  }
  if (typeof ev !== "object" || ev === null || Array.isArray(ev)) {
    rejection = `frame ${b}: Invalid event: the frame is not a JSON object.`;
    break;
  }
  if (typeof ev.type !== "string" || ev.type.length === 0) {
    rejection = `frame ${b}: Invalid event: the frame carries no event type.`;
    break;
  }
  parsed.push(ev);
  if (opts.emissionRules) {
    if (ev.type.endsWith("_CHUNK")) problems.push(`frame ${b}: ${ev.type} on the wire (emit the expanded START/CONTENT/END form)`);
    if (ev.type === "RUN_STARTED" && ev.protocolVersion !== "1.0") problems.push(`frame ${b}: RUN_STARTED without protocolVersion "1.0"`);
  }
}
if (opts.emissionRules && tail) problems.push("stream does not end with a blank line after the last event");

// --- the client's stages ---------------------------------------------------------------------
// runAgent() checks the producer's declared protocol version in a RUN_STARTED subscriber (not exported).
function protocolVersionCheck(ev) {
  if (ev.type !== "RUN_STARTED") return;
  const v = ev.protocolVersion;
  if (v === undefined || v === client.PROTOCOL_VERSION) return;
  const m = /^(\d+)\.(\d+)$/.exec(String(v));
  if (!m) {
    console.warn(`[ag-ui] The producer declared protocol version '${v}', which this client cannot interpret.`);
    return;
  }
  const [maj, min] = client.PROTOCOL_VERSION.split(".").map(Number);
  const newer = Number(m[1]) > maj || (Number(m[1]) === maj && Number(m[2]) > min);
  if (newer) console.warn(`[ag-ui] The producer speaks protocol ${v}; this client speaks ${client.PROTOCOL_VERSION}. Unrecognised material will be stripped with warnings.`);
}

let seed = {};
if (opts.request) {
  try {
    seed = JSON.parse(readFileSync(opts.request, "utf8"));
  } catch (err) {
    usage(`cannot read JSON from ${opts.request}: ${errorText(err)}`);
  }
}
const input = {
  threadId: seed.threadId ?? "offline-thread",
  runId: seed.runId ?? "offline-run",
  messages: seed.messages ?? [],
  tools: seed.tools ?? [],
  context: seed.context ?? [],
  state: seed.state ?? {},
  forwardedProps: seed.forwardedProps ?? {},
};
// The reducer reads the starting messages from its agent argument and the state from the input.
const reducerAgent = { messages: structuredClone(input.messages), state: structuredClone(input.state), pendingInterrupts: [] };
let messages = structuredClone(input.messages);
let state = structuredClone(input.state);

const verified = [];
if (rejection === undefined) {
  try {
    const upstream = { run: () => from(parsed) };
    const compat = new CompatibilityBoundary();
    const verified$ = compat.run(structuredClone(input), upstream).pipe(
      enforceEvents(),
      transformChunks(),
      verifyEvents(),
      tap((ev) => {
        protocolVersionCheck(ev);
        verified.push(ev);
      }),
    );
    await lastValueFrom(
      defaultApplyEvents(input, verified$, reducerAgent, []).pipe(
        tap((mutation) => {
          if (mutation.messages !== undefined) messages = mutation.messages;
          if (mutation.state !== undefined) state = mutation.state;
        }),
        toArray(),
      ),
    );
  } catch (err) {
    rejection = errorText(err);
  }
}

// --- split into runs and apply the checks the client does not make ---------------------------
const runs = [];
let cur;
for (const ev of verified) {
  // A new run begins at each RUN_STARTED; anything after a terminal stays in that run, so the
  // "exactly one terminal, last" check sees it (e.g. RUN_FINISHED followed by RUN_ERROR).
  if (ev.type === "RUN_STARTED" || !cur) {
    cur = { events: [], runError: undefined, outcome: undefined };
    runs.push(cur);
  }
  cur.events.push(ev);
  if (ev.type === "RUN_ERROR") cur.runError = ev;
  if (ev.type === "RUN_FINISHED") cur.outcome = ev.outcome ?? { type: "success" };
}

if (rejection !== undefined) {
  problems.push(`rejected: ${rejection}`);
} else if (runs.length === 0) {
  problems.push("stream: no events at all (empty stream)");
} else {
  runs.forEach((r, i) => problems.push(...sequenceProblems(r.events.map((e) => e.type), `run ${i + 1}`, opts)));
}
for (const line of captured) {
  const flat = line.replace(/\s*\n\s*/g, " ");
  if (isAguiWarning(line)) problems.push(`client warning: ${flat}`);
  else if (!opts.lenient) problems.push(`client console output: ${flat}`);
}

const verdict = rejection !== undefined ? "rejected" : problems.length ? "dirty" : "ok";
finish({ verdict, runs, problems, warnings: captured, messages, state, parsedCount: parsed.length }, verdict === "ok" ? 0 : 1);
