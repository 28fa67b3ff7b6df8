//! Reading a JSON request body: bounded in size, strict about its fields, and never a source of
//! access. Every failure names the field at fault.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{ApiError, code};

/// Largest request body accepted (a question is at most 2,000 characters; keywords far less).
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Fields that would name who the caller is: access comes from the token alone.
const ACCESS_FIELDS: [&str; 5] = ["tenant", "role", "roles", "access", "caller"];

/// The whole body, read under one deadline: a client that sends it too slowly (slowloris)
/// is answered 408 and no longer holds a worker, one larger than [`MAX_BODY_BYTES`] 413.
pub async fn read(body: Body, deadline: Duration) -> Result<Bytes, ApiError> {
    match tokio::time::timeout(deadline, axum::body::to_bytes(body, MAX_BODY_BYTES)).await {
        Err(_) => Err(ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            code::BODY_TIMEOUT,
            format!(
                "the request body did not arrive within {} s",
                deadline.as_secs_f64()
            ),
        )),
        Ok(Err(e)) => {
            let inner = e.into_inner();
            if inner
                .downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                Err(ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    code::BODY_TOO_LARGE,
                    format!("the request body is larger than {MAX_BODY_BYTES} bytes"),
                ))
            } else {
                Err(ApiError::bad_request(
                    code::MALFORMED_JSON,
                    format!("the request body could not be read: {inner}"),
                ))
            }
        }
        Ok(Ok(bytes)) => Ok(bytes),
    }
}

/// The body as a `T` (whose type rejects unknown fields), or the error to answer with.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        ApiError::bad_request(
            code::MALFORMED_JSON,
            format!("the request body is not JSON: {e}"),
        )
    })?;
    let Value::Object(fields) = &value else {
        return Err(ApiError::bad_request(
            code::MALFORMED_JSON,
            "the request body must be a JSON object",
        ));
    };
    if let Some(field) = fields.keys().find(|k| ACCESS_FIELDS.contains(&k.as_str())) {
        return Err(ApiError::bad_request(
            code::ACCESS_IN_REQUEST,
            format!("`{field}` cannot be set in a request: tenant and roles come from your token"),
        )
        .with_field(field.clone()));
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let message = e.inner().to_string();
        // serde's own wording: "unknown field `x`, expected …" (the path already ends in
        // `x`), "missing field `x`" (the path is the object that lacks it).
        let named = |prefix: &str| {
            message
                .strip_prefix(prefix)
                .and_then(|rest| rest.split('`').next())
                .map(str::to_string)
        };
        let within = |name: String| {
            if path == "." {
                name
            } else {
                format!("{path}.{name}")
            }
        };
        if named("unknown field `").is_some() {
            ApiError::bad_request(code::UNKNOWN_FIELD, message).with_field(path)
        } else if let Some(name) = named("missing field `") {
            ApiError::bad_request(code::MISSING_FIELD, message).with_field(within(name))
        } else {
            ApiError::bad_request(code::INVALID_FIELD, format!("{path}: {message}"))
                .with_field(path)
        }
    })
}

/// `value` when it lies in `min..=max`, else `out_of_range` naming `field`.
pub fn bounded<T: PartialOrd + std::fmt::Display>(
    field: &str,
    value: T,
    min: T,
    max: T,
) -> Result<T, ApiError> {
    if value < min || value > max {
        return Err(ApiError::bad_request(
            code::OUT_OF_RANGE,
            format!("{field} must be between {min} and {max}, not {value}"),
        )
        .with_field(field));
    }
    Ok(value)
}
