//! ragtrail as a service: an HTTP API (`/v1/search`, `/v1/ask`, `/v1/traces/…`), a trace browser
//! at `/` over that API, and an MCP server
//! (tools `searchDocs` and `ask`) over the same engine and the same hash-chained traces as the
//! command line. Who may see what comes from a verified bearer token ([`tokens`]) or, for MCP
//! over stdio, from the operator's configuration; never from a request.
//!
//! The engine is synchronous: every engine call runs on tokio's blocking pool.

pub mod api;
mod body;
mod direct;
pub mod error;
pub mod mcp;
pub mod openapi;
pub mod service;
mod stream;
pub mod tokens;
mod ui;

use std::sync::Arc;

pub use api::router;
pub use direct::SEARCH_ONLY_REASON;
pub use service::{App, PlannerFactory, ServerConfig};
pub use tokens::{Grant, TokenStore};

/// The port `ragtrail serve` listens on by default (on 127.0.0.1).
pub const DEFAULT_PORT: u16 = 7341;

/// Serves the HTTP API on `listener` until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Arc<App>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(app))
        .with_graceful_shutdown(shutdown)
        .await
}
