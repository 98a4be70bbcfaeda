// Shared helpers for the @ag-ui/client 1.0.0 validators (run-agent.mjs, validate-stream.mjs).

// The client silences every [ag-ui][enforce] / [ag-ui][compat] warning when this
// variable is set (it is read at call time). A validator must never run silenced.
delete process.env.SUPPRESS_TRANSFORMATION_WARNINGS;

export const TERMINAL = new Set(["RUN_FINISHED", "RUN_ERROR"]);

/** Lines that mark output a 1.0 client had to strip, drop or convert. */
export function isAguiWarning(line) {
  // "[ag-ui]", "[ag-ui][enforce]", "[ag-ui][compat]", "[ag-ui][transform]", "[ag-ui][proto]", ...
  // plus the legacy shims' "AG-UI is converting/dropping ..." wording.
  return line.includes("[ag-ui]") || /^AG-UI is (converting|dropping) /.test(line);
}

function fmt(args) {
  return args
    .map((a) => {
      if (a instanceof Error) return a.stack ? `${a.message}` : String(a);
      if (typeof a === "string") return a;
      try {
        return JSON.stringify(a);
      } catch {
        return String(a);
      }
    })
    .join(" ");
}

/**
 * Capture console.warn / console.error (the client's warning channels) and keep
 * stdout clean for the single JSON verdict line: console.log/info/debug are
 * redirected to stderr. Everything captured is echoed to stderr for humans.
 */
export function captureConsole() {
  const lines = [];
  const stderr = (s) => process.stderr.write(s.endsWith("\n") ? s : s + "\n");
  for (const level of ["warn", "error"]) {
    console[level] = (...args) => {
      const line = fmt(args);
      lines.push(line);
      stderr(`[captured console.${level}] ${line}`);
    };
  }
  for (const level of ["log", "info", "debug", "trace"]) {
    console[level] = (...args) => stderr(`[console.${level}] ${fmt(args)}`);
  }
  return lines;
}

/**
 * The checks the client itself does not make, for the events of one stream. AG-UI 1.1 lets a
 * stream carry several runs in sequence: it is split at each RUN_STARTED that follows a
 * terminal event, and each run is checked on its own.
 */
export function sequenceProblems(types, label, { allowLoneRunError = false } = {}) {
  if (types.length === 0) {
    return [`${label}: no events at all (empty stream)`];
  }
  const runs = [[]];
  types.forEach((t, i) => {
    if (t === "RUN_STARTED" && i > 0 && TERMINAL.has(types[i - 1])) runs.push([]);
    runs.at(-1).push(t);
  });
  return runs.flatMap((run, i) =>
    runProblems(run, runs.length > 1 ? `${label} (run ${i + 1} of the stream)` : label, {
      allowLoneRunError,
    }),
  );
}

function runProblems(types, label, { allowLoneRunError }) {
  const problems = [];
  const loneRunError = types.length === 1 && types[0] === "RUN_ERROR";
  if (types[0] !== "RUN_STARTED" && !(allowLoneRunError && loneRunError)) {
    problems.push(`${label}: first event is '${types[0]}', expected 'RUN_STARTED'`);
  }
  const terminals = types.filter((t) => TERMINAL.has(t)).length;
  if (!TERMINAL.has(types.at(-1))) {
    problems.push(`${label}: last event is '${types.at(-1)}', expected a terminal RUN_FINISHED or RUN_ERROR (truncated run)`);
  }
  // AG-UI 1.1 admits one late RUN_ERROR right after RUN_FINISHED: the run failed after all.
  const late = terminals === 2 && types.at(-2) === "RUN_FINISHED" && types.at(-1) === "RUN_ERROR";
  if (terminals !== 1 && !late) {
    problems.push(`${label}: ${terminals} terminal events (RUN_FINISHED/RUN_ERROR), expected exactly one (or RUN_FINISHED then a late RUN_ERROR)`);
  }
  return problems;
}

/** One-line error text (zod errors arrive as pretty-printed JSON). */
export function errorText(err) {
  const text = err instanceof Error ? err.message : String(err);
  return text.replace(/\s*\n\s*/g, " ").trim();
}

/** Print exactly one JSON line on stdout, then exit. */
export function finish(verdict, exitCode) {
  process.stdout.write(JSON.stringify(verdict) + "\n", () => process.exit(exitCode));
}
