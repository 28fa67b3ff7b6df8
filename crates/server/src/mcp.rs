//! The MCP server: tools `searchDocs` and `ask` over the same engine and traces as the HTTP API,
//! over stdio (`ragtrail mcp`) and over the Streamable HTTP transport at `/mcp` on `serve`.
//! Who the caller is comes from the operator's configuration (stdio: the [`Grant`] the server
//! was started with) or from the verified bearer token of each HTTP request (`/mcp`), never
//! from a tool's arguments: the argument types reject any field they do not name, a tenant or
//! role included.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ragtrail::SearchHit;
use ragtrail::{AgentOutcome, AgentRagOptions};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleServer, ServerHandler, ServiceExt, schemars, tool, tool_handler, tool_router};
use serde::{Deserialize, Serialize};

use crate::error::ApiError;
use crate::service::{App, AskParams, blocking};
use crate::tokens::Grant;

/// `searchDocs` arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SearchDocsArgs {
    /// 1 to 8 keywords: words or short phrases taken literally (no query syntax, no
    /// sentences), in the knowledge base's language.
    pub keywords: Vec<String>,
    /// Hits to return, 1 to 20 [default: 5].
    // A plain integer with a default, not a nullable one: clients that map tool schemas onto
    // a single-`type` dialect accept it (the MCP inspector's portability check).
    #[serde(default = "default_top_k")]
    pub top_k: u32,
}

fn default_top_k() -> u32 {
    AgentRagOptions::default().top_k_per_round
}

/// `ask` arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AskArgs {
    /// The question, in any language of the knowledge base (at most 2,000 characters).
    pub question: String,
}

/// One hit as a tool returns it.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolHit {
    /// Stable id of the chunk; cite it.
    pub chunk_id: String,
    /// Document title and headings down to the chunk ("Travel > Hotels").
    pub title_path: String,
    /// The chunk's best passage for the keywords.
    pub snippet: String,
    /// The source file.
    pub source_uri: String,
    /// Fused relevance score (higher is better).
    pub score: f64,
}

impl From<&SearchHit> for ToolHit {
    fn from(h: &SearchHit) -> Self {
        Self {
            chunk_id: h.chunk_id.clone(),
            title_path: h.title_path.clone(),
            snippet: h.snippet.clone(),
            source_uri: h.source_uri.clone(),
            score: h.score,
        }
    }
}

/// `searchDocs` result.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchDocsResult {
    /// The traced run of this call (replay and audit it by this id).
    pub run_id: String,
    pub hits: Vec<ToolHit>,
    /// Whether the best hit covers the keywords well enough to answer from.
    pub sufficient: bool,
}

/// A cited passage of an answer.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolCitation {
    pub chunk_id: String,
    pub title_path: String,
    pub source_uri: String,
    /// Verbatim quote from the chunk, checked against it.
    pub quote: String,
}

/// `ask` result.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AskResult {
    pub run_id: String,
    /// `answered`, `evidence` or `insufficient_evidence`; a broken setup (an index embedded
    /// with another model, an embeddings or chat server that does not answer) is the tool's
    /// error instead, `setup_error: CAUSE`.
    pub status: String,
    pub reason: String,
    /// The answer, or what to tell the user when there is none.
    pub answer: Option<String>,
    pub citations: Vec<ToolCitation>,
    /// Every hit of every search round, in order.
    pub hits: Vec<ToolHit>,
}

fn all_hits(outcome: &AgentOutcome) -> Vec<ToolHit> {
    outcome
        .rounds
        .iter()
        .flat_map(|r| r.hits.iter().map(ToolHit::from))
        .collect()
}

/// `memorySet`'s arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemorySetArgs {
    /// The fact's name (grade, base city, start date…), any case.
    pub key: String,
    /// Its value, as the documents write it where possible (B, 成都, 2023-07-01).
    pub value: String,
}

/// `memoryForget`'s arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemoryForgetArgs {
    /// The fact's name, any case.
    pub key: String,
}

/// `memoryList`'s arguments: none.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryListArgs {}

/// One remembered fact.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolFact {
    pub key: String,
    pub value: String,
    /// `set by the asker` or `said in run <runId>`.
    pub source: String,
    /// When it was set, RFC 3339 UTC.
    pub set_at: String,
}

/// What the memory tools answer: the caller's facts after the call.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryResult {
    pub facts: Vec<ToolFact>,
}

fn tool_facts(facts: Vec<ragtrail::Fact>) -> Json<MemoryResult> {
    Json(MemoryResult {
        facts: facts
            .into_iter()
            .map(|f| ToolFact {
                source: f.source.describe(),
                key: f.key,
                value: f.value,
                set_at: f.set_at,
            })
            .collect(),
    })
}

fn tool_error(e: ApiError) -> String {
    match e.field {
        Some(field) => format!("{} ({field}): {}", e.code, e.message),
        None => format!("{}: {}", e.code, e.message),
    }
}

/// The MCP service of one connection (stdio) or session (HTTP).
#[derive(Clone)]
pub struct McpServer {
    app: Arc<App>,
    /// The operator's grant over stdio; `None` over HTTP, where each request's token decides.
    grant: Option<Grant>,
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl McpServer {
    /// Every call under `grant` (stdio: the operator's flags).
    pub fn new(app: Arc<App>, grant: Grant) -> Self {
        Self {
            app,
            grant: Some(grant),
            tool_router: Self::tool_router() + Self::memory_router(),
        }
    }

    /// Each call under the grant of the token its HTTP request carried ([`routes`]).
    pub fn over_http(app: Arc<App>) -> Self {
        Self {
            app,
            grant: None,
            tool_router: Self::tool_router() + Self::memory_router(),
        }
    }

    /// Who makes this call: the operator's grant, or the one [`require_token`] put on the
    /// request after verifying its token.
    fn caller(&self, ctx: &RequestContext<RoleServer>) -> Result<Grant, String> {
        if let Some(grant) = &self.grant {
            return Ok(grant.clone());
        }
        ctx.extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Grant>())
            .cloned()
            .ok_or_else(|| "unauthorized: this call carried no verified token".to_string())
    }

    #[tool(
        name = "searchDocs",
        description = "Search the policy knowledge base with keywords (short terms, not sentences). Returns hits with chunkId, titlePath, snippet, sourceUri and score; every call is traced."
    )]
    async fn search_docs(
        &self,
        Parameters(args): Parameters<SearchDocsArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<SearchDocsResult>, String> {
        let app = self.app.clone();
        let grant = self.caller(&ctx)?;
        let top_k = args.top_k;
        let outcome = blocking(move || app.traced_search(&grant, args.keywords, top_k))
            .await
            .map_err(tool_error)?;
        let sufficient = outcome
            .rounds
            .first()
            .is_some_and(|r| r.sufficiency.sufficient);
        Ok(Json(SearchDocsResult {
            run_id: outcome.run_id.to_string(),
            hits: all_hits(&outcome),
            sufficient,
        }))
    }

    #[tool(
        name = "ask",
        description = "Answer a question from the policy knowledge base, searching in rounds; the answer cites chunks with verbatim quotes, or says the evidence is insufficient. Every run is traced."
    )]
    async fn ask(
        &self,
        Parameters(args): Parameters<AskArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<AskResult>, String> {
        let app = self.app.clone();
        let grant = self.caller(&ctx)?;
        let params = AskParams {
            question: args.question,
            options: AgentRagOptions::default(),
            today: None,
        };
        let outcome = blocking(move || app.ask(&grant, params))
            .await
            .map_err(tool_error)?;
        let status = serde_json::to_value(outcome.status)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default();
        Ok(Json(AskResult {
            run_id: outcome.run_id.to_string(),
            status,
            reason: outcome.reason.clone(),
            answer: outcome
                .answer
                .as_ref()
                .map(|a| a.text.clone())
                .or_else(|| outcome.message.clone()),
            citations: outcome
                .answer
                .as_ref()
                .map(|a| {
                    a.citations
                        .iter()
                        .map(|c| ToolCitation {
                            chunk_id: c.chunk_id.clone(),
                            title_path: c.title_path.clone(),
                            source_uri: c.source_uri.clone(),
                            quote: c.quote.clone(),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            hits: all_hits(&outcome),
        }))
    }
}

// The asker's memory, one caller's own: whose is the grant's (the token's name over HTTP, the
// operator's `--caller` over stdio), never a tool argument.
#[tool_router(router = memory_router)]
impl McpServer {
    #[tool(
        name = "memoryList",
        description = "List the facts remembered about the caller (grade, base city…): key, value, where it came from, when."
    )]
    async fn memory_list(
        &self,
        Parameters(_args): Parameters<MemoryListArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<MemoryResult>, String> {
        let app = self.app.clone();
        let grant = self.caller(&ctx)?;
        let facts = blocking(move || app.memory_list(&grant))
            .await
            .map_err(tool_error)?;
        Ok(tool_facts(facts))
    }

    #[tool(
        name = "memorySet",
        description = "Remember a fact about the caller (e.g. key \"grade\", value \"B\"), replacing the key's earlier value; ask uses it where the documents tie it to the answer. Returns the caller's facts."
    )]
    async fn memory_set(
        &self,
        Parameters(args): Parameters<MemorySetArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<MemoryResult>, String> {
        let app = self.app.clone();
        let grant = self.caller(&ctx)?;
        let facts = blocking(move || {
            app.memory_set(&grant, &args.key, &args.value)?;
            app.memory_list(&grant)
        })
        .await
        .map_err(tool_error)?;
        Ok(tool_facts(facts))
    }

    #[tool(
        name = "memoryForget",
        description = "Forget a fact about the caller: it is removed from memory. Returns the caller's facts."
    )]
    async fn memory_forget(
        &self,
        Parameters(args): Parameters<MemoryForgetArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<MemoryResult>, String> {
        let app = self.app.clone();
        let grant = self.caller(&ctx)?;
        let facts = blocking(move || {
            app.memory_forget(&grant, &args.key)?;
            app.memory_list(&grant)
        })
        .await
        .map_err(tool_error)?;
        Ok(tool_facts(facts))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("ragtrail", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Policy documents (travel expenses, leave, returns, HR handbooks; Chinese and English). \
                 Call searchDocs with short keywords and cite chunkIds, or call ask for a cited answer.",
            )
    }
}

/// Serves MCP over stdin/stdout until the client closes the connection.
pub async fn serve_stdio(app: Arc<App>, grant: Grant) -> Result<(), String> {
    let service = McpServer::new(app, grant)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| format!("starting the MCP session: {e}"))?;
    service
        .waiting()
        .await
        .map_err(|e| format!("the MCP session failed: {e}"))?;
    Ok(())
}

/// The `Host` names `/mcp` always answers: the loopback names, as the MCP SDK allows by default.
pub const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// The hosts `/mcp` answers: the loopback names and the operator's `allowed` ones, each a name
/// (any port) or `name:port` (that port only), compared without case.
#[derive(Debug, Clone)]
struct AllowedHosts(Vec<(String, Option<u16>)>);

impl AllowedHosts {
    fn new(allowed: &[String]) -> Self {
        let entries = LOOPBACK_HOSTS
            .iter()
            .map(|h| (h.to_string(), None))
            .chain(allowed.iter().filter_map(|a| parse_host(a)))
            .collect();
        Self(entries)
    }

    /// Every entry as the SDK's own check takes it (the same list, so both agree).
    fn for_sdk(&self) -> Vec<String> {
        self.0
            .iter()
            .map(|(host, port)| match (port, host.contains(':')) {
                (Some(p), true) => format!("[{host}]:{p}"),
                (Some(p), false) => format!("{host}:{p}"),
                (None, _) => host.clone(),
            })
            .collect()
    }

    fn allows(&self, host: &str) -> bool {
        let Some((name, port)) = parse_host(host) else {
            return false;
        };
        self.0
            .iter()
            .any(|(n, p)| *n == name && p.is_none_or(|p| Some(p) == port))
    }
}

/// `name` or `name:port` (IPv6 in brackets) as a lower-case name and a port; `None` when it is
/// not a host (a path, a user, an empty name).
fn parse_host(text: &str) -> Option<(String, Option<u16>)> {
    let authority: axum::http::uri::Authority = text.trim().parse().ok()?;
    if authority.as_str().contains('@') || authority.host().is_empty() {
        return None;
    }
    let name = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    Some((name, authority.port_u16()))
}

/// Whether `text` can be given to `--allowed-host`: a host name or address, with or without a
/// port.
pub fn valid_allowed_host(text: &str) -> bool {
    parse_host(text).is_some()
}

/// The header that names a Streamable HTTP session.
const SESSION_HEADER: &str = "mcp-session-id";

/// Which token opened each live `/mcp` session: only that token may use or end it.
struct SessionOwners {
    owners: Mutex<HashMap<String, Grant>>,
    manager: Arc<LocalSessionManager>,
}

impl SessionOwners {
    /// Whether `grant` may use session `id`. A session no token opened is the SDK's to refuse
    /// (it answers 404 for an unknown one).
    fn may_use(&self, id: &str, grant: &Grant) -> bool {
        let owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        owners.get(id).is_none_or(|owner| owner == grant)
    }

    /// Records the opener of a new session, forgetting those the SDK has closed since (ended,
    /// or idle past its keep-alive).
    async fn bind(&self, id: String, grant: Grant) {
        let live: Vec<String> = self
            .manager
            .sessions
            .read()
            .await
            .keys()
            .map(|k| k.to_string())
            .collect();
        let mut owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        owners.retain(|k, _| live.contains(k));
        owners.insert(id, grant);
    }

    fn forget(&self, id: &str) {
        let mut owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        owners.remove(id);
    }
}

/// `/mcp`: MCP's Streamable HTTP transport. Every request needs a `Host` the operator allowed, a
/// verified bearer token, and a body within the limits every other route has (64 KiB, the body
/// deadline): the SDK would otherwise read the body itself, unbounded in time. A session is
/// bound to the token that opened it.
pub fn routes(app: Arc<App>) -> axum::Router<Arc<App>> {
    let hosts = AllowedHosts::new(&app.config.allowed_hosts);
    let for_sessions = app.clone();
    let manager = Arc::new(LocalSessionManager::default());
    let owners = Arc::new(SessionOwners {
        owners: Mutex::new(HashMap::new()),
        manager: manager.clone(),
    });
    let service = StreamableHttpService::new(
        move || Ok(McpServer::over_http(for_sessions.clone())),
        manager,
        StreamableHttpServerConfig::default()
            .with_allowed_hosts(hosts.for_sdk())
            .with_max_request_body_bytes(crate::body::MAX_BODY_BYTES),
    );
    axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(
            (app, Arc::new(hosts), owners),
            guard,
        ))
}

/// In front of the SDK: refuses a `Host` the operator did not allow (403, before anything
/// else: a rebinding page learns nothing), a request without a valid token (401, as the rest
/// of the API), a session another token opened (404, as for a session that does not exist: it
/// is not the caller's to see, use or end), and a body too large (413) or too slow (408); then
/// hands the token's grant to the tool calls the request carries, with the body already read.
#[allow(clippy::type_complexity)]
async fn guard(
    axum::extract::State((app, hosts, owners)): axum::extract::State<(
        Arc<App>,
        Arc<AllowedHosts>,
        Arc<SessionOwners>,
    )>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::extract::FromRequestParts;
    use axum::response::IntoResponse;
    let (mut parts, body) = request.into_parts();
    let host = parts
        .headers
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| parts.uri.authority().map(|a| a.as_str()));
    if !host.is_some_and(|h| hosts.allows(h)) {
        return ApiError::new(
            axum::http::StatusCode::FORBIDDEN,
            crate::error::code::HOST_NOT_ALLOWED,
            format!(
                "/mcp does not answer for the host {:?}: the server allows loopback names and those given with --allowed-host",
                host.unwrap_or("")
            ),
        )
        .into_response();
    }
    let grant = match crate::auth::Caller::from_request_parts(&mut parts, &app).await {
        Ok(crate::auth::Caller(grant)) => grant,
        Err(e) => return e.into_response(),
    };
    let session = parts
        .headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if session
        .as_deref()
        .is_some_and(|id| !owners.may_use(id, &grant))
    {
        return ApiError::not_found("such MCP session").into_response();
    }
    let ends_session = parts.method == axum::http::Method::DELETE;
    let bytes = match crate::body::read(body, app.config.limits.body_timeout).await {
        Ok(bytes) => bytes,
        Err(e) => return e.into_response(),
    };
    parts.extensions.insert(grant.clone());
    let response = next
        .run(axum::extract::Request::from_parts(
            parts,
            axum::body::Body::from(bytes),
        ))
        .await;
    match session {
        None => {
            let opened = response
                .headers()
                .get(SESSION_HEADER)
                .and_then(|v| v.to_str().ok());
            if let Some(id) = opened {
                owners.bind(id.to_string(), grant).await;
            }
        }
        Some(id) if ends_session && response.status().is_success() => owners.forget(&id),
        Some(_) => {}
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_and_the_operators_hosts_are_allowed_and_nothing_else() {
        let hosts = AllowedHosts::new(&["kb.example.com".into(), "Api.Example.com:8443".into()]);
        for ok in [
            "localhost",
            "127.0.0.1:7341",
            "[::1]:7341",
            "kb.example.com",
            "KB.example.com:80",
            "api.example.com:8443",
        ] {
            assert!(hosts.allows(ok), "{ok}");
        }
        for refused in [
            "evil.example.com",
            "api.example.com",
            "api.example.com:443",
            "kb.example.com.evil.net",
            "user@kb.example.com",
            "",
        ] {
            assert!(!hosts.allows(refused), "{refused}");
        }
        assert_eq!(
            hosts.for_sdk(),
            [
                "localhost",
                "127.0.0.1",
                "::1",
                "kb.example.com",
                "api.example.com:8443"
            ]
        );
    }

    #[test]
    fn an_allowed_host_is_a_name_with_an_optional_port() {
        assert!(valid_allowed_host("kb.example.com"));
        assert!(valid_allowed_host("10.0.0.5:7341"));
        assert!(valid_allowed_host("[fe80::1]"));
        for bad in [
            "",
            "http://kb.example.com",
            "kb.example.com/mcp",
            "a@b",
            "a b",
        ] {
            assert!(!valid_allowed_host(bad), "{bad}");
        }
    }
}
