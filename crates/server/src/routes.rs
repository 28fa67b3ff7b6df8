//! The whole router: the API's routes, `/openapi.json`, the trace browser and `/mcp`, with
//! the fallback and the body limit every route shares.

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::get;

use crate::body::MAX_BODY_BYTES;
use crate::error::ApiError;
use crate::service::App;

/// The router of the whole API over `app`.
pub fn router(app: Arc<App>) -> Router {
    crate::api::routes()
        .route("/openapi.json", get(crate::spec::openapi_json))
        .merge(crate::ui::routes())
        .merge(crate::mcp::routes(app.clone()))
        .fallback(|| async { ApiError::not_found("such endpoint") })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(app)
}
