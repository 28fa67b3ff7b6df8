//! What a person reads is plain text: chunk text, snippets, quotes, answers and titlePaths hold
//! no Markdown link syntax, template tags, emphasis marks or HTML tags, and a table row names its
//! header cells wherever it is shown. Over the bundled `knowledge/` and six real handbook pages
//! (`tests/fixtures/handbook-sample/`).

use std::path::{Path, PathBuf};

use crate::common::cli::{ragtrail, text};
use crate::common::*;
use ragtrail::OfflinePlanner;
use ragtrail::trace::RunStatus;
use ragtrail::{Engine, IngestOptions};
use ragtrail::{internals::DEFAULT_SNIPPET_CHARS, internals::keyword_terms, internals::snippet};

fn handbook_sample() -> PathBuf {
    tests_dir().join("fixtures/handbook-sample")
}

/// The first piece of markup in `s`, if any.
fn markup_in(s: &str) -> Option<String> {
    for mark in ["](", "{%", "%}", "{{", "}}", "**"] {
        if s.contains(mark) {
            return Some(mark.to_string());
        }
    }
    // `<a href…>`, `</div>`, `<br/>`, `<!-- … -->`: a `<` that opens a tag.
    let bytes = s.as_bytes();
    for (i, _) in s.match_indices('<') {
        let next = bytes.get(i + 1).copied().unwrap_or(b' ');
        if (next.is_ascii_alphabetic() || next == b'/' || next == b'!')
            && let Some(end) = s[i..].find('>')
        {
            let tag = &s[i..i + end + 1];
            if !tag[1..].contains('<') {
                return Some(tag.to_string());
            }
        }
    }
    None
}

fn ingested(folder: &Path) -> (Workspace, Engine) {
    let ws = Workspace::new();
    let mut engine = ws.engine();
    engine
        .ingest(folder, &IngestOptions::default(), &mut |_| {})
        .expect("ingest");
    (ws, engine)
}

/// Every chunk's text, headings and titlePath, its snippet for its own heading's words, and the
/// snippets and titlePaths of a search for them.
fn assert_all_plain(folder: &Path) {
    let (_ws, engine) = ingested(folder);
    let chunks = engine.store().chunks().expect("chunk records");
    assert!(chunks.len() > 20, "{} chunks", chunks.len());
    let mut checked_hits = 0;
    for chunk in chunks {
        let place = format!("{} ({})", chunk.title_path, chunk.id);
        for (what, s) in [("text", &chunk.text), ("titlePath", &chunk.title_path)]
            .into_iter()
            .chain(chunk.headings.iter().map(|h| ("heading", h)))
        {
            assert_eq!(markup_in(s), None, "{what} of {place}: {s}");
        }
        let words: Vec<String> = chunk
            .title_path
            .split(" / ")
            .last()
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_string)
            .collect();
        let own = snippet(&chunk.text, &keyword_terms(&words), DEFAULT_SNIPPET_CHARS);
        assert_eq!(markup_in(&own), None, "snippet of {place}: {own}");
        let keywords: Vec<&str> = words.iter().map(String::as_str).collect();
        for hit in search(&engine, &keywords, 5) {
            assert_eq!(
                markup_in(&hit.snippet),
                None,
                "snippet of {}",
                hit.title_path
            );
            assert_eq!(markup_in(&hit.title_path), None, "{}", hit.title_path);
            checked_hits += 1;
        }
    }
    assert!(checked_hits > chunks.len(), "{checked_hits} hits");
}

#[test]
fn the_handbook_sample_holds_the_markup_this_guards_against() {
    // Without it the test below would pass on any chunker.
    let mut all = String::new();
    for rel in [
        "travel-and-leave/voluntary-leave-transfer-program.md",
        "travel-and-leave/overtime.md",
        "general-information-and-resources/general-contacts.md",
        "general-information-and-resources/reasonable-accommodations.md",
        "18f/project-lifecycle.md",
        "travel-and-leave/first-time-travel-get-in-concur-pre-olu.md",
    ] {
        all.push_str(&std::fs::read_to_string(handbook_sample().join(rel)).expect("fixture"));
    }
    for mark in [
        "](",
        "({% page",
        "{% alert %}",
        "{{site.base_url}}",
        "## **Resources**",
        "<a href",
        "| ---",
        "title: Get set up to travel for TTS <em>before</em> GSA onboarding",
    ] {
        assert!(all.contains(mark), "{mark}");
    }
}

#[test]
fn every_chunk_snippet_and_title_path_of_the_handbook_sample_is_plain_text() {
    assert_all_plain(&handbook_sample());
}

#[test]
fn every_chunk_snippet_and_title_path_of_the_bundled_knowledge_is_plain_text() {
    assert_all_plain(&repo_root().join("knowledge"));
}

#[test]
fn headings_keep_their_words_and_lose_their_markup() {
    let (_ws, engine) = ingested(&handbook_sample());
    let paths: Vec<&str> = engine
        .store()
        .chunks()
        .expect("chunk records")
        .iter()
        .map(|c| c.title_path.as_str())
        .collect();
    for expected in [
        "Voluntary Leave Transfer Program / Resources",
        "Reasonable Accommodations / Role and Responsibilities of the LRAC",
        // The front matter's title held `<em>before</em>`.
        "Get set up to travel for TTS before GSA onboarding",
    ] {
        assert!(paths.contains(&expected), "{expected} not in {paths:#?}");
    }
    // The sentence was a Markdown link; its words are what is searched and shown. (Which of
    // the VLTP chunks ranks first is the fusion's business, not this test's.)
    let donate = search(&engine, &["Docusign", "templates", "VLTP"], 3);
    assert!(
        donate.iter().any(|h| h
            .snippet
            .contains("You can use Docusign templates for VLTP")),
        "{:#?}",
        donate.iter().map(|h| &h.snippet).collect::<Vec<_>>()
    );
}

#[test]
fn a_table_row_is_shown_with_its_header_in_snippets_and_quotes() {
    let (_ws, engine) = ingested(&handbook_sample());
    let hits = search(&engine, &["Chicago", "Dearborn"], 3);
    assert_eq!(hits[0].title_path, "General contacts / Offices");
    assert!(
        hits[0]
            .snippet
            .contains("Location: Chicago, IL, Address: 230 S. Dearborn St. 60604, GSA region: 5, Office guide: Office Guide"),
        "{}",
        hits[0].snippet
    );

    let (ws, engine) = ingested(&repo_root().join("knowledge"));
    let hits = search(&engine, &["满10年不满20年", "法定年假"], 3);
    assert!(
        hits[0]
            .snippet
            .contains("累计工作年限：满10年不满20年，法定年假天数：10天"),
        "{}",
        hits[0].snippet
    );
    let outcome = ws.ask(
        &engine,
        &mut OfflinePlanner::new(),
        "累计工作年限满10年不满20年，法定年假天数是多少？",
    );
    assert_eq!(outcome.status, RunStatus::Answered, "{:?}", outcome.message);
    let answer = outcome.answer.expect("answer");
    let quotes: Vec<&str> = answer.citations.iter().map(|c| c.quote.as_str()).collect();
    assert!(
        quotes
            .iter()
            .any(|q| q.contains("累计工作年限：满10年不满20年，法定年假天数：10天")),
        "{quotes:?}"
    );
}

#[test]
fn answers_over_the_handbook_sample_are_plain_text() {
    let ws = Workspace::new();
    let data = ws.data().display().to_string();
    let knowledge = handbook_sample().display().to_string();
    for question in [
        "How do I donate annual leave to a colleague through VLTP?",
        "Where is the Chicago office?",
        "How do I request overtime hours in HR Links?",
    ] {
        let out = ragtrail(
            ws.dir.path(),
            &[
                "--data-dir",
                &data,
                "--knowledge",
                &knowledge,
                "ask",
                "--planner",
                "offline",
                "--json",
                question,
            ],
        );
        let (stdout, stderr) = text(&out);
        assert!(stdout.contains("\"status\""), "{stdout}\n{stderr}");
        assert_eq!(markup_in(&stdout), None, "{question}: {stdout}");
    }
}

#[test]
fn an_index_of_the_markdown_format_asks_for_a_rebuild_and_ingest_rebuild_upgrades_it() {
    let ws = Workspace::new();
    ws.write("finance/travel.md", TRAVEL);
    let data = ws.data().display().to_string();
    let knowledge = ws.knowledge().display().to_string();
    let out = ragtrail(ws.dir.path(), &["--data-dir", &data, "ingest", &knowledge]);
    assert!(out.status.success(), "{:?}", text(&out));
    // What an index written before plain text looks like: format 1 in its manifest.
    let store = ws.data().join("store");
    let current = std::fs::read_to_string(store.join("CURRENT")).expect("CURRENT");
    let manifest = store.join(current.trim()).join("manifest.json");
    let json = std::fs::read_to_string(&manifest).expect("manifest");
    assert!(json.contains("\"format\": 2"), "{json}");
    std::fs::write(&manifest, json.replace("\"format\": 2", "\"format\": 1")).expect("write");

    let out = ragtrail(ws.dir.path(), &["--data-dir", &data, "search", "高铁票"]);
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(
        stderr.contains("has format 1, this ragtrail reads format 2")
            && stderr.contains("run `ragtrail ingest --rebuild`"),
        "{stderr}"
    );
    let out = ragtrail(ws.dir.path(), &["--data-dir", &data, "ingest", &knowledge]);
    assert!(
        !out.status.success(),
        "a plain ingest must not open it either"
    );

    let out = ragtrail(
        ws.dir.path(),
        &["--data-dir", &data, "ingest", "--rebuild", &knowledge],
    );
    assert!(out.status.success(), "{:?}", text(&out));
    let out = ragtrail(
        ws.dir.path(),
        &["--data-dir", &data, "search", "一线城市", "--json"],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("城市：一线城市，标准：600元"), "{stdout}");
}
