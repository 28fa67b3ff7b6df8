//! `POST /v1/ask` with `Accept: text/event-stream`: the run's rounds as Server-Sent Events
//! while it happens. Events, in order: one `round` per search (round, keywords, reason, hits,
//! sufficiency: the same object as an entry of the outcome's `rounds`), `repeated` or
//! `rejected` for a search the loop refused, `refused` for citations that failed their check,
//! and last `outcome` (the JSON of a plain `/v1/ask`) or `error` (`{"error": {…}}`).
//!
//! The run does not belong to the connection: it runs on the blocking pool and its events go
//! into a channel, so a client that hangs up only drops the receiving end; the run finishes
//! and its trace is complete.

use std::convert::Infallible;
use std::sync::Arc;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use ragtrail::AgentEvent;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::error::ApiError;
use crate::service::{App, AskParams};
use crate::tokens::Grant;

/// Whether the request's `Accept` asks for an event stream.
pub fn wants_events(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get_all(axum::http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|media| {
            media
                .split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("text/event-stream"))
        })
}

fn event(name: &str, data: &Value) -> Event {
    Event::default().event(name).data(data.to_string())
}

/// An engine value as an event, through a `Value` so its keys are written sorted, as in the
/// plain answer.
fn value_event(name: &str, data: &impl Serialize) -> Event {
    match serde_json::to_value(data) {
        Ok(value) => event(name, &value),
        Err(e) => error_event(&ApiError::internal(e)),
    }
}

fn agent_event(e: &AgentEvent<'_>) -> Event {
    match e {
        AgentEvent::Round(r) => value_event("round", r),
        AgentEvent::Repeated { keywords } => event("repeated", &json!({ "keywords": keywords })),
        AgentEvent::Rejected { message } => event("rejected", &json!({ "message": message })),
        AgentEvent::Refused(reasons) => event("refused", &json!({ "citations": reasons })),
    }
}

fn error_event(e: &ApiError) -> Event {
    let mut body = json!({"error": {"code": e.code, "message": e.message}});
    if let Some(field) = &e.field {
        body["error"]["field"] = json!(field);
    }
    event("error", &body)
}

/// Starts the run and answers with its event stream.
pub fn ask(app: Arc<App>, grant: Grant, params: AskParams) -> Response {
    let (tx, rx) = mpsc::unbounded_channel::<Event>();
    tokio::task::spawn_blocking(move || {
        // A send fails only when the client is gone; the run goes on regardless.
        let last = match app.ask_observed(&grant, params, &mut |e| {
            let _ = tx.send(agent_event(&e));
        }) {
            Ok(outcome) => value_event("outcome", &outcome),
            Err(e) => error_event(&e),
        };
        let _ = tx.send(last);
    });
    let events = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|e| (Ok::<_, Infallible>(e), rx))
    });
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}
