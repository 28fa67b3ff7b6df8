//! The flags every command takes: directories, access, the database, fusion and the
//! embedder.

use std::path::PathBuf;

use clap::Args;

use crate::config::{DEFAULT_DATA_DIR, DEFAULT_KNOWLEDGE_DIR, DEFAULT_TRACE_DIR};
use ragtrail::IngestOptions;
use ragtrail::{EmbedConfig, EmbedderChoice};

#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Where the index and the embedded store live.
    #[arg(long, global = true, env = "RAGTRAIL_DATA_DIR", default_value = DEFAULT_DATA_DIR, value_name = "DIR")]
    pub data_dir: PathBuf,
    /// Knowledge folder ingested on first use when the index is empty.
    #[arg(long, global = true, env = "RAGTRAIL_KNOWLEDGE_DIR", default_value = DEFAULT_KNOWLEDGE_DIR, value_name = "DIR")]
    pub knowledge: PathBuf,
    /// Where traces and the trace ledger are written.
    #[arg(long, global = true, env = "RAGTRAIL_TRACE_DIR", default_value = DEFAULT_TRACE_DIR, value_name = "DIR")]
    pub trace_dir: PathBuf,
    /// Tenant whose documents may be searched (set by the operator, never by the model).
    #[arg(long, global = true, env = "RAGTRAIL_TENANT", value_name = "NAME")]
    pub tenant: Option<String>,
    /// Role granted to the asker; repeat or separate with commas (e.g. `--role hr`).
    #[arg(
        long = "role",
        global = true,
        env = "RAGTRAIL_ROLES",
        value_name = "ROLE",
        value_delimiter = ','
    )]
    pub roles: Vec<String>,
    /// Who is asking, within the tenant: whose remembered facts `ask`, `chat` and `memory`
    /// read and write (set by the operator, never by a question) [default: the OS user name
    /// ($USER, $USERNAME), else `default`].
    #[arg(long, global = true, env = "RAGTRAIL_USER", value_name = "NAME")]
    pub user: Option<String>,
    /// PostgreSQL + pgvector as the system of record (unset: the embedded store in --data-dir).
    #[arg(
        long,
        global = true,
        env = "DATABASE_URL",
        hide_env_values = true,
        value_name = "URL"
    )]
    pub database_url: Option<String>,
    /// Re-ingest the knowledge folder first when its files changed since the last ingest
    /// (`ask`, `search`, `chat`); without it they only say so.
    #[arg(
        long,
        global = true,
        env = "RAGTRAIL_AUTO_INGEST",
        action = clap::ArgAction::SetTrue,
        // The variable is on unless it says 0, false, no or off.
        value_parser = clap::builder::FalseyValueParser::new()
    )]
    pub auto_ingest: bool,
    /// Where a document without `tenant:` in its front matter goes when ingested: `default`
    /// (the default tenant) or `deny` (an error naming the file), for a multi-tenant folder.
    #[arg(
        long,
        global = true,
        env = "RAGTRAIL_DEFAULT_ACCESS",
        value_enum,
        default_value_t = DefaultAccessArg::Default,
        value_name = "RULE"
    )]
    pub default_access: DefaultAccessArg,
    /// How a search that names no fusion fuses the two legs (`search`, HTTP and MCP
    /// `searchDocs`, and the agent's searches unless `--agent-fusion` says otherwise), in
    /// `search --fusion`'s terms; default: `agree:0.5` with the hashing embedder,
    /// `standout-coverage` with multilingual-e5-small (its meaning leads where BM25's best hit
    /// holds little of the question), `standout` with another model.
    #[arg(
        long,
        global = true,
        env = "RAGTRAIL_SEARCH_FUSION",
        value_name = "FUSION"
    )]
    pub search_fusion: Option<ragtrail::Fusion>,
    /// How the agent's own searches fuse the two legs (`ask`, `chat`, `serve`, `mcp`, `eval`),
    /// in `search --fusion`'s terms; default: as `searchDocs` does (`--search-fusion`). To try
    /// a fusion on the agent alone, e.g. `coverage:1` (BM25 weighed by its best hit's share
    /// of the question's key terms).
    #[arg(
        long,
        global = true,
        env = "RAGTRAIL_AGENT_FUSION",
        value_name = "FUSION"
    )]
    pub agent_fusion: Option<ragtrail::Fusion>,
    #[command(flatten)]
    pub embed: EmbedArgs,
}

/// `--default-access`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DefaultAccessArg {
    Default,
    Deny,
}

impl GlobalArgs {
    /// The search settings the operator chose on the command line (`--search-fusion`,
    /// `--agent-fusion`).
    pub(crate) fn apply_search_settings(&self, settings: &mut ragtrail::SearchSettings) {
        if let Some(fusion) = self.search_fusion {
            settings.fusion = fusion;
            settings.agent_fusion = fusion;
        }
        if let Some(fusion) = self.agent_fusion {
            settings.agent_fusion = fusion;
        }
    }

    /// Ingest options from the global flags.
    pub fn ingest_options(&self) -> IngestOptions {
        let mut options = IngestOptions::default();
        options.scan.default_access = match self.default_access {
            DefaultAccessArg::Default => ragtrail::DefaultAccess::DefaultTenant,
            DefaultAccessArg::Deny => ragtrail::DefaultAccess::Deny,
        };
        options
    }

    /// The asker whose memory is read and written: the tenant of `--tenant` and the user of
    /// `--user`, else the OS user name, else `default`.
    pub fn asker(&self) -> anyhow::Result<ragtrail::Asker> {
        let access = crate::config::access_context(self.tenant.as_deref(), &self.roles);
        let os_user = || {
            ["USER", "USERNAME", "LOGNAME"]
                .iter()
                .find_map(|v| std::env::var(v).ok().filter(|u| !u.trim().is_empty()))
        };
        let user = self
            .user
            .clone()
            .filter(|u| !u.trim().is_empty())
            .or_else(os_user)
            .unwrap_or_else(|| "default".to_string());
        Ok(ragtrail::Asker::new(&access.tenant, &user)?)
    }

    /// The database URL, if one is set and not blank.
    pub fn database_url(&self) -> Option<&str> {
        self.database_url
            .as_deref()
            .map(str::trim)
            .filter(|u| !u.is_empty())
    }
}

/// Which embedder computes the vectors (see docs/embeddings.md).
#[derive(Debug, Args)]
#[command(next_help_heading = "Embeddings")]
pub struct EmbedArgs {
    /// `hashing` (offline, lexical), `local` (a model folder or file) or `http` (an OpenAI-compatible
    /// endpoint) [default: local if a model folder is set, else http if an endpoint is set,
    /// else the default model multilingual-e5-small from the model cache, installed by the
    /// first ingest that needs it (`ragtrail model install`); an index built with hashing
    /// stays with hashing until `ingest --rebuild`].
    #[arg(long, global = true, env = "RAGTRAIL_EMBEDDER", value_name = "KIND")]
    pub embedder: Option<EmbedderChoice>,
    /// Local sentence-transformers model folder (config.json, tokenizer.json, model.safetensors),
    /// or the packed multilingual-e5-small file e5-small-q4.bin.
    #[arg(
        long,
        global = true,
        env = "RAGTRAIL_EMBED_MODEL_DIR",
        value_name = "DIR"
    )]
    pub embed_model_dir: Option<PathBuf>,
    /// OpenAI-compatible embeddings endpoint, usually ending in /v1.
    #[arg(
        long,
        global = true,
        env = "RAGTRAIL_EMBED_BASE_URL",
        value_name = "URL"
    )]
    pub embed_base_url: Option<String>,
    /// API key of the embeddings endpoint (sent as a bearer token, never logged).
    #[arg(
        long,
        global = true,
        env = "RAGTRAIL_EMBED_API_KEY",
        hide_env_values = true,
        value_name = "KEY"
    )]
    pub embed_api_key: Option<String>,
    /// Model name sent to the embeddings endpoint.
    #[arg(long, global = true, env = "RAGTRAIL_EMBED_MODEL", value_name = "NAME")]
    pub embed_model: Option<String>,
    /// Expected vector length of the endpoint [default: learnt from its first answer].
    #[arg(long, global = true, env = "RAGTRAIL_EMBED_DIMS", value_name = "N")]
    pub embed_dims: Option<u32>,
    /// Inputs per request (http, default 64) or per forward pass (local, default 32).
    #[arg(
        long,
        global = true,
        env = "RAGTRAIL_EMBED_BATCH_SIZE",
        value_name = "N"
    )]
    pub embed_batch_size: Option<usize>,
    /// Embedding requests in flight at once (http) [default: 2].
    #[arg(
        long,
        global = true,
        env = "RAGTRAIL_EMBED_CONCURRENCY",
        value_name = "N"
    )]
    pub embed_concurrency: Option<usize>,
    /// Longest text sent to the endpoint, in characters; longer ones are cut and counted
    /// [default: 6000].
    #[arg(
        long,
        global = true,
        env = "RAGTRAIL_EMBED_MAX_CHARS",
        value_name = "N"
    )]
    pub embed_max_chars: Option<usize>,
    /// How queries and passages are marked for the endpoint: none, input-type (an input_type
    /// field "query"/"passage", as scripts/embed-server.sh's server wants), e5 (text prefixes
    /// "query: "/"passage: "), bge, nomic, input-type:QUERY,PASSAGE or prefix:QUERY|PASSAGE.
    /// Part of the index: changing it needs `ingest --rebuild` [default: none].
    #[arg(
        long,
        global = true,
        env = "RAGTRAIL_EMBED_MARKING",
        value_name = "MARKING"
    )]
    pub embed_marking: Option<ragtrail::Marking>,
}

impl EmbedArgs {
    pub fn config(&self) -> EmbedConfig {
        EmbedConfig {
            choice: self.embedder.unwrap_or_default(),
            base_url: self.embed_base_url.clone(),
            api_key: self.embed_api_key.clone(),
            model: self.embed_model.clone(),
            model_dir: self.embed_model_dir.clone(),
            default_model: None,
            dims: self.embed_dims,
            batch_size: self.embed_batch_size,
            concurrency: self.embed_concurrency,
            max_input_chars: self.embed_max_chars,
            marking: self.embed_marking.clone(),
        }
    }
}
