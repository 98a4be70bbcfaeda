#!/usr/bin/env python3
"""Schema cross-check of an AG-UI SSE stream with the official Python SDK (ag-ui-protocol 1.0.0).

    python validate_events.py [FILE.sse | -]        (no argument or "-" reads stdin)

Framing mirrors @ag-ui/client: UTF-8 (BOM dropped), events split on "\\n\\n", only "data:" lines
used (one optional leading space stripped, several joined with "\\n"), comments and other fields
ignored. EVERY data payload is validated with
``pydantic.TypeAdapter(ag_ui.core.Event).validate_json(payload)``; on top of that (the SDK is
looser than the TS client: it keeps extra fields and accepts nulls and snake_case) each event
must have no ``null`` value at top level (except the required fields whose value may be null:
``STATE_SNAPSHOT.snapshot``, ``CUSTOM.value``, ``RAW.event``), an integer ``timestamp`` when present, only camelCase
top-level keys (no "_"), and no top-level field the SDK model does not declare.

stdout: one JSON line {"verdict": "ok"|"invalid", "count": N, "problems": [...]};
exit 0 only when the verdict is "ok".
"""

from __future__ import annotations

# Required fields that carry any JSON, null included (agui.md §2.5, §2.8): present and null is
# legal there; everywhere else an absent optional field must be omitted, never null.
NULLABLE_REQUIRED = {("STATE_SNAPSHOT", "snapshot"), ("CUSTOM", "value"), ("RAW", "event")}

import json
import sys

from pydantic import TypeAdapter, ValidationError

from ag_ui.core import Event

EVENT_ADAPTER = TypeAdapter(Event)


def frames(text: str):
    """Yield (frame_index, payload) like the TS client's parseSSEStream."""
    blocks = text.split("\n\n")
    for index, block in enumerate(blocks):
        data = [line[5:][1:] if line[5:].startswith(" ") else line[5:]
                for line in block.split("\n") if line.startswith("data:")]
        if data:
            yield index, "\n".join(data)


def short(err: ValidationError) -> str:
    parts = []
    for e in err.errors(include_url=False):
        loc = "/".join(str(p) for p in e.get("loc", ()))
        parts.append(f"{loc or '<event>'}: {e.get('msg')}")
    return "; ".join(parts)


def check_payload(index: int, payload: str, problems: list[str]) -> bool:
    where = f"frame {index}"
    try:
        raw = json.loads(payload)
    except json.JSONDecodeError as exc:
        problems.append(f"{where}: invalid JSON: {exc}")
        return False
    if isinstance(raw, dict) and isinstance(raw.get("type"), str):
        where = f"frame {index} ({raw['type']})"

    try:
        model = EVENT_ADAPTER.validate_json(payload)
    except ValidationError as exc:
        problems.append(f"{where}: ag_ui.core.Event rejects it: {short(exc)}")
        model = None

    if not isinstance(raw, dict):
        problems.append(f"{where}: event is not a JSON object")
        return False
    for key, value in raw.items():
        if value is None and (raw.get("type"), key) not in NULLABLE_REQUIRED:
            problems.append(f"{where}: top-level '{key}' is null (omit optional fields instead)")
        if "_" in key:
            problems.append(f"{where}: top-level key '{key}' is not camelCase")
    if "timestamp" in raw:
        ts = raw["timestamp"]
        if not (isinstance(ts, int) and not isinstance(ts, bool)):
            problems.append(f"{where}: timestamp {ts!r} is not an integer")
    if model is not None and model.model_extra:
        extra = sorted(model.model_extra)
        problems.append(f"{where}: undeclared top-level field(s) {extra} (closed objects; use metadata/CUSTOM/RAW)")
    return True


def main(argv: list[str]) -> int:
    if len(argv) > 2 or (len(argv) == 2 and argv[1] in ("-h", "--help")):
        sys.stderr.write("usage: python validate_events.py [FILE.sse | -]\n")
        return 2
    source = argv[1] if len(argv) == 2 else "-"
    try:
        data = sys.stdin.buffer.read() if source == "-" else open(source, "rb").read()
    except OSError as exc:
        sys.stderr.write(f"validate_events.py: cannot read {source}: {exc}\n")
        return 2
    text = data.decode("utf-8", errors="replace")
    if text.startswith("\ufeff"):
        text = text[1:]

    problems: list[str] = []
    count = 0
    for index, payload in frames(text):
        count += 1
        check_payload(index, payload, problems)
    if count == 0:
        problems.append("no data: events in the stream")

    verdict = "invalid" if problems else "ok"
    print(json.dumps({"verdict": verdict, "count": count, "problems": problems}))
    return 0 if verdict == "ok" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
