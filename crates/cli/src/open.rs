//! Opening the engine the global flags name, ingesting the knowledge folder first when the
//! index is empty (or, with `--auto-ingest`, when its files changed), with a progress bar.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;

use crate::global::GlobalArgs;
use crate::output::{self, Lang};
use ragtrail::{EmbedConfig, Embedder, EmbedderInfo, models};
use ragtrail::{Engine, IngestOptions, IngestProgress, IngestSummary};

pub(crate) fn open_engine(global: &GlobalArgs) -> anyhow::Result<Engine> {
    open_engine_as(global, false, ModelUse::IfInstalled, Lang::En)
}

/// What a command that finds no embedder configured does about the default model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ModelUse {
    /// `ingest`: install the model when missing, and say when the index stays with hashing.
    Ingest,
    /// A command that answers (and ingests first into an empty index): install the model
    /// when missing.
    Answer,
    /// Use the model if it is installed; otherwise the hashing embedder.
    IfInstalled,
}

/// `for_rebuild`: an index written in an older format opens empty, to be rebuilt; an index
/// built with the hashing embedder is rebuilt with the default model. What it says about the
/// default model is said in `lang`.
pub(crate) fn open_engine_as(
    global: &GlobalArgs,
    for_rebuild: bool,
    model_use: ModelUse,
    lang: Lang,
) -> anyhow::Result<Engine> {
    let config = global.embed.config();
    let mut engine = if config.is_unconfigured() {
        // Which embedder built the index decides the default: open with the hashing embedder
        // (free) to read it, then load the model if it is to be used.
        let hashing: Arc<dyn Embedder> = Arc::new(ragtrail::HashingEmbedder::default());
        let mut engine = open_with(global, for_rebuild, hashing)?;
        let stored = engine.store().manifest().embedder.clone();
        let config = default_config(
            config,
            stored.as_ref(),
            for_rebuild,
            model_use,
            Notes::Print(lang),
        );
        let with_model = config.default_model.is_some();
        if with_model {
            let embedder = ragtrail::embedder_from_config(&config)
                .context("setting up the default embedder")?;
            if global.database_url().is_some() {
                engine = open_with(global, for_rebuild, embedder)?;
            } else {
                engine.use_embedder(embedder);
            }
        }
        // The glossary comes with the default model: fetched with it where it is fetched.
        let fetch_missing = with_model && model_use != ModelUse::IfInstalled;
        if let Some(glossary) = glossary(fetch_missing, lang) {
            engine.use_glossary(glossary);
        }
        engine
    } else {
        let embedder =
            ragtrail::embedder_from_config(&config).context("setting up the embedder")?;
        let mut engine = open_with(global, for_rebuild, embedder)?;
        if let Some(glossary) = glossary(false, lang) {
            engine.use_glossary(glossary);
        }
        engine
    };
    global.apply_search_settings(&mut engine.settings);
    Ok(engine)
}

/// The Chinese–English glossary (`models::GLOSSARY`) when it is installed, whatever the
/// embedder: it carries a question's missing words into the other language for the lexical
/// leg too. With `fetch_missing` (the default model in use, a command that may install it) a
/// missing one is installed first, saying so; one that cannot be had is said once and left out.
fn glossary(fetch_missing: bool, lang: Lang) -> Option<Arc<ragtrail::Glossary>> {
    let spec = models::GLOSSARY;
    let cache = models::cache_dir()?;
    if let Some(path) = spec.installed_in(&cache) {
        return Some(Arc::new(ragtrail::Glossary::open(&path)));
    }
    if !fetch_missing {
        return None;
    }
    match crate::model_cmd::fetch(spec, &cache, lang) {
        Ok(path) => Some(Arc::new(ragtrail::Glossary::open(&path))),
        Err(e) => {
            eprintln!(
                "{}",
                match lang {
                    Lang::En => format!(
                        "note: {} could not be installed: {e}; questions about passages written only in the other language (Chinese or English) will find fewer of them. `ragtrail model install {}` installs it later.",
                        spec.name, spec.name
                    ),
                    Lang::Zh => format!(
                        "提示：{} 未能安装：{e}；只用另一种语言（中文或英文）写成的段落会更难找到。之后可用 `ragtrail model install {}` 安装。",
                        spec.name, spec.name
                    ),
                }
            );
            None
        }
    }
}

fn open_with(
    global: &GlobalArgs,
    for_rebuild: bool,
    embedder: Arc<dyn Embedder>,
) -> anyhow::Result<Engine> {
    Ok(if let Some(url) = global.database_url() {
        Engine::open_postgres(&global.data_dir, url, embedder)
            .context("opening the knowledge base in PostgreSQL")?
    } else if for_rebuild {
        Engine::open_for_rebuild(&global.data_dir, embedder)
            .with_context(|| format!("opening the data directory {}", global.data_dir.display()))?
    } else {
        Engine::open_with(&global.data_dir, embedder)
            .with_context(|| format!("opening the data directory {}", global.data_dir.display()))?
    })
}

/// The embedder the flags and the environment configure, or the default model (installed
/// first when missing), for a fresh index that is not the data directory's (`eval --beir`).
pub(crate) fn embedder_for_new_index(global: &GlobalArgs) -> anyhow::Result<Arc<dyn Embedder>> {
    let mut config = global.embed.config();
    if config.is_unconfigured() {
        config = default_config(
            config,
            None,
            false,
            ModelUse::Answer,
            Notes::Print(Lang::En),
        );
    }
    ragtrail::embedder_from_config(&config).context("setting up the embedder")
}

/// Whether [`default_config`] tells the user what it decided, and in which language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Notes {
    Print(Lang),
    Quiet,
}

/// The embedder settings when none were given (`config.is_unconfigured()`): the installed
/// default model, unless the index was built with the hashing embedder (it keeps working as
/// it is; `ingest --rebuild` moves it to the model) or the model cannot be had.
pub(crate) fn default_config(
    mut config: EmbedConfig,
    stored: Option<&EmbedderInfo>,
    for_rebuild: bool,
    model_use: ModelUse,
    notes: Notes,
) -> EmbedConfig {
    let spec = models::DEFAULT_MODEL;
    let lang = match notes {
        Notes::Print(lang) => lang,
        Notes::Quiet => Lang::En,
    };
    let say = |text: String| {
        if notes != Notes::Quiet {
            eprintln!("{text}");
        }
    };
    if stored.is_some_and(|s| s.kind == ragtrail::HASHING_KIND) && !for_rebuild {
        // Only where the user acts on it: every `ask` would repeat it otherwise.
        if model_use == ModelUse::Ingest {
            say(format!(
                "note: this index was built with the hashing embedder (lexical, not semantic) and stays with it; `ragtrail ingest --rebuild` re-embeds it with {} (--embedder hashing keeps hashing and drops this note).",
                spec.name
            ));
        }
        return config;
    }
    let Some(cache) = models::cache_dir() else {
        say(match lang {
            Lang::En => format!(
                "note: no home folder to keep {} in (set RAGTRAIL_MODEL_CACHE): using the hashing embedder (lexical, not semantic).",
                spec.name
            ),
            Lang::Zh => format!(
                "提示：没有可存放 {} 的主目录（请设置 RAGTRAIL_MODEL_CACHE）：改用哈希嵌入（只按字面匹配，不理解语义）。",
                spec.name
            ),
        });
        return config;
    };
    if let Some(path) = spec.installed_in(&cache) {
        config.default_model = Some(path);
        return config;
    }
    if model_use == ModelUse::IfInstalled {
        return config;
    }
    say(match lang {
        Lang::En => format!(
            "No embedder is configured: installing the default model {} first, into {} (once; --embedder hashing skips it).",
            spec.name,
            cache.display()
        ),
        Lang::Zh => format!(
            "未配置嵌入模型：先安装默认模型 {}，装到 {}（只需一次；--embedder hashing 可跳过）。",
            spec.name,
            cache.display()
        ),
    });
    match crate::model_cmd::fetch(spec, &cache, lang) {
        Ok(path) => config.default_model = Some(path),
        Err(e) => say(match lang {
            Lang::En => format!(
                "note: {} could not be installed: {e}\n{}\nUsing the hashing embedder (lexical, not semantic); once the model is installed, `ragtrail ingest --rebuild` re-embeds the index with it.",
                spec.name,
                spec.manual_steps(&cache)
            ),
            // The manual steps are commands and addresses; their few words stay as written.
            Lang::Zh => format!(
                "提示：{} 未能安装：{e}\n{}\n改用哈希嵌入（只按字面匹配，不理解语义）；模型装好后，`ragtrail ingest --rebuild` 会用它重新嵌入索引。",
                spec.name,
                spec.manual_steps(&cache)
            ),
        }),
    }
    config
}

/// Opens the engine, ingesting the knowledge folder first if nothing was ingested yet; what
/// it says on the way is said in `lang` (the asker's).
pub(crate) fn open_ready_engine(global: &GlobalArgs, lang: Lang) -> anyhow::Result<Engine> {
    let mut engine = open_engine_as(global, false, ModelUse::Answer, lang)?;
    if engine.is_empty() {
        let knowledge = global.knowledge.display();
        eprintln!(
            "{}",
            match lang {
                Lang::En => format!("The index is empty: ingesting {knowledge} first."),
                Lang::Zh => format!("索引还是空的：先导入 {knowledge}。"),
            }
        );
        let summary = run_ingest(
            &mut engine,
            &global.knowledge,
            &global.ingest_options(),
            lang,
        )?;
        eprintln!("{}", output::ingest_summary_line(&summary, lang));
    }
    Ok(engine)
}

/// [`open_ready_engine`] for a command that answers from the index (`ask`, `search`, `chat`):
/// knowledge files edited, added or removed since the last ingest are re-ingested first with
/// `--auto-ingest`, and otherwise named on stderr with the command that brings the index up
/// to date, so nobody is answered from an old text without knowing it.
pub(crate) fn open_current_engine(global: &GlobalArgs, lang: Lang) -> anyhow::Result<Engine> {
    let mut engine = open_ready_engine(global, lang)?;
    let Some(changes) = engine.knowledge_changes().filter(|c| !c.is_empty()) else {
        return Ok(engine);
    };
    let changed = output::knowledge_changes_line(&changes, lang);
    if global.auto_ingest && !changes.root_missing {
        eprintln!(
            "{}",
            match lang {
                Lang::En => format!("{changed}; re-ingesting first (--auto-ingest)."),
                Lang::Zh => format!("{changed}；先重新导入（--auto-ingest）。"),
            }
        );
        let summary = run_ingest(&mut engine, &changes.root, &global.ingest_options(), lang)?;
        eprintln!("{}", output::ingest_summary_line(&summary, lang));
    } else {
        let hint = output::knowledge_refresh_hint(&changes, &global.data_dir, lang);
        eprintln!(
            "{}",
            match lang {
                Lang::En =>
                    format!("note: {changed}; answers come from the text as it was then. {hint}"),
                Lang::Zh => format!("提示：{changed}；回答仍依据上次导入时的文本。{hint}"),
            }
        );
    }
    Ok(engine)
}

/// A rate as a person reads it: one decimal (indicatif's own `{per_sec}` prints four,
/// "20.3777/s").
fn per_second(rate: f64) -> String {
    format!("{rate:.1}/s")
}

/// Ingests `dir` with a progress bar on a terminal; what it says is said in `lang`.
pub(crate) fn run_ingest(
    engine: &mut Engine,
    dir: &Path,
    options: &IngestOptions,
    lang: Lang,
) -> anyhow::Result<IngestSummary> {
    let eta = lang.pick("eta", "剩余");
    let style = |unit: &str| {
        indicatif::ProgressStyle::with_template(&format!(
            "{{spinner}} {{msg}} {{pos}}/{{len}} {unit} [{{elapsed}}, {{rate}}, {eta} {{eta}}]"
        ))
        .map(|style| {
            style.with_key(
                "rate",
                |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = w.write_str(&per_second(state.per_sec()));
                },
            )
        })
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
    };
    let (chunks, pages_unit) = (lang.pick("chunks", "个片段"), lang.pick("pages", "页"));
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = indicatif::ProgressBar::new(0);
        bar.set_style(style(chunks));
        bar
    });
    let resumed = |kept: usize| match lang {
        Lang::En => {
            format!("resuming: {kept} vectors kept from an ingest that stopped before it finished")
        }
        Lang::Zh => format!("继续上次未完成的导入：保留已算好的 {kept} 个向量"),
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
                        bar.set_style(style(pages_unit));
                        bar.set_length(pages as u64);
                        bar.set_message(format!("{} {file}", lang.pick("reading", "读取")));
                    }
                    bar.set_position(done as u64);
                    if done == pages {
                        bar.set_style(style(chunks));
                    }
                }
                IngestProgress::Reading { .. } => {}
                IngestProgress::Indexing { total } => {
                    bar.reset();
                    bar.set_message(lang.pick("indexing", "建索引"));
                    bar.set_length(total as u64);
                }
                IngestProgress::Indexed { done } => bar.set_position(done as u64),
                IngestProgress::Embedding { total } => {
                    // A fresh start, so chunks/s and the ETA measure embedding alone.
                    bar.reset();
                    bar.set_message(lang.pick("embedding", "嵌入"));
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
        match lang {
            Lang::En => eprintln!("warning: skipped {}: {}", skipped.path, skipped.reason),
            Lang::Zh => eprintln!("警告：已跳过 {}：{}", skipped.path, skipped.reason),
        }
    }
    let truncated = engine.embedder().truncated_inputs();
    if truncated > 0 {
        match lang {
            Lang::En => eprintln!(
                "note: {truncated} chunk texts were longer than the embedder accepts and were embedded from their beginning only"
            ),
            Lang::Zh => {
                eprintln!("提示：{truncated} 个片段超出嵌入模型的长度上限，只嵌入了开头部分")
            }
        }
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::per_second;

    #[test]
    fn an_ingest_rate_reads_with_one_decimal() {
        assert_eq!(per_second(20.3777), "20.4/s");
        assert_eq!(per_second(7.0), "7.0/s");
    }
}
