#!/usr/bin/env node
// HAI consumer check: read a HAI SSE stream the way ZTE's `hai-client` 0.0.5 and its demo UI do
// (`hai.md` §6) and fail loudly on anything they would choke on.
//
//   node hai-client.mjs FILE.sse|- [--request REQUEST.json] [--strict-nesting]
//   node hai-client.mjs --url URL --body REQUEST.json [--header "Name: value"]... [--timeout MS]
//                       [--capture FILE.sse] [--strict-nesting]
//
// FILE.sse holds the raw response bytes (`data: <json>\n\n` frames). With --url the body file is
// POSTed (Content-Type: application/json, Accept: text/event-stream) and the response is read as
// it arrives; --capture writes the raw bytes it received. The starting state for STATE_DELTA is
// the request's `state` (or the demo's `initialState`; --request gives the request in file mode),
// else {}: then, until a STATE_SNAPSHOT, a delta that does not apply is only a warning (the UI may
// hold state from earlier runs that the harness cannot know).
//
// hai-client is an @ag-ui/client fork whose source is not public; what is checked is what hai.md
// §6 states or the public demo (ZTE-AICloud/Co-TAP code/HAI/client-demo) visibly relies on:
//  - framing: the @ag-ui/client SSE parser (UTF-8, blocks split on "\n\n" only, `data:` lines);
//    every event block is exactly one `data: <json object>` line with a string `type`; comment
//    blocks (`: ping` heartbeats) are fine; the stream ends with a blank line.
//  - events: only HAI types (hai.md §2); integer epoch-ms `timestamp` on every event
//    (obligation 10); RUN_STARTED first (or a lone RUN_ERROR), exactly one terminal, last;
//    RUN_STARTED / RUN_FINISHED carry `messageId` and `role: "assistant"` (obligation 9).
//  - business data: CONTENT only inside BUSINESS_DATA_START/END of the same messageId, `delta` a
//    string; the message buffer (all deltas so far) is parsed like the demo's parseJsonString —
//    JSON.parse('[' + buffer.replace(/}{/g, '},{') + ']') on a non-empty string — after every
//    CONTENT and at END; each element must be an object with a string `output.type`, `thinking`
//    (never `think`) with data {content: string, elapsed: number, thinking: bool, collapse: bool},
//    `text` with string `content`. A literal `}{` inside a string survives that parse but comes
//    out as `},{`: it is caught by comparing with a real JSON stream parse (obligation 2).
//  - collaboration: START/CONTENT/END with `messageId`, exactly one CONTENT (string delta); at END
//    JSON.parse(buffer) is one object with string `task.id` / `task.name`.
//  - tool calls: every ARGS delta is a string the demo's parseJsonString accepts on its own (so
//    no partial JSON, obligation 7); the concatenation at END JSON.parses to one object.
//  - state: STATE_SNAPSHOT replaces it; STATE_DELTA `delta` is an array, no `from` except on
//    move/copy (obligation 8), applied with fast-json-patch applyPatch(copy, delta, true, false)
//    like the demo; a failure is an error once the state is known (see above).
//  - MESSAGE_SNAPSHOT: `messages` array; non-empty assistant `content` parses like a buffer.
//  - nothing open (business message, collaboration, tool call, step) at RUN_FINISHED.
// Warnings (never fatal unless --strict-nesting for the first one): events inside an open business
// message or tool call other than its own (@ag-ui/client 0.0.x's verifier rejected those; hai.md
// does not say whether hai-client kept that rule), blockId/style/layout at the event top level
// (hai-client ignores them, obligation 4), timestamps that look like seconds, missing
// threadId/runId on RUN_STARTED.
//
// stdout: ONE JSON line {events, types, messages: [{id, outputs}], text: {messageId: text},
//   thinking: {messageId: text}, toolCalls: [{id, name, parentMessageId?, args, result?}], state,
//   steps, collaborations: [{messageId, from, to, task}], terminal: {type, code?, message?},
//   errors, warnings, http?}. Errors also go to stderr. Exit 0 when `errors` is empty, 1 otherwise,
//   2 on usage errors.

import { readFileSync, writeFileSync } from "node:fs";
import jsonpatch from "fast-json-patch";

const HAI_TYPES = new Set([
  "RUN_STARTED",
  "RUN_FINISHED",
  "RUN_ERROR",
  "STEP_STARTED",
  "STEP_FINISHED",
  "BUSINESS_DATA_START",
  "BUSINESS_DATA_CONTENT",
  "BUSINESS_DATA_END",
  "AGENT_COLLABORATIVE_MESSAGE_START",
  "AGENT_COLLABORATIVE_MESSAGE_CONTENT",
  "AGENT_COLLABORATIVE_MESSAGE_END",
  "TOOL_CALL_START",
  "TOOL_CALL_ARGS",
  "TOOL_CALL_END",
  "TOOL_CALL_RESULT",
  "STATE_SNAPSHOT",
  "STATE_DELTA",
  "MESSAGE_SNAPSHOT",
  "RAW",
  "CUSTOM",
]);
const TERMINAL = new Set(["RUN_FINISHED", "RUN_ERROR"]);
/** Timestamps below this (ms) are 1973 or earlier: almost certainly seconds. */
const PLAUSIBLE_MS = 1e11;

// === arguments ===

function usage(msg) {
  process.stderr.write(
    (msg ? `hai-client.mjs: ${msg}\n` : "") +
      "usage: node hai-client.mjs FILE.sse|- [--request REQUEST.json] [--strict-nesting]\n" +
      '       node hai-client.mjs --url URL --body REQUEST.json [--header "Name: value"]... ' +
      "[--timeout MS] [--capture FILE.sse] [--strict-nesting]\n",
  );
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { headers: {}, timeout: 60000, strictNesting: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    if (a === "--url") opts.url = value();
    else if (a === "--body") opts.body = value();
    else if (a === "--request") opts.request = value();
    else if (a === "--header") {
      const h = value();
      const c = h.indexOf(":");
      if (c <= 0) usage(`bad --header '${h}', expected "Name: value"`);
      opts.headers[h.slice(0, c).trim()] = h.slice(c + 1).trim();
    } else if (a === "--timeout") opts.timeout = Number(value());
    else if (a === "--capture") opts.capture = value();
    else if (a === "--strict-nesting") opts.strictNesting = true;
    else if (a === "-h" || a === "--help") usage();
    else if (a === "-" || !a.startsWith("--")) {
      if (opts.file !== undefined) usage("only one input file");
      opts.file = a;
    } else usage(`unknown argument '${a}'`);
  }
  if (opts.url !== undefined) {
    if (opts.file !== undefined) usage("give either FILE or --url, not both");
    if (opts.body === undefined) usage("--url needs --body REQUEST.json");
    if (opts.request !== undefined) usage("--request is for file mode; --body seeds the state");
  } else {
    if (opts.file === undefined) usage("missing input: FILE.sse, - or --url URL --body FILE");
    for (const k of ["body", "capture"]) if (opts[k] !== undefined) usage(`--${k} needs --url`);
  }
  if (!Number.isFinite(opts.timeout) || opts.timeout <= 0) usage("--timeout must be a positive number of ms");
  return opts;
}

function readJsonFile(file) {
  try {
    return JSON.parse(readFileSync(file, "utf8"));
  } catch (err) {
    usage(`cannot read JSON from ${file}: ${oneLine(err)}`);
  }
}

function oneLine(err) {
  const text = err instanceof Error ? err.message : String(err);
  return text.replace(/\s*\n\s*/g, " ").trim();
}

// === helpers ===

const isObject = (v) => typeof v === "object" && v !== null && !Array.isArray(v);
const isString = (v) => typeof v === "string";
const show = (v) => {
  const s = v === undefined ? "undefined" : JSON.stringify(v);
  return s.length > 120 ? `${s.slice(0, 117)}...` : s;
};

/** The demo's parseJsonString (task.component.ts): throws where the demo throws. */
function demoParse(text) {
  if (!text || typeof text !== "string") throw new Error("input must be a non-empty string");
  return JSON.parse(`[${text.replace(/}{/g, "},{")}]`);
}

/**
 * A real JSON stream parse of concatenated top-level values (whitespace between them allowed).
 * Returns {values} or {error, partial} (partial: the text ends inside a value).
 */
function streamParse(text) {
  const values = [];
  let i = 0;
  const n = text.length;
  while (i < n) {
    while (i < n && /\s/.test(text[i])) i++;
    if (i >= n) break;
    const start = i;
    if (text[i] !== "{" && text[i] !== "[") {
      // A scalar at the top level: let JSON.parse judge the rest as one value.
      try {
        values.push(JSON.parse(text.slice(start)));
        return { values };
      } catch (err) {
        return { error: oneLine(err), partial: false };
      }
    }
    let depth = 0;
    let inString = false;
    let escaped = false;
    for (; i < n; i++) {
      const c = text[i];
      if (inString) {
        if (escaped) escaped = false;
        else if (c === "\\") escaped = true;
        else if (c === '"') inString = false;
      } else if (c === '"') inString = true;
      else if (c === "{" || c === "[") depth++;
      else if (c === "}" || c === "]") {
        depth--;
        if (depth === 0) {
          i++;
          break;
        }
      }
    }
    if (depth !== 0) return { error: "text ends inside a JSON value", partial: true };
    try {
      values.push(JSON.parse(text.slice(start, i)));
    } catch (err) {
      return { error: oneLine(err), partial: false };
    }
  }
  return { values };
}

function deepEqual(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * Parses `text` the demo's way and explains a failure (or a silent corruption) in terms of the
 * producer obligations. Returns {values} or {reason}.
 */
function parseLikeDemo(text) {
  if (typeof text !== "string" || text === "") {
    return { reason: "the buffer is empty; the demo's parseJsonString throws on an empty string" };
  }
  let demo;
  let demoError;
  try {
    demo = demoParse(text);
  } catch (err) {
    demoError = oneLine(err);
  }
  const real = streamParse(text);
  if (demoError === undefined && real.values && deepEqual(demo, real.values)) return { values: demo };

  const head = text.trimStart()[0];
  if (head !== undefined && head !== "{" && head !== "[") {
    return {
      reason: `plain text, not a JSON object string (${show(text)}): the demo's '}{' parser throws (${demoError ?? "parse differs"})`,
    };
  }
  if (real.values) {
    if (/}\s+{/.test(text) && demoError !== undefined) {
      return { reason: `whitespace between top-level objects ('} {' is not split; obligation 3): ${demoError}` };
    }
    if (text.includes("}{")) {
      return {
        reason:
          "a literal '}{' inside a JSON string value: the demo's replace turns it into '},{' " +
          "(escape braces as \\u007d\\u007b, obligation 2)" +
          (demoError !== undefined ? `; JSON.parse: ${demoError}` : "; the parsed outputs differ from the sent ones"),
      };
    }
    return { reason: `the demo's '}{' parse differs from a real JSON parse: ${demoError ?? "different values"}` };
  }
  if (real.partial) {
    return { reason: `partial JSON (an object cut across events?): ${demoError ?? real.error}` };
  }
  return { reason: `not parseable the demo's way: ${demoError ?? real.error}` };
}

/** Problems of one parsed business output element (the demo's handlers' needs). */
function outputProblems(el) {
  if (!isObject(el)) return [`element ${show(el)} is not an object`];
  const out = el.output;
  if (!isObject(out)) return [`element has no 'output' object: ${show(el)}`];
  if (!isString(out.type)) return [`output.type is not a string: ${show(out)}`];
  const problems = [];
  const data = out.data;
  switch (out.type) {
    case "think":
      problems.push(`output.type 'think' is not allowed, use 'thinking' (obligation 10): ${show(out)}`);
      break;
    case "text":
      if (!isString(out.content)) problems.push(`text output without a string 'content': ${show(out)}`);
      break;
    case "thinking":
      if (!isObject(data)) {
        problems.push(`thinking output without a 'data' object: ${show(out)}`);
        break;
      }
      if (!isString(data.content)) problems.push(`thinking output: data.content is not a string: ${show(out)}`);
      if (typeof data.elapsed !== "number" || !Number.isFinite(data.elapsed))
        problems.push(`thinking output: data.elapsed is not a number: ${show(out)}`);
      if (typeof data.thinking !== "boolean") problems.push(`thinking output: data.thinking is not a boolean: ${show(out)}`);
      if (typeof data.collapse !== "boolean") problems.push(`thinking output: data.collapse is not a boolean: ${show(out)}`);
      break;
    case "toolCallShow": // the demo reads output.id and iterates output.data.tools
      if (!isObject(data) || !Array.isArray(data.tools))
        problems.push(`toolCallShow output without a data.tools array: ${show(out)}`);
      break;
    case "fold": // the demo reads output.data.position
      if (!isObject(data)) problems.push(`fold output without a 'data' object: ${show(out)}`);
      break;
  }
  return problems;
}

// === the checker ===

class HaiClientCheck {
  constructor({ state, strictNesting }) {
    this.strictNesting = strictNesting;
    this.errors = [];
    this.warnings = [];
    this.count = 0;
    this.types = {};
    this.messages = []; // one entry per business message (START..END), ids may repeat (hai.md §2)
    this.open = new Map(); // messageId -> {entry, buffer, checked, broken}
    this.collab = undefined; // the open collaborative message
    this.collaborations = [];
    this.toolCalls = [];
    this.openCalls = new Map(); // toolCallId -> call
    // The client's state before the run is known only when the request carried one; until a
    // STATE_SNAPSHOT arrives, a delta that does not apply to {} may still apply to the state
    // the UI kept from earlier runs (HAI requests usually carry none, hai.md §1).
    this.stateKnown = state !== undefined;
    this.state = state ?? {};
    this.steps = [];
    this.activeSteps = [];
    this.terminal = undefined;
  }

  error(where, reason) {
    this.errors.push(`${where}: ${reason}`);
  }

  warn(where, reason) {
    this.warnings.push(`${where}: ${reason}`);
  }

  /** One SSE block (the text between two "\n\n"). */
  block(text) {
    const lines = text.split("\n");
    const data = [];
    const bad = [];
    for (const line of lines) {
      if (line.startsWith("data:")) data.push(line);
      else if (line.startsWith(":")) continue; // comment, e.g. a `: ping` heartbeat
      else bad.push(line);
    }
    if (data.length === 0 && bad.length === 0) return; // comment-only block
    const where = `event ${this.count}`;
    if (text.includes("\r")) this.error(where, "CR in the stream: hai-client splits frames on \"\\n\\n\" only (LF framing)");
    for (const line of bad) {
      if (line.replace(/\r$/, "") === "") continue;
      this.error(where, `line ${show(line)} in a frame; HAI frames are 'data: <json>' only (hai.md §1)`);
    }
    if (data.length === 0) return;
    if (data.length > 1) this.error(where, `${data.length} data: lines in one frame (one 'data: <json>' line per event)`);
    if (!data[0].startsWith("data: ")) this.error(where, "'data:' without the single space");
    const payload = data.map((l) => l.slice(5).replace(/^ /, "")).join("\n");
    let ev;
    try {
      ev = JSON.parse(payload);
    } catch (err) {
      this.error(where, `frame is not JSON (${oneLine(err)}): ${show(payload)}`);
      this.count++;
      return;
    }
    if (!isObject(ev)) {
      this.error(where, `frame is not a JSON object: ${show(ev)}`);
      this.count++;
      return;
    }
    if (!isString(ev.type) || ev.type === "") {
      this.error(where, `event without a string 'type': ${show(ev)}`);
      this.count++;
      return;
    }
    this.event(ev);
  }

  event(ev) {
    const i = this.count++;
    const type = ev.type;
    const where = `event ${i} (${type})`;
    this.types[type] = (this.types[type] ?? 0) + 1;

    if (!HAI_TYPES.has(type)) {
      this.error(where, `'${type}' is not a HAI event type (hai.md §2); hai-client's event schema would reject it`);
    }
    if (!Number.isInteger(ev.timestamp)) {
      this.error(where, `timestamp ${show(ev.timestamp)} is not an integer epoch-ms timestamp (obligation 10)`);
    } else if (ev.timestamp < PLAUSIBLE_MS) {
      this.warn(where, `timestamp ${ev.timestamp} looks like seconds, not epoch ms`);
    }

    // Run envelope.
    if (i === 0) {
      if (type !== "RUN_STARTED" && type !== "RUN_ERROR") this.error(where, "the first event must be RUN_STARTED (or a lone RUN_ERROR)");
    } else if (type === "RUN_STARTED") {
      this.error(where, "a second RUN_STARTED; one HAI response is one run");
    }
    if (this.terminal !== undefined) {
      this.error(where, `event after the terminal ${this.terminal.type} (exactly one terminal, and it is last; a RUN_ERROR before RUN_STARTED stands alone)`);
    }

    this.nesting(ev, where);
    const handler = this[`on_${type}`];
    if (handler) handler.call(this, ev, where);
  }

  /** @ag-ui/client 0.0.x only allowed a message's / call's own events while it was open. */
  nesting(ev, where) {
    const type = ev.type;
    const note = (what) => {
      const text = `${type} inside ${what} (@ag-ui/client 0.0.x, which hai-client forks, rejected this; hai.md is silent)`;
      if (this.strictNesting) this.error(where, text);
      else this.warn(where, text);
    };
    if (TERMINAL.has(type) || type === "RAW") return;
    if (this.open.size > 0 && (!type.startsWith("BUSINESS_DATA_") || type === "BUSINESS_DATA_START")) {
      note(`open business message ${[...this.open.keys()].join(", ")}`);
    }
    if (this.openCalls.size > 0 && !["TOOL_CALL_ARGS", "TOOL_CALL_END"].includes(type)) {
      note(`open tool call ${[...this.openCalls.keys()].join(", ")}`);
    }
  }

  // --- run ---

  runMarkers(ev, where) {
    if (!isString(ev.messageId) || ev.messageId === "") this.error(where, `no string messageId (obligation 9): ${show(ev)}`);
    if (ev.role !== "assistant") this.error(where, `role is ${show(ev.role)}, expected "assistant" (obligation 9)`);
    if (ev.type === "RUN_STARTED" && (!isString(ev.threadId) || !isString(ev.runId))) {
      this.warn(where, "no threadId/runId (obligation 9 asks for them as harmless extras)");
    }
  }

  on_RUN_STARTED(ev, where) {
    this.runMarkers(ev, where);
  }

  on_RUN_FINISHED(ev, where) {
    this.runMarkers(ev, where);
    this.setTerminal(ev);
    for (const [id] of this.open) this.error(where, `business message ${id} is still open at RUN_FINISHED (BUSINESS_DATA_END missing)`);
    if (this.collab) this.error(where, `collaborative message ${this.collab.messageId} is still open at RUN_FINISHED`);
    for (const [id] of this.openCalls) this.error(where, `tool call ${id} is still open at RUN_FINISHED (TOOL_CALL_END missing)`);
    for (const name of this.activeSteps) this.error(where, `step ${show(name)} is still open at RUN_FINISHED (STEP_FINISHED missing)`);
  }

  on_RUN_ERROR(ev, where) {
    if (!isString(ev.message)) this.error(where, `RUN_ERROR without a string 'message': ${show(ev)}`);
    if (ev.code !== undefined && !isString(ev.code)) this.error(where, `RUN_ERROR code is not a string: ${show(ev.code)}`);
    this.setTerminal(ev);
  }

  setTerminal(ev) {
    if (this.terminal !== undefined) return; // reported as "event after the terminal"
    this.terminal = {
      type: ev.type,
      ...(ev.code !== undefined && { code: ev.code }),
      ...(ev.message !== undefined && { message: ev.message }),
    };
  }

  // --- steps ---

  on_STEP_STARTED(ev, where) {
    if (!isString(ev.stepName)) return this.error(where, `no string stepName: ${show(ev)}`);
    if (this.activeSteps.includes(ev.stepName)) this.error(where, `step ${show(ev.stepName)} is already active`);
    else this.activeSteps.push(ev.stepName);
    this.steps.push(ev.stepName);
  }

  on_STEP_FINISHED(ev, where) {
    if (!isString(ev.stepName)) return this.error(where, `no string stepName: ${show(ev)}`);
    const at = this.activeSteps.indexOf(ev.stepName);
    if (at < 0) this.error(where, `step ${show(ev.stepName)} was not started`);
    else this.activeSteps.splice(at, 1);
  }

  // --- business data ---

  on_BUSINESS_DATA_START(ev, where) {
    const id = ev.messageId;
    if (!isString(id) || id === "") return this.error(where, `no string messageId: ${show(ev)}`);
    if (ev.role !== undefined && !isString(ev.role)) this.error(where, `role is not a string: ${show(ev.role)}`);
    if (this.open.has(id)) return this.error(where, `business message ${id} is already open`);
    const entry = { id, outputs: [] };
    this.messages.push(entry);
    this.open.set(id, { entry, buffer: "", checked: 0, broken: false });
  }

  on_BUSINESS_DATA_CONTENT(ev, where) {
    const id = ev.messageId;
    for (const key of ["blockId", "style", "layout"]) {
      if (ev[key] !== undefined) this.warn(where, `'${key}' at the event top level is ignored by hai-client; it belongs inside the delta (obligation 4)`);
    }
    if (!isString(id)) return this.error(where, `no string messageId: ${show(ev)}`);
    const msg = this.open.get(id);
    if (!msg) return this.error(where, `CONTENT for business message ${id}, which is not open (BUSINESS_DATA_START first, obligation 5)`);
    const delta = ev.delta;
    if (isObject(delta) || Array.isArray(delta)) {
      msg.broken = true;
      return this.error(where, `delta is an object, not a JSON string: string concatenation makes it "[object Object]" (obligation 1): ${show(delta)}`);
    }
    if (!isString(delta)) {
      msg.broken = true;
      return this.error(where, `delta is ${show(delta)}, not a string (obligation 1)`);
    }
    if (/^\s|\s$/.test(delta) && /^[{[]/.test(delta.trim())) {
      this.error(where, `delta has leading/trailing whitespace: the next '}{' between objects would not be split (obligation 3): ${show(delta)}`);
    }
    msg.buffer += delta;
    this.checkBuffer(msg, where);
  }

  on_BUSINESS_DATA_END(ev, where) {
    const id = ev.messageId;
    if (!isString(id)) return this.error(where, `no string messageId: ${show(ev)}`);
    const msg = this.open.get(id);
    if (!msg) return this.error(where, `END for business message ${id}, which is not open`);
    this.checkBuffer(msg, where);
    this.open.delete(id);
  }

  /** The demo parses the whole buffer after every CONTENT and at END; check the new outputs. */
  checkBuffer(msg, where) {
    if (msg.broken) return; // the first failure of this message was reported; the rest follows from it
    const parsed = parseLikeDemo(msg.buffer);
    if (parsed.reason) {
      msg.broken = true;
      return this.error(where, `message ${msg.entry.id}: ${parsed.reason}`);
    }
    for (let k = msg.checked; k < parsed.values.length; k++) {
      for (const p of outputProblems(parsed.values[k])) this.error(where, `message ${msg.entry.id}, output ${k}: ${p}`);
    }
    msg.checked = parsed.values.length;
    msg.entry.outputs = parsed.values;
  }

  // --- agent collaboration ---

  on_AGENT_COLLABORATIVE_MESSAGE_START(ev, where) {
    if (!isString(ev.messageId)) this.error(where, `no string messageId (obligation 6): ${show(ev)}`);
    if (!isString(ev.from) || !isString(ev.to)) this.warn(where, `from/to are not both strings: ${show(ev)}`);
    if (this.collab) this.error(where, `collaborative message ${this.collab.messageId} is still open (one START/CONTENT/END at a time)`);
    this.collab = { messageId: ev.messageId, from: ev.from, to: ev.to, buffer: "", contents: 0, broken: false };
  }

  on_AGENT_COLLABORATIVE_MESSAGE_CONTENT(ev, where) {
    if (!isString(ev.messageId)) this.error(where, `no string messageId (obligation 6): ${show(ev)}`);
    const c = this.collab;
    if (!c) return this.error(where, "CONTENT without an open AGENT_COLLABORATIVE_MESSAGE_START");
    if (isString(ev.messageId) && ev.messageId !== c.messageId)
      this.error(where, `messageId ${ev.messageId} is not the open collaborative message ${c.messageId}`);
    c.contents++;
    if (isObject(ev.delta) || Array.isArray(ev.delta)) {
      c.broken = true;
      return this.error(where, `delta is an object, not a JSON string: the buffer becomes "[object Object]" (obligation 6): ${show(ev.delta)}`);
    }
    if (!isString(ev.delta)) {
      c.broken = true;
      return this.error(where, `delta is ${show(ev.delta)}, not a string (obligation 6)`);
    }
    c.buffer += ev.delta;
  }

  on_AGENT_COLLABORATIVE_MESSAGE_END(ev, where) {
    if (!isString(ev.messageId)) this.error(where, `no string messageId (obligation 6): ${show(ev)}`);
    const c = this.collab;
    if (!c) return this.error(where, "END without an open AGENT_COLLABORATIVE_MESSAGE_START");
    this.collab = undefined;
    if (isString(ev.messageId) && ev.messageId !== c.messageId)
      this.error(where, `messageId ${ev.messageId} is not the open collaborative message ${c.messageId}`);
    if (c.contents !== 1) this.error(where, `${c.contents} CONTENT events in this collaborative message; exactly one is required (obligation 6)`);
    if (c.broken) return;
    let task;
    try {
      const item = JSON.parse(c.buffer); // the demo: JSON.parse(textMessageBuffer)
      if (!isObject(item)) throw new Error(`not an object: ${show(item)}`);
      task = item.task;
      if (!isObject(task) || !isString(task.id) || !isString(task.name))
        return this.error(where, `the buffer has no task {id: string, name: string}: ${show(item)}`);
    } catch (err) {
      return this.error(where, `JSON.parse of the collaborative buffer failed (${oneLine(err)}): ${show(c.buffer)}`);
    }
    this.collaborations.push({ messageId: c.messageId, from: c.from, to: c.to, task });
  }

  // --- tool calls ---

  on_TOOL_CALL_START(ev, where) {
    const id = ev.toolCallId;
    if (!isString(id) || !isString(ev.toolCallName)) return this.error(where, `toolCallId/toolCallName are not strings: ${show(ev)}`);
    if (ev.parentMessageId !== undefined && !isString(ev.parentMessageId))
      this.error(where, `parentMessageId is ${show(ev.parentMessageId)}; omit it or send a string`);
    if (this.openCalls.has(id)) return this.error(where, `tool call ${id} is already open`);
    if (this.toolCalls.some((c) => c.id === id)) this.error(where, `tool call id ${id} used twice in the run`);
    const call = { id, name: ev.toolCallName, ...(isString(ev.parentMessageId) && { parentMessageId: ev.parentMessageId }), args: null };
    Object.defineProperty(call, "buffer", { value: "", writable: true, enumerable: false });
    Object.defineProperty(call, "broken", { value: false, writable: true, enumerable: false });
    this.toolCalls.push(call);
    this.openCalls.set(id, call);
  }

  on_TOOL_CALL_ARGS(ev, where) {
    const call = this.openCalls.get(ev.toolCallId);
    if (!call) return this.error(where, `ARGS for tool call ${show(ev.toolCallId)}, which is not open`);
    const delta = ev.delta;
    if (!isString(delta)) {
      call.broken = true;
      const object = isObject(delta) || Array.isArray(delta);
      const effect = object ? ' and the concatenation would hold "[object Object]"' : "";
      return this.error(where, `delta is ${object ? "an object" : show(delta)}, not a JSON string: the demo's parseJsonString throws${effect} (obligation 7)`);
    }
    call.buffer += delta;
    // The demo parses every ARGS delta on its own: parseJsonString(event.delta)[0].id.
    const parsed = parseLikeDemo(delta);
    if (parsed.reason) {
      call.broken = true;
      const hint = /partial JSON|plain text/.test(parsed.reason) ? "; send the complete arguments as one ARGS event" : "";
      return this.error(where, `tool call ${call.id}: delta ${show(delta)}: ${parsed.reason}${hint} (obligation 7)`);
    }
    if (!parsed.values.every(isObject)) {
      call.broken = true;
      this.error(where, `tool call ${call.id}: delta ${show(delta)} does not hold JSON objects only`);
    }
  }

  on_TOOL_CALL_END(ev, where) {
    const call = this.openCalls.get(ev.toolCallId);
    if (!call) return this.error(where, `END for tool call ${show(ev.toolCallId)}, which is not open`);
    this.openCalls.delete(ev.toolCallId);
    if (call.broken) return;
    try {
      const args = JSON.parse(call.buffer);
      if (!isObject(args)) throw new Error(`not an object: ${show(args)}`);
      call.args = args;
    } catch (err) {
      const what = call.buffer === "" ? "no TOOL_CALL_ARGS at all" : show(call.buffer);
      this.error(where, `tool call ${call.id}: the concatenated arguments do not JSON.parse to one object (${oneLine(err)}): ${what}`);
    }
  }

  on_TOOL_CALL_RESULT(ev, where) {
    if (!isString(ev.messageId) || !isString(ev.toolCallId) || !isString(ev.content))
      return this.error(where, `TOOL_CALL_RESULT needs string messageId, toolCallId and content: ${show(ev)}`);
    const call = this.toolCalls.find((c) => c.id === ev.toolCallId);
    if (!call) this.warn(where, `result for tool call ${ev.toolCallId}, not started in this run`);
    else call.result = ev.content;
  }

  // --- state ---

  on_STATE_SNAPSHOT(ev, where) {
    if (!("snapshot" in ev)) return this.error(where, "STATE_SNAPSHOT without 'snapshot'");
    this.state = jsonpatch.deepClone(ev.snapshot);
    this.stateKnown = true;
  }

  on_STATE_DELTA(ev, where) {
    const delta = ev.delta;
    if (!Array.isArray(delta)) {
      return this.error(where, `delta is ${isObject(delta) ? "a single op object" : show(delta)}, not an array of operations (obligation 8)`);
    }
    delta.forEach((op, k) => {
      if (isObject(op) && "from" in op && op.op !== "move" && op.op !== "copy") {
        this.error(where, `op ${k} (${show(op.op)}) carries from: ${show(op.from)}; 'from' only on move/copy (obligation 8)`);
      }
    });
    try {
      // The demo: applyPatch(this.state, delta, true, false).newDocument
      const result = jsonpatch.applyPatch(jsonpatch.deepClone(this.state), delta, true, false);
      this.state = result.newDocument;
    } catch (err) {
      const text = `fast-json-patch applyPatch failed: ${err?.name ?? "Error"}: ${oneLine(err)} (state ${show(this.state)}, delta ${show(delta)})`;
      if (this.stateKnown) this.error(where, text);
      else this.warn(where, `${text}; not an error: the state before this run is unknown (no request state, no STATE_SNAPSHOT yet)`);
    }
  }

  // --- AG-UI carriers ---

  on_CUSTOM(ev, where) {
    if (!isString(ev.name)) this.error(where, `CUSTOM without a string 'name': ${show(ev)}`);
  }

  on_RAW(ev, where) {
    if (!("event" in ev)) this.error(where, `RAW without 'event': ${show(ev)}`);
  }

  // --- snapshot ---

  on_MESSAGE_SNAPSHOT(ev, where) {
    if (!Array.isArray(ev.messages)) return this.error(where, `messages is ${show(ev.messages)}, not an array`);
    ev.messages.forEach((m, k) => {
      if (!isObject(m) || !isString(m.id) || !isString(m.role)) {
        return this.error(where, `message ${k} needs a string id and role: ${show(m)}`);
      }
      if (m.role !== "assistant" || m.content === undefined || m.content === null || m.content === "") return;
      if (!isString(m.content)) return this.error(where, `assistant message ${m.id}: content is not a string: ${show(m.content)}`);
      const parsed = parseLikeDemo(m.content);
      if (parsed.reason) return this.error(where, `assistant message ${m.id}: content does not parse like a business buffer (obligation 11): ${parsed.reason}`);
      parsed.values.forEach((el, j) => {
        for (const p of outputProblems(el)) this.error(where, `assistant message ${m.id}, output ${j}: ${p}`);
      });
    });
  }

  // --- end of stream ---

  finish(tail) {
    if (tail.replace(/^(:[^\n]*(\n|$))*/, "").trim() !== "") {
      this.error("end of stream", `the last frame is not terminated by a blank line: ${show(tail)}`);
    }
    if (this.count === 0) {
      this.error("end of stream", "no events at all (empty stream)");
    } else if (this.terminal === undefined) {
      this.error("end of stream", "no terminal RUN_FINISHED/RUN_ERROR (truncated run)");
    }
  }

  summary(extra) {
    const text = {};
    const thinking = {};
    for (const m of this.messages) {
      for (const el of m.outputs) {
        const out = el?.output;
        if (out?.type === "text" && isString(out.content)) text[m.id] = (text[m.id] ?? "") + out.content;
        if (out?.type === "thinking" && isString(out.data?.content)) thinking[m.id] = (thinking[m.id] ?? "") + out.data.content;
      }
    }
    return {
      events: this.count,
      types: this.types,
      messages: this.messages,
      text,
      thinking,
      toolCalls: this.toolCalls,
      state: this.state,
      steps: this.steps,
      collaborations: this.collaborations,
      terminal: this.terminal ?? null,
      errors: this.errors,
      warnings: this.warnings,
      ...extra,
    };
  }
}

// === the SSE reader: @ag-ui/client's parseSSEStream framing, fed chunk by chunk ===

class SseReader {
  constructor(check) {
    this.check = check;
    // The client decodes leniently (U+FFFD); a second, fatal decoder only detects bad UTF-8.
    this.decoder = new TextDecoder("utf-8");
    this.strict = new TextDecoder("utf-8", { fatal: true });
    this.buffer = "";
    this.first = true;
  }

  push(bytes, last = false) {
    if (this.strict) {
      try {
        this.strict.decode(bytes, { stream: !last });
      } catch (err) {
        this.strict = undefined;
        this.check.error("stream", `invalid UTF-8 (${oneLine(err)}); the client would see U+FFFD instead`);
      }
    }
    this.buffer += this.decoder.decode(bytes, { stream: !last });
    if (this.first && this.buffer.length > 0) {
      this.first = false;
      if (this.buffer.charCodeAt(0) === 0xfeff) this.buffer = this.buffer.slice(1);
    }
    const parts = this.buffer.split("\n\n");
    this.buffer = parts.pop() ?? "";
    for (const part of parts) this.check.block(part);
  }

  end() {
    this.push(new Uint8Array(0), true);
    const tail = this.buffer;
    // A last event without its blank line: the client may or may not flush it; read it, then
    // report the missing terminator.
    const tailHasData = tail.split("\n").some((l) => l.startsWith("data:"));
    if (tailHasData) this.check.block(tail);
    this.check.finish(tail);
  }
}

// === main ===

function report(summary, exitCode) {
  for (const e of summary.errors) process.stderr.write(`hai-client error: ${e}\n`);
  for (const w of summary.warnings) process.stderr.write(`hai-client warning: ${w}\n`);
  process.stdout.write(JSON.stringify(summary) + "\n", () => process.exit(exitCode));
}

const opts = parseArgs(process.argv.slice(2));

if (opts.url === undefined) {
  const request = opts.request !== undefined ? readJsonFile(opts.request) : {};
  const check = new HaiClientCheck({ state: request.state ?? request.initialState, strictNesting: opts.strictNesting });
  let bytes;
  try {
    bytes = readFileSync(opts.file === "-" ? 0 : opts.file);
  } catch (err) {
    usage(`cannot read ${opts.file}: ${oneLine(err)}`);
  }
  const reader = new SseReader(check);
  reader.push(bytes);
  reader.end();
  const summary = check.summary({});
  report(summary, summary.errors.length === 0 ? 0 : 1);
} else {
  const body = readJsonFile(opts.body);
  const check = new HaiClientCheck({ state: body?.state ?? body?.initialState, strictNesting: opts.strictNesting });
  const reader = new SseReader(check);
  const captured = [];
  const http = {};
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new Error(`timeout: no complete response within ${opts.timeout} ms`)), opts.timeout);
  try {
    const res = await fetch(opts.url, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream", ...opts.headers },
      body: JSON.stringify(body),
      signal: controller.signal,
    });
    http.status = res.status;
    http.contentType = res.headers.get("content-type");
    const sse = (http.contentType ?? "").startsWith("text/event-stream");
    if (res.status !== 200 || !sse) {
      const text = await res.text();
      captured.push(Buffer.from(text));
      check.error("http", `status ${res.status}, content-type ${show(http.contentType)}; expected 200 text/event-stream. Body: ${show(text.slice(0, 400))}`);
    } else if (res.body) {
      for await (const chunk of res.body) {
        captured.push(Buffer.from(chunk));
        reader.push(chunk);
      }
      reader.end();
    }
  } catch (err) {
    const cause = err?.cause ? ` (${oneLine(err.cause)})` : "";
    check.error("http", `request failed: ${oneLine(controller.signal.reason ?? err)}${controller.signal.aborted ? "" : cause}`);
  } finally {
    clearTimeout(timer);
  }
  if (opts.capture !== undefined) {
    try {
      writeFileSync(opts.capture, Buffer.concat(captured));
    } catch (err) {
      check.warn("capture", `cannot write ${opts.capture}: ${oneLine(err)}`);
    }
  }
  const summary = check.summary({ http });
  report(summary, summary.errors.length === 0 ? 0 : 1);
}
