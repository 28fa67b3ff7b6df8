//! `ragtrail status`: what is in the data directory and which embedder it was built with.

use std::process::ExitCode;

use clap::Args;

use crate::global::GlobalArgs;
use crate::output::Lang;
use crate::output::{knowledge_changes_line, knowledge_refresh_hint};
use ragtrail::EmbedderInfo;
use ragtrail::{Scope, Status};

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Print a JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Count every tenant's documents and chunks, one line per tenant (the operator's view).
    /// Without it the counts are what --tenant and --role may search.
    #[arg(long)]
    pub all_tenants: bool,
}

pub fn run(global: &GlobalArgs, args: &StatusArgs) -> anyhow::Result<ExitCode> {
    let caller = crate::config::access_context(global.tenant.as_deref(), &global.roles);
    let counted = (!args.all_tenants).then_some(&caller);
    // The embedded store is read without opening an engine: asking changes nothing on disk.
    let status = if global.database_url().is_some() {
        let engine = crate::open::open_engine(global)?;
        match counted {
            Some(caller) => engine.status(caller)?,
            None => engine.status_all_tenants()?,
        }
    } else {
        ragtrail::status_in(&global.data_dir, counted)?
    };
    // With no embedder configured, what the next command would use: the installed default
    // model, or the hashing embedder an index built with it stays with (nothing installed).
    let mut config = global.embed.config();
    let default_note = config
        .is_unconfigured()
        .then(|| default_model_note(status.index_embedder.as_ref()));
    if config.is_unconfigured() {
        config = crate::open::default_config(
            config,
            status.index_embedder.as_ref(),
            false,
            crate::open::ModelUse::IfInstalled,
            crate::open::Notes::Quiet,
        );
    }
    let status = status.with_configuration(&config, &|s| global.apply_search_settings(s));
    if args.json {
        println!("{}", serde_json::to_string_pretty(&status)?);
    } else {
        print!("{}", render(&status));
        if let Some(note) = default_note {
            println!("{:<20} {note}", "default embedder");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// What the default embedder is when none is configured, and why the index may not use it.
fn default_model_note(index: Option<&EmbedderInfo>) -> String {
    let spec = ragtrail::models::DEFAULT_MODEL;
    let installed = ragtrail::models::cache_dir().and_then(|c| spec.installed_in(&c));
    let hashing_index = index.is_some_and(|i| i.kind == ragtrail::HASHING_KIND);
    match installed {
        Some(path) if hashing_index => format!(
            "{} (installed at {}); this index was built with the hashing embedder and stays with it until `ragtrail ingest --rebuild` re-embeds it with the model",
            spec.name,
            path.display()
        ),
        Some(path) => format!("{} (installed at {})", spec.name, path.display()),
        None => format!(
            "{} is not installed: the hashing embedder is used until `ragtrail model install` (or the first `ragtrail ingest`) installs it",
            spec.name
        ),
    }
}

fn describe(info: &EmbedderInfo) -> String {
    let nature = match info.kind.as_str() {
        ragtrail::HASHING_KIND => {
            " — lexical, not semantic: texts are close when they share character n-grams, not when they mean the same"
        }
        ragtrail::LOCAL_KIND | ragtrail::HTTP_KIND => " — semantic",
        _ => "",
    };
    format!(
        "{} {} ({} dims){nature}; query/passage marking: {}",
        info.kind, info.model, info.dims, info.marking
    )
}

fn render(s: &Status) -> String {
    let mut out = String::new();
    let mut line = |label: &str, value: String| {
        out.push_str(&format!("{label:<20} {value}\n"));
    };
    line("data dir", s.data_dir.clone());
    match &s.database {
        Some(url) => line(
            "backend",
            format!(
                "{} at {url} (system of record; the BM25 index is in the data dir)",
                s.backend
            ),
        ),
        None => line(
            "backend",
            format!("{} (chunk store and BM25 index in the data dir)", s.backend),
        ),
    }
    if !s.ingested {
        line(
            "index",
            "empty: nothing ingested yet (run `ragtrail ingest`)".into(),
        );
    } else {
        let scope = match &s.scope {
            Scope::AllTenants => "all tenants".to_string(),
            Scope::Access { tenant, roles } if roles.is_empty() => {
                format!("visible to tenant {tenant}, no roles; --all-tenants counts every tenant")
            }
            Scope::Access { tenant, roles } => format!(
                "visible to tenant {tenant}, roles {}; --all-tenants counts every tenant",
                roles.join(", ")
            ),
        };
        line("documents", format!("{} ({scope})", s.documents));
        line("chunks", s.chunks.to_string());
        for t in s.tenants.iter().flatten() {
            line(
                &format!("  tenant {}", t.tenant),
                format!(
                    "{} document{}, {} chunk{}",
                    t.documents,
                    if t.documents == 1 { "" } else { "s" },
                    t.chunks,
                    if t.chunks == 1 { "" } else { "s" }
                ),
            );
        }
        let age = s.age_seconds.map(human_age).unwrap_or_default();
        line(
            "index updated",
            format!(
                "{}{} (generation {})",
                s.updated_at.as_deref().unwrap_or("unknown"),
                if age.is_empty() {
                    String::new()
                } else {
                    format!(", {age} ago")
                },
                s.generation
            ),
        );
        if let Some(root) = &s.knowledge_root {
            line("knowledge from", root.clone());
        }
        line(
            "knowledge files",
            match &s.knowledge_changes {
                None => "not tracked (changes are noticed after the next `ragtrail ingest`)".into(),
                Some(c) if c.is_empty() => "unchanged since the last ingest".into(),
                Some(c) => format!(
                    "{}. {}",
                    knowledge_changes_line(c, Lang::En),
                    knowledge_refresh_hint(c, std::path::Path::new(&s.data_dir), Lang::En)
                ),
            },
        );
        line(
            "index embedder",
            s.index_embedder
                .as_ref()
                .map(describe)
                .unwrap_or_else(|| "none (no vectors stored)".into()),
        );
    }
    if let Some(runs) = &s.ingest_runs {
        let mut text = match runs.running {
            0 => "none running".to_string(),
            n => format!("{n} running now"),
        };
        if runs.abandoned > 0 {
            text.push_str(&format!(
                "; {} abandoned (stopped before committing: killed or crashed; the next ingest redoes their work)",
                runs.abandoned
            ));
        }
        if !runs.marked_now.is_empty() {
            let ids: Vec<String> = runs.marked_now.iter().map(i64::to_string).collect();
            text.push_str(&format!(
                "; marked abandoned just now: run {}",
                ids.join(", ")
            ));
        }
        line("ingest runs", text);
    }
    match (&s.configured_embedder, &s.configured_embedder_error) {
        (Some(info), _) => line("configured embedder", describe(info)),
        (None, Some(err)) => line("configured embedder", format!("unavailable: {err}")),
        (None, None) => {}
    }
    let url = s.embedder_url.as_deref().unwrap_or("the endpoint");
    match (s.embedder_reachable, &s.configured_embedder_error) {
        (Some(true), _) => line("endpoint", format!("{url}: reachable (answered a probe)")),
        (Some(false), Some(err)) if s.configured_embedder.is_some() => {
            line("endpoint", format!("{url}: NOT reachable: {err}"))
        }
        (Some(false), _) => line("endpoint", format!("{url}: NOT reachable")),
        (None, _) => {}
    }
    if let (Some(fusion), Some(agent)) = (&s.fusion, &s.agent_fusion) {
        line(
            "fusion",
            if agent == fusion {
                fusion.clone()
            } else {
                format!("{fusion}; the agent's searches: {agent} (--agent-fusion)")
            },
        );
    }
    match s.embedder_matches {
        Some(true) => line("vectors", "match the configured embedder".into()),
        Some(false) => line(
            "vectors",
            "DO NOT match the configured embedder: searches fail until `ragtrail ingest --rebuild` re-embeds everything (or configure the index's embedder again)".into(),
        ),
        None => {}
    }
    out
}

/// "45 s", "12 min", "3 h 5 min", "2 days 4 h".
fn human_age(secs: i64) -> String {
    let secs = secs.max(0);
    match secs {
        0..60 => format!("{secs} s"),
        60..3600 => format!("{} min", secs / 60),
        3600..86_400 => format!("{} h {} min", secs / 3600, secs % 3600 / 60),
        _ => format!("{} days {} h", secs / 86_400, secs % 86_400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_naturally() {
        assert_eq!(human_age(-5), "0 s");
        assert_eq!(human_age(45), "45 s");
        assert_eq!(human_age(12 * 60 + 5), "12 min");
        assert_eq!(human_age(3 * 3600 + 5 * 60), "3 h 5 min");
        assert_eq!(human_age(2 * 86_400 + 4 * 3600), "2 days 4 h");
    }

    #[test]
    fn the_hashing_embedder_is_called_lexical() {
        let text = describe(&ragtrail::HashingEmbedder::default().info());
        assert!(text.contains("lexical, not semantic"), "{text}");
        assert!(text.contains("384 dims"), "{text}");
    }
}
