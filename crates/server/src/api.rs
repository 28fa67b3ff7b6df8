//! The HTTP API (`/v1/…`, `/healthz`, `/readyz`): routing, the bearer-token check, request
//! bodies and queries; the work itself is [`App`]'s.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use ragtrail::review::runs::{RunFilter, STATUS_NAMES};
use ragtrail::{AgentError, AgentRagOptions, MAX_QUESTION_CHARS, MAX_TOP_K_PER_ROUND};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::Caller;
use crate::body::{self, bounded};
use crate::error::{ApiError, code};
use crate::service::{App, AskParams, blocking};

/// The routes of the API proper (health, `/v1/…`); [`crate::routes::router`] adds the rest.
pub(crate) fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/v1/search", post(search))
        .route("/v1/ask", post(ask))
        .route("/v1/traces", get(traces))
        .route("/v1/traces/{runId}", get(trace))
        .route("/v1/traces/{runId}/audit", get(audit))
        .route("/v1/traces/{runId}/replay", post(replay))
        .route("/v1/memory", get(memory_list))
        .route("/v1/memory/{key}", put(memory_set).delete(memory_forget))
}

#[utoipa::path(get, path = "/healthz", tag = "health", security(()),
    responses((status = 200, description = "The process is up", body = crate::openapi::Health)))]
async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// Ready when the index is open and holds chunks (with PostgreSQL, when the database answers),
/// at the knowledge base's current generation. The chunk count is the caller's scope and only
/// with a token: an unauthenticated probe learns nothing of any tenant's volume.
#[utoipa::path(get, path = "/readyz", tag = "health", security((), ("bearer" = [])),
    responses(
        (status = 200, description = "The index is open and holds chunks", body = crate::openapi::Ready),
        (status = 401, description = "A token was sent and is unknown or revoked", body = crate::openapi::ErrorBody),
        (status = 503, description = "The index is empty (not_ready)", body = crate::openapi::ErrorBody),
    ))]
async fn readyz(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    let grant = match crate::auth::optional_grant(&headers, &app) {
        Ok(grant) => grant,
        Err(e) => return e.into_response(),
    };
    let ready = blocking(move || {
        // Catches up first: the generation is the one the next request answers from (with
        // PostgreSQL this asks the database, so ready means reachable too).
        let engine = app.engine()?;
        if engine.is_empty() {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                code::NOT_READY,
                "the index is empty: ingest a knowledge folder first",
            ));
        }
        let store = engine.store();
        let mut ready = json!({"status": "ready", "generation": store.generation()});
        if let Some(grant) = grant {
            ready["chunks"] = json!(store.visible_count(&grant.access));
        }
        Ok(ready)
    })
    .await;
    match ready {
        Ok(ready) => Json(ready).into_response(),
        Err(e) => e.into_response(),
    }
}

/// `POST /v1/search`: the keywords of one `searchDocs` call.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct SearchBody {
    /// 1 to 32 keywords, each at most 200 characters.
    keywords: Vec<String>,
    /// Hits to return, 1 to 50 (default 5).
    #[serde(default = "default_top_k")]
    #[schema(default = 5)]
    top_k: usize,
    #[serde(default)]
    include_superseded: bool,
}

fn default_top_k() -> usize {
    5
}

/// `POST /v1/search`: the hits as `ragtrail search --json` prints them.
#[utoipa::path(post, path = "/v1/search", tag = "search", request_body = SearchBody,
    responses(
        (status = 200, description = "The hits, as `ragtrail search --json` prints them", body = Vec<crate::openapi::SearchHit>),
        (status = 400, description = "Malformed JSON, an unknown, missing or out-of-range field, bad keywords, or a tenant or role in the body", body = crate::openapi::ErrorBody),
        (status = 401, description = "No token, or an unknown or revoked one", body = crate::openapi::ErrorBody),
        (status = 413, description = "A body over 64 KiB", body = crate::openapi::ErrorBody),
        (status = 503, description = "The server's setup failed: an index embedded with another model, an embeddings or chat server that does not answer, a missing model (setup_error, with the cause)", body = crate::openapi::ErrorBody),
    ))]
async fn search(
    State(app): State<Arc<App>>,
    Caller(grant): Caller,
    body: Body,
) -> Result<Response, ApiError> {
    let body: SearchBody = body::parse(&body::read(body, app.config.limits.body_timeout).await?)?;
    let resp =
        blocking(move || app.search(&grant, body.keywords, body.top_k, body.include_superseded))
            .await?;
    Ok(Json(resp.hits).into_response())
}

/// `POST /v1/ask`: a question and the run's options (each bounded as the CLI bounds it).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct AskBody {
    /// At most 2,000 characters.
    question: String,
    /// Searches allowed, 1 to 10.
    #[serde(default)]
    max_rounds: Option<u32>,
    /// Hits per search, 1 to 20.
    #[serde(default)]
    top_k: Option<u32>,
    /// Whether an answer must cite a source (default true).
    #[serde(default)]
    require_source: Option<bool>,
    /// The run's date, YYYY-MM-DD (documents in force on that day).
    #[serde(default)]
    #[schema(value_type = Option<String>, format = Date)]
    today: Option<chrono::NaiveDate>,
}

/// Searches allowed in one run, as `AgentRagOptions::clamped` bounds them.
const MAX_ROUNDS: u32 = 10;

/// `POST /v1/ask`: the outcome as `ragtrail ask --json` prints it; with `Accept:
/// text/event-stream`, each round as it happens and then the outcome.
#[utoipa::path(post, path = "/v1/ask", tag = "ask", request_body = AskBody,
    responses(
        (status = 200, description = "The outcome, as `ragtrail ask --json` prints it; with `Accept: text/event-stream`, Server-Sent Events: one `round` per search, then `outcome` (this object) or `error` (`setup_error` when the setup failed)",
            content((crate::openapi::AskOutcome = "application/json"), (String = "text/event-stream"))),
        (status = 400, description = "Malformed JSON, a bad question or an out-of-range option", body = crate::openapi::ErrorBody),
        (status = 401, description = "No token, or an unknown or revoked one", body = crate::openapi::ErrorBody),
        (status = 413, description = "A body over 64 KiB", body = crate::openapi::ErrorBody),
        (status = 503, description = "The server's setup failed: an index embedded with another model, an embeddings or chat server that does not answer, a missing model (setup_error, with the cause)", body = crate::openapi::ErrorBody),
    ))]
async fn ask(
    State(app): State<Arc<App>>,
    Caller(grant): Caller,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let body: AskBody = body::parse(&body::read(body, app.config.limits.body_timeout).await?)?;
    let defaults = AgentRagOptions::default();
    let options = AgentRagOptions {
        max_search_rounds: bounded(
            "maxRounds",
            body.max_rounds.unwrap_or(defaults.max_search_rounds),
            1,
            MAX_ROUNDS,
        )?,
        top_k_per_round: bounded(
            "topK",
            body.top_k.unwrap_or(defaults.top_k_per_round),
            1,
            MAX_TOP_K_PER_ROUND,
        )?,
        require_source: body.require_source.unwrap_or(defaults.require_source),
    };
    let params = AskParams {
        question: body.question,
        options,
        today: body.today.map(|d| d.format("%Y-%m-%d").to_string()),
    };
    if crate::stream::wants_events(&headers) {
        // Bad questions are answered with a status before the stream starts, as without it.
        let chars = params.question.trim().chars().count();
        if chars == 0 || chars > MAX_QUESTION_CHARS {
            let e = if chars == 0 {
                AgentError::EmptyQuestion
            } else {
                AgentError::QuestionTooLong(chars)
            };
            return Err(
                ApiError::bad_request(code::INVALID_QUESTION, e.to_string()).with_field("question")
            );
        }
        return Ok(crate::stream::ask(app, grant, params));
    }
    // The outcome is turned into JSON on the blocking pool too: the async workers only move
    // bytes, so a burst of runs never delays accepting and reading other connections.
    // Through a `Value`, whose keys are written sorted, as `ask --json` prints them.
    let outcome = blocking(move || {
        app.ask(&grant, params)
            .and_then(|o| serde_json::to_value(&o).map_err(ApiError::internal))
    })
    .await?;
    Ok(Json(outcome).into_response())
}

/// Query parameters as given, checked by [`query_fields`].
type RawQuery = Result<Query<BTreeMap<String, String>>, QueryRejection>;

/// The query's fields, refusing access fields and any field not in `allowed`.
fn query_fields(query: RawQuery, allowed: &[&str]) -> Result<BTreeMap<String, String>, ApiError> {
    let Query(fields) =
        query.map_err(|e| ApiError::bad_request(code::INVALID_FIELD, e.body_text()))?;
    for name in fields.keys() {
        if ["tenant", "role", "roles", "access", "caller"].contains(&name.as_str()) {
            return Err(ApiError::bad_request(
                code::ACCESS_IN_REQUEST,
                format!(
                    "`{name}` cannot be set in a request: tenant and roles come from your token"
                ),
            )
            .with_field(name.clone()));
        }
        if !allowed.contains(&name.as_str()) {
            return Err(ApiError::bad_request(
                code::UNKNOWN_FIELD,
                format!("unknown query parameter `{name}`, expected one of {allowed:?}"),
            )
            .with_field(name.clone()));
        }
    }
    Ok(fields)
}

/// Most runs one listing returns.
const MAX_LIST: usize = 1000;

/// `GET /v1/traces?limit=N&status=S&session=ID&since=T`: the caller's tenant's runs, newest
/// first, kept by the engine's run filter (the filter of `ragtrail traces`).
#[utoipa::path(get, path = "/v1/traces", tag = "traces",
    params(
        ("limit" = Option<usize>, Query, description = "Most runs to list, 1 to 1000 (default 50)"),
        ("status" = Option<String>, Query, description = "answered, evidence, insufficient_evidence (or insufficient), error, incomplete"),
        ("session" = Option<String>, Query, description = "Only the turns of this conversation"),
        ("since" = Option<String>, Query, description = "Only runs started at or after: a date (2026-11-30) or an RFC 3339 time"),
    ),
    responses(
        (status = 200, description = "The caller's tenant's runs, newest first", body = crate::openapi::RunList),
        (status = 400, description = "A bad filter, or a tenant or role in the query", body = crate::openapi::ErrorBody),
        (status = 401, description = "No token, or an unknown or revoked one", body = crate::openapi::ErrorBody),
    ))]
async fn traces(
    State(app): State<Arc<App>>,
    Caller(grant): Caller,
    query: RawQuery,
) -> Result<Response, ApiError> {
    let fields = query_fields(query, &["limit", "status", "session", "since"])?;
    let limit = match fields.get("limit") {
        Some(l) => bounded(
            "limit",
            l.parse::<usize>().map_err(|_| {
                ApiError::bad_request(code::INVALID_FIELD, "limit must be a whole number")
                    .with_field("limit")
            })?,
            1,
            MAX_LIST,
        )?,
        None => 50,
    };
    let mut filter = RunFilter {
        session: fields.get("session").cloned(),
        ..RunFilter::default()
    };
    if let Some(wanted) = fields.get("status") {
        let name = RunFilter::status_name(wanted).ok_or_else(|| {
            ApiError::bad_request(
                code::INVALID_FIELD,
                format!("status is one of {STATUS_NAMES:?}, not {wanted:?}"),
            )
            .with_field("status")
        })?;
        filter.status = Some(name.to_string());
    }
    if let Some(since) = fields.get("since") {
        filter.since = Some(RunFilter::parse_since(since).ok_or_else(|| {
            ApiError::bad_request(
                code::INVALID_FIELD,
                format!(
                    "since is a date (2026-11-30) or an RFC 3339 time (2026-11-30T09:00:00Z), not {since:?}"
                ),
            )
            .with_field("since")
        })?);
    }
    let runs = blocking(move || app.list(&grant, limit, &filter)).await?;
    Ok(Json(json!({ "runs": runs })).into_response())
}

/// `GET /v1/traces/{runId}`: the run's summary, integrity and every event as written.
#[utoipa::path(get, path = "/v1/traces/{runId}", tag = "traces", params(("runId" = String, Path, description = "The run's id (a UUID, as /v1/traces lists it)")),
    responses(
        (status = 200, description = "The run's summary, integrity and every event", body = crate::openapi::TraceDetail),
        (status = 400, description = "Not a UUID (invalid_run_id)", body = crate::openapi::ErrorBody),
        (status = 401, description = "No token, or an unknown or revoked one", body = crate::openapi::ErrorBody),
        (status = 404, description = "No such run, or another tenant's", body = crate::openapi::ErrorBody),
    ))]
async fn trace(
    State(app): State<Arc<App>>,
    Caller(grant): Caller,
    Path(run_id): Path<String>,
) -> Result<Response, ApiError> {
    let body = blocking(move || {
        let run = app.open_run(&grant, &run_id)?;
        let events: Vec<&Value> = run.file.lines.iter().map(|l| &l.value).collect();
        Ok(json!({
            "run": run.summary,
            "integrity": run.integrity,
            "events": events,
        }))
    })
    .await?;
    Ok(Json(body).into_response())
}

/// `GET /v1/traces/{runId}/audit?format=json|markdown`.
#[utoipa::path(get, path = "/v1/traces/{runId}/audit", tag = "traces",
    params(("runId" = String, Path, description = "The run's id (a UUID, as /v1/traces lists it)"), ("format" = Option<String>, Query, description = "json (default) or markdown")),
    responses(
        (status = 200, description = "The audit, as `ragtrail audit --json` (or the Markdown report) prints it",
            content((crate::openapi::AuditReport = "application/json"), (String = "text/markdown"))),
        (status = 400, description = "Not a UUID, or an unknown format", body = crate::openapi::ErrorBody),
        (status = 401, description = "No token, or an unknown or revoked one", body = crate::openapi::ErrorBody),
        (status = 404, description = "No such run, or another tenant's", body = crate::openapi::ErrorBody),
    ))]
async fn audit(
    State(app): State<Arc<App>>,
    Caller(grant): Caller,
    Path(run_id): Path<String>,
    query: RawQuery,
) -> Result<Response, ApiError> {
    let fields = query_fields(query, &["format"])?;
    let markdown = match fields.get("format").map(String::as_str) {
        None | Some("json") => false,
        Some("markdown") => true,
        Some(other) => {
            return Err(ApiError::bad_request(
                code::INVALID_FIELD,
                format!("format is json or markdown, not {other:?}"),
            )
            .with_field("format"));
        }
    };
    let report = blocking(move || {
        let run = app.open_run(&grant, &run_id)?;
        app.audit(&grant, &run)
    })
    .await?;
    Ok(if markdown {
        (
            [(header::CONTENT_TYPE, "text/markdown; charset=utf-8")],
            ragtrail::review::audit_markdown(&report),
        )
            .into_response()
    } else {
        Json(report.to_json()).into_response()
    })
}

/// `POST /v1/traces/{runId}/replay`: the recorded searches against today's index.
#[utoipa::path(post, path = "/v1/traces/{runId}/replay", tag = "traces", params(("runId" = String, Path, description = "The run's id (a UUID, as /v1/traces lists it)")),
    responses(
        (status = 200, description = "The recorded searches against today's index", body = crate::openapi::ReplayReport),
        (status = 400, description = "Not a UUID (invalid_run_id)", body = crate::openapi::ErrorBody),
        (status = 401, description = "No token, or an unknown or revoked one", body = crate::openapi::ErrorBody),
        (status = 403, description = "Recorded with other roles than the caller's (access_mismatch)", body = crate::openapi::ErrorBody),
        (status = 404, description = "No such run, or another tenant's", body = crate::openapi::ErrorBody),
        (status = 422, description = "The trace's integrity fails (integrity_failure)", body = crate::openapi::ErrorBody),
    ))]
async fn replay(
    State(app): State<Arc<App>>,
    Caller(grant): Caller,
    Path(run_id): Path<String>,
) -> Result<Response, ApiError> {
    let report = blocking(move || {
        let run = app.open_run(&grant, &run_id)?;
        app.replay(&grant, &run)
    })
    .await?;
    Ok(Json(report).into_response())
}

/// `PUT /v1/memory/{key}`: the fact's value.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct MemoryBody {
    /// 1 to 200 characters, one line.
    value: String,
}

/// `GET /v1/memory`: the facts remembered for the caller (the token's name within its tenant),
/// as `ragtrail memory list --json` prints them.
#[utoipa::path(get, path = "/v1/memory", tag = "memory",
    responses(
        (status = 200, description = "The caller's remembered facts: {key, value, source, setAt} each", body = Vec<crate::openapi::FactSchema>),
        (status = 401, description = "No token, or an unknown or revoked one", body = crate::openapi::ErrorBody),
    ))]
async fn memory_list(
    State(app): State<Arc<App>>,
    Caller(grant): Caller,
) -> Result<Response, ApiError> {
    let facts = blocking(move || app.memory_list(&grant)).await?;
    Ok(Json(facts).into_response())
}

/// `PUT /v1/memory/{key}`: remembers a fact for the caller, replacing the key's earlier value.
#[utoipa::path(put, path = "/v1/memory/{key}", tag = "memory", request_body = MemoryBody,
    params(("key" = String, Path, description = "The fact's name (grade, base city…), any case")),
    responses(
        (status = 200, description = "The fact as remembered", body = crate::openapi::FactSchema),
        (status = 400, description = "Malformed JSON, an unknown field, or an empty or over-long key or value", body = crate::openapi::ErrorBody),
        (status = 401, description = "No token, or an unknown or revoked one", body = crate::openapi::ErrorBody),
    ))]
async fn memory_set(
    State(app): State<Arc<App>>,
    Caller(grant): Caller,
    Path(key): Path<String>,
    body: Body,
) -> Result<Response, ApiError> {
    let body: MemoryBody = body::parse(&body::read(body, app.config.limits.body_timeout).await?)?;
    let fact = blocking(move || app.memory_set(&grant, &key, &body.value)).await?;
    Ok(Json(fact).into_response())
}

/// `DELETE /v1/memory/{key}`: forgets one of the caller's facts (removed from the memory
/// file; traces keep what past runs used).
#[utoipa::path(delete, path = "/v1/memory/{key}", tag = "memory",
    params(("key" = String, Path, description = "The fact's name, any case")),
    responses(
        (status = 200, description = "The fact forgotten", body = crate::openapi::FactSchema),
        (status = 401, description = "No token, or an unknown or revoked one", body = crate::openapi::ErrorBody),
        (status = 404, description = "No such fact remembered for the caller", body = crate::openapi::ErrorBody),
    ))]
async fn memory_forget(
    State(app): State<Arc<App>>,
    Caller(grant): Caller,
    Path(key): Path<String>,
) -> Result<Response, ApiError> {
    let fact = blocking(move || app.memory_forget(&grant, &key)).await?;
    Ok(Json(fact).into_response())
}
