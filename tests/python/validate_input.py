#!/usr/bin/env python3
"""Schema cross-check of AG-UI run requests with the official Python SDK (ag-ui-protocol 1.0.0).

    python validate_input.py [FILE.jsonl | -]        (no argument or "-" reads stdin)

Input: one ``RunAgentInput`` JSON document per line (UTF-8, BOM dropped, blank lines skipped), as
an agent would receive them in the POST body of each run. EVERY document is validated with
``ag_ui.core.RunAgentInput.model_validate_json(line)``; on top of that (the SDK is looser than
the 1.0 contract: it coerces, keeps extra fields, accepts nulls for optional fields and
snake_case names) each document must:

- validate again with ``strict=True`` (no coercion: a number where a string belongs, ...);
- have no ``null`` value for any field the SDK declares, at any depth of the SDK's models
  (top level, messages, their tool calls and content parts, tools, context, resume entries):
  an absent optional field is omitted, never null;
- use only camelCase keys in those models (no "_"; a key must be the field's wire name);
- carry no field the SDK model does not declare (closed objects; ``metadata``,
  ``forwardedProps``, ``state``, tool ``parameters`` and resume ``payload`` are open values and
  are not looked into).

stdout: one JSON line {"verdict": "ok"|"invalid", "count": N, "problems": [...]};
exit 0 only when the verdict is "ok" (2 on a usage or read error, with nothing on stdout).
"""

from __future__ import annotations

import json
import sys

from pydantic import BaseModel, ValidationError

from ag_ui.core import RunAgentInput


def short(err: ValidationError) -> str:
    parts = []
    for e in err.errors(include_url=False):
        loc = "/".join(str(p) for p in e.get("loc", ()))
        parts.append(f"{loc or '<document>'}: {e.get('msg')}")
    return "; ".join(parts)


def wire_names(model: BaseModel) -> dict[str, str]:
    """Wire name (alias) -> attribute name of each field the model declares."""
    names = {}
    for name, field in type(model).model_fields.items():
        names[field.alias or name] = name
    return names


def walk(model: BaseModel, raw, path: str, problems: list[str]) -> None:
    """Checks the raw JSON object `raw` that validated into `model`, and its nested models."""
    if not isinstance(raw, dict):
        problems.append(f"{path}: expected a JSON object, got {type(raw).__name__}")
        return
    fields = type(model).model_fields
    declared = wire_names(model)
    for key, value in raw.items():
        at = f"{path}.{key}" if path else key
        if "_" in key:
            problems.append(f"{at}: key is not camelCase")
        name = declared.get(key)
        if name is None:
            if key in fields:
                problems.append(f"{at}: snake_case attribute name instead of the wire name "
                                f"{fields[key].alias!r}")
            else:
                problems.append(f"{at}: undeclared field (closed object; use metadata)")
            continue
        if value is None:
            problems.append(f"{at}: null (omit optional fields instead)")
            continue
        descend(getattr(model, name), value, at, problems)


def descend(parsed, raw, path: str, problems: list[str]) -> None:
    """Follows a field's parsed value into nested models; open values are not looked into."""
    if isinstance(parsed, BaseModel):
        walk(parsed, raw, path, problems)
    elif isinstance(parsed, (list, tuple)) and isinstance(raw, list):
        for index, (item, raw_item) in enumerate(zip(parsed, raw)):
            descend(item, raw_item, f"{path}[{index}]", problems)


def check_document(index: int, line: str, problems: list[str]) -> None:
    where = f"document {index}"
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as exc:
        problems.append(f"{where}: invalid JSON: {exc}")
        return
    if isinstance(raw, dict) and isinstance(raw.get("runId"), str):
        where = f"document {index} (runId {raw['runId']})"
    if not isinstance(raw, dict):
        problems.append(f"{where}: not a JSON object")
        return

    try:
        model = RunAgentInput.model_validate_json(line)
    except ValidationError as exc:
        problems.append(f"{where}: ag_ui.core.RunAgentInput rejects it: {short(exc)}")
        return
    try:
        RunAgentInput.model_validate_json(line, strict=True)
    except ValidationError as exc:
        problems.append(f"{where}: accepted only with coercion (strict=True rejects it): {short(exc)}")

    found: list[str] = []
    walk(model, raw, "", found)
    problems.extend(f"{where}: {problem}" for problem in found)


def main(argv: list[str]) -> int:
    if len(argv) > 2 or (len(argv) == 2 and argv[1] in ("-h", "--help")):
        sys.stderr.write("usage: python validate_input.py [FILE.jsonl | -]\n")
        return 2
    source = argv[1] if len(argv) == 2 else "-"
    try:
        data = sys.stdin.buffer.read() if source == "-" else open(source, "rb").read()
    except OSError as exc:
        sys.stderr.write(f"validate_input.py: cannot read {source}: {exc}\n")
        return 2
    text = data.decode("utf-8", errors="replace")
    if text.startswith("\ufeff"):
        text = text[1:]

    problems: list[str] = []
    count = 0
    for line in text.split("\n"):
        if not line.strip():
            continue
        check_document(count, line, problems)
        count += 1
    if count == 0:
        problems.append("no JSON document in the input")

    verdict = "invalid" if problems else "ok"
    print(json.dumps({"verdict": verdict, "count": count, "problems": problems}))
    return 0 if verdict == "ok" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
