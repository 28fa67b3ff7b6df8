//! `ragtrail search`.

use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use super::output;
use crate::config;
use crate::global::GlobalArgs;
use crate::open::open_current_engine;
use crate::output::Lang;
use ragtrail::Fusion;
use ragtrail::SearchRequest;

#[derive(Debug, Args)]
pub struct SearchArgs {
    /// Keywords: words or short phrases, each taken literally (no query syntax).
    #[arg(required = true, value_name = "KEYWORD")]
    pub keywords: Vec<String>,
    /// How many hits to show (1 to 50).
    #[arg(long, short = 'k', default_value_t = 5, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..=ragtrail::MAX_TOP_K as u64))]
    pub top_k: u64,
    /// Print a JSON array of SearchHit records instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also search documents whose front matter says `status: superseded`.
    #[arg(long)]
    pub include_superseded: bool,
    /// How to combine the legs: `minmax:W` (weighted min-max, BM25 weight W; `minmax` alone
    /// is 0.3), `agree:W` (min-max whose vector weight is W times the legs' agreement on their
    /// top 10), `confidence:W` (min-max whose BM25 weight is 1 - W·(1 - c), c the IDF-weighted
    /// share of the key terms BM25's best hit contains: BM25 leads where the keywords are the
    /// passage's own words), `standout` (min-max weighing each leg by how far its best hit
    /// stands out among its hits), `standout-coverage` (standout, BM25's part times c: for a
    /// model that knows the askers' languages), `rrf` (reciprocal rank fusion, k = 60), `bm25`
    /// or `vector` (one leg alone). Default: `--search-fusion`, else `agree:0.5` with the
    /// hashing embedder, `standout` with a model embedder.
    #[arg(long, value_name = "FUSION")]
    pub fusion: Option<Fusion>,
}

pub fn run(global: &GlobalArgs, args: &SearchArgs) -> anyhow::Result<ExitCode> {
    let engine = open_current_engine(global, Lang::of(&args.keywords.join(" ")))?;
    let access = config::access_context(global.tenant.as_deref(), &global.roles);
    let mut req = SearchRequest::new(args.keywords.clone(), args.top_k as usize, access);
    req.include_superseded = args.include_superseded;
    req.fusion = args.fusion;
    let resp = engine.search_docs(&req).context("searching")?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&resp.hits)?);
    } else if resp.hits.is_empty() {
        let keywords = output::terminal_safe(&args.keywords.join(", "));
        match output::Lang::of(&args.keywords.join(" ")) {
            output::Lang::En => println!("No hits for [{keywords}]."),
            output::Lang::Zh => println!("没有结果：[{keywords}]。"),
        }
    } else {
        print!("{}", output::hits_table(&resp.hits));
    }
    if !args.json {
        eprintln!("{}", evidence_line(&args.keywords, &resp.sufficiency));
    }
    // As `ask`: the process ends here, and the OS frees the engine faster than its drop does.
    std::mem::forget(engine);
    Ok(ExitCode::SUCCESS)
}

/// Whether the hits hold evidence for the keywords, in the keywords' language, naming the
/// keywords no hit holds as they were typed (never the analyser's stems, never the coverage
/// figures: `--json` and traces keep those).
fn evidence_line(keywords: &[String], s: &ragtrail::Sufficiency) -> String {
    let typed = keywords.join(" ");
    let lang = output::Lang::of(&typed);
    let mut line = match (s.sufficient, lang) {
        (true, output::Lang::En) => "evidence: sufficient".to_string(),
        (false, output::Lang::En) => "evidence: insufficient".to_string(),
        (true, output::Lang::Zh) => "证据：充分".to_string(),
        (false, output::Lang::Zh) => "证据：不足".to_string(),
    };
    let missing = ragtrail::written_words(&typed, &s.missing_terms);
    if !missing.is_empty() {
        let missing = output::terminal_safe(&missing.join(", "));
        line.push_str(&match lang {
            output::Lang::En => format!("; no hit holds {missing}"),
            output::Lang::Zh => format!("；没有结果包含：{missing}"),
        });
    }
    line
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The chunk: its id (`c_` and 16 hex digits, as search, replay and audit print it) for
    /// today's text, or ID@HASH (the content hash, or its first 8 or more characters) for the
    /// text it held then, kept since it was indexed even if its document was edited or removed.
    #[arg(value_name = "CHUNK_ID[@CONTENT_HASH]")]
    pub chunk: String,
    /// Print one JSON object: chunkId, contentHash, state (current, past, deleted),
    /// titlePath, source, sourceUri, tenant, roles, status, firstIndexed, text, and versions
    /// ([{contentHash, firstIndexed, current, prunedAt}], oldest first).
    #[arg(long)]
    pub json: bool,
}

/// `CHUNK_ID[@HASH]`, checked.
fn parse_chunk_ref(s: &str) -> anyhow::Result<(&str, Option<String>)> {
    let (id, hash) = match s.trim().split_once('@') {
        Some((id, hash)) => (id, Some(hash.trim().to_ascii_lowercase())),
        None => (s.trim(), None),
    };
    let hex = |t: &str| t.chars().all(|c| c.is_ascii_hexdigit());
    let well_formed = id.len() == 18 && id.starts_with("c_") && hex(&id[2..]);
    if !well_formed {
        anyhow::bail!(
            "`{id}` is not a chunk id: it is c_ followed by 16 hex digits, as `ragtrail search`, `replay` and `audit` print it"
        );
    }
    if let Some(h) = &hash
        && (h.len() < 8 || h.len() > 64 || !hex(h))
    {
        anyhow::bail!(
            "`{h}` is not a content hash: give the 64 hex digits `ragtrail audit` prints, or the first 8 or more"
        );
    }
    Ok((id, hash))
}

/// What `show` prints.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Shown<'a> {
    chunk_id: &'a str,
    content_hash: &'a str,
    /// `current` (today's text), `past` (the chunk says something else today), `deleted`.
    state: &'static str,
    title_path: &'a str,
    source: &'a str,
    source_uri: &'a str,
    tenant: &'a str,
    roles: &'a [String],
    status: ragtrail::DocStatus,
    first_indexed: &'a str,
    text: &'a str,
    versions: Vec<ShownVersion<'a>>,
}

#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ShownVersion<'a> {
    content_hash: &'a str,
    first_indexed: &'a str,
    current: bool,
    pruned_at: Option<&'a str>,
}

/// `ragtrail show`: a chunk's text today, or as it was. Under the caller's access: a chunk of
/// another tenant, or of roles the caller lacks, is unknown exactly as one that never existed.
/// Exit status: 0 shown, 1 no such chunk or version, 3 bad input.
pub fn show(global: &GlobalArgs, args: &ShowArgs) -> anyhow::Result<ExitCode> {
    let (id, hash) = parse_chunk_ref(&args.chunk)?;
    let engine = crate::open::open_engine(global)?;
    let access = config::access_context(global.tenant.as_deref(), &global.roles);
    let versions = engine
        .chunk_versions(id, &access)
        .with_context(|| format!("reading the versions of {id}"))?;
    let current_hash = engine
        .store()
        .get_visible(id, &access)
        .map(|c| c.content_hash.as_str());
    let not_found = |what: String| {
        eprintln!(
            "error: {what} (unknown, or outside your access: tenant {} roles [{}])",
            access.tenant,
            access.roles.join(", ")
        );
        Ok(ExitCode::from(1))
    };
    if versions.is_empty() {
        return not_found(format!("no chunk {id} in this knowledge base"));
    }
    let chosen = match &hash {
        Some(prefix) => {
            let matching: Vec<_> = versions
                .iter()
                .filter(|v| v.content_hash.starts_with(prefix.as_str()))
                .collect();
            match matching.as_slice() {
                [one] => *one,
                [] => return not_found(format!("chunk {id} has no version {prefix}")),
                many => anyhow::bail!(
                    "{} versions of {id} start with {prefix}: give more of the content hash",
                    many.len()
                ),
            }
        }
        // Today's text, or the last one it had.
        None => versions
            .iter()
            .find(|v| Some(v.content_hash.as_str()) == current_hash)
            .or_else(|| versions.iter().rev().find(|v| v.text.is_some()))
            .unwrap_or(&versions[versions.len() - 1]),
    };
    let Some(text) = chosen.text.as_deref() else {
        eprintln!(
            "error: version {} of chunk {id} was pruned on {} (ingest --keep-versions): its text is no longer kept",
            chosen.content_hash,
            chosen.pruned_at.as_deref().unwrap_or("-")
        );
        return Ok(ExitCode::from(1));
    };
    let state = match current_hash {
        Some(h) if h == chosen.content_hash => "current",
        Some(_) => "past",
        None => "deleted",
    };
    let shown = Shown {
        chunk_id: id,
        content_hash: &chosen.content_hash,
        state,
        title_path: &chosen.title_path,
        source: &chosen.source,
        source_uri: &chosen.source_uri,
        tenant: &chosen.tenant,
        roles: &chosen.roles,
        status: chosen.status,
        first_indexed: &chosen.first_indexed,
        text,
        versions: versions
            .iter()
            .map(|v| ShownVersion {
                content_hash: &v.content_hash,
                first_indexed: &v.first_indexed,
                current: Some(v.content_hash.as_str()) == current_hash,
                pruned_at: v.pruned_at.as_deref(),
            })
            .collect(),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&shown)?);
    } else {
        print!("{}", show_text(&shown));
    }
    Ok(ExitCode::SUCCESS)
}

fn show_text(s: &Shown<'_>) -> String {
    use std::fmt::Write as _;
    let safe = output::terminal_safe;
    let mut out = String::new();
    let state = match s.state {
        "current" => "today's text",
        "past" => "a past text: the chunk says something else today",
        _ => "a past text: the chunk is no longer in the knowledge base",
    };
    let _ = writeln!(out, "chunk {}@{}  ({state})", s.chunk_id, s.content_hash);
    let _ = writeln!(out, "titlePath: {}", safe(s.title_path));
    let _ = writeln!(out, "source: {}", safe(s.source_uri));
    let _ = writeln!(
        out,
        "access: tenant {} roles [{}], status {}",
        s.tenant,
        s.roles.join(", "),
        s.status.as_str()
    );
    let _ = writeln!(out, "indexed: {}", s.first_indexed);
    let _ = writeln!(out, "\n{}\n", safe(s.text));
    let _ = writeln!(out, "versions (oldest first):");
    for v in &s.versions {
        let mut notes = Vec::new();
        if v.current {
            notes.push("today".to_string());
        }
        if let Some(p) = v.pruned_at {
            notes.push(format!("pruned {p}"));
        }
        let _ = writeln!(
            out,
            "  {}@{}  indexed {}{}",
            s.chunk_id,
            ragtrail::truncate_chars(v.content_hash, 16),
            v.first_indexed,
            if notes.is_empty() {
                String::new()
            } else {
                format!("  ({})", notes.join(", "))
            }
        );
    }
    out
}
