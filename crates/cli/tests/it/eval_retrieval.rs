//! `ragtrail eval` on the tiny BEIR fixture (`tests/fixtures/beir-tiny`): every expected figure
//! is derived by hand from the rankings, query by query, in the comments.
//!
//! The library test uses a topic embedder (four topics, one dimension each) so that the vector
//! leg, RRF and min-max rankings are known exactly too; the CLI tests use the default embedder
//! and pin the BM25 figures, which do not depend on it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use ragtrail::Engine;
use ragtrail::eval::metrics::Scores;
use ragtrail::eval::retrieval::{self, ChunkShape, RetrievalOptions};
use ragtrail::{EmbedError, Embedder, EmbedderInfo};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/beir-tiny")
}

/// Counts words of four topics (plants, volcanoes, insects, the sea); L2-normalised.
struct TopicEmbedder;

const TOPICS: [&[&str]; 4] = [
    &[
        "chlorophyll",
        "photosynthesis",
        "plant",
        "plants",
        "pigments",
    ],
    &[
        "volcano",
        "volcanoes",
        "eruption",
        "magma",
        "lava",
        "hotspot",
    ],
    &[
        "honey",
        "bees",
        "nectar",
        "pollinate",
        "flowers",
        "pollination",
        "insects",
        "butterflies",
        "pollen",
        "blossoms",
    ],
    &["sea", "oceans", "moon", "tides"],
];

impl Embedder for TopicEmbedder {
    fn info(&self) -> EmbedderInfo {
        EmbedderInfo {
            kind: "test".into(),
            model: "topics-v1".into(),
            dims: 4,
            ..Default::default()
        }
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0f32; 4];
                for word in t
                    .split(|c: char| !c.is_alphanumeric())
                    .map(str::to_lowercase)
                {
                    for (i, topic) in TOPICS.iter().enumerate() {
                        if topic.contains(&word.as_str()) {
                            v[i] += 1.0;
                        }
                    }
                }
                let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                if norm > 0.0 {
                    v.iter_mut().for_each(|x| *x /= norm);
                }
                v
            })
            .collect())
    }
}

fn l2(x: f64) -> f64 {
    x.log2()
}

/// BM25 alone. q1 [d1 (2), d2 (1)]: ideal order, 1.0. q2 [d3 (0), d4 (1)], d8 (1) shares no
/// word: DCG 1/log2 3 over IDCG 1 + 1/log2 3; recall 1/2; MRR 1/2. q3 [d5 (1)], d6 (2) shares no
/// word: DCG 1 over IDCG 2 + 1/log2 3; recall 1/2; MRR 1. q6 matches nothing: 0. q4 (all
/// grade 0) and q5 (no text) are left out: the means are over 4 queries.
fn bm25_expected() -> Scores {
    let ndcg = (1.0 + (1.0 / l2(3.0)) / (1.0 + 1.0 / l2(3.0)) + 1.0 / (2.0 + 1.0 / l2(3.0))) / 4.0;
    Scores {
        ndcg_at_10: ndcg,
        recall_at_10: (1.0 + 0.5 + 0.5) / 4.0,
        recall_at_100: (1.0 + 0.5 + 0.5) / 4.0,
        mrr_at_10: (1.0 + 0.5 + 1.0) / 4.0,
    }
}

/// Vector alone (topic embedder). q1: d1 is all plants (cos 1), d2 also mentions the sea
/// (3/√10): [d1, d2], 1.0. q2: d3 (1), d4 (volcano, hotspot, sea: 2/√5), d8 (magma, lava, sea,
/// oceans: 1/√2): [d3, d4, d8], DCG 1/log2 3 + 1/log2 4 over 1 + 1/log2 3; recall 1; MRR 1/2.
/// q3: d5 (1), d6 (5 insect words and the sea: 5/√26): [d5, d6], DCG 1 + 2/log2 3 over
/// 2 + 1/log2 3; recall 1; MRR 1. q6: no topic word, a zero query: nothing.
///
/// RRF (k = 60) and min-max (BM25 weight 0.3) order every query the same way: in q2, d3 leads
/// both legs, d4 is second in both, d8 only in the vector leg (RRF 1/63; min-max 0, the vector
/// leg's minimum); in q3, d5 leads both legs and d6 is only in the vector leg, last.
fn fused_expected() -> Scores {
    let ndcg = (1.0
        + (1.0 / l2(3.0) + 0.5) / (1.0 + 1.0 / l2(3.0))
        + (1.0 + 2.0 / l2(3.0)) / (2.0 + 1.0 / l2(3.0)))
        / 4.0;
    Scores {
        ndcg_at_10: ndcg,
        recall_at_10: 3.0 / 4.0,
        recall_at_100: 3.0 / 4.0,
        mrr_at_10: (1.0 + 0.5 + 1.0) / 4.0,
    }
}

fn assert_scores(mode: &str, got: &Scores, want: &Scores) {
    for (name, g, w) in [
        ("nDCG@10", got.ndcg_at_10, want.ndcg_at_10),
        ("recall@10", got.recall_at_10, want.recall_at_10),
        ("recall@100", got.recall_at_100, want.recall_at_100),
        ("MRR@10", got.mrr_at_10, want.mrr_at_10),
    ] {
        assert!((g - w).abs() < 1e-9, "{mode} {name}: got {g}, want {w}");
    }
}

#[test]
fn every_mode_scores_the_hand_computed_values() {
    let set = retrieval::load(&fixture(), None).expect("fixture");
    assert_eq!(set.split, "test");
    assert_eq!(set.corpus.len(), 8);
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut engine = Engine::open_with(tmp.path(), Arc::new(TopicEmbedder)).expect("engine");
    let (summary, map) =
        retrieval::ingest(&mut engine, &set, ChunkShape::default(), &mut |_| {}).expect("ingest");
    assert_eq!(summary.chunks, 8);
    assert_eq!(map.len(), 8);
    let report =
        retrieval::evaluate(&engine, &map, &set, &RetrievalOptions::default()).expect("evaluate");
    assert_eq!(report.queries, 4);
    assert_eq!(report.skipped_no_relevant, 1);
    assert_eq!(report.skipped_missing_text, 1);
    let modes: Vec<&str> = report.modes.iter().map(|m| m.mode.as_str()).collect();
    assert_eq!(modes, ["bm25", "vector", "rrf:60", "minmax:0.3"]);
    assert_scores("bm25", &report.modes[0].scores, &bm25_expected());
    for m in &report.modes[1..] {
        assert_scores(&m.mode, &m.scores, &fused_expected());
    }
    // The rankings behind the figures.
    let top = |mode: &str, q: &str| -> Vec<String> {
        report
            .per_query
            .iter()
            .find(|r| r.mode == mode && r.query_id == q)
            .map(|r| r.top10.clone())
            .unwrap_or_default()
    };
    assert_eq!(top("bm25", "q2"), ["d3", "d4"]);
    assert_eq!(top("vector", "q2"), ["d3", "d4", "d8"]);
    assert_eq!(top("rrf:60", "q3"), ["d5", "d6"]);
    assert_eq!(top("minmax:0.3", "q2"), ["d3", "d4", "d8"]);
    assert!(top("bm25", "q6").is_empty());
    let q2 = report
        .per_query
        .iter()
        .find(|r| r.mode == "bm25" && r.query_id == "q2")
        .expect("q2");
    assert_eq!(
        q2.relevant,
        [("d4".to_string(), Some(2)), ("d8".to_string(), None)]
    );
}

fn ragtrail(args: &[&str], cwd: &Path) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ragtrail"))
        .args(args)
        .current_dir(cwd)
        // The figures pinned here are the hashing embedder's, whatever the environment says.
        .env("RAGTRAIL_EMBEDDER", "hashing")
        .env_remove("RAGTRAIL_LLM_BASE_URL")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("RAGTRAIL_LLM_MODEL")
        .output()
        .expect("run ragtrail");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn scores_of(mode: &serde_json::Value) -> Scores {
    let f = |k: &str| mode[k].as_f64().unwrap_or(f64::NAN);
    Scores {
        ndcg_at_10: f("ndcgAt10"),
        recall_at_10: f("recallAt10"),
        recall_at_100: f("recallAt100"),
        mrr_at_10: f("mrrAt10"),
    }
}

#[test]
fn eval_retrieval_cli_reports_json_table_and_per_query_lines() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let fixture = fixture();
    let per_query = tmp.path().join("per-query.jsonl");
    let (code, out, err) = ragtrail(
        &[
            "eval",
            "retrieval",
            "--beir",
            fixture.to_str().expect("utf-8 path"),
            "--json",
            "--per-query",
            per_query.to_str().expect("utf-8 path"),
        ],
        tmp.path(),
    );
    assert_eq!(code, 0, "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(report["dataset"], "beir-tiny");
    assert_eq!(report["split"], "test");
    assert_eq!(report["queries"], 4);
    assert_eq!(report["skippedNoRelevant"], 1);
    assert_eq!(report["skippedMissingText"], 1);
    let modes = report["modes"].as_array().expect("modes");
    let names: Vec<&str> = modes.iter().filter_map(|m| m["mode"].as_str()).collect();
    assert_eq!(names, ["bm25", "vector", "rrf:60", "minmax:0.3"]);
    // BM25 does not depend on the embedder: the same figures as with the topic embedder.
    assert_scores("bm25", &scores_of(&modes[0]), &bm25_expected());
    for m in modes {
        let s = scores_of(m);
        for v in [s.ndcg_at_10, s.recall_at_10, s.recall_at_100, s.mrr_at_10] {
            assert!((0.0..=1.0).contains(&v), "{m}");
        }
    }
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&per_query)
        .expect("per-query file")
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert_eq!(lines.len(), 4 * 4);
    let q3 = lines
        .iter()
        .find(|l| l["mode"] == "bm25" && l["queryId"] == "q3")
        .expect("q3");
    assert_eq!(q3["top10"], serde_json::json!(["d5"]));
    assert_eq!(q3["mrrAt10"], 1.0);

    // The table names the modes and the left-out queries.
    let (code, out, err) = ragtrail(
        &[
            "eval",
            "retrieval",
            "--beir",
            fixture.to_str().expect("utf-8 path"),
            "--modes",
            "bm25,rrf:10",
            "--timing",
        ],
        tmp.path(),
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("4 queries scored"), "{out}");
    assert!(out.contains("1 without a relevant document"), "{out}");
    assert!(
        out.contains("rrf:10") && out.contains("searchDocs q/s"),
        "{out}"
    );
    let bm25_row = out.lines().find(|l| l.starts_with("bm25 ")).unwrap_or("");
    assert!(
        bm25_row.split_whitespace().nth(1) == Some("0.4417"),
        "{out}"
    );
}

#[test]
fn eval_retrieval_cli_rejects_unknown_splits_and_missing_folders() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let fixture = fixture();
    let (code, _, err) = ragtrail(
        &[
            "eval",
            "retrieval",
            "--beir",
            fixture.to_str().expect("utf-8 path"),
            "--split",
            "dev",
        ],
        tmp.path(),
    );
    assert_eq!(code, 3);
    assert!(
        err.contains("no split \"dev\"") && err.contains("available: test"),
        "{err}"
    );
    let (code, _, err) = ragtrail(
        &["eval", "retrieval", "--beir", "no-such-folder"],
        tmp.path(),
    );
    assert_eq!(code, 3);
    assert!(err.contains("no-such-folder"), "{err}");
}

#[test]
fn eval_multihop_cli_reports_recall_by_round_and_keeps_traces() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let fixture = fixture();
    let out_dir = tmp.path().join("mh");
    let (code, out, err) = ragtrail(
        &[
            "eval",
            "multihop",
            "--beir",
            fixture.to_str().expect("utf-8 path"),
            "--planner",
            "offline",
            "--today",
            "2026-11-30",
            "--json",
            "--out",
            out_dir.to_str().expect("utf-8 path"),
        ],
        tmp.path(),
    );
    assert_eq!(code, 0, "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(report["questions"], 4);
    assert_eq!(report["maxRounds"], 3);
    let joint: Vec<f64> = report["jointRecallByRound"]
        .as_array()
        .expect("by round")
        .iter()
        .filter_map(|v| v.as_f64())
        .collect();
    let any: Vec<f64> = report["anyRecallByRound"]
        .as_array()
        .expect("by round")
        .iter()
        .filter_map(|v| v.as_f64())
        .collect();
    assert_eq!(joint.len(), 3);
    assert!(joint.windows(2).all(|w| w[0] <= w[1]), "{joint:?}");
    assert!(joint.iter().zip(&any).all(|(j, a)| j <= a));
    // q6 matches nothing: no round can find its document.
    let q6 = report["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|i| i["queryId"] == "q6")
        .expect("q6");
    assert_eq!(q6["goldSeenByRound"], serde_json::json!([0, 0, 0]));
    let md = std::fs::read_to_string(out_dir.join("report.md")).expect("report.md");
    assert!(
        md.contains("joint recall") && md.contains("[trace](traces/"),
        "{md}"
    );
    let traces = std::fs::read_dir(out_dir.join("traces"))
        .expect("traces")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        })
        .count();
    assert!(traces >= 4, "{traces} traces");
}

#[test]
fn search_ranked_goes_past_the_search_docs_cap_in_the_same_order() {
    use ragtrail::AccessContext;
    use ragtrail::Fusion;
    use ragtrail::eval::retrieval::BeirDoc;
    use ragtrail::{MAX_TOP_K, SearchRequest, internals::RankedRequest};

    let tmp = tempfile::tempdir().expect("tempdir");
    let mut engine = Engine::open(tmp.path()).expect("engine");
    // 80 documents that all match "glacier", each a little differently.
    let (documents, chunks): (Vec<_>, Vec<_>) = (0..80)
        .map(|i| {
            let text = format!("glacier {} ice sheet number {i}", "glacier ".repeat(i % 7));
            retrieval::document_chunk(
                &BeirDoc {
                    id: format!("doc{i}"),
                    title: format!("Note {i}"),
                    text,
                },
                ChunkShape::default(),
            )
        })
        .unzip();
    engine
        .replace_all(documents, chunks, None, &mut |_| {})
        .expect("load");
    let keywords = vec!["glacier".to_string()];
    let access = AccessContext::default();
    let ranked = |fusion: Fusion, depth: usize| {
        engine
            .search_ranked(&RankedRequest {
                keywords: &keywords,
                access: &access,
                fusion,
                depth,
            })
            .expect("ranked")
    };
    let deep = ranked(Fusion::Bm25Only, 70);
    assert_eq!(deep.len(), 70);
    assert!(deep.windows(2).all(|w| w[0].score >= w[1].score));
    assert!(
        deep.iter()
            .enumerate()
            .all(|(i, h)| h.bm25.map(|r| r.rank) == Some(i as u32 + 1) && h.vector.is_none())
    );
    // searchDocs shows the same ranking, cut at its cap.
    let mut req = SearchRequest::new(keywords.clone(), 100, access.clone());
    req.fusion = Some(Fusion::Bm25Only);
    let shown: Vec<String> = engine
        .search_docs(&req)
        .expect("search")
        .hits
        .into_iter()
        .map(|h| h.chunk_id)
        .collect();
    assert_eq!(shown.len(), MAX_TOP_K);
    let deep_ids: Vec<String> = deep.iter().map(|h| h.id.clone()).collect();
    assert_eq!(shown, deep_ids[..MAX_TOP_K]);
    // Fused rankings are as deep as asked too.
    assert_eq!(ranked(Fusion::Rrf { k: 60.0 }, 75).len(), 75);
    assert!(ranked(Fusion::VectorOnly, 60).len() <= 60);
}

#[test]
fn default_fusion_follows_the_embedder_and_a_request_overrides_it() {
    use ragtrail::AccessContext;
    use ragtrail::Fusion;
    use ragtrail::SearchRequest;

    let set = retrieval::load(&fixture(), None).expect("fixture");
    let tmp = tempfile::tempdir().expect("tempdir");
    // A model embedder (here a test one; kinds "local" and "http" alike): each leg weighed by
    // how far its best hit stands out.
    let mut engine = Engine::open_with(tmp.path(), Arc::new(TopicEmbedder)).expect("engine");
    assert_eq!(engine.settings.fusion, Fusion::Standout);
    retrieval::ingest(&mut engine, &set, ChunkShape::default(), &mut |_| {}).expect("ingest");
    let mut req = SearchRequest::new(vec!["volcano".into()], 5, AccessContext::default());
    let response = engine.search_docs(&req).expect("search");
    // The fusion actually used is what the response (and so the trace) records.
    assert_eq!(response.fusion.to_string(), "standout");
    // With its weight for this query, as every min-max mode records it.
    let weight = response.weights.expect("a weighted fusion").bm25;
    assert!((0.0..=1.0).contains(&weight), "{weight}");
    req.fusion = Some(Fusion::Rrf { k: 60.0 });
    assert_eq!(
        engine.search_docs(&req).expect("search").fusion.to_string(),
        "rrf:60"
    );

    // The lexical hashing embedder: BM25 leads, the vector leg weighs by agreement.
    let tmp = tempfile::tempdir().expect("tempdir");
    let engine = Engine::open(tmp.path()).expect("engine");
    assert_eq!(engine.settings.fusion.to_string(), "agree:0.5");
}
