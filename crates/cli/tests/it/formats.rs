//! HTML, Word and PDF ingest on files real tools made (pandoc, LibreOffice, qpdf: see
//! `tests/fixtures/formats/README.md`): titlePaths from headings and outlines, tables whole with
//! their header, PDF pages in `sourceUri` and hit metadata, and every file that cannot be read
//! named with its reason, its previous version kept.

use std::path::PathBuf;

use crate::common::cli::{ragtrail, ragtrail_over, text};
use crate::common::*;
use ragtrail::Engine;
use ragtrail::OfflinePlanner;
use ragtrail::trace::RunStatus;

fn fixture(name: &str) -> PathBuf {
    tests_dir().join("fixtures/formats").join(name)
}

/// A workspace whose knowledge folder holds copies of `fixtures` (under their own names).
fn workspace_with(fixtures: &[&str]) -> Workspace {
    let ws = Workspace::new();
    std::fs::create_dir_all(ws.knowledge()).expect("mkdir");
    for name in fixtures {
        std::fs::copy(fixture(name), ws.knowledge().join(name)).expect("copy fixture");
    }
    ws
}

fn ingested(fixtures: &[&str]) -> (Workspace, Engine) {
    let ws = workspace_with(fixtures);
    let mut engine = ws.engine();
    let summary = ws.ingest(&mut engine);
    assert!(summary.skipped.is_empty(), "{:?}", summary.skipped);
    (ws, engine)
}

fn title_paths(engine: &Engine) -> Vec<String> {
    let mut paths: Vec<String> = engine
        .store()
        .chunks()
        .expect("chunk records")
        .iter()
        .map(|c| c.title_path.clone())
        .collect();
    paths.dedup();
    paths
}

const EN_TITLE: &str = "Overseas Staff Travel & Expense Policy";

/// The English policy's headings, as its Markdown has them.
fn en_sections() -> Vec<String> {
    [
        "",
        " / Scope and Eligibility",
        " / Booking Travel",
        " / Booking Travel / Flights",
        " / Booking Travel / Hotels",
        " / Booking Travel / Ground Transport",
        " / Lodging and Meal Allowances / Regional Rate Table",
        " / Lodging and Meal Allowances / Partial Days and Provided Meals",
        " / Submitting a Claim / Deadline and System",
        " / Submitting a Claim / Receipts",
        " / Submitting a Claim / Missing Receipts",
        " / Currency and Exchange Rates",
        " / Exceeding the Limits",
        " / Reimbursable Extras",
        " / Non-Reimbursable Items",
        " / Corporate Card",
    ]
    .iter()
    .map(|s| format!("{EN_TITLE}{s}"))
    .collect()
}

const ZONE_1_ROW: &str = "Zone: Zone 1, Countries and regions: United States, United Kingdom, \
                          Switzerland, Japan, Singapore, Hong Kong, Lodging cap per night (USD): \
                          280, Meal allowance per day (USD): 85";

#[test]
fn html_headings_build_title_paths_and_the_table_keeps_its_header() {
    let (_ws, engine) = ingested(&["overseas-travel-expense-en.html"]);
    assert_eq!(title_paths(&engine), en_sections());
    let hits = search(&engine, &["Zone 1", "lodging cap"], 3);
    assert_eq!(
        hits[0].title_path,
        format!("{EN_TITLE} / Lodging and Meal Allowances / Regional Rate Table")
    );
    assert_eq!(
        hits[0].source_uri,
        "overseas-travel-expense-en.html#regional-rate-table"
    );
    let chunk = engine
        .store()
        .chunks()
        .expect("chunk records")
        .iter()
        .find(|c| c.id == hits[0].chunk_id)
        .expect("chunk");
    assert!(chunk.text.contains(ZONE_1_ROW), "{}", chunk.text);
    assert!(
        !chunk.text.contains("font-size"),
        "the page's CSS is not text"
    );
}

#[test]
fn docx_heading_styles_build_title_paths_and_tables_stay_whole() {
    let (_ws, engine) = ingested(&["overseas-travel-expense-en.docx", "annual-leave.docx"]);
    let paths = title_paths(&engine);
    let en: Vec<String> = paths
        .iter()
        .filter(|p| p.starts_with(EN_TITLE))
        .cloned()
        .collect();
    assert_eq!(en, en_sections());
    assert!(
        paths.contains(&"年休假管理办法 / 年假天数 / 法定年假".to_string()),
        "{paths:?}"
    );
    let texts: Vec<&str> = engine
        .store()
        .chunks()
        .expect("chunk records")
        .iter()
        .map(|c| c.text.as_str())
        .collect();
    assert!(texts.iter().any(|t| t.contains(ZONE_1_ROW)), "{texts:?}");
    assert!(
        texts
            .iter()
            .any(|t| t.contains("累计工作年限：满10年不满20年，法定年假天数：10天")),
        "{texts:?}"
    );
}

#[test]
fn pdf_outline_names_sections_and_pages_are_cited() {
    let (ws, engine) = ingested(&["overseas-travel-expense-en.pdf"]);
    let hits = search(&engine, &["FIN-12", "missing receipt"], 3);
    assert_eq!(
        hits[0].title_path,
        format!("{EN_TITLE} / Submitting a Claim / Missing Receipts")
    );
    assert_eq!(hits[0].source_uri, "overseas-travel-expense-en.pdf#page=3");
    assert_eq!(hits[0].metadata.get("page").map(String::as_str), Some("3"));
    let flights = search(&engine, &["economy class", "premium economy"], 3);
    assert_eq!(
        flights[0].source_uri,
        "overseas-travel-expense-en.pdf#page=1"
    );

    // The question's answer sits on page 3: the answer cites it there.
    let outcome = ws.ask(
        &engine,
        &mut OfflinePlanner::new(),
        "How many times per year can form FIN-12 be used for a lost receipt?",
    );
    // An answer or, when no sentence covers enough of the question's words, evidence: either
    // way the passage is cited on its page.
    assert!(
        matches!(outcome.status, RunStatus::Answered | RunStatus::Evidence),
        "{:?}",
        outcome.message
    );
    let answer = outcome.answer.expect("answer");
    assert!(
        answer
            .citations
            .iter()
            .any(|c| c.source_uri == "overseas-travel-expense-en.pdf#page=3"),
        "{:?}",
        answer.citations
    );
}

#[test]
fn pdf_without_an_outline_takes_its_headings_from_font_size_and_weight() {
    // LibreOffice wrote no bookmarks: the title is set in 18 pt bold, `##` headings in 14 pt
    // bold, `###` in 12 pt bold, the body in 12 pt regular.
    let (_ws, engine) = ingested(&["overseas-travel-expense-en-no-outline.pdf"]);
    assert_eq!(title_paths(&engine), en_sections());
    let uris: Vec<&str> = engine
        .store()
        .chunks()
        .expect("chunk records")
        .iter()
        .map(|c| c.source_uri.as_str())
        .collect();
    for page in 1..=3 {
        let uri = format!("overseas-travel-expense-en-no-outline.pdf#page={page}");
        assert!(uris.contains(&uri.as_str()), "{uris:?}");
    }
    let hits = search(&engine, &["FIN-12", "missing receipt"], 3);
    assert_eq!(
        hits[0].title_path,
        format!("{EN_TITLE} / Submitting a Claim / Missing Receipts")
    );
    assert_eq!(hits[0].metadata.get("page").map(String::as_str), Some("3"));
    // A heading is not text of its section.
    let chunk = engine
        .store()
        .chunks()
        .expect("chunk records")
        .iter()
        .find(|c| c.id == hits[0].chunk_id)
        .expect("chunk");
    assert!(chunk.text.contains("FIN-12"), "{}", chunk.text);
}

#[test]
fn a_chinese_pdf_without_an_outline_takes_its_headings_from_bold_cjk_fonts() {
    let (_ws, engine) = ingested(&["annual-leave-no-outline.pdf"]);
    assert_eq!(
        title_paths(&engine),
        [
            "",
            " / 年假天数",
            " / 年假天数 / 法定年假",
            " / 年假天数 / 福利年假",
            " / 年假天数 / 新入职员工",
            " / 申请与审批",
            " / 扣减顺序",
            " / 结转与清零",
            " / 未休年假的补偿",
            " / 离职时的年假",
            " / 不享受当年年假的情形",
        ]
        .iter()
        .map(|s| format!("年休假管理办法{s}"))
        .collect::<Vec<_>>()
    );
    let hits = search(&engine, &["未休年假", "日工资"], 3);
    assert_eq!(hits[0].title_path, "年休假管理办法 / 未休年假的补偿");
    assert_eq!(hits[0].source_uri, "annual-leave-no-outline.pdf#page=2");
    assert!(hits[0].snippet.contains("300%"), "{}", hits[0].snippet);
}

#[test]
fn a_chinese_pdf_reads_in_order_and_is_found_by_chinese_keywords() {
    let (_ws, engine) = ingested(&["annual-leave.pdf"]);
    let hits = search(&engine, &["未休年假", "日工资"], 3);
    assert_eq!(hits[0].title_path, "年休假管理办法 / 未休年假的补偿");
    assert_eq!(hits[0].source_uri, "annual-leave.pdf#page=2");
    assert!(hits[0].snippet.contains("300%"), "{}", hits[0].snippet);
}

#[test]
fn unreadable_files_are_named_counted_and_keep_their_previous_version() {
    let ws = workspace_with(&[
        "overseas-travel-expense-en.docx",
        "encrypted.pdf",
        "not-a-zip.docx",
        "zip-bomb.docx",
    ]);
    ws.write("policy.docx", "");
    ws.write("scan.png", "not read");
    std::fs::copy(
        fixture("annual-leave.docx"),
        ws.knowledge().join("leave.docx"),
    )
    .expect("copy");
    let mut engine = ws.engine();
    let first = ws.ingest(&mut engine);
    let reasons = skip_reasons(&first);
    assert_eq!(
        reasons,
        vec![
            ("encrypted.pdf", "encrypted PDF"),
            ("not-a-zip.docx", "not a zip archive (a .docx is one)"),
            ("policy.docx", "empty file (0 bytes)"),
            (
                "scan.png",
                "unsupported type (.png); ingest reads .md, .txt, .html, .htm, .docx, .pdf"
            ),
            (
                "zip-bomb.docx",
                "word/document.xml declares 209715200 bytes inflated, over the 67108864-byte bound (a zip bomb, or a document too large to ingest)"
            ),
        ]
    );
    let counts: Vec<(&str, usize, usize)> = first
        .formats
        .iter()
        .map(|(f, c)| (f.as_str(), c.read, c.skipped))
        .collect();
    assert_eq!(counts, vec![("docx", 2, 3), ("other", 0, 1), ("pdf", 0, 1)]);
    let leave_chunks = |engine: &Engine| {
        engine
            .store()
            .chunks()
            .expect("chunk records")
            .iter()
            .filter(|c| c.source == "leave.docx")
            .count()
    };
    let before = leave_chunks(&engine);
    assert!(before > 0);

    // The file is now corrupt: it is named, and its previous version stays searchable.
    ws.write("leave.docx", "PK\u{3}\u{4} truncated");
    let second = ws.ingest(&mut engine);
    assert!(second.removed.is_empty(), "{:?}", second.removed);
    assert!(
        second
            .skipped
            .iter()
            .any(|s| s.path == "leave.docx" && s.reason.starts_with("not a zip archive")),
        "{:?}",
        second.skipped
    );
    assert_eq!(leave_chunks(&engine), before);
    assert_eq!(search(&engine, &["法定年假"], 3)[0].chunk_id.len(), 18);
}

#[test]
fn ingest_json_carries_the_counts_and_every_skipped_file() {
    let ws = workspace_with(&["overseas-travel-expense-en.html", "encrypted.pdf"]);
    ws.write("notes.md", "# Notes\n\nKeep receipts.\n");
    let data = ws.data();
    let out = ragtrail(
        ws.dir.path(),
        &[
            "--data-dir",
            data.to_str().expect("utf-8"),
            "ingest",
            ws.knowledge().to_str().expect("utf-8"),
            "--json",
        ],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(json["formats"]["html"]["read"], 1);
    assert_eq!(json["formats"]["markdown"]["read"], 1);
    assert_eq!(json["formats"]["pdf"]["skipped"], 1);
    assert_eq!(json["skipped"][0]["path"], "encrypted.pdf");
    assert!(
        json["skipped"][0]["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("encrypted PDF")),
        "{stdout}"
    );
    assert_eq!(
        json["added"],
        serde_json::json!(["notes.md", "overseas-travel-expense-en.html"])
    );

    let out = ragtrail(
        ws.dir.path(),
        &[
            "--data-dir",
            data.to_str().expect("utf-8"),
            "ingest",
            ws.knowledge().to_str().expect("utf-8"),
        ],
    );
    let (stdout, stderr) = text(&out);
    assert!(
        stdout.contains("files: html 1 read, markdown 1 read, pdf 1 skipped"),
        "{stdout}"
    );
    assert!(
        stderr.contains("warning: skipped encrypted.pdf: encrypted PDF"),
        "{stderr}"
    );
}

#[test]
fn a_scanned_pdf_is_named_as_having_no_text_layer_and_the_rest_is_ingested() {
    let ws = workspace_with(&["scanned-no-text.pdf", "overseas-travel-expense-en.html"]);
    let mut engine = ws.engine();
    let summary = ws.ingest(&mut engine);
    let skipped: Vec<(&str, &str)> = summary
        .skipped
        .iter()
        .map(|s| (s.path.as_str(), s.reason.as_str()))
        .collect();
    assert_eq!(
        skipped,
        vec![(
            "scanned-no-text.pdf",
            "no text layer: none of its 1 pages holds text (a scan?); ragtrail does no OCR, so \
             run one first"
        )]
    );
    let counts: Vec<(&str, usize, usize)> = summary
        .formats
        .iter()
        .map(|(f, c)| (f.as_str(), c.read, c.skipped))
        .collect();
    assert_eq!(counts, vec![("html", 1, 0), ("pdf", 0, 1)]);
    // Nothing of the scan reached the index; the HTML policy beside it did.
    let sources: Vec<&str> = engine
        .store()
        .chunks()
        .expect("chunk records")
        .iter()
        .map(|c| c.source.as_str())
        .collect();
    assert!(!sources.contains(&"scanned-no-text.pdf"), "{sources:?}");
    let hits = search(&engine, &["FIN-12", "missing receipt"], 3);
    assert_eq!(
        hits[0].source_uri,
        "overseas-travel-expense-en.html#missing-receipts"
    );
}

#[test]
fn ask_on_the_bundled_knowledge_cites_the_pdf_page_that_holds_the_answer() {
    // The bundled meeting-room policy is a 3-page PDF (see the fixtures README); the no-show rule
    // sits on its page 2.
    let ws = Workspace::new();
    let data = ws.data();
    let knowledge = repo_root().join("knowledge");
    let out = ragtrail_over(
        ws.dir.path(),
        &data,
        &knowledge,
        &[
            "ask",
            "How many days does an organiser lose the right to book meeting rooms after three \
             no-shows in a month?",
            "--json",
            "--no-trace",
            "--today",
            "2026-11-30",
        ],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("pdf 1 read"), "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(json["status"], "answered", "{stdout}");
    assert!(
        json["answer"]
            .as_str()
            .is_some_and(|a| a.contains("14 days")),
        "{stdout}"
    );
    let cited: Vec<(&str, &str)> = json["citations"]
        .as_array()
        .expect("citations")
        .iter()
        .map(|c| {
            (
                c["sourceUri"].as_str().unwrap_or(""),
                c["titlePath"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert!(
        cited.contains(&(
            "facilities/meeting-rooms-en.pdf#page=2",
            "Meeting Room and Event Space Booking Policy / Check-in, No-shows and Cancellations"
        )),
        "{cited:?}"
    );
}

/// The first PDF line-break or run-join artifact in `s`: a space inside brackets or before
/// punctuation, or a word hyphenated across a line with a space left in it (`add- in`).
fn pdf_artifact(s: &str) -> Option<String> {
    for bad in ["( ", " )", "（ ", " ）", " ,", " ;", " ."] {
        if let Some(i) = s.find(bad) {
            return Some(s[i.saturating_sub(20)..(i + 10).min(s.len())].to_string());
        }
    }
    let chars: Vec<char> = s.chars().collect();
    chars.windows(4).find_map(|w| {
        (w[0].is_alphabetic() && w[1] == '-' && w[2] == ' ' && w[3].is_lowercase())
            .then(|| w.iter().collect())
    })
}

#[test]
fn the_bundled_pdf_reads_without_line_break_or_run_join_artifacts() {
    // The meeting-room policy as LibreOffice set it: "add-in" broken after its hyphen at a line
    // end, "办公通" in a CJK font between a Latin font's brackets.
    let ws = Workspace::new();
    std::fs::create_dir_all(ws.knowledge()).expect("mkdir");
    for name in ["meeting-rooms-en.pdf", "meeting-rooms-en.pdf.yaml"] {
        std::fs::copy(
            repo_root().join("knowledge/facilities").join(name),
            ws.knowledge().join(name),
        )
        .expect("copy");
    }
    let mut engine = ws.engine();
    let summary = ws.ingest(&mut engine);
    assert!(summary.skipped.is_empty(), "{:?}", summary.skipped);
    let chunks = engine.store().chunks().expect("chunk records");
    let all: String = chunks
        .iter()
        .map(|c| c.text.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(all.contains("through the calendar add-in, never"), "{all}");
    assert!(all.contains("Workplace app (办公通) or"), "{all}");
    for chunk in chunks {
        assert_eq!(pdf_artifact(&chunk.text), None, "{}", chunk.title_path);
    }
    let hits = search(&engine, &["calendar", "add-in"], 1);
    assert!(
        hits[0].snippet.contains("calendar add-in"),
        "{}",
        hits[0].snippet
    );
}

/// `# 探亲假规定` / `员工每年享有探亲假十二天。` saved as GBK (as an older Windows editor saves it).
const GBK_MARKDOWN: &[u8] = b"\x23\x20\xcc\xbd\xc7\xd7\xbc\xd9\xb9\xe6\xb6\xa8\x0a\x0a\xd4\xb1\xb9\
\xa4\xc3\xbf\xc4\xea\xcf\xed\xd3\xd0\xcc\xbd\xc7\xd7\xbc\xd9\xca\xae\xb6\xfe\xcc\xec\xa1\xa3\x0a";
/// `报销须在出差结束后三十日内提交。` in GBK.
const GBK_TEXT: &[u8] = b"\xb1\xa8\xcf\xfa\xd0\xeb\xd4\xda\xb3\xf6\xb2\xee\xbd\xe1\xca\xf8\xba\xf3\
\xc8\xfd\xca\xae\xc8\xd5\xc4\xda\xcc\xe1\xbd\xbb\xa1\xa3\x0a";

#[test]
fn bad_input_each_gets_a_reason_and_gbk_and_bom_files_are_read() {
    let ws = workspace_with(&["overseas-travel-expense-en.html"]);
    let put = |name: &str, bytes: &[u8]| {
        std::fs::write(ws.knowledge().join(name), bytes).expect("write");
    };
    put("gbk-leave.md", GBK_MARKDOWN);
    put("gbk-claims.txt", GBK_TEXT);
    put(
        "bom.md",
        "\u{feff}---\ntenant: default\n---\n# Parking\n\nStaff park on level B2.\n".as_bytes(),
    );
    put(
        "bom.html",
        "\u{feff}<html><head><title>Lockers</title></head><body><h2>Keys</h2><p>Locker keys sit at reception.</p></body></html>"
            .as_bytes(),
    );
    for empty in [
        "empty.md",
        "empty.txt",
        "empty.html",
        "empty.docx",
        "empty.pdf",
    ] {
        put(empty, b"");
    }
    // A PDF header, then no objects that parse and no cross-reference table.
    put(
        "broken.pdf",
        b"%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 2 0 R\nstream\n\x00\xff",
    );
    // 10,000 nested divs around one paragraph.
    put(
        "deep.html",
        format!(
            "<title>Deep</title>{}<p>The bottom of the page keeps its words.</p>{}",
            "<div>".repeat(10_000),
            "</div>".repeat(10_000)
        )
        .as_bytes(),
    );
    let mut engine = ws.engine();
    let summary = ws.ingest(&mut engine);
    let reasons = skip_reasons(&summary);
    assert_eq!(
        reasons,
        vec![
            ("broken.pdf", "broken PDF"),
            ("empty.docx", "empty file (0 bytes)"),
            ("empty.html", "empty file (0 bytes)"),
            ("empty.md", "empty file (0 bytes)"),
            ("empty.pdf", "empty file (0 bytes)"),
            ("empty.txt", "empty file (0 bytes)"),
        ],
    );
    let chunk_of = |source: &str| {
        engine
            .store()
            .chunks()
            .expect("chunk records")
            .iter()
            .find(|c| c.source == source)
            .unwrap_or_else(|| panic!("no chunk of {source}"))
            .clone()
    };
    // GBK decoded, not refused and not mojibake.
    let leave = chunk_of("gbk-leave.md");
    assert_eq!(leave.title_path, "探亲假规定");
    assert!(
        leave.text.contains("员工每年享有探亲假十二天。"),
        "{}",
        leave.text
    );
    assert!(chunk_of("gbk-claims.txt").text.contains("三十日内提交"));
    assert_eq!(
        search(&engine, &["探亲假"], 3)[0].source_uri,
        "gbk-leave.md"
    );
    // A BOM is no text: the front matter and the title still read.
    let parking = chunk_of("bom.md");
    assert_eq!(parking.title_path, "Parking");
    assert!(!parking.text.contains('\u{feff}'), "{:?}", parking.text);
    let lockers = chunk_of("bom.html");
    assert_eq!(lockers.title_path, "Lockers / Keys");
    assert!(!lockers.text.contains('\u{feff}'), "{:?}", lockers.text);
    assert!(
        chunk_of("deep.html")
            .text
            .contains("The bottom of the page keeps its words."),
    );
    // The rest of the folder is in.
    assert_eq!(
        search(&engine, &["FIN-12", "missing receipt"], 3)[0].source_uri,
        "overseas-travel-expense-en.html#missing-receipts"
    );
}

#[test]
fn a_long_pdf_reports_its_pages_as_they_are_read() {
    let ws = workspace_with(&["overseas-travel-expense-en.pdf", "annual-leave.docx"]);
    let mut engine = ws.engine();
    let mut pages: Vec<(String, usize, usize)> = Vec::new();
    engine
        .ingest(
            &ws.knowledge(),
            &ragtrail::IngestOptions::default(),
            &mut |p| {
                if let ragtrail::IngestProgress::Reading {
                    file,
                    done,
                    pages: n,
                } = p
                {
                    pages.push((file, done, n));
                }
            },
        )
        .expect("ingest");
    let file = "overseas-travel-expense-en.pdf".to_string();
    assert_eq!(
        pages,
        vec![(file.clone(), 1, 3), (file.clone(), 2, 3), (file, 3, 3)]
    );
}

/// Each skipped file with its reason up to the first `:` (the detail after it varies).
fn skip_reasons(summary: &ragtrail::IngestSummary) -> Vec<(&str, &str)> {
    summary
        .skipped
        .iter()
        .map(|s| (s.path.as_str(), s.reason.split(':').next().unwrap_or("")))
        .collect()
}
