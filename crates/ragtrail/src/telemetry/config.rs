//! The exporter's settings from the standard OpenTelemetry environment variables (read through
//! a lookup function, so tests need not touch the process environment).
//!
//! Export is on only when an endpoint is set and the SDK is not disabled; only OTLP over HTTP
//! with protobuf is spoken (`http/protobuf`, the specification's default for HTTP).

use std::fmt;
use std::time::Duration;

use super::spans::AttrValue;

/// The specification's default export timeout.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where and how spans are sent.
#[derive(Clone, PartialEq)]
pub struct TelemetryConfig {
    /// The full URL spans are POSTed to (`…/v1/traces`).
    pub endpoint: String,
    /// Extra request headers (`OTEL_EXPORTER_OTLP_HEADERS`), e.g. an authorization header.
    pub headers: Vec<(String, String)>,
    /// Time allowed for one export request.
    pub timeout: Duration,
    /// The resource's attributes, `service.name` first.
    pub resource: Vec<(String, AttrValue)>,
    /// Questions, answers, snippets and the model's decisions are exported only when set
    /// (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`).
    pub capture_content: bool,
}

impl fmt::Debug for TelemetryConfig {
    // Hand-written: header values may hold credentials and must never reach a log line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TelemetryConfig")
            .field("endpoint", &self.endpoint)
            .field(
                "headers",
                &self.headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .field("timeout", &self.timeout)
            .field("capture_content", &self.capture_content)
            .finish_non_exhaustive()
    }
}

/// Why the variables ask for export yet none is done.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigProblem {
    #[error(
        "OTEL_EXPORTER_OTLP_PROTOCOL={0} is not supported: ragtrail exports http/protobuf only; no spans are exported"
    )]
    Protocol(String),
}

impl TelemetryConfig {
    /// The settings the variables describe: `Ok(None)` when export is off (no endpoint,
    /// `OTEL_SDK_DISABLED=true`, `OTEL_TRACES_EXPORTER=none`).
    pub fn from_vars(var: &dyn Fn(&str) -> Option<String>) -> Result<Option<Self>, ConfigProblem> {
        let get = |name: &str| {
            var(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let get_either = |specific: &str, general: &str| get(specific).or_else(|| get(general));
        if get("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
            || get("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"))
        {
            return Ok(None);
        }
        let endpoint = match get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            Some(url) => url,
            None => match get("OTEL_EXPORTER_OTLP_ENDPOINT") {
                Some(base) => format!("{}/v1/traces", base.trim_end_matches('/')),
                None => return Ok(None),
            },
        };
        if let Some(protocol) = get_either(
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ) && protocol != "http/protobuf"
        {
            return Err(ConfigProblem::Protocol(protocol));
        }
        let headers = get_either(
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
            "OTEL_EXPORTER_OTLP_HEADERS",
        )
        .map(|h| pairs(&h))
        .unwrap_or_default();
        let timeout = get_either(
            "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
            "OTEL_EXPORTER_OTLP_TIMEOUT",
        )
        .and_then(|ms| ms.parse::<u64>().ok())
        .map(Duration::from_millis)
        .unwrap_or(DEFAULT_TIMEOUT);
        let listed = get("OTEL_RESOURCE_ATTRIBUTES")
            .map(|a| pairs(&a))
            .unwrap_or_default();
        let service = get("OTEL_SERVICE_NAME")
            .or_else(|| (listed.iter()).find_map(|(k, v)| (k == "service.name").then(|| v.clone())))
            .unwrap_or_else(|| "ragtrail".to_string());
        let mut resource = vec![
            ("service.name".to_string(), AttrValue::Str(service)),
            (
                "service.version".to_string(),
                AttrValue::Str(env!("CARGO_PKG_VERSION").to_string()),
            ),
            (
                "telemetry.sdk.name".to_string(),
                AttrValue::Str("ragtrail".into()),
            ),
            (
                "telemetry.sdk.language".to_string(),
                AttrValue::Str("rust".into()),
            ),
        ];
        for (k, v) in listed {
            if !resource.iter().any(|(have, _)| *have == k) {
                resource.push((k, AttrValue::Str(v)));
            }
        }
        let capture_content = get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        Ok(Some(Self {
            endpoint,
            headers,
            timeout,
            resource,
            capture_content,
        }))
    }
}

/// `key=value,key=value` with percent-encoded values (the W3C baggage form the headers and
/// resource variables use); an entry without `=` or with an empty key is skipped.
fn pairs(list: &str) -> Vec<(String, String)> {
    list.split(',')
        .filter_map(|entry| {
            let (k, v) = entry.split_once('=')?;
            let k = k.trim();
            (!k.is_empty()).then(|| (percent_decoded(k), percent_decoded(v.trim())))
        })
        .collect()
}

fn percent_decoded(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(hi), Some(lo)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((hi * 16 + lo) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(vars: &[(&str, &str)]) -> Result<Option<TelemetryConfig>, ConfigProblem> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        TelemetryConfig::from_vars(&|name| map.get(name).cloned())
    }

    #[test]
    fn off_without_an_endpoint_or_when_disabled() {
        assert_eq!(config(&[]), Ok(None));
        assert_eq!(config(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "  ")]), Ok(None));
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");
        assert_eq!(config(&[endpoint, ("OTEL_SDK_DISABLED", "TRUE")]), Ok(None));
        assert_eq!(
            config(&[endpoint, ("OTEL_TRACES_EXPORTER", "none")]),
            Ok(None)
        );
        assert!(
            config(&[endpoint, ("OTEL_SDK_DISABLED", "false")])
                .unwrap()
                .is_some()
        );
    }

    #[test]
    fn the_base_endpoint_gets_the_traces_path_and_the_traces_one_is_kept() {
        let c = config(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318/")])
            .unwrap()
            .unwrap();
        assert_eq!(c.endpoint, "http://h:4318/v1/traces");
        let c = config(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318"),
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://other:9/custom",
            ),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(c.endpoint, "http://other:9/custom");
        assert!(!c.capture_content);
        assert_eq!(c.timeout, DEFAULT_TIMEOUT);
    }

    #[test]
    fn headers_resource_and_service_name_are_read_and_decoded() {
        let c = config(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "authorization=Bearer%20s3cret, x-project-name=p1,bad",
            ),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "service.name=from-attrs,deployment.environment=prod",
            ),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
            ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "True"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            c.headers,
            [
                ("authorization".to_string(), "Bearer s3cret".to_string()),
                ("x-project-name".to_string(), "p1".to_string())
            ]
        );
        assert_eq!(c.resource[0].1, AttrValue::Str("from-attrs".into()));
        assert!(c.resource.contains(&(
            "deployment.environment".to_string(),
            AttrValue::Str("prod".into())
        )));
        assert_eq!(c.timeout, Duration::from_millis(2500));
        assert!(c.capture_content);
        // The header's value never shows in a Debug rendering.
        assert!(!format!("{c:?}").contains("s3cret"));

        let c = config(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318"),
            ("OTEL_SERVICE_NAME", "kb-prod"),
            ("OTEL_RESOURCE_ATTRIBUTES", "service.name=ignored"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(c.resource[0].1, AttrValue::Str("kb-prod".into()));
    }

    #[test]
    fn another_protocol_is_refused_not_spoken_wrongly() {
        assert_eq!(
            config(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4317"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ]),
            Err(ConfigProblem::Protocol("grpc".into()))
        );
    }
}
