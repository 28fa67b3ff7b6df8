//! HTTP clients for the tests. reqwest is built without a TLS crypto provider of its own (see
//! the engine's `http.rs`) and sets up TLS even for a plain-HTTP client, so a test process sets
//! ring as its provider before its first client, as the engine does.

use std::sync::Once;

fn provider_set() {
    static PROVIDER: Once = Once::new();
    PROVIDER.call_once(|| {
        // Err only means a provider is set already.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

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
