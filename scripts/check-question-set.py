#!/usr/bin/env python3
"""Check an evaluation question set (eval/*.jsonl) against a Markdown knowledge folder.

What it checks, as eval/README.md requires:
  * every line is valid JSON and the ids are unique;
  * every titlePath in `expected` is a section of the folder (front matter `title`, `##`, `###`
    joined with " / "), and never one of a document the default user cannot see (another tenant,
    a `roles:` list, `status: superseded`);
  * every string in `facts` occurs verbatim in the plain text of one of that turn's expected
    sections (links reduced to their text, `**`/`*`/`_` emphasis and inline code marks removed);
  * unanswerable items have empty expected, facts and computedFacts.

It reads sections as eval/README.md defines them for the bundled knowledge/ (front matter, headings
down to ###); the held-out folders under ../shared/data have no front matter and deeper headings,
so their sets are not checked by it.

Usage: python3 scripts/check-question-set.py eval/second-set.jsonl [knowledge]
Exit status 1 and one line per problem when a check fails.
"""
import json
import pathlib
import re
import sys


def plain(text):
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"(\*\*|__|\*|`)", "", text)
    return text


def sections(path):
    """Map titlePath -> plain text of a section (heading to the next heading of any level)."""
    raw = path.read_text(encoding="utf-8")
    m = re.match(r"^---\n(.*?)\n---\n", raw, re.S)
    if not m:
        return {}, {}
    front, body = m.group(1), raw[m.end():]
    meta = dict(re.findall(r"^(\w+):\s*(.*?)\s*$", front, re.M))
    title = meta.get("title", path.stem).strip("\"'")
    out, h2, cur, buf = {}, None, title, []
    for line in body.split("\n"):
        h = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if not h:
            buf.append(line)
            continue
        out[cur] = out.get(cur, "") + "\n".join(buf)
        buf = []
        level, name = len(h.group(1)), plain(h.group(2))
        if level == 1:
            cur, h2 = title, None
        elif level == 2:
            h2, cur = name, f"{title} / {name}"
        else:
            cur = " / ".join([title] + ([h2] if h2 else []) + [name])
    out[cur] = out.get(cur, "") + "\n".join(buf)
    return {k: plain(v) for k, v in out.items()}, meta


def main():
    qset = pathlib.Path(sys.argv[1])
    folder = pathlib.Path(sys.argv[2] if len(sys.argv) > 2 else "knowledge")
    visible, hidden = {}, set()
    for md in sorted(folder.rglob("*.md")):
        secs, meta = sections(md)
        restricted = (
            meta.get("tenant", "default") != "default"
            or meta.get("roles", "[]").replace(" ", "") not in ("", "[]")
            or meta.get("status", "active") == "superseded"
        )
        (hidden.update(secs) if restricted else visible.update(secs))
    problems, ids = [], set()
    for n, line in enumerate(qset.read_text(encoding="utf-8").splitlines(), 1):
        try:
            item = json.loads(line)
        except json.JSONDecodeError as e:
            problems.append(f"line {n}: invalid JSON: {e}")
            continue
        iid = item.get("id", f"line {n}")
        if iid in ids:
            problems.append(f"{iid}: duplicate id")
        ids.add(iid)
        for t in item["turns"]:
            if not item["answerable"]:
                if t["expected"] or t["facts"] or t["computedFacts"]:
                    problems.append(f"{iid}: unanswerable but has expected/facts")
                continue
            if not t["expected"]:
                problems.append(f"{iid}: answerable without expected sections")
            for tp in t["expected"]:
                if tp in hidden:
                    problems.append(f"{iid}: expected section not visible to the default user: {tp}")
                elif tp not in visible:
                    problems.append(f"{iid}: no such section: {tp}")
            texts = [visible.get(tp, "") for tp in t["expected"]]
            for fact in t["facts"]:
                if not any(fact in tx for tx in texts):
                    problems.append(f"{iid}: fact not in its expected sections: {fact}")
    for p in problems:
        print(p)
    print(f"{qset}: {len(ids)} items, {len(problems)} problems")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
