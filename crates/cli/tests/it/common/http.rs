//! HTTP clients for the tests. reqwest is built without a TLS crypto provider of its own, so
//! each builder sets the engine's ([`ragtrail::use_ring_for_tls`]) first.

use ragtrail::use_ring_for_tls as provider_set;

/// A blocking client builder.
pub fn blocking_builder() -> reqwest::blocking::ClientBuilder {
    provider_set();
    reqwest::blocking::Client::builder()
}

/// A blocking client with reqwest's defaults.
pub fn blocking() -> reqwest::blocking::Client {
    blocking_builder().build().expect("HTTP client")
}

/// An async client builder (rmcp's Streamable HTTP transport).
pub fn async_builder() -> reqwest::ClientBuilder {
    provider_set();
    reqwest::Client::builder()
}
