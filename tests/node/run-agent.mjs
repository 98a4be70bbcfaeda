#!/usr/bin/env node
// Live validator: drive a real @ag-ui/client 1.0.0 HttpAgent against an AG-UI endpoint.
//
//   node run-agent.mjs --url URL --request REQUEST.json [--runs RUN2.json [RUN3.json ...]]
//                      [--header "Name: value"]... [--timeout MS] [--capture PREFIX]
//                      [--lenient] [--allow-lone-run-error]
//
// REQUEST.json: a RunAgentInput-shaped object {threadId, runId?, messages?, state?, tools?,
//   context?, forwardedProps?, resume?}. The agent is built with threadId, messages as
//   initialMessages and state as initialState; runAgent() gets runId/tools/context/
//   forwardedProps/resume (keys absent from the file are left to the client's defaults).
// RUNn.json: {runId?, tools?, context?, forwardedProps?, resume?, state?, appendMessages?: [...]}
//   run again on the same agent; appendMessages are pushed onto agent.messages first
//   (e.g. a tool result), state (if present) replaces agent.state.
//
// --capture PREFIX writes the raw response bytes of run N to PREFIX-N.sse (for
//   validate-stream.mjs / validate_events.py); each run also records {http: {status, contentType}}.
// --allow-lone-run-error accepts a run that is exactly one RUN_ERROR (input rejected before
//   RUN_STARTED, agui.md §9.7); by default that fails the "starts with RUN_STARTED" check.
//
// stdout: ONE JSON line {verdict: "ok"|"rejected"|"dirty", runs: [{events, runError, outcome,
//   ...}], problems, warnings, messages, state}. Exit 0 only for "ok" (1 otherwise, 2 on usage errors).
//
// Fails on: a rejected runAgent() promise (or --timeout), any console.warn/error line containing
// "[ag-ui]" (enforce/compat/protocol warnings), a run whose events do not start with RUN_STARTED
// or do not end with exactly one terminal RUN_FINISHED/RUN_ERROR. By default ANY other
// console.warn/error line (reducer warnings such as "Failed to apply state patch") is a failure
// too; --lenient reports those in "warnings" only.

import { readFileSync, writeFileSync } from "node:fs";
import { captureConsole, isAguiWarning, sequenceProblems, errorText, finish } from "./lib.mjs";

const captured = captureConsole();
const { HttpAgent } = await import("@ag-ui/client");

function usage(msg) {
  process.stderr.write(
    (msg ? `run-agent.mjs: ${msg}\n` : "") +
      "usage: node run-agent.mjs --url URL --request REQUEST.json [--runs RUN.json ...] " +
      '[--header "Name: value"]... [--timeout MS] [--capture PREFIX] [--lenient] [--allow-lone-run-error]\n',
  );
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { runs: [], headers: {}, timeout: 60000, lenient: false, allowLoneRunError: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    if (a === "--url") opts.url = value();
    else if (a === "--request") opts.request = value();
    else if (a === "--runs") {
      const start = i;
      while (i + 1 < argv.length && !argv[i + 1].startsWith("--")) opts.runs.push(argv[++i]);
      if (i === start) usage("--runs needs at least one file");
    } else if (a === "--header") {
      const h = value();
      const c = h.indexOf(":");
      if (c <= 0) usage(`bad --header '${h}', expected "Name: value"`);
      opts.headers[h.slice(0, c).trim()] = h.slice(c + 1).trim();
    } else if (a === "--timeout") opts.timeout = Number(value());
    else if (a === "--capture") opts.capture = value();
    else if (a === "--lenient") opts.lenient = true;
    else if (a === "--allow-lone-run-error") opts.allowLoneRunError = true;
    else if (a === "-h" || a === "--help") usage();
    else usage(`unknown argument '${a}'`);
  }
  if (!opts.url) usage("--url is required");
  if (!opts.request) usage("--request is required");
  if (!Number.isFinite(opts.timeout) || opts.timeout <= 0) usage("--timeout must be a positive number of ms");
  return opts;
}

function readJson(file) {
  try {
    return JSON.parse(readFileSync(file, "utf8"));
  } catch (err) {
    usage(`cannot read JSON from ${file}: ${errorText(err)}`);
  }
}

const opts = parseArgs(process.argv.slice(2));
const request = readJson(opts.request);
const runSpecs = [request, ...opts.runs.map(readJson)];

// Records status / content type of every response and, with --capture, tees the raw bytes to a file.
let currentRun;
const pendingCaptures = [];
async function recordingFetch(url, init) {
  const res = await fetch(url, init);
  const run = currentRun;
  run.http = { status: res.status, contentType: res.headers.get("content-type") };
  if (!opts.capture || !res.body) return res;
  const [mine, theirs] = res.body.tee();
  const file = `${opts.capture}-${runs.length}.sse`;
  pendingCaptures.push(
    new Response(mine).arrayBuffer().then(
      (buf) => writeFileSync(file, Buffer.from(buf)),
      (err) => process.stderr.write(`capture of ${file} failed: ${errorText(err)}\n`),
    ),
  );
  run.capture = file;
  return new Response(theirs, { status: res.status, statusText: res.statusText, headers: res.headers });
}

const agent = new HttpAgent({
  url: opts.url,
  headers: opts.headers,
  fetch: recordingFetch,
  ...(request.threadId !== undefined && { threadId: request.threadId }),
  ...(request.messages !== undefined && { initialMessages: request.messages }),
  ...(request.state !== undefined && request.state !== null && { initialState: request.state }),
});

const PARAM_KEYS = ["runId", "tools", "context", "forwardedProps", "resume"];
const runs = [];
const problems = [];
let rejected = false;

for (let n = 0; n < runSpecs.length; n++) {
  const spec = runSpecs[n];
  const label = `run ${n + 1}`;
  if (n > 0) {
    if (Array.isArray(spec.appendMessages)) agent.messages.push(...spec.appendMessages);
    if (spec.state !== undefined) agent.setState(spec.state);
  }
  const params = {};
  for (const k of PARAM_KEYS) if (spec[k] !== undefined) params[k] = spec[k];

  const run = { runId: params.runId, events: [], runError: undefined, outcome: undefined, warnings: [] };
  runs.push(run);
  currentRun = run;
  const warnStart = captured.length;

  let timedOut = false; // after a timeout the client synthesizes RUN_ERROR{code:"abort"}: not the server's
  const subscriber = {
    onEvent: ({ event }) => {
      if (!timedOut) run.events.push(event);
    },
    onRunErrorEvent: ({ event }) => {
      if (!timedOut) run.runError = event;
    },
    onRunFinishedEvent: ({ outcome, result, interrupts, pendingToolCallIds }) => {
      if (timedOut) return;
      run.outcome = {
        type: outcome,
        ...(result !== undefined && { result }),
        ...(interrupts !== undefined && { interrupts }),
        ...(pendingToolCallIds !== undefined && { pendingToolCallIds }),
      };
    },
  };

  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => {
      timedOut = true;
      reject(new Error(`timeout: run did not settle within ${opts.timeout} ms`));
      try {
        agent.abortRun();
      } catch {
        /* ignore */
      }
    }, opts.timeout);
  });
  try {
    const res = await Promise.race([agent.runAgent(params, subscriber), timeout]);
    run.newMessages = res?.newMessages;
  } catch (err) {
    rejected = true;
    run.rejection = errorText(err);
    problems.push(`${label}: runAgent() rejected: ${errorText(err)}`);
  } finally {
    clearTimeout(timer);
  }
  run.warnings = captured.slice(warnStart);

  if (!run.rejection) {
    problems.push(...sequenceProblems(run.events.map((e) => e?.type), label, opts));
  }
  for (const line of run.warnings) {
    const flat = line.replace(/\s*\n\s*/g, " ");
    if (isAguiWarning(line)) problems.push(`${label}: client warning: ${flat}`);
    else if (!opts.lenient && !run.rejection) problems.push(`${label}: client console output: ${flat}`);
  }
  if (rejected) break; // later runs would build on a broken thread
}

await Promise.race([Promise.all(pendingCaptures), new Promise((r) => setTimeout(r, 2000))]);
const verdict = rejected ? "rejected" : problems.length ? "dirty" : "ok";
finish(
  {
    verdict,
    runs,
    problems,
    warnings: captured,
    messages: agent.messages,
    state: agent.state,
  },
  verdict === "ok" ? 0 : 1,
);
