#!/usr/bin/env node
// Schema cross-check of AG-UI run requests with @ag-ui/core 1.0.0's own zod schema.
//
//   node validate-input.mjs [FILE.jsonl|-]        (no argument or "-" reads stdin)
//
// Input: one RunAgentInput JSON document per line (UTF-8, BOM dropped, blank lines skipped), as an
// agent would receive them in the POST body of each run. EVERY document goes through
// RunAgentInputSchema.safeParse (from "@ag-ui/core/schemas"), strictly: any zod issue rejects the
// document and is reported with its path. On top of that (the schemas are loose objects: they keep
// unknown keys, and `state` accepts null) each document must, in every object the schema declares
// (top level, messages, their tool calls and content parts, tools, context, resume entries):
//   - have no null value for a declared field: an absent optional field is omitted, never null;
//   - use only camelCase keys (no "_");
//   - carry no key the schema does not declare (closed objects; `metadata`, `forwardedProps`,
//     `state`, tool `parameters` and resume `payload` are open values and are not looked into).
// The same rules as tests/python/validate_input.py, so the two SDKs judge the same documents.
//
// stdout: ONE JSON line {verdict: "ok"|"invalid", count: N, problems: [...]}.
// Exit 0 only for "ok" (1 otherwise, 2 on usage or read errors, with nothing on stdout).

import { readFileSync } from "node:fs";
import { finish } from "./lib.mjs";

const { RunAgentInputSchema } = await import("@ag-ui/core/schemas");

function usage(msg) {
  process.stderr.write(
    (msg ? `validate-input.mjs: ${msg}\n` : "") + "usage: node validate-input.mjs [FILE.jsonl|-]\n",
  );
  process.exit(2);
}

const args = process.argv.slice(2);
if (args.length > 1 || (args.length === 1 && (args[0] === "-h" || args[0] === "--help"))) usage();
const source = args[0] ?? "-";
let text;
try {
  text = readFileSync(source === "-" ? 0 : source).toString("utf8");
} catch (err) {
  usage(`cannot read ${source}: ${err.message}`);
}
if (text.startsWith("\ufeff")) text = text.slice(1);

// === zod issues ===

function pathText(path) {
  let out = "";
  for (const part of path ?? []) {
    out += typeof part === "number" ? `[${part}]` : out ? `.${String(part)}` : String(part);
  }
  return out;
}

/** One line per zod issue; a union's branches are summarised in brackets. */
function issueLines(issues, prefix = []) {
  const lines = [];
  for (const issue of issues) {
    const path = pathText([...prefix, ...(issue.path ?? [])]) || "<document>";
    let line = `${path}: ${issue.message} (${issue.code})`;
    if (issue.code === "invalid_union" && Array.isArray(issue.errors) && issue.errors.length) {
      const branches = issue.errors.map((branch) =>
        issueLines(branch, [...prefix, ...(issue.path ?? [])]).join("; "),
      );
      line += ` [${branches.map((b, i) => `branch ${i}: ${b}`).join(" | ")}]`;
    }
    lines.push(line);
  }
  return lines;
}

// === the checks the schema does not make ===

/** The schema behind optional/nullable/default/pipe/lazy wrappers. */
function unwrap(schema) {
  for (let i = 0; i < 32 && schema; i++) {
    const def = schema._zod.def;
    switch (def.type) {
      case "optional":
      case "nullable":
      case "default":
      case "prefault":
      case "nonoptional":
      case "readonly":
      case "catch":
        schema = def.innerType;
        break;
      case "pipe":
        schema = def.in;
        break;
      case "lazy":
        schema = def.getter();
        break;
      default:
        return schema;
    }
  }
  return schema;
}

const isObject = (v) => typeof v === "object" && v !== null && !Array.isArray(v);

/** The union member `value` is checked against: by discriminator, else the first that parses. */
function unionMember(def, value) {
  if (def.discriminator && isObject(value)) {
    const tag = value[def.discriminator];
    for (const option of def.options) {
      const field = unwrap(option)._zod.def.shape?.[def.discriminator];
      const values = field ? unwrap(field)._zod.def.values : undefined;
      if (Array.isArray(values) && values.includes(tag)) return option;
    }
    return undefined;
  }
  return def.options.find((option) => option.safeParse(value).success);
}

/** Walks `value` along `schema`, into every object the schema declares. */
function walk(schema, value, path, problems) {
  schema = unwrap(schema);
  const def = schema._zod.def;
  switch (def.type) {
    case "object": {
      if (!isObject(value)) return; // the schema reports it
      for (const [key, field] of Object.entries(value)) {
        const at = path ? `${path}.${key}` : key;
        if (key.includes("_")) problems.push(`${at}: key is not camelCase`);
        if (!Object.hasOwn(def.shape, key)) {
          problems.push(`${at}: undeclared field (closed object; use metadata)`);
        } else if (field === null) {
          problems.push(`${at}: null (omit optional fields instead)`);
        } else {
          walk(def.shape[key], field, at, problems);
        }
      }
      return;
    }
    case "array":
      if (Array.isArray(value)) value.forEach((item, i) => walk(def.element, item, `${path}[${i}]`, problems));
      return;
    case "union": {
      const member = unionMember(def, value);
      if (member) walk(member, value, path, problems);
      return;
    }
    default:
      return; // scalars and open values (any, custom, record)
  }
}

// === main ===

const problems = [];
let count = 0;
for (const line of text.split("\n")) {
  if (!line.trim()) continue;
  const index = count++;
  let where = `document ${index}`;
  let raw;
  try {
    raw = JSON.parse(line);
  } catch (err) {
    problems.push(`${where}: invalid JSON: ${err.message}`);
    continue;
  }
  if (!isObject(raw)) {
    problems.push(`${where}: not a JSON object`);
    continue;
  }
  if (typeof raw.runId === "string") where = `document ${index} (runId ${raw.runId})`;
  const parsed = RunAgentInputSchema.safeParse(raw);
  if (!parsed.success) {
    for (const issue of issueLines(parsed.error.issues)) {
      problems.push(`${where}: @ag-ui/core RunAgentInputSchema rejects it: ${issue}`);
    }
  }
  const found = [];
  walk(RunAgentInputSchema, raw, "", found);
  problems.push(...found.map((p) => `${where}: ${p}`));
}
if (count === 0) problems.push("no JSON document in the input");

const verdict = problems.length ? "invalid" : "ok";
finish({ verdict, count, problems }, verdict === "ok" ? 0 : 1);
