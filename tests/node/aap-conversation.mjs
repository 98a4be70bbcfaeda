#!/usr/bin/env node
// Live conversation driver: a real @ag-ui/client 1.0.0 HttpAgent holds one thread over several
// runs and answers what the previous run left open (pending tool calls, interrupts) the way an
// application would, from ids it only learns at run time.
//
//   node aap-conversation.mjs --url URL --conversation CONVERSATION.json [--timeout MS] [--capture PREFIX]
//
// CONVERSATION.json: {threadId, runs: [RUN, ...]}. Each RUN, in order, on the same agent:
//   {runId?, tools?, context?, forwardedProps?,
//    answer?: {<toolName>: <content string>},  one tool message per call the previous run left
//              pending (its outcome's pendingToolCallIds), content chosen by the call's name
//              (a pending call whose name is not listed is a usage error), id "<runId>.tool<i>";
//    resume?: {status, payload?},             one resume entry {interruptId, status, payload} per
//              interrupt of the previous run (agent.pendingInterrupts);
//    user?: <text>}                           then a user message, id "<runId>.user".
//   runId defaults to "<threadId>-run<N>" (N from 1); keys absent are left to the client.
//
// stdout: ONE JSON line {verdict: "ok"|"rejected"|"dirty", runs: [{runId, request, http, events,
//   runError, outcome, appended, warnings, rejection?}], problems, warnings, messages}, where
//   `request` is the RunAgentInput the client POSTed and `appended` the messages added before the
//   run. Exit 0 only for "ok" (1 otherwise, 2 on usage errors).
//
// Fails like run-agent.mjs: a rejected runAgent() promise (or --timeout), any console.warn/error
// line (those containing "[ag-ui]" are enforce/compat/protocol warnings), a run whose events do not
// start with RUN_STARTED or do not end with exactly one terminal event. Stops at the first
// rejected run.

import { readFileSync, writeFileSync } from "node:fs";
import { captureConsole, isAguiWarning, sequenceProblems, errorText, finish } from "./lib.mjs";

const captured = captureConsole();
const { HttpAgent } = await import("@ag-ui/client");

function usage(msg) {
  process.stderr.write(
    (msg ? `aap-conversation.mjs: ${msg}\n` : "") +
      "usage: node aap-conversation.mjs --url URL --conversation CONVERSATION.json [--timeout MS] [--capture PREFIX]\n",
  );
  process.exit(2);
}

const opts = { timeout: 60000 };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  const value = () => {
    if (i + 1 >= argv.length) usage(`${a} needs a value`);
    return argv[++i];
  };
  if (a === "--url") opts.url = value();
  else if (a === "--conversation") opts.conversation = value();
  else if (a === "--timeout") opts.timeout = Number(value());
  else if (a === "--capture") opts.capture = value();
  else if (a === "-h" || a === "--help") usage();
  else usage(`unknown argument '${a}'`);
}
if (!opts.url) usage("--url is required");
if (!opts.conversation) usage("--conversation is required");
if (!Number.isFinite(opts.timeout) || opts.timeout <= 0) usage("--timeout must be a positive number of ms");

let conversation;
try {
  conversation = JSON.parse(readFileSync(opts.conversation, "utf8"));
} catch (err) {
  usage(`cannot read JSON from ${opts.conversation}: ${errorText(err)}`);
}
if (typeof conversation.threadId !== "string" || !Array.isArray(conversation.runs)) {
  usage("the conversation needs a string threadId and a runs array");
}

// Records the request body, status and content type of every response; with --capture, tees
// the raw bytes of run N to PREFIX-N.sse.
let currentRun;
const pendingCaptures = [];
async function recordingFetch(url, init) {
  const run = currentRun;
  try {
    run.request = JSON.parse(init.body);
  } catch {
    run.request = init.body;
  }
  const res = await fetch(url, init);
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

const agent = new HttpAgent({ url: opts.url, threadId: conversation.threadId, fetch: recordingFetch });

/** The name of the tool call `id` in the agent's messages. */
function callName(id) {
  for (const message of agent.messages) {
    const call = message.toolCalls?.find((c) => c.id === id);
    if (call) return call.function.name;
  }
  return undefined;
}

const PARAM_KEYS = ["tools", "context", "forwardedProps"];
const runs = [];
const problems = [];
let rejected = false;
let previous; // the previous run's record

for (let n = 0; n < conversation.runs.length; n++) {
  const spec = conversation.runs[n];
  const label = `run ${n + 1}`;
  const runId = spec.runId ?? `${conversation.threadId}-run${n + 1}`;
  const params = { runId };
  for (const k of PARAM_KEYS) if (spec[k] !== undefined) params[k] = spec[k];

  const appended = [];
  if (spec.answer !== undefined) {
    const pending = previous?.outcome?.pendingToolCallIds ?? [];
    if (pending.length === 0) {
      const why = n ? "the previous run left none" : "there is no previous run";
      problems.push(`${label}: asked to answer pending calls, but ${why}`);
    }
    pending.forEach((toolCallId, i) => {
      const name = callName(toolCallId);
      if (!Object.prototype.hasOwnProperty.call(spec.answer, name)) {
        usage(`${label}: no answer for the pending call ${toolCallId} (tool ${JSON.stringify(name)})`);
      }
      appended.push({ id: `${runId}.tool${i}`, role: "tool", toolCallId, content: spec.answer[name] });
    });
  }
  if (spec.resume !== undefined) {
    if (agent.pendingInterrupts.length === 0) problems.push(`${label}: asked to resume, but no interrupt is pending`);
    params.resume = agent.pendingInterrupts.map((interrupt) => ({ interruptId: interrupt.id, ...spec.resume }));
  }
  if (spec.user !== undefined) appended.push({ id: `${runId}.user`, role: "user", content: spec.user });
  agent.messages.push(...appended);

  const run = { runId, request: undefined, events: [], runError: undefined, outcome: undefined, appended };
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

  if (!run.rejection) problems.push(...sequenceProblems(run.events.map((e) => e?.type), label));
  for (const line of run.warnings) {
    const flat = line.replace(/\s*\n\s*/g, " ");
    if (isAguiWarning(line)) problems.push(`${label}: client warning: ${flat}`);
    else if (!run.rejection) problems.push(`${label}: client console output: ${flat}`);
  }
  if (rejected) break; // later runs would build on a broken thread
  previous = run;
}

await Promise.race([Promise.all(pendingCaptures), new Promise((r) => setTimeout(r, 2000))]);
const verdict = rejected ? "rejected" : problems.length ? "dirty" : "ok";
finish({ verdict, runs, problems, warnings: captured, messages: agent.messages }, verdict === "ok" ? 0 : 1);
