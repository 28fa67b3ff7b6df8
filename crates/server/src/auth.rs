//! The bearer-token check every `/v1` route and `/mcp` make: the caller's grant, from a valid
//! `Authorization: Bearer` token.

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::header;
use axum::http::request::Parts;

use crate::error::ApiError;
use crate::service::App;
use crate::tokens::Grant;

/// The caller, from a valid `Authorization: Bearer` token.
pub struct Caller(pub Grant);

impl FromRequestParts<Arc<App>> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &Arc<App>) -> Result<Self, ApiError> {
        let header = parts
            .headers
            .get(header::AUTHORIZATION)
            .ok_or_else(|| {
                ApiError::unauthorized(
                    "send `Authorization: Bearer <token>` (make one with `ragtrail tokens add`)",
                )
            })?
            .to_str()
            .map_err(|_| ApiError::unauthorized("the Authorization header is not text"))?;
        let token = header
            .strip_prefix("Bearer ")
            .or_else(|| header.strip_prefix("bearer "))
            .ok_or_else(|| ApiError::unauthorized("the Authorization header is not `Bearer …`"))?;
        match app.config.tokens.verify(token) {
            Ok(Some(grant)) => Ok(Caller(grant)),
            Ok(None) => Err(ApiError::unauthorized("the token is unknown or revoked")),
            Err(e) => Err(ApiError::internal(e)),
        }
    }
}
