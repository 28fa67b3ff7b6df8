//! `ragtrail status`: what is in the data directory and which embedder it was built with.

use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use serde::Serialize;

use crate::global::GlobalArgs;
use crate::output::{knowledge_changes_line, knowledge_refresh_hint};
use ragtrail::embed::{self, EmbedderInfo};
use ragtrail::knowledge::KnowledgeChanges;
use ragtrail::store::ChunkStore;

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

/// Documents and chunks of one tenant (`status --all-tenants`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct TenantCounts {
    tenant: String,
    documents: usize,
    chunks: usize,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Status {
    data_dir: String,
    /// `embedded` or `postgresql`.
    backend: &'static str,
    /// The PostgreSQL URL, password removed (postgresql only).
    database: Option<String>,
    ingested: bool,
    /// What `documents` and `chunks` count: the caller's access context, or every tenant.
    scope: Scope,
    documents: usize,
    chunks: usize,
    /// Per tenant, with `--all-tenants`.
    tenants: Option<Vec<TenantCounts>>,
    generation: u64,
    updated_at: Option<String>,
    age_seconds: Option<i64>,
    knowledge_root: Option<String>,
    /// What produced the stored vectors.
    index_embedder: Option<EmbedderInfo>,
    /// What this invocation's configuration would use.
    configured_embedder: Option<EmbedderInfo>,
    configured_embedder_error: Option<String>,
    /// For an embeddings endpoint: whether it answered a probe query just now (`None`: not an
    /// endpoint). The marking is in `configuredEmbedder.marking` (absent: none).
    embedder_reachable: Option<bool>,
    /// The endpoint's URL, when the configured embedder is one.
    embedder_url: Option<String>,
    /// Whether searching now would work (`None`: nothing to compare).
    embedder_matches: Option<bool>,
    /// How a `searchDocs` call that names no fusion fuses the legs with the configured embedder
    /// (`--search-fusion`, else the embedder's default).
    fusion: Option<String>,
    /// How the agent's own searches fuse them (`--agent-fusion`, else the same).
    agent_fusion: Option<String>,
    /// Knowledge files edited, added or removed since the last ingest (`None`: not tracked).
    knowledge_changes: Option<KnowledgeChanges>,
    /// PostgreSQL's ingest runs not committed (postgresql only).
    ingest_runs: Option<IngestRuns>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct IngestRuns {
    /// Runs in progress now (their process is alive).
    running: u64,
    /// Runs whose process stopped before committing, ever.
    abandoned: u64,
    /// The ids this status call found dead and marked abandoned.
    marked_now: Vec<i64>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase", tag = "of")]
enum Scope {
    /// What this tenant and these roles may search.
    Access {
        tenant: String,
        roles: Vec<String>,
    },
    AllTenants,
}

/// Where the chunk records are read from: the embedded store in the data dir, or PostgreSQL
/// (through an engine, which loads its rows).
enum Source {
    Embedded(Option<Box<ChunkStore>>),
    Postgres(Box<ragtrail::engine::Engine>),
}

impl Source {
    fn store(&self) -> Option<&ChunkStore> {
        match self {
            Source::Embedded(store) => store.as_deref(),
            Source::Postgres(engine) => Some(engine.store()),
        }
    }
}

pub fn run(global: &GlobalArgs, args: &StatusArgs) -> anyhow::Result<ExitCode> {
    let source = if global.database_url().is_some() {
        Source::Postgres(Box::new(crate::open::open_engine(global)?))
    } else {
        let store_dir = global.data_dir.join("store");
        Source::Embedded(if store_dir.is_dir() {
            Some(Box::new(ChunkStore::open(&store_dir).with_context(
                || format!("reading the chunk store in {}", store_dir.display()),
            )?))
        } else {
            None
        })
    };
    let store = source.store();
    let caller = crate::config::access_context(global.tenant.as_deref(), &global.roles);
    let (scope, documents, chunks, tenants) = match store {
        None => (
            scope_of(args.all_tenants, &caller),
            0,
            0,
            args.all_tenants.then(Vec::new),
        ),
        Some(store) if args.all_tenants => {
            let mut per: std::collections::BTreeMap<&str, (usize, usize)> = Default::default();
            for d in store.documents() {
                per.entry(&d.tenant).or_default().0 += 1;
            }
            for c in store.chunks() {
                per.entry(&c.tenant).or_default().1 += 1;
            }
            let tenants = per
                .into_iter()
                .map(|(tenant, (documents, chunks))| TenantCounts {
                    tenant: tenant.to_string(),
                    documents,
                    chunks,
                })
                .collect();
            (
                Scope::AllTenants,
                store.documents().len(),
                store.chunks().len(),
                Some(tenants),
            )
        }
        Some(store) => (
            scope_of(false, &caller),
            store
                .documents()
                .iter()
                .filter(|d| caller.allows(&d.tenant, &d.roles))
                .count(),
            store
                .chunks()
                .iter()
                .filter(|c| caller.allows(&c.tenant, &c.roles))
                .count(),
            None,
        ),
    };
    let manifest = store.as_ref().map(|s| s.manifest());
    let ingested = store.as_ref().is_some_and(|s| s.generation() > 0);
    let updated_at = manifest
        .map(|m| m.updated_at.clone())
        .filter(|u| !u.is_empty());
    let age_seconds = updated_at
        .as_deref()
        .and_then(|u| chrono::DateTime::parse_from_rfc3339(u).ok())
        .map(|t| (chrono::Utc::now() - t.with_timezone(&chrono::Utc)).num_seconds());
    let index_embedder = manifest.and_then(|m| m.embedder.clone());
    let config = global.embed.config();
    let is_endpoint = config.resolved_choice() == embed::EmbedderChoice::Http;
    let (configured_embedder, configured_embedder_error, embedder_reachable) =
        match embed::from_config(&config) {
            // An endpoint is asked for one query vector: configured is not the same as up.
            Ok(e) if is_endpoint => match e.embed_query(&["status probe"]) {
                Ok(_) => (Some(e.info()), None, Some(true)),
                Err(err) => (Some(e.info()), Some(err.to_string()), Some(false)),
            },
            Ok(e) => (Some(e.info()), None, None),
            Err(e) => (None, Some(e.to_string()), is_endpoint.then_some(false)),
        };
    let embedder_url = if is_endpoint {
        config
            .base_url
            .as_deref()
            .map(|u| ragtrail::http::display_url(u.trim()))
    } else {
        None
    };
    let embedder_matches = match (&index_embedder, &configured_embedder) {
        (Some(stored), Some(configured)) if ingested => Some(stored == configured),
        _ => None,
    };
    // What an engine opened with this configuration would use.
    let settings = configured_embedder.as_ref().map(|info| {
        let mut settings = ragtrail::search::SearchSettings::for_embedder(&info.kind);
        global.apply_search_settings(&mut settings);
        settings
    });
    let fusion = settings.map(|s| s.fusion.to_string());
    let agent_fusion = settings.map(|s| s.agent_fusion.to_string());
    let (backend, database) = match &source {
        Source::Embedded(_) => ("embedded", None),
        Source::Postgres(engine) => (
            "postgresql",
            engine.postgres().map(|pg| pg.url().to_string()),
        ),
    };
    let knowledge_changes = match &source {
        Source::Embedded(_) => ingested
            .then(|| ragtrail::engine::knowledge_changes_in(&global.data_dir))
            .flatten(),
        Source::Postgres(engine) => ingested.then(|| engine.knowledge_changes()).flatten(),
    };
    let ingest_runs = match &source {
        Source::Embedded(_) => None,
        Source::Postgres(engine) => match engine.postgres() {
            Some(pg) => {
                let marked_now = pg
                    .mark_abandoned_runs()
                    .context("checking PostgreSQL's ingest runs")?;
                let (running, abandoned) = pg
                    .run_counts()
                    .context("counting PostgreSQL's ingest runs")?;
                Some(IngestRuns {
                    running,
                    abandoned,
                    marked_now,
                })
            }
            None => None,
        },
    };
    let status = Status {
        data_dir: global.data_dir.display().to_string(),
        backend,
        database,
        ingested,
        scope,
        documents,
        chunks,
        tenants,
        generation: store.as_ref().map_or(0, |s| s.generation()),
        updated_at,
        age_seconds,
        knowledge_root: manifest.and_then(|m| m.knowledge_root.clone()),
        index_embedder,
        configured_embedder,
        configured_embedder_error,
        embedder_reachable,
        embedder_url,
        embedder_matches,
        fusion,
        agent_fusion,
        knowledge_changes,
        ingest_runs,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&status)?);
    } else {
        print!("{}", render(&status));
    }
    Ok(ExitCode::SUCCESS)
}

fn scope_of(all_tenants: bool, caller: &ragtrail::access::AccessContext) -> Scope {
    if all_tenants {
        Scope::AllTenants
    } else {
        Scope::Access {
            tenant: caller.tenant.clone(),
            roles: caller.roles.clone(),
        }
    }
}

fn describe(info: &EmbedderInfo) -> String {
    let nature = match info.kind.as_str() {
        embed::hashing::KIND => {
            " — lexical, not semantic: texts are close when they share character n-grams, not when they mean the same"
        }
        embed::LOCAL_KIND | embed::http::KIND => " — semantic",
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
                    knowledge_changes_line(c),
                    knowledge_refresh_hint(c, std::path::Path::new(&s.data_dir))
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
        let text = describe(&embed::HashingEmbedder::default().info());
        assert!(text.contains("lexical, not semantic"), "{text}");
        assert!(text.contains("384 dims"), "{text}");
    }
}
