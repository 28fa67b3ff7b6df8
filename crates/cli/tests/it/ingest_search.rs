//! Ingest and BM25 search on a real on-disk index.

use crate::common::*;
use ragtrail::AccessContext;
use ragtrail::SearchRequest;
use ragtrail::{Engine, IngestOptions};

#[test]
fn chinese_keywords_find_chinese_text_and_hits_carry_the_record_fields() {
    let ws = Workspace::new();
    ws.write("finance/travel.md", TRAVEL);
    ws.write("hr/leave.md", LEAVE_EN);
    let mut engine = ws.engine();
    let summary = ws.ingest(&mut engine);
    assert_eq!(summary.added, vec!["finance/travel.md", "hr/leave.md"]);
    let hits = search(&engine, &["高铁票", "报销凭证"], 5);
    let first = &hits[0];
    assert_eq!(first.title_path, "差旅报销制度 / 交通费 / 火车票");
    assert_eq!(first.source_uri, "finance/travel.md#火车票");
    assert!(first.snippet.contains("铁路电子客票报销凭证"));
    assert_eq!(
        first.metadata.get("bm25Rank").map(String::as_str),
        Some("1")
    );
    assert_eq!(
        first.metadata.get("version").map(String::as_str),
        Some("2026-03")
    );
    assert_eq!(
        first.metadata.get("tenant").map(String::as_str),
        Some("default")
    );
    assert!(first.score > 0.0);
    let json = serde_json::to_value(first).expect("json");
    let keys: Vec<_> = json.as_object().expect("object").keys().cloned().collect();
    assert_eq!(
        keys,
        vec![
            "chunkId",
            "metadata",
            "score",
            "snippet",
            "sourceUri",
            "titlePath"
        ]
    );
}

#[test]
fn english_keywords_are_stemmed() {
    let ws = Workspace::new();
    ws.write("hr/leave.md", LEAVE_EN);
    let mut engine = ws.engine();
    ws.ingest(&mut engine);
    let hits = search(&engine, &["doctors", "notes"], 3);
    assert_eq!(hits[0].title_path, "Leave Policy / Sick leave");
}

#[test]
fn second_ingest_reports_everything_unchanged_and_keeps_ids() {
    let ws = Workspace::new();
    ws.write("finance/travel.md", TRAVEL);
    ws.write("hr/leave.md", LEAVE_EN);
    let mut engine = ws.engine();
    ws.ingest(&mut engine);
    let ids: Vec<String> = engine
        .store()
        .chunks()
        .expect("chunk records")
        .iter()
        .map(|c| c.id.clone())
        .collect();
    let generation = engine.store().generation();
    let again = ws.ingest(&mut engine);
    assert!(again.added.is_empty() && again.changed.is_empty() && again.removed.is_empty());
    assert_eq!(again.unchanged, 2);
    assert_eq!(
        engine.store().generation(),
        generation,
        "no new generation for no change"
    );
    let reopened = ws.engine();
    let ids_after: Vec<String> = reopened
        .store()
        .chunks()
        .expect("chunk records")
        .iter()
        .map(|c| c.id.clone())
        .collect();
    assert_eq!(ids, ids_after);
}

#[test]
fn a_changed_file_replaces_only_its_chunks_and_edited_text_keeps_its_id() {
    let ws = Workspace::new();
    ws.write("finance/travel.md", TRAVEL);
    ws.write("hr/leave.md", LEAVE_EN);
    let mut engine = ws.engine();
    ws.ingest(&mut engine);
    let before = engine.store().chunks().expect("chunk records").to_vec();
    ws.write(
        "finance/travel.md",
        &TRAVEL.replace("截图不予报销", "截图一律不予报销"),
    );
    let summary = ws.ingest(&mut engine);
    assert_eq!(summary.changed, vec!["finance/travel.md"]);
    assert_eq!(summary.unchanged, 1);
    let after = engine.store().chunks().expect("chunk records").to_vec();
    assert_eq!(before.len(), after.len());
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(b.id, a.id, "ids name places");
        let edited = a.title_path.ends_with("火车票");
        assert_eq!(b.content_hash != a.content_hash, edited, "{}", a.title_path);
    }
    // The index reflects the edit, and no stale copy of the old text is searchable.
    let hits = search(&engine, &["一律"], 5);
    assert_eq!(hits.len(), 1);
    assert_eq!(
        hits[0].chunk_id,
        before
            .iter()
            .find(|c| c.title_path.ends_with("火车票"))
            .map(|c| c.id.clone())
            .unwrap_or_default()
    );
    // BM25 alone: a stale copy of the old text would show up as a second hit.
    let mut req = SearchRequest::new(vec!["高铁票".into()], 10, AccessContext::default());
    req.fusion = Some(ragtrail::Fusion::Bm25Only);
    let rail = engine.search_docs(&req).expect("search").hits;
    assert_eq!(
        rail.len(),
        1,
        "the old version of the chunk must be gone from the index"
    );
}

#[test]
fn a_deleted_file_disappears_from_store_and_index() {
    let ws = Workspace::new();
    ws.write("finance/travel.md", TRAVEL);
    ws.write("hr/leave.md", LEAVE_EN);
    let mut engine = ws.engine();
    ws.ingest(&mut engine);
    ws.remove("hr/leave.md");
    let summary = ws.ingest(&mut engine);
    assert_eq!(summary.removed, vec!["hr/leave.md"]);
    assert!(
        engine
            .store()
            .chunks()
            .expect("chunk records")
            .iter()
            .all(|c| c.source != "hr/leave.md")
    );
    assert!(search(&engine, &["annual", "leave"], 5).is_empty());
    assert_eq!(
        engine.index().num_chunks() as usize,
        engine.store().chunks().expect("chunk records").len()
    );
}

#[test]
fn superseded_documents_are_hidden_unless_asked_for() {
    let ws = Workspace::new();
    ws.write("finance/travel.md", TRAVEL);
    ws.write(
        "finance/travel-2024.md",
        &TRAVEL
            .replace("status: active", "status: superseded")
            .replace("600元", "500元")
            .replace("差旅报销制度", "差旅报销制度（2024版）"),
    );
    let mut engine = ws.engine();
    ws.ingest(&mut engine);
    let hits = search(&engine, &["一线城市", "住宿"], 10);
    assert!(!hits.is_empty());
    assert!(
        hits.iter()
            .all(|h| !h.source_uri.starts_with("finance/travel-2024.md")),
        "{hits:?}"
    );
    let mut req = SearchRequest::new(
        vec!["一线城市".into(), "住宿".into()],
        10,
        AccessContext::default(),
    );
    req.include_superseded = true;
    let all = engine.search_docs(&req).expect("search").hits;
    assert!(
        all.iter()
            .any(|h| h.source_uri.starts_with("finance/travel-2024.md"))
    );
}

#[test]
fn tenant_and_role_filters_apply_before_top_k() {
    let ws = Workspace::new();
    ws.write("finance/travel.md", TRAVEL);
    ws.write(
        "globex/travel.md",
        &TRAVEL
            .replace("tenant: default", "tenant: globex")
            .replace("差旅报销制度", "Globex 差旅"),
    );
    ws.write("hr/internal.md", "---\ntitle: HR 内部\nroles: [hr]\n---\n\n## 病假核查\n\n高铁票 报销凭证 高铁票 报销凭证 内部核查流程。\n");
    let mut engine = ws.engine();
    ws.ingest(&mut engine);
    let staff = search(&engine, &["高铁票", "报销凭证"], 1);
    assert_eq!(staff.len(), 1);
    assert_eq!(staff[0].title_path, "差旅报销制度 / 交通费 / 火车票");
    let everything = search(&engine, &["高铁票", "报销凭证", "住宿", "内部"], 50);
    assert!(
        everything
            .iter()
            .all(|h| h.metadata.get("tenant").map(String::as_str) == Some("default"))
    );
    assert!(
        everything
            .iter()
            .all(|h| !h.source_uri.starts_with("hr/internal.md"))
    );
    let hr = search_as(
        &engine,
        &["内部", "核查"],
        5,
        AccessContext::new("default", ["hr"]),
    );
    assert_eq!(hr[0].source_uri, "hr/internal.md#病假核查");
    let globex = search_as(
        &engine,
        &["高铁票"],
        5,
        AccessContext::new("globex", Vec::<String>::new()),
    );
    assert!(!globex.is_empty() && globex.iter().all(|h| h.title_path.starts_with("Globex")));
}

#[test]
fn hostile_keywords_are_terms_not_syntax() {
    let ws = Workspace::new();
    ws.write("finance/travel.md", TRAVEL);
    ws.write(
        "globex/travel.md",
        &TRAVEL.replace("tenant: default", "tenant: globex"),
    );
    let mut engine = ws.engine();
    ws.ingest(&mut engine);
    for keywords in [
        vec!["tenant:globex OR *"],
        vec!["*"],
        vec!["\"高铁票\" AND tenant:globex"],
        vec!["roles:hr", "status:superseded"],
        vec!["'; DROP TABLE chunks; --"],
        vec!["\\", "[", "(", "^2", "~"],
    ] {
        let hits = search(&engine, &keywords, 50);
        assert!(
            hits.iter()
                .all(|h| h.metadata.get("tenant").map(String::as_str) == Some("default")),
            "{keywords:?}"
        );
    }
    assert!(search(&engine, &["*"], 5).is_empty());
    let long = "报".repeat(10_000);
    let too_long = engine.search_docs(&SearchRequest::new(vec![long], 5, AccessContext::default()));
    assert!(too_long.is_err_and(|e| e.to_string().contains("limit")));
    let many: Vec<String> = (0..1000).map(|i| format!("词{i}")).collect();
    assert!(
        engine
            .search_docs(&SearchRequest::new(many, 5, AccessContext::default()))
            .is_err()
    );
    let empty = engine.search_docs(&SearchRequest::new(
        vec!["  ".into()],
        5,
        AccessContext::default(),
    ));
    assert!(empty.is_err());
}

#[test]
fn bad_input_is_reported_not_fatal_and_malformed_front_matter_leaves_the_index_alone() {
    let ws = Workspace::new();
    ws.write("finance/travel.md", TRAVEL);
    ws.write("empty.md", "\n\n");
    std::fs::write(
        ws.knowledge().join("image.md"),
        [0x89u8, b'P', b'N', b'G', 0, 0],
    )
    .expect("write");
    let mut engine = ws.engine();
    let summary = ws.ingest(&mut engine);
    let mut skipped: Vec<_> = summary.skipped.iter().map(|s| s.path.as_str()).collect();
    skipped.sort();
    assert_eq!(skipped, vec!["empty.md", "image.md"]);
    assert_eq!(summary.added, vec!["finance/travel.md"]);
    ws.write("hr/bad.md", "---\ntitle: bad\nroles: [hr\n---\n\nx\n");
    let generation = engine.store().generation();
    let err = engine
        .ingest(&ws.knowledge(), &IngestOptions::default(), &mut |_| {})
        .expect_err("must fail");
    assert!(err.to_string().contains("hr/bad.md:"), "{err}");
    assert_eq!(engine.store().generation(), generation);
    assert!(!search(&engine, &["高铁票"], 5).is_empty());
}

#[test]
fn missing_knowledge_folder_is_a_clear_error() {
    let ws = Workspace::new();
    let mut engine = ws.engine();
    let err = engine
        .ingest(&ws.knowledge(), &IngestOptions::default(), &mut |_| {})
        .expect_err("missing");
    assert!(err.to_string().contains("does not exist"), "{err}");
}

#[test]
fn hits_dropped_as_weak_are_replaced_from_further_down_the_fused_list() {
    let ws = Workspace::new();
    // Short sections that look like "alpha" to the character n-gram vectors without containing
    // the word, and one long section that contains it but is diluted among other words.
    for i in 0..6 {
        ws.write(
            &format!("near/n{i}.md"),
            &format!("# Near {i}\n\nalphabet alphanumeric alphabetical {i}\n"),
        );
    }
    ws.write(
        "target.md",
        "# Target\n\nThe alpha release ships with many unrelated words about shipping schedules, \
         storage quotas, meeting rooms, printer queues, parking permits and lunch menus.\n",
    );
    let mut engine = ws.engine();
    ws.ingest(&mut engine);
    // Every hit without a key term is weak, whatever its vector score.
    engine.settings.vector_only_floor = 2.0;
    let mut req = SearchRequest::new(vec!["alpha".into()], 1, AccessContext::default());
    req.fusion = Some(ragtrail::Fusion::VectorOnly);
    let resp = engine.search_docs(&req).expect("search");
    let rank = resp
        .hits
        .first()
        .and_then(|h| h.metadata.get("vectorRank").cloned());
    let titles: Vec<&str> = resp.hits.iter().map(|h| h.title_path.as_str()).collect();
    assert_eq!(titles, ["Target"]);
    // The case this guards: the vector leg ranked it below the first cut of 2 × topK.
    let rank: u32 = rank.expect("vector rank").parse().expect("number");
    assert!(
        rank > 2,
        "vector rank {rank}: the test no longer reaches the second cut"
    );
}

#[test]
fn the_hashing_embedder_searches_the_keywords_even_when_a_question_is_given() {
    let ws = Workspace::new();
    ws.write("finance/travel.md", TRAVEL);
    ws.write("hr/leave.md", LEAVE_EN);
    let mut engine = ws.engine();
    ws.ingest(&mut engine);
    let mut req = SearchRequest::new(vec!["高铁".into()], 5, AccessContext::default());
    req.fusion = Some(ragtrail::Fusion::VectorOnly);
    let keywords_only = engine.search_docs(&req).expect("search").hits;
    assert!(!keywords_only.is_empty());
    // Character n-grams of a whole sentence match worse than the keywords (BENCHMARKS.md), so
    // the question is not embedded: the same hits, in the same order, with the same scores.
    req.query = Some("How many days of annual leave do I get?".into());
    let with_question = engine.search_docs(&req).expect("search").hits;
    assert_eq!(with_question, keywords_only);
    // A question longer than any question is refused, not embedded.
    req.query = Some("x".repeat(ragtrail::internals::MAX_QUERY_CHARS + 1));
    assert!(engine.search_docs(&req).is_err());
}

#[test]
fn a_renamed_heading_over_unchanged_text_gets_a_new_vector() {
    let ws = Workspace::new();
    ws.write("hr/leave.md", TWO_SECTIONS);
    let counting = CountingHashing::new();
    let mut engine = Engine::open_with(&ws.data(), counting.clone()).expect("open");
    ws.ingest(&mut engine);
    let before = counting.count();
    ws.write("hr/leave.md", TWO_SECTIONS_RENAMED);
    // A file that sorts first moves the unchanged section to another row.
    ws.write(
        "finance/a.md",
        "# Meals\n\nDinner is paid up to 40 euros.\n",
    );
    ws.ingest(&mut engine);
    // A vector embeds the heading path with the text: only the renamed section and the new
    // file are embedded.
    assert_eq!(counting.count() - before, 2);
    let store = engine.store();
    let chunks = store.chunks().expect("chunk records");
    assert!(chunks.iter().any(|c| c.title_path.ends_with("Illness")));
    // Each row, the one reused as the one embedded anew, is its own chunk's vector, read from
    // the files the ingest wrote.
    assert!(store.vectors().is_mapped());
    for (row, chunk) in chunks.iter().enumerate() {
        let want = ragtrail::HashingEmbedder::default().embed_batch(&[format!(
            "{}\n{}",
            chunk.title_path, chunk.text
        )
        .as_str()]);
        assert_eq!(
            store.vectors().row(row),
            want[0].as_slice(),
            "{}",
            chunk.title_path
        );
    }
}

#[test]
fn every_min_max_search_reports_the_weights_it_gave_the_legs() {
    let ws = Workspace::new();
    ws.write("finance/travel.md", TRAVEL);
    ws.write("hr/leave.md", LEAVE_EN);
    let mut engine = ws.engine();
    ws.ingest(&mut engine);
    let mut req = SearchRequest::new(
        vec!["高铁票".into(), "报销凭证".into()],
        5,
        AccessContext::default(),
    );
    // The hashing default weighs by agreement: a weight, no lexical confidence.
    let default = engine.search_docs(&req).expect("search");
    assert_eq!(default.fusion.to_string(), "agree:0.5");
    let w = default.weights.expect("agree is a min-max mode");
    assert!((0.5..=1.0).contains(&w.bm25), "{w:?}");
    assert_eq!(w.lexical_confidence, None);
    // Confidence fusion: BM25's best hit, the train-ticket section, holds the keywords and
    // stands ahead of the rest, so BM25 keeps the lead and the weight says how much.
    req.fusion = Some("confidence:1".parse().expect("fusion"));
    let confident = engine.search_docs(&req).expect("search");
    assert_eq!(
        confident.hits[0].title_path,
        "差旅报销制度 / 交通费 / 火车票"
    );
    assert_eq!(
        confident.hits[0]
            .metadata
            .get("bm25Rank")
            .map(String::as_str),
        Some("1")
    );
    let w = confident.weights.expect("confidence is a min-max mode");
    let c = w.lexical_confidence.expect("the confidence it read");
    assert!(c > 0.0 && c <= 1.0, "{w:?}");
    assert!(
        (w.bm25 - c).abs() < 1e-12,
        "at weight 1, BM25's weight is c: {w:?}"
    );
    // The same keywords under RRF: no weights to report.
    req.fusion = Some(ragtrail::Fusion::Rrf { k: 60.0 });
    assert_eq!(engine.search_docs(&req).expect("search").weights, None);
}
