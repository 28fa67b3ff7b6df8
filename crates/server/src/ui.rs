//! The trace browser at `/`: one HTML page, its script and its style sheet, compiled into the
//! binary (no build step, nothing fetched from elsewhere, so it works offline). The page holds
//! no data: it asks the API with the caller's bearer token like any other client, so it sees
//! exactly what that token may see.

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::service::App;

const INDEX_HTML: &str = include_str!("ui/index.html");
const APP_JS: &str = include_str!("ui/app.js");
const APP_CSS: &str = include_str!("ui/app.css");

/// Only this origin's own script, style and API: no inline script, no other origin, no
/// framing, so a trace's text cannot run anything or be shown inside another site.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The browser's routes: `/`, `/ui/app.js`, `/ui/app.css`.
pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/", get(index))
        .route(
            "/ui/app.js",
            get(|| async { asset("text/javascript; charset=utf-8", APP_JS) }),
        )
        .route(
            "/ui/app.css",
            get(|| async { asset("text/css; charset=utf-8", APP_CSS) }),
        )
}

/// `GET /`: the trace browser (no token needed to load it; it asks for one).
#[utoipa::path(get, path = "/", tag = "meta", security(()),
    responses((status = 200, description = "The trace browser's page", content_type = "text/html", body = String)))]
pub(crate) async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX_HTML)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}
