#!/usr/bin/env python3
"""Checks that no module of the engine crate imports one above it.

The layers, bottom first, are listed in docs/architecture.md and below; a module may use
`crate::X` only for an X at its own layer or lower. Every `crate::name` path in a source file
counts (imports, paths in code, doc links), so a dependency cannot hide in a full path.
Exit status 1 lists each arrow that points up.
"""
import pathlib
import re
import sys

# Bottom first. Keep in step with the table in docs/architecture.md.
LAYERS = [
    "access", "memory", "seeded", "text", "http", "knowledge", "embed", "index", "store", "search",
    "engine", "trace", "llm", "agent", "session", "telemetry", "review", "eval",
]
RANK = {name: i for i, name in enumerate(LAYERS)}

root = pathlib.Path(__file__).resolve().parent.parent / "crates" / "ragtrail" / "src"
problems = []
for path in sorted(root.rglob("*.rs")):
    rel = path.relative_to(root)
    own = rel.parts[0].removesuffix(".rs")
    if own == "lib":
        continue
    if own not in RANK:
        problems.append(f"{rel}: module `{own}` is not in the layer list")
        continue
    # `super::` in a top-level module (`text.rs`, `search/mod.rs`) names the crate root too.
    top_level = len(rel.parts) == 1 or (len(rel.parts) == 2 and rel.name == "mod.rs")
    pattern = r"\b(?:crate|super)::([a-z_]+)" if top_level else r"\bcrate::([a-z_]+)"
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        for used in re.findall(pattern, line):
            if used not in RANK:
                problems.append(f"{rel}:{n}: `crate::{used}` is not in the layer list")
            elif RANK[used] > RANK[own]:
                problems.append(f"{rel}:{n}: `{own}` uses `{used}`, a layer above it")
if problems:
    print("\n".join(problems))
    sys.exit(1)
print(f"layers: {len(LAYERS)} modules, no import points up")
