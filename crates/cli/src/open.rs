//! Opening the engine the global flags name, ingesting the knowledge folder first when the
//! index is empty (or, with `--auto-ingest`, when its files changed), with a progress bar.

use std::io::IsTerminal;
use std::path::Path;

use anyhow::Context;

use crate::global::GlobalArgs;
use crate::output;
use ragtrail::{Engine, IngestOptions, IngestProgress, IngestSummary};

pub(crate) fn open_engine(global: &GlobalArgs) -> anyhow::Result<Engine> {
    open_engine_as(global, false)
}

/// `for_rebuild`: an index written in an older format opens empty, to be rebuilt.
pub(crate) fn open_engine_as(global: &GlobalArgs, for_rebuild: bool) -> anyhow::Result<Engine> {
    let embedder = ragtrail::embedder_from_config(&global.embed.config())
        .context("setting up the embedder")?;
    let mut engine = if let Some(url) = global.database_url() {
        Engine::open_postgres(&global.data_dir, url, embedder)
            .context("opening the knowledge base in PostgreSQL")?
    } else if for_rebuild {
        Engine::open_for_rebuild(&global.data_dir, embedder)
            .with_context(|| format!("opening the data directory {}", global.data_dir.display()))?
    } else {
        Engine::open_with(&global.data_dir, embedder)
            .with_context(|| format!("opening the data directory {}", global.data_dir.display()))?
    };
    global.apply_search_settings(&mut engine.settings);
    Ok(engine)
}

/// Opens the engine, ingesting the knowledge folder first if nothing was ingested yet.
pub(crate) fn open_ready_engine(global: &GlobalArgs) -> anyhow::Result<Engine> {
    let mut engine = open_engine(global)?;
    if engine.is_empty() {
        eprintln!(
            "The index is empty: ingesting {} first.",
            global.knowledge.display()
        );
        let summary = run_ingest(&mut engine, &global.knowledge, &global.ingest_options())?;
        eprintln!("{}", output::ingest_summary_line(&summary));
    }
    Ok(engine)
}

/// [`open_ready_engine`] for a command that answers from the index (`ask`, `search`, `chat`):
/// knowledge files edited, added or removed since the last ingest are re-ingested first with
/// `--auto-ingest`, and otherwise named on stderr with the command that brings the index up
/// to date, so nobody is answered from an old text without knowing it.
pub(crate) fn open_current_engine(global: &GlobalArgs) -> anyhow::Result<Engine> {
    let mut engine = open_ready_engine(global)?;
    let Some(changes) = engine.knowledge_changes().filter(|c| !c.is_empty()) else {
        return Ok(engine);
    };
    if global.auto_ingest && !changes.root_missing {
        eprintln!(
            "{}; re-ingesting first (--auto-ingest).",
            output::knowledge_changes_line(&changes)
        );
        let summary = run_ingest(&mut engine, &changes.root, &global.ingest_options())?;
        eprintln!("{}", output::ingest_summary_line(&summary));
    } else {
        eprintln!(
            "note: {}; answers come from the text as it was then. {}",
            output::knowledge_changes_line(&changes),
            output::knowledge_refresh_hint(&changes, &global.data_dir)
        );
    }
    Ok(engine)
}

pub(crate) fn run_ingest(
    engine: &mut Engine,
    dir: &Path,
    options: &IngestOptions,
) -> anyhow::Result<IngestSummary> {
    let style = |unit: &str| {
        indicatif::ProgressStyle::with_template(&format!(
            "{{spinner}} {{msg}} {{pos}}/{{len}} {unit} [{{elapsed}}, {{per_sec}}, eta {{eta}}]"
        ))
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
    };
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = indicatif::ProgressBar::new(0);
        bar.set_style(style("chunks"));
        bar
    });
    let resumed = |kept: usize| {
        format!("resuming: {kept} vectors kept from an ingest that stopped before it finished")
    };
    let mut progress = |p: IngestProgress| {
        if let (IngestProgress::Resumed { kept }, None) = (&p, &bar) {
            eprintln!("{}", resumed(*kept));
        }
        if let Some(bar) = &bar {
            match p {
                // A long file's pages (a PDF of a hundred pages and more), so a big file does
                // not look stuck.
                IngestProgress::Reading { file, done, pages } if pages >= 100 => {
                    if done == 1 {
                        bar.reset();
                        bar.set_style(style("pages"));
                        bar.set_length(pages as u64);
                        bar.set_message(format!("reading {file}"));
                    }
                    bar.set_position(done as u64);
                    if done == pages {
                        bar.set_style(style("chunks"));
                    }
                }
                IngestProgress::Reading { .. } => {}
                IngestProgress::Indexing { total } => {
                    bar.reset();
                    bar.set_message("indexing");
                    bar.set_length(total as u64);
                }
                IngestProgress::Indexed { done } => bar.set_position(done as u64),
                IngestProgress::Embedding { total } => {
                    // A fresh start, so chunks/s and the ETA measure embedding alone.
                    bar.reset();
                    bar.set_message("embedding");
                    bar.set_length(total as u64);
                }
                IngestProgress::Embedded { done } => bar.set_position(done as u64),
                IngestProgress::Resumed { kept } => bar.println(resumed(kept)),
            }
        }
    };
    let summary = engine
        .ingest(dir, options, &mut progress)
        .with_context(|| format!("ingesting {}", dir.display()))?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    for skipped in &summary.skipped {
        eprintln!("warning: skipped {}: {}", skipped.path, skipped.reason);
    }
    let truncated = engine.embedder().truncated_inputs();
    if truncated > 0 {
        eprintln!(
            "note: {truncated} chunk texts were longer than the embedder accepts and were embedded from their beginning only"
        );
    }
    Ok(summary)
}
