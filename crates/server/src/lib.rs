//! ragtrail as a service: an HTTP API (`/v1/search`, `/v1/ask`, `/v1/traces/…`), a trace browser
//! at `/` over that API, and an MCP server
//! (tools `searchDocs` and `ask`) over the same engine and the same hash-chained traces as the
//! command line. Who may see what comes from a verified bearer token ([`tokens`]) or, for MCP
//! over stdio, from the operator's configuration; never from a request.
//!
//! The engine is synchronous: every engine call runs on tokio's blocking pool.

pub mod api;
mod auth;
mod body;
mod direct;
pub mod error;
pub mod mcp;
pub mod openapi;
mod routes;
pub mod service;
mod spec;
mod stream;
pub mod tokens;
mod ui;

use std::sync::Arc;

pub use direct::SEARCH_ONLY_REASON;
pub use routes::router;
pub use service::{App, Limits, PlannerFactory, ServerConfig};
pub use tokens::{Grant, TokenStore};

/// The port `ragtrail serve` listens on by default (on 127.0.0.1).
pub const DEFAULT_PORT: u16 = 7341;

/// Serves the HTTP API on `listener` until `shutdown` completes, then lets open requests
/// finish. At most `limits.max_connections` connections are open at once (the next client
/// waits in the listen queue), and a client must send a request's headers within
/// `limits.header_timeout`, so slow or idle clients cannot hold every place.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Arc<App>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let limits = app.config.limits;
    let router = router(app);
    let places = Arc::new(tokio::sync::Semaphore::new(limits.max_connections.max(1)));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    tokio::pin!(shutdown);
    loop {
        let place = tokio::select! {
            place = places.clone().acquire_owned() => match place {
                Ok(place) => place,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors and the like: wait rather than spin.
                    tracing::warn!("accepting a connection: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let service = hyper_util::service::TowerToHyperService::new(router.clone());
        let connection =
            graceful.watch(http.serve_connection(hyper_util::rt::TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("connection closed: {e}");
            }
            drop(place);
        });
    }
    // Open event streams (an MCP client's GET /mcp) would hold shutdown forever.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), graceful.shutdown()).await;
    Ok(())
}
