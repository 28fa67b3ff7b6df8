//! PostgreSQL + pgvector as the system of record, against a real server (a fresh database per
//! test; see `tests/common/pg.rs`).

use std::path::Path;
use std::sync::Arc;

use crate::common::pg::{TestDb, exec, server_url, with_database};
use crate::common::*;
use ragtrail::AccessContext;
use ragtrail::Fusion;
use ragtrail::internals::Bm25Index;
use ragtrail::internals::SplitMix64 as Rng;
use ragtrail::{DocStatus, internals::Chunk, internals::Document};
use ragtrail::{EmbedderInfo, HashingEmbedder};
use ragtrail::{Engine, EngineError, IngestOptions};
use ragtrail::{IterativeScan, MIGRATOR, PgError, PgSettings, PgStore, VectorSearchMode};
use ragtrail::{SearchError, SearchHit, SearchRequest};
use sqlx::AssertSqlSafe;

fn pg_engine(data: &Path, db: &TestDb) -> Engine {
    Engine::open_postgres(data, &db.url, Arc::new(HashingEmbedder::default())).expect("open")
}

fn pg_engine_with(data: &Path, db: &TestDb, settings: PgSettings, dims: usize) -> Engine {
    let store = PgStore::connect(&db.url, settings).expect("connect");
    Engine::open_with_pg_store(data, store, Arc::new(HashingEmbedder::new(dims))).expect("open")
}

fn scalar_i64(store: &PgStore, sql: &str) -> i64 {
    store
        .block_on(
            sqlx::query_scalar::<_, i64>(AssertSqlSafe(sql.to_string())).fetch_one(store.pool()),
        )
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

fn scalar_text(store: &PgStore, sql: &str) -> String {
    store
        .block_on(
            sqlx::query_scalar::<_, Option<String>>(AssertSqlSafe(sql.to_string()))
                .fetch_one(store.pool()),
        )
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .unwrap_or_default()
}

/// Every row's identity and version (`xmin` changes whenever a row is rewritten).
fn fingerprint(store: &PgStore) -> String {
    [
        "select data_version::text || ':' || coalesce(last_run::text, '-') from kb_state",
        "select count(*)::text from ingest_runs",
        "select string_agg(source || ':' || xmin::text, ',' order by source) from documents",
        "select string_agg(pk || ':' || xmin::text || ':' || id || ':' || content_hash, ',' order by pk) from chunks",
        "select string_agg(chunk_pk || ':' || xmin::text, ',' order by chunk_pk) from vectors_1",
    ]
    .iter()
    .map(|sql| scalar_text(store, sql))
    .collect::<Vec<_>>()
    .join("\n")
}

fn rows_of(store: &PgStore, source: &str) -> Vec<(i64, String, String, String)> {
    store
        .block_on(
            sqlx::query_as::<_, (i64, String, String, String)>(
                "select pk, xmin::text, id, content_hash from chunks where document = $1 order by seq",
            )
            .bind(source)
            .fetch_all(store.pool()),
        )
        .expect("rows")
}

fn bm25(engine: &Engine, keywords: &[&str], access: AccessContext) -> Vec<(String, f64)> {
    let mut req = SearchRequest::new(keywords.iter().map(|s| s.to_string()).collect(), 10, access);
    req.fusion = Some(Fusion::Bm25Only);
    engine
        .search_docs(&req)
        .expect("search")
        .hits
        .into_iter()
        .map(|h| (h.chunk_id, h.score))
        .collect()
}

#[test]
fn test_database_urls_name_the_database() {
    assert_eq!(
        with_database("postgres://u@h:5/postgres", "x"),
        "postgres://u@h:5/x"
    );
    assert_eq!(
        with_database("postgres://u:p@h/db?sslmode=disable", "y"),
        "postgres://u:p@h/y?sslmode=disable"
    );
    assert_eq!(with_database("postgres://h", "z"), "postgres://h/z");
}

#[test]
fn migrations_apply_from_empty_and_are_idempotent() {
    let db = TestDb::new();
    let manual = PgSettings {
        auto_migrate: false,
        ..PgSettings::default()
    };
    let err = PgStore::connect(&db.url, manual.clone()).expect_err("pending migrations");
    assert!(
        matches!(err, PgError::MigrationsPending { pending, .. } if pending == MIGRATOR.iter().count()),
        "{err}"
    );
    assert!(err.to_string().contains("ragtrail migrate"), "{err}");

    let (store, applied) =
        PgStore::connect_and_migrate(&db.url, PgSettings::default()).expect("migrate");
    let all: Vec<i64> = MIGRATOR.iter().map(|m| m.version).collect();
    assert_eq!(applied, all);
    assert_eq!(
        scalar_i64(
            &store,
            "select count(*) from information_schema.tables where table_schema = 'public' \
             and table_name in ('kb_state', 'documents', 'chunks', 'ingest_runs', 'embedding_spaces')"
        ),
        5
    );
    assert!(
        scalar_text(
            &store,
            "select extversion from pg_extension where extname = 'vector'"
        )
        .starts_with("0.8"),
    );
    assert_eq!(store.data_version().expect("version"), 0);
    let kb_id = store.kb_id().to_string();
    assert_eq!(kb_id.len(), 32);

    let (again, applied) =
        PgStore::connect_and_migrate(&db.url, PgSettings::default()).expect("migrate again");
    assert!(applied.is_empty(), "{applied:?}");
    assert_eq!(
        again.kb_id(),
        kb_id,
        "migrating again must not reset the knowledge base"
    );
    assert_eq!(
        scalar_i64(&again, "select count(*) from _sqlx_migrations"),
        all.len() as i64
    );
    // With everything applied, a store that never migrates connects fine.
    let manual_store = PgStore::connect(&db.url, manual).expect("connect without migrating");
    assert!(
        manual_store
            .pending_migrations()
            .expect("pending")
            .is_empty()
    );
}

#[test]
fn migrations_newer_than_the_binary_are_refused() {
    let db = TestDb::new();
    PgStore::connect_and_migrate(&db.url, PgSettings::default()).expect("migrate");
    exec(
        &db.url,
        "insert into _sqlx_migrations (version, description, success, checksum, execution_time) \
         values (99991231000000, 'from a future ragtrail', true, '\\x00', 0)",
    );
    for err in [
        PgStore::connect(&db.url, PgSettings::default()).expect_err("newer schema"),
        PgStore::connect_and_migrate(&db.url, PgSettings::default()).expect_err("newer schema"),
    ] {
        assert!(
            matches!(
                err,
                PgError::MigrationsNewer {
                    database: 99991231000000,
                    ..
                }
            ),
            "{err}"
        );
        let text = err.to_string();
        assert!(
            text.contains("newer ragtrail") && text.contains("Upgrade ragtrail"),
            "{text}"
        );
    }
}

#[test]
fn ingest_twice_changes_nothing() {
    let db = TestDb::new();
    let ws = Workspace::new();
    ws.write("finance/travel.md", TRAVEL);
    ws.write("hr/leave.md", LEAVE_EN);
    let mut engine = pg_engine(&ws.data(), &db);
    let first = ws.ingest(&mut engine);
    assert_eq!(first.added, vec!["finance/travel.md", "hr/leave.md"]);
    let store = engine.postgres().expect("postgres");
    let chunks = scalar_i64(store, "select count(*) from chunks");
    assert_eq!(chunks as usize, first.chunks);
    assert_eq!(
        scalar_i64(store, "select count(embedding) from vectors_1"),
        chunks
    );
    let before = fingerprint(store);

    let again = ws.ingest(&mut engine);
    assert!(again.added.is_empty() && again.changed.is_empty() && again.removed.is_empty());
    assert_eq!(again.unchanged, 2);
    assert_eq!(again.generation, first.generation);
    assert_eq!(fingerprint(engine.postgres().expect("postgres")), before);

    // A new process over the same data dir: nothing to repair, nothing to write.
    drop(engine);
    let mut engine = pg_engine(&ws.data(), &db);
    let third = ws.ingest(&mut engine);
    assert_eq!(third.unchanged, 2);
    assert_eq!(fingerprint(engine.postgres().expect("postgres")), before);
}

#[test]
fn a_renamed_heading_over_unchanged_text_is_embedded_again() {
    let db = TestDb::new();
    let ws = Workspace::new();
    ws.write("hr/leave.md", TWO_SECTIONS);
    let counting = CountingHashing::new();
    let mut engine = Engine::open_postgres(&ws.data(), &db.url, counting.clone()).expect("open");
    ws.ingest(&mut engine);
    let before = counting.count();
    ws.write("hr/leave.md", TWO_SECTIONS_RENAMED);
    ws.ingest(&mut engine);
    // The unchanged section reuses its stored vector; the renamed one is embedded afresh.
    assert_eq!(counting.count() - before, 1);
}

#[test]
fn chunks_of_the_markdown_text_format_are_rewritten_by_the_next_ingest() {
    let db = TestDb::new();
    let ws = Workspace::new();
    ws.write("finance/travel.md", TRAVEL);
    let mut engine = pg_engine(&ws.data(), &db);
    ws.ingest(&mut engine);
    let store = engine.postgres().expect("postgres");
    assert_eq!(
        store.text_format().expect("format"),
        ragtrail::internals::TEXT_FORMAT
    );
    // What a database written before plain text holds: format 1, chunks in Markdown.
    exec(&db.url, "update kb_state set text_format = 1");
    exec(
        &db.url,
        "update chunks set content = '| 一线城市 | 600元 |' where title_path = '差旅报销制度 / 住宿费'",
    );
    drop(engine);
    let mut engine = pg_engine(&ws.data(), &db);
    let again = ws.ingest(&mut engine);
    assert_eq!(again.changed, vec!["finance/travel.md"], "{again:?}");
    let store = engine.postgres().expect("postgres");
    assert_eq!(store.text_format().expect("format"), 2);
    let content = scalar_text(
        store,
        "select content from chunks where title_path = '差旅报销制度 / 住宿费'",
    );
    assert!(content.contains("城市：一线城市，标准：600元"), "{content}");
}

#[test]
fn a_changed_document_replaces_only_its_rows() {
    let db = TestDb::new();
    let ws = Workspace::new();
    ws.write("finance/travel.md", TRAVEL);
    ws.write("hr/leave.md", LEAVE_EN);
    let mut engine = pg_engine(&ws.data(), &db);
    ws.ingest(&mut engine);
    let store = engine.postgres().expect("postgres");
    let leave_before = rows_of(store, "hr/leave.md");
    let travel_before = rows_of(store, "finance/travel.md");
    let leave_doc_before = scalar_text(
        store,
        "select xmin::text from documents where source = 'hr/leave.md'",
    );

    ws.write(
        "finance/travel.md",
        &TRAVEL.replace(
            "机票须提供电子行程单。",
            "机票须提供电子行程单和登机牌存根。",
        ),
    );
    let summary = ws.ingest(&mut engine);
    assert_eq!(summary.changed, vec!["finance/travel.md"]);
    assert_eq!(summary.unchanged, 1);
    let store = engine.postgres().expect("postgres");
    assert_eq!(
        rows_of(store, "hr/leave.md"),
        leave_before,
        "untouched rows keep pk and xmin"
    );
    assert_eq!(
        scalar_text(
            store,
            "select xmin::text from documents where source = 'hr/leave.md'"
        ),
        leave_doc_before
    );
    let travel_after = rows_of(store, "finance/travel.md");
    assert_eq!(travel_after.len(), travel_before.len());
    for (old, new) in travel_before.iter().zip(&travel_after) {
        assert_ne!(old.0, new.0, "the changed document's rows are replaced");
        assert_eq!(old.2, new.2, "place-based ids survive an edit");
    }
    let edited = travel_before
        .iter()
        .zip(&travel_after)
        .filter(|(a, b)| a.3 != b.3)
        .count();
    assert_eq!(edited, 1, "exactly one chunk's text changed");
    assert_eq!(
        scalar_i64(store, "select count(*) from vectors_1"),
        scalar_i64(store, "select count(*) from chunks")
    );
    assert_eq!(
        scalar_i64(
            store,
            "select count(*) from ingest_runs where status = 'committed'"
        ),
        2
    );
    assert_eq!(
        scalar_i64(
            store,
            "select (changed * 10 + unchanged)::int8 from ingest_runs order by id desc limit 1"
        ),
        11
    );
    let hits = search(&engine, &["登机牌存根"], 3);
    assert_eq!(hits[0].title_path, "差旅报销制度 / 交通费 / 飞机票");
    assert!(
        hits[0].snippet.contains("登机牌存根"),
        "{}",
        hits[0].snippet
    );
}

fn synthetic_doc(d: usize, tenant: &str) -> Document {
    Document {
        source: format!("synthetic/d{d:04}.md"),
        title: format!("Doc {d}"),
        tenant: tenant.to_string(),
        roles: Vec::new(),
        version: None,
        updated: None,
        status: DocStatus::Active,
        content_hash: format!("{d:064x}"),
    }
}

fn synthetic_chunk(doc: &Document, id: u64, i: usize) -> Chunk {
    Chunk {
        id: format!("c_{id:016x}"),
        source: doc.source.clone(),
        title_path: format!("{} / part {i}", doc.title),
        headings: vec![format!("part {i}")],
        source_uri: format!("{}#part-{i}", doc.source),
        ordinal: 0,
        text: format!("synthetic text {id}"),
        content_hash: format!("{id:064x}"),
        tenant: doc.tenant.clone(),
        roles: doc.roles.clone(),
        version: None,
        updated: None,
        status: doc.status,
    }
}

#[test]
fn a_selective_filter_still_returns_top_k_through_the_hnsw_index() {
    const DOCS: usize = 200;
    const PER_DOC: usize = 100; // 20,000 rows; tenant "small" holds every 20th document: 5%
    const DIMS: usize = 32;
    const K: usize = 10;
    let db = TestDb::new();
    let store = PgStore::connect(&db.url, PgSettings::default()).expect("connect");
    let info = EmbedderInfo {
        kind: "synthetic".to_string(),
        model: "uniform-v1".to_string(),
        dims: DIMS as u32,
        ..Default::default()
    };
    let space = store.ensure_space(&info, false).expect("space");
    let mut rng = Rng(7);
    for d in 0..DOCS {
        let doc = synthetic_doc(d, if d.is_multiple_of(20) { "small" } else { "big" });
        let chunks: Vec<Chunk> = (0..PER_DOC)
            .map(|i| synthetic_chunk(&doc, (d * PER_DOC + i) as u64, i))
            .collect();
        let vectors: Vec<Vec<f32>> = (0..PER_DOC).map(|_| rng.vector(DIMS)).collect();
        store
            .write_document(None, &space, &doc, &chunks, &vectors)
            .expect("write");
    }
    assert!(store.ensure_hnsw_index(&space).expect("index"));
    assert!(
        !store.ensure_hnsw_index(&space).expect("index"),
        "created once"
    );
    exec(&db.url, &format!("analyze {}", space.table));
    assert_eq!(
        scalar_i64(
            &store,
            &format!(
                "select count(*) from {} where tenant = 'small'",
                space.table
            )
        ),
        (DOCS / 20 * PER_DOC) as i64
    );

    let small = AccessContext::new("small", Vec::<String>::new());
    let is_small = |id: &str| {
        let n = u64::from_str_radix(&id[2..], 16).expect("hex id") as usize;
        (n / PER_DOC).is_multiple_of(20)
    };
    let off = PgStore::connect(
        &db.url,
        PgSettings {
            iterative_scan: IterativeScan::Off,
            // pgvector's default: 40 candidates hold about two rows of a 5% tenant, so the
            // starved scan shows whatever the project's default is.
            hnsw_ef_search: 40,
            ..PgSettings::default()
        },
    )
    .expect("connect");
    let mut fewer = 0;
    let mut overlap = 0;
    const QUERIES: usize = 5;
    for _ in 0..QUERIES {
        let q = rng.vector(DIMS);
        let hits = store
            .vector_search(&space, &q, K, &small, false)
            .expect("search");
        assert_eq!(hits.hits.len(), K, "iterative scans return top-k");
        assert!(
            hits.hits.iter().all(|(id, _)| is_small(id)),
            "{:?}",
            hits.hits
        );
        assert!(hits.hits.windows(2).all(|w| w[0].1 >= w[1].1), "best first");
        let plan = store
            .explain_vector_search(VectorSearchMode::Hnsw, &space, &q, K, &small, false)
            .expect("explain");
        assert!(plan.contains("Index Scan using vectors_1_hnsw"), "{plan}");
        let exact = store
            .vector_search_with(VectorSearchMode::Exact, &space, &q, K, &small, false)
            .expect("exact");
        assert_eq!(exact.hits.len(), K);
        let exact_plan = store
            .explain_vector_search(VectorSearchMode::Exact, &space, &q, K, &small, false)
            .expect("explain");
        assert!(!exact_plan.contains("hnsw"), "{exact_plan}");
        overlap += hits
            .hits
            .iter()
            .filter(|h| exact.hits.iter().any(|e| e.0 == h.0))
            .count();
        let without = off
            .vector_search(&space, &q, K, &small, false)
            .expect("search");
        assert!(without.hits.iter().all(|(id, _)| is_small(id)));
        if without.hits.len() < K {
            fewer += 1;
        }
        // The unselective tenant is served by the index too.
        let big = AccessContext::new("big", Vec::<String>::new());
        assert_eq!(
            store
                .vector_search(&space, &q, K, &big, false)
                .expect("search")
                .hits
                .len(),
            K
        );
    }
    let recall = overlap as f64 / (QUERIES * K) as f64;
    eprintln!(
        "iterative scans off: {fewer}/{QUERIES} queries short of top-{K}; recall@{K} {recall}"
    );
    assert_eq!(
        fewer, QUERIES,
        "without iterative scans the filter starves the index scan"
    );
    assert!(recall >= 0.8, "HNSW recall@{K} against exact: {recall}");
}

/// Hits compared field by field; scores may differ in the last float bits between Rust's dot
/// product and pgvector's cosine distance.
fn assert_same_hits(context: &str, a: &[SearchHit], b: &[SearchHit]) {
    let ids = |h: &[SearchHit]| h.iter().map(|x| x.chunk_id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(a), ids(b), "{context}");
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x.title_path, y.title_path, "{context}");
        assert_eq!(x.snippet, y.snippet, "{context}");
        assert_eq!(x.source_uri, y.source_uri, "{context}");
        assert!(
            (x.score - y.score).abs() < 1e-4,
            "{context}: {} vs {}",
            x.score,
            y.score
        );
        let strip = |h: &SearchHit| {
            let mut m = h.metadata.clone();
            let v = m.remove("vectorScore");
            (m, v.and_then(|s| s.parse::<f64>().ok()))
        };
        let (mx, vx) = strip(x);
        let (my, vy) = strip(y);
        assert_eq!(mx, my, "{context}");
        match (vx, vy) {
            (Some(p), Some(q)) => assert!((p - q).abs() <= 1.5e-4, "{context}: {p} vs {q}"),
            (p, q) => assert_eq!(p, q, "{context}"),
        }
    }
}

#[test]
fn embedded_and_postgres_return_the_same_hits_on_the_bundled_knowledge() {
    let db = TestDb::new();
    let tmp = tempfile::tempdir().expect("tempdir");
    let knowledge = repo_root().join("knowledge");
    let mut embedded = Engine::open(&tmp.path().join("embedded")).expect("open");
    embedded
        .ingest(&knowledge, &IngestOptions::default(), &mut |_| {})
        .expect("ingest");
    let exact = PgSettings {
        vector_search: VectorSearchMode::Exact,
        ..PgSettings::default()
    };
    let mut pg = pg_engine_with(&tmp.path().join("pg"), &db, exact, 384);
    pg.ingest(&knowledge, &IngestOptions::default(), &mut |_| {})
        .expect("ingest");
    assert_eq!(pg.store().documents(), embedded.store().documents());
    let mut a: Vec<_> = embedded.store().chunks().expect("chunk records").to_vec();
    let mut b: Vec<_> = pg.store().chunks().expect("chunk records").to_vec();
    a.sort_by(|x, y| x.id.cmp(&y.id));
    b.sort_by(|x, y| x.id.cmp(&y.id));
    assert_eq!(
        a, b,
        "the database holds exactly the embedded store's chunks"
    );

    let golden =
        ragtrail::eval::golden::load(&repo_root().join("eval/golden.jsonl")).expect("golden");
    let mut queries: Vec<Vec<String>> = Vec::new();
    for item in &golden {
        for turn in &item.turns {
            queries.push(vec![turn.question.clone()]);
            if !turn.facts.is_empty() {
                queries.push(turn.facts.clone());
            }
        }
    }
    assert!(queries.len() > 150, "{} queries", queries.len());
    let contexts = [
        AccessContext::default(),
        AccessContext::new("default", ["hr"]),
        AccessContext::new("globex", Vec::<String>::new()),
    ];
    let mut with_vector_hits = 0;
    let mut compared = 0;
    for keywords in &queries {
        for access in &contexts {
            for fusion in [
                None,
                Some(Fusion::Rrf { k: 60.0 }),
                Some(Fusion::VectorOnly),
            ] {
                let mut req = SearchRequest::new(keywords.clone(), 8, access.clone());
                req.fusion = fusion;
                let x = embedded.search_docs(&req).expect("embedded search");
                let y = pg.search_docs(&req).expect("postgres search");
                let context = format!("{keywords:?} as {access:?} with {fusion:?}");
                assert_eq!(
                    x.legs.get("vector").map(|l| l.count),
                    y.legs.get("vector").map(|l| l.count),
                    "{context}"
                );
                assert_same_hits(&context, &x.hits, &y.hits);
                assert_eq!(x.sufficiency, y.sufficiency, "{context}");
                if x.hits.iter().any(|h| h.metadata.contains_key("vectorRank")) {
                    with_vector_hits += 1;
                }
                compared += 1;
            }
        }
    }
    assert!(
        with_vector_hits * 2 > compared,
        "only {with_vector_hits} of {compared} searches had vector hits"
    );
}

/// The agent's "stand-out" evidence (a chunk's similarity to the question against the visible
/// chunks' mean and spread) goes through the searcher's vector leg: PostgreSQL answers it in
/// SQL with the embedded store's figures (it used to find nothing there).
#[test]
fn postgres_answers_the_same_standout_similarities_as_the_embedded_store() {
    let db = TestDb::new();
    let tmp = tempfile::tempdir().expect("tempdir");
    let knowledge = repo_root().join("knowledge");
    let mut embedded = Engine::open(&tmp.path().join("embedded")).expect("open");
    embedded
        .ingest(&knowledge, &IngestOptions::default(), &mut |_| {})
        .expect("ingest");
    let mut pg = pg_engine_with(&tmp.path().join("pg"), &db, PgSettings::default(), 384);
    pg.ingest(&knowledge, &IngestOptions::default(), &mut |_| {})
        .expect("ingest");
    let golden =
        ragtrail::eval::golden::load(&repo_root().join("eval/golden.jsonl")).expect("golden");
    let questions: Vec<&str> = golden
        .iter()
        .step_by(7)
        .map(|item| item.turns[0].question.as_str())
        .collect();
    assert!(questions.len() >= 10, "{}", questions.len());
    let contexts = [
        AccessContext::default(),
        AccessContext::new("default", ["hr"]),
        AccessContext::new("globex", Vec::<String>::new()),
    ];
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-5;
    let mut compared = 0;
    for access in &contexts {
        let (x, y) = (embedded.searcher(access), pg.searcher(access));
        for question in &questions {
            let context = format!("{question} as {access:?}");
            let query = x.embed_query(question).expect("embed");
            let (sx, sy) = (
                x.similarity_spread(&query, 4096, 16),
                y.similarity_spread(&query, 4096, 16),
            );
            assert_eq!(sx.is_some(), sy.is_some(), "{context}");
            let (Some(sx), Some(sy)) = (sx, sy) else {
                // Too few chunks visible to take a spread over, in either store alike.
                assert_eq!(access.tenant, "globex", "no spread for {context}");
                let (fx, fy) = (
                    x.similarity_spread(&query, 4096, 1).expect("embedded"),
                    y.similarity_spread(&query, 4096, 1).expect("postgres"),
                );
                assert!(fx.sampled < 16 && fx.sampled == fy.sampled, "{context}");
                continue;
            };
            assert_eq!(sx.sampled, sy.sampled, "{context}");
            assert!(sx.sampled > 100, "{context}: {}", sx.sampled);
            assert!(close(sx.mean, sy.mean), "{context}: {sx:?} vs {sy:?}");
            assert!(close(sx.spread, sy.spread), "{context}: {sx:?} vs {sy:?}");
            assert!(sx.spread > 1e-3, "{context}: {sx:?}");
            // An even sample takes the same chunks from either store: one run of 10, three
            // runs of 32.
            for sample in [10, 100] {
                let (tx, ty) = (
                    x.similarity_spread(&query, sample, 16).expect("sample"),
                    y.similarity_spread(&query, sample, 16).expect("sample"),
                );
                assert_eq!(tx.sampled, ty.sampled, "{context}");
                assert!(tx.sampled <= sample, "{context}: {}", tx.sampled);
                assert!(tx.sampled * 3 >= sample, "{context}: {}", tx.sampled);
                assert!(close(tx.mean, ty.mean), "{context}: {tx:?} vs {ty:?}");
                assert!(close(tx.spread, ty.spread), "{context}: {tx:?} vs {ty:?}");
            }
            let req = SearchRequest::new(vec![question.to_string()], 5, access.clone());
            let hits = embedded.search_docs(&req).expect("search").hits;
            for hit in &hits {
                let a = x
                    .similarity(&query, &hit.chunk_id)
                    .expect("embedded similarity");
                let b = y
                    .similarity(&query, &hit.chunk_id)
                    .expect("postgres similarity");
                assert!(close(a, b), "{context}, {}: {a} vs {b}", hit.chunk_id);
                let (za, zb) = ((a - sx.mean) / sx.spread, (b - sy.mean) / sy.spread);
                assert!((za - zb).abs() <= 1e-3, "{context}: z {za} vs {zb}");
                compared += 1;
            }
        }
    }
    assert!(compared > 50, "only {compared} hits compared");
    assert_eq!(
        pg.searcher(&AccessContext::default())
            .similarity(&[0.5; 384], "c_missing"),
        None
    );
}

#[test]
fn reindex_reproduces_identical_bm25_results() {
    let db = TestDb::new();
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut engine = pg_engine(&tmp.path().join("a"), &db);
    engine
        .ingest(
            &repo_root().join("knowledge"),
            &IngestOptions::default(),
            &mut |_| {},
        )
        .expect("ingest");
    let queries: [&[&str]; 6] = [
        &["高铁票", "报销凭证"],
        &["住宿", "标准"],
        &["年假"],
        &["annual", "leave"],
        &["退货", "运费"],
        &["password", "reset"],
    ];
    let contexts = [
        AccessContext::default(),
        AccessContext::new("default", ["hr"]),
    ];
    let results = |e: &Engine| {
        queries
            .iter()
            .flat_map(|q| contexts.iter().map(move |a| bm25(e, q, a.clone())))
            .collect::<Vec<_>>()
    };
    let before = results(&engine);
    assert!(
        before.iter().filter(|r| !r.is_empty()).count() >= 10,
        "{before:?}"
    );
    engine.reindex(&mut |_| {}).expect("reindex");
    assert_eq!(results(&engine), before);
    // Another process with an empty data dir builds its index from the database alone.
    let other = pg_engine(&tmp.path().join("b"), &db);
    assert_eq!(other.index().num_chunks(), engine.index().num_chunks());
    assert_eq!(results(&other), before);
}

#[test]
fn a_crash_between_database_and_index_commit_is_repaired_by_the_next_ingest() {
    let db = TestDb::new();
    let ws = Workspace::new();
    ws.write("finance/travel.md", TRAVEL);
    ws.write("hr/leave.md", LEAVE_EN);
    let mut engine = pg_engine(&ws.data(), &db);
    ws.ingest(&mut engine);
    drop(engine);
    let index_dir = ws.data().join("pg-index");
    let backup = ws.dir.path().join("index-backup");
    copy_dir(&index_dir, &backup);

    ws.write(
        "hr/leave.md",
        &format!("{LEAVE_EN}\n## Zeppelin travel\n\nZeppelin travel needs the board's approval.\n"),
    );
    let mut engine = pg_engine(&ws.data(), &db);
    assert_eq!(ws.ingest(&mut engine).changed, vec!["hr/leave.md"]);
    let database_version = engine
        .postgres()
        .expect("pg")
        .data_version()
        .expect("version");
    drop(engine);
    // The crash: the database committed, the index commit never happened.
    std::fs::remove_dir_all(&index_dir).expect("rm index");
    copy_dir(&backup, &index_dir);
    {
        let stale = Bm25Index::open_or_create(&index_dir).expect("index");
        let payload = stale
            .committed_payload()
            .expect("payload")
            .expect("some payload");
        assert!(
            !payload.contains(&format!("version={database_version} ")),
            "{payload}"
        );
    }

    let mut engine = pg_engine(&ws.data(), &db);
    let summary = ws.ingest(&mut engine);
    assert!(
        summary.changed.is_empty() && summary.added.is_empty(),
        "{summary:?}"
    );
    assert_eq!(summary.unchanged, 2);
    let hits = bm25(&engine, &["zeppelin"], AccessContext::default());
    assert_eq!(hits.len(), 1, "{hits:?}");
    let payload = engine
        .index()
        .committed_payload()
        .expect("payload")
        .expect("payload");
    assert!(
        payload.contains(&format!("version={database_version} ")),
        "{payload}"
    );
    assert_eq!(engine.store().generation(), database_version);
}

#[test]
fn a_stale_index_is_refused_and_the_next_ingest_catches_up() {
    let db = TestDb::new();
    let ws = Workspace::new();
    ws.write("finance/travel.md", TRAVEL);
    ws.write("hr/leave.md", LEAVE_EN);
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut writer = pg_engine(&ws.data(), &db);
    ws.ingest(&mut writer);
    let mut reader = pg_engine(tmp.path(), &db);
    assert_eq!(
        search(&reader, &["doctor"], 3)[0].title_path,
        "Leave Policy / Sick leave"
    );

    ws.write(
        "hr/leave.md",
        &LEAVE_EN.replace("doctor's note", "medical certificate"),
    );
    ws.ingest(&mut writer);
    for fusion in [None, Some(Fusion::Bm25Only)] {
        let mut req = SearchRequest::new(vec!["doctor".to_string()], 3, AccessContext::default());
        req.fusion = fusion;
        let err = reader.search_docs(&req).expect_err("stale index");
        assert!(
            matches!(err, EngineError::Search(SearchError::StaleIndex { .. })),
            "{err}"
        );
        assert!(err.to_string().contains("ragtrail reindex"), "{err}");
    }
    let summary = ws.ingest(&mut reader);
    assert_eq!(summary.unchanged, 2, "the writer already stored the change");
    let hits = search(&reader, &["medical", "certificate"], 3);
    assert_eq!(hits[0].title_path, "Leave Policy / Sick leave");
    assert!(bm25(&reader, &["doctor"], AccessContext::default()).is_empty());
    // A fresh catch-up has nothing left to do.
    assert!(!reader.catch_up(&mut |_| {}).expect("catch up"));
}

#[test]
fn an_embedder_dimension_that_differs_from_the_column_is_an_error_until_rebuild() {
    let db = TestDb::new();
    let ws = Workspace::new();
    ws.write("finance/travel.md", TRAVEL);
    let mut engine = pg_engine_with(&ws.data(), &db, PgSettings::default(), 64);
    ws.ingest(&mut engine);
    drop(engine);
    let mut engine = pg_engine_with(&ws.data(), &db, PgSettings::default(), 32);
    let err = engine
        .ingest(&ws.knowledge(), &IngestOptions::default(), &mut |_| {})
        .expect_err("dimension mismatch");
    assert!(
        matches!(
            err,
            EngineError::Postgres(PgError::DimensionMismatch {
                column_dims: 64,
                embedder_dims: 32,
                ..
            })
        ),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains("vector(64)") && text.contains("--rebuild"),
        "{text}"
    );
    let rebuilt = engine
        .ingest(
            &ws.knowledge(),
            &IngestOptions {
                rebuild: true,
                ..IngestOptions::default()
            },
            &mut |_| {},
        )
        .expect("rebuild");
    assert_eq!(rebuilt.changed, vec!["finance/travel.md"]);
    let store = engine.postgres().expect("pg");
    assert_eq!(
        scalar_i64(
            store,
            "select atttypmod::int8 from pg_attribute where attrelid = 'vectors_1'::regclass and attname = 'embedding'"
        ),
        32
    );
    assert_eq!(
        scalar_i64(store, "select dims::int8 from embedding_spaces"),
        32
    );
    let resp = engine
        .search_docs(&SearchRequest::new(
            vec!["高铁票".into()],
            3,
            AccessContext::default(),
        ))
        .expect("search");
    assert!(resp.legs["vector"].count > 0);
}

#[test]
fn a_database_without_the_vector_extension_says_what_to_do() {
    let db = TestDb::new();
    let role = format!("{}_app", db.name);
    exec(server_url(), &format!("create role {role} login"));
    // The role owns the database (so it may create tables) but is no superuser, and pgvector
    // is not a trusted extension: what a managed database without pgvector enabled looks like.
    exec(
        server_url(),
        &format!("alter database {} owner to {role}", db.name),
    );
    let url = with_user(&db.url, &role);
    let err = PgStore::connect(&url, PgSettings::default()).expect_err("no extension rights");
    assert!(matches!(err, PgError::ExtensionMissing { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("create extension vector") && text.contains("ragtrail migrate"),
        "{text}"
    );
    drop(db);
    exec(server_url(), &format!("drop role if exists {role}"));
}

fn with_user(url: &str, user: &str) -> String {
    let start = url.find("://").expect("scheme") + 3;
    let at = url[start..]
        .find('@')
        .map(|i| start + i + 1)
        .unwrap_or(start);
    format!("{}{user}@{}", &url[..start], &url[at..])
}

#[test]
fn an_unreachable_database_is_reported_without_the_password() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let url = format!("postgres://someone:hunter2secret@127.0.0.1:{port}/kb");
    let err = Engine::open_postgres(
        tempfile::tempdir().expect("tmp").path(),
        &url,
        Arc::new(HashingEmbedder::default()),
    )
    .err()
    .expect("unreachable");
    assert!(
        matches!(err, EngineError::Postgres(PgError::Unreachable { .. })),
        "{err}"
    );
    let text = format!("{err} {err:?}");
    assert!(!text.contains("hunter2secret"), "{text}");
    assert!(text.contains("postgres://someone:***@127.0.0.1"), "{text}");
    assert!(text.contains("Check that the server is running"), "{text}");

    let bad = PgStore::connect(
        "postgres://someone:hunter2secret@127.0.0.1:notaport/kb",
        PgSettings::default(),
    )
    .expect_err("bad url");
    assert!(matches!(bad, PgError::BadUrl { .. }), "{bad}");
    assert!(
        !format!("{bad} {bad:?}").contains("hunter2secret"),
        "{bad:?}"
    );
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// `ragtrail --data-dir DATA status --json` against `db`, with the hashing embedder.
fn status_json(cwd: &Path, data: &str, db: &TestDb) -> serde_json::Value {
    let out = crate::common::cli::ragtrail_with_env(
        cwd,
        &["--data-dir", data, "status", "--json"],
        &[("DATABASE_URL", db.url.as_str())],
    );
    let (stdout, stderr) = crate::common::cli::text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn status_with_database_url_reports_postgresql_and_its_counts() {
    let db = TestDb::new();
    let ws = Workspace::new();
    ws.write("finance/travel.md", TRAVEL);
    ws.write("hr/leave.md", LEAVE_EN);
    let env = [("DATABASE_URL", db.url.as_str())];
    let out = crate::common::cli::ragtrail_with_env(
        ws.dir.path(),
        &["--data-dir", "data", "ingest"],
        &env,
    );
    assert!(out.status.success(), "{:?}", crate::common::cli::text(&out));
    // A data dir of its own: the counts come from the database, not from files beside it.
    let status = status_json(ws.dir.path(), "other-data", &db);
    assert_eq!(status["backend"], "postgresql", "{status:#}");
    assert_eq!(status["ingested"], true, "{status:#}");
    assert_eq!(status["documents"], 2, "{status:#}");
    let chunks = status["chunks"].as_u64().expect("chunks");
    let pg = pg_engine(&ws.data(), &db);
    assert_eq!(
        chunks as usize,
        pg.store().chunks().expect("chunk records").len()
    );
    assert!(chunks > 2);
    assert_eq!(status["ingestRuns"]["running"], 0, "{status:#}");
    let database = status["database"].as_str().expect("database");
    assert!(database.contains(&db.name), "{database}");
    let out = crate::common::cli::ragtrail_with_env(
        ws.dir.path(),
        &["--data-dir", "other-data", "status"],
        &env,
    );
    let (stdout, _) = crate::common::cli::text(&out);
    assert!(stdout.contains("postgresql at "), "{stdout}");
    assert!(!stdout.contains("embedded"), "{stdout}");
    assert!(
        !stdout.contains("index empty") && !stdout.contains("nothing ingested"),
        "{stdout}"
    );
    assert!(
        stdout.contains("documents            2 (visible to tenant default"),
        "{stdout}"
    );
}

#[test]
fn an_ingest_killed_mid_way_is_marked_abandoned_not_running_forever() {
    let db = TestDb::new();
    let ws = Workspace::new();
    ws.write("finance/travel.md", TRAVEL);
    // An embeddings endpoint that takes connections and never answers: the ingest starts its
    // run, then waits in its first embedding request until it is killed.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/v1", silent.local_addr().expect("addr"));
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ragtrail"));
    cmd.current_dir(ws.dir.path())
        .args(["--data-dir", "data", "ingest"])
        .env("DATABASE_URL", &db.url)
        .env("RAGTRAIL_EMBEDDER", "http")
        .env("RAGTRAIL_EMBED_BASE_URL", &url)
        .env("RAGTRAIL_EMBED_MODEL", "silent")
        .env("RAGTRAIL_EMBED_DIMS", "8")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().expect("spawn ingest");
    let store = PgStore::connect(&db.url, PgSettings::default()).expect("connect");
    let running = || {
        scalar_i64(
            &store,
            "select count(*) from ingest_runs where status = 'running'",
        )
    };
    let started = std::time::Instant::now();
    while running() == 0 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "the ingest never started its run"
        );
        assert!(
            child.try_wait().expect("try_wait").is_none(),
            "ingest ended early"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Alive: its run is running, and status leaves it so.
    let status = status_json(ws.dir.path(), "status-data", &db);
    assert_eq!(status["ingestRuns"]["running"], 1, "{status:#}");
    assert_eq!(status["ingestRuns"]["markedNow"], serde_json::json!([]));
    child.kill().expect("kill");
    child.wait().expect("wait");
    // The server notices the closed connection within moments.
    let started = std::time::Instant::now();
    let status = loop {
        let status = status_json(ws.dir.path(), "status-data", &db);
        if status["ingestRuns"]["abandoned"] == 1 {
            break status;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "still running after the kill: {status:#}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert_eq!(status["ingestRuns"]["running"], 0, "{status:#}");
    assert_eq!(
        status["ingestRuns"]["markedNow"].as_array().map(Vec::len),
        Some(1)
    );
    assert_eq!(
        scalar_text(
            &store,
            "select status || ':' || (finished_at is not null)::text from ingest_runs"
        ),
        "abandoned:true"
    );
    // The next ingest (a working embedder) commits; the dead run stays abandoned.
    let mut engine = pg_engine(&ws.data(), &db);
    ws.ingest(&mut engine);
    assert_eq!(
        scalar_text(
            &store,
            "select string_agg(status, ',' order by id) from ingest_runs"
        ),
        "abandoned,committed"
    );
    drop(silent);
}
