"""Side-by-side with bm25s on a BEIR-format set: nDCG@10, recall@100 and single-thread queries/s.

    python bench/peer_bm25s.py bm25s   --beir DIR --split NAME --k 100 --out FILE
    python bench/peer_bm25s.py compare --beir DIR --split NAME PEER.json[,…] LABEL=RAGTRAIL.json[,…][:PERQUERY.jsonl] ...

`bm25s` indexes title + text as one field (English stop words, Snowball English stemmer, the
bm25s defaults k1 = 1.5, b = 0.75, method "lucene"), then times retrieval of every judged query,
top k, on one thread (best of 3 passes; index build excluded; query tokenization timed apart).

`compare` prints one table: the peer's figures and each ragtrail run's (`ragtrail eval retrieval
--json`). Where a per-query file is given, nDCG@10 is recomputed here from ragtrail's top 10 with
the same code that scores bm25s, as an independent check of ragtrail's own scoring.
"""

import argparse
import json
import math
import os
import sys
import time


def load_beir(folder, split):
    corpus = []
    with open(os.path.join(folder, "corpus.jsonl"), encoding="utf-8") as f:
        for line in f:
            if line.strip():
                d = json.loads(line)
                corpus.append((str(d["_id"]), d.get("title") or "", d.get("text") or ""))
    queries = {}
    with open(os.path.join(folder, "queries.jsonl"), encoding="utf-8") as f:
        for line in f:
            if line.strip():
                q = json.loads(line)
                queries[str(q["_id"])] = q["text"]
    qrels = {}
    with open(os.path.join(folder, "qrels", split + ".tsv"), encoding="utf-8") as f:
        for i, line in enumerate(f):
            cols = line.rstrip("\n").split("\t")
            if len(cols) != 3:
                continue
            try:
                grade = int(cols[2])
            except ValueError:
                if i == 0:
                    continue
                raise
            qrels.setdefault(cols[0], {})[cols[1]] = grade
    # Judged queries with a relevant document and a text, in queries.jsonl order (as ragtrail).
    judged = [q for q in queries if q in qrels and any(g >= 1 for g in qrels[q].values())]
    return corpus, queries, qrels, judged


def ndcg_at(ranked, judgments, k=10):
    seen, dcg = set(), 0.0
    pos = 0
    for d in ranked:
        if d in seen:
            continue
        seen.add(d)
        if pos >= k:
            break
        dcg += max(judgments.get(d, 0), 0) / math.log2(pos + 2)
        pos += 1
    ideal = sorted((g for g in judgments.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg


def recall_at(ranked, judgments, k):
    rel = {d for d, g in judgments.items() if g >= 1}
    return len(rel & set(ranked[:k])) / len(rel)


def run_bm25s(args):
    import bm25s
    import Stemmer

    try:
        from threadpoolctl import threadpool_info

        pools = [
            {k: p.get(k) for k in ("internal_api", "num_threads", "architecture")}
            for p in threadpool_info()
        ]
    except ImportError:
        pools = "threadpoolctl not installed"
    corpus, queries, qrels, judged = load_beir(args.beir, args.split)
    stemmer = Stemmer.Stemmer("english")
    texts = [t + " " + x for _, t, x in corpus]
    ids = [d for d, _, _ in corpus]
    started = time.perf_counter()
    corpus_tokens = bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False)
    retriever = bm25s.BM25()
    retriever.index(corpus_tokens, show_progress=False)
    build_s = time.perf_counter() - started
    qtexts = [queries[q] for q in judged]
    best_tok, best_ret, results = math.inf, math.inf, None
    for _ in range(3):
        t0 = time.perf_counter()
        qtok = bm25s.tokenize(
            qtexts, stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False
        )
        t1 = time.perf_counter()
        docs, _scores = retriever.retrieve(qtok, k=args.k, n_threads=0, show_progress=False)
        t2 = time.perf_counter()
        best_tok, best_ret = min(best_tok, t1 - t0), min(best_ret, t2 - t1)
        results = docs
    n = len(judged)
    ranked = [[ids[i] for i in row] for row in results]
    out = {
        "engine": "bm25s " + getattr(bm25s, "__version__", "?"),
        "backend": retriever.backend,
        "threadpools": pools,
        "documents": len(corpus),
        "queries": n,
        "k": args.k,
        "indexSeconds": build_s,
        "ndcgAt10": sum(ndcg_at(r, qrels[q]) for r, q in zip(ranked, judged)) / n,
        "recallAt100": sum(recall_at(r, qrels[q], 100) for r, q in zip(ranked, judged)) / n,
        "retrieveQps": n / best_ret,
        "tokenizeAndRetrieveQps": n / (best_tok + best_ret),
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=2)
    print(json.dumps(out, indent=2), file=sys.stderr)


def compare(args):
    _, _, qrels, judged = load_beir(args.beir, args.split)
    # Several runs of each side (comma-separated files): the best throughput of each is kept,
    # the machines being shared; the quality figures are the same in every run.
    peers = []
    for path in args.peer.split(","):
        with open(path, encoding="utf-8") as f:
            peers.append(json.load(f))
    peer = max(peers, key=lambda p: p["retrieveQps"])
    peer["tokenizeAndRetrieveQps"] = max(p["tokenizeAndRetrieveQps"] for p in peers)
    rows = []
    for spec in args.ragtrail:
        label, _, rest = spec.partition("=")
        report_paths, _, per_query = rest.partition(":")
        modes = []
        for path in report_paths.split(","):
            with open(path, encoding="utf-8") as f:
                report = json.load(f)
            modes.append(next(m for m in report["modes"] if m["mode"] == "bm25"))
        mode = dict(modes[0])
        if all(m.get("timing") for m in modes):
            mode["timing"] = {
                k: max(m["timing"][k] for m in modes) for k in ("rankedQps", "searchDocsQps")
            }
        check = None
        if per_query:
            tops = {}
            with open(per_query, encoding="utf-8") as f:
                for line in f:
                    r = json.loads(line)
                    if r["mode"] == "bm25":
                        tops[r["queryId"]] = r["top10"]
            check = sum(ndcg_at(tops.get(q, []), qrels[q]) for q in judged) / len(judged)
        rows.append((label, mode, check))
    print(
        f"{peer['queries']} queries, {peer['documents']} documents, top {peer['k']}, one thread; "
        f"best of {len(peers)} interleaved runs per engine\n"
    )
    print("| engine | nDCG@10 | R@100 | queries/s | vs bm25s nDCG@10 | vs bm25s q/s |")
    print("|---|---|---|---|---|---|")
    print(
        f"| {peer['engine']} ({peer['backend']}; retrieve only) | {peer['ndcgAt10']:.4f} | "
        f"{peer['recallAt100']:.4f} | {peer['retrieveQps']:,.0f} | | |"
    )
    print(
        f"| {peer['engine']} (tokenize + retrieve) | | | {peer['tokenizeAndRetrieveQps']:,.0f} | | |"
    )
    for label, m, check in rows:
        t = m.get("timing") or {}
        qps = t.get("rankedQps", float("nan"))
        note = f" (recomputed here: {check:.4f})" if check is not None else ""
        print(
            f"| ragtrail {label} (BM25 leg, analysis included) | {m['ndcgAt10']:.4f}{note} | "
            f"{m['recallAt100']:.4f} | {qps:,.0f} | {m['ndcgAt10'] - peer['ndcgAt10']:+.4f} | "
            f"{qps / peer['retrieveQps']:.2f}× |"
        )
        if "searchDocsQps" in t:
            print(
                f"| ragtrail {label} (full searchDocs, top 10) | | | {t['searchDocsQps']:,.0f} | | "
                f"{t['searchDocsQps'] / peer['retrieveQps']:.2f}× |"
            )


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("bm25s")
    a.add_argument("--beir", required=True)
    a.add_argument("--split", default="train")
    a.add_argument("--k", type=int, default=100)
    a.add_argument("--out", required=True)
    c = sub.add_parser("compare")
    c.add_argument("--beir", required=True)
    c.add_argument("--split", default="train")
    c.add_argument("peer", help="PEER.json[,PEER.json…]")
    c.add_argument("ragtrail", nargs="+", help="LABEL=REPORT.json[,REPORT.json…][:PERQUERY.jsonl]")
    args = p.parse_args()
    if args.cmd == "bm25s":
        run_bm25s(args)
    else:
        compare(args)


if __name__ == "__main__":
    main()
