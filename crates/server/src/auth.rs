//! The bearer-token check every `/v1` route and `/mcp` make: the caller's grant, from a valid
//! `Authorization: Bearer` token.

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};

use crate::error::ApiError;
use crate::service::App;
use crate::tokens::Grant;

/// The caller, from a valid `Authorization: Bearer` token.
pub struct Caller(pub Grant);

impl FromRequestParts<Arc<App>> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &Arc<App>) -> Result<Self, ApiError> {
        match optional_grant(&parts.headers, app)? {
            Some(grant) => Ok(Caller(grant)),
            None => Err(ApiError::unauthorized(
                "send `Authorization: Bearer <token>` (make one with `ragtrail tokens add`)",
            )),
        }
    }
}

/// The caller's grant when the request carries a token (`None` without an `Authorization`
/// header); a token that is malformed, unknown or revoked is refused as on every route.
pub fn optional_grant(headers: &HeaderMap, app: &App) -> Result<Option<Grant>, ApiError> {
    let Some(header) = headers.get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    let header = header
        .to_str()
        .map_err(|_| ApiError::unauthorized("the Authorization header is not text"))?;
    let token = header
        .strip_prefix("Bearer ")
        .or_else(|| header.strip_prefix("bearer "))
        .ok_or_else(|| ApiError::unauthorized("the Authorization header is not `Bearer …`"))?;
    match app.config.tokens.verify(token) {
        Ok(Some(grant)) => Ok(Some(grant)),
        Ok(None) => Err(ApiError::unauthorized("the token is unknown or revoked")),
        Err(e) => Err(ApiError::internal(e)),
    }
}
