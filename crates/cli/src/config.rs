//! Configuration: `.env` < environment < flags. The `.env` file is loaded into the environment
//! (never overriding a variable already set) before flags are parsed; clap reads each flag's
//! environment variable, so a flag always wins.

use ragtrail::{AccessContext, DEFAULT_TENANT};

/// Default data directory (index, embedded store, sessions).
pub const DEFAULT_DATA_DIR: &str = ".ragtrail";
/// Default trace directory.
pub const DEFAULT_TRACE_DIR: &str = "traces";
/// Default knowledge folder, ingested on first use.
pub const DEFAULT_KNOWLEDGE_DIR: &str = "knowledge";

/// Loads `.env` from the current directory if there is one. A malformed file is reported, not
/// fatal: the environment and flags still apply.
pub fn load_dotenv() {
    match dotenvy::dotenv() {
        Ok(_) => {}
        Err(e) if e.not_found() => {}
        Err(e) => eprintln!("warning: ignoring .env: {e}"),
    }
}

/// Builds the operator's access context from a tenant and role names (comma-separated lists
/// accepted), trimming blanks.
pub fn access_context(tenant: Option<&str>, roles: &[String]) -> AccessContext {
    let tenant = tenant
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .unwrap_or(DEFAULT_TENANT);
    let roles = roles
        .iter()
        .flat_map(|r| r.split(','))
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(String::from);
    AccessContext::new(tenant, roles)
}

/// The operator's trace key (`RAGTRAIL_TRACE_KEY`): read from the environment only, so it never
/// sits in shell history or in a process listing.
pub fn trace_key() -> Option<Vec<u8>> {
    std::env::var("RAGTRAIL_TRACE_KEY")
        .ok()
        .filter(|k| !k.is_empty())
        .map(String::into_bytes)
}

/// File name of the operator's signing key inside the data directory.
pub const SIGNING_KEY_FILE: &str = "signing-key";

/// Where the operator's signing key lives: `RAGTRAIL_SIGNING_KEY` (a file path) when set, else
/// `signing-key` in the data directory.
pub fn signing_key_path(data_dir: &std::path::Path) -> std::path::PathBuf {
    match std::env::var_os("RAGTRAIL_SIGNING_KEY").filter(|p| !p.is_empty()) {
        Some(p) => std::path::PathBuf::from(p),
        None => data_dir.join(SIGNING_KEY_FILE),
    }
}

/// The operator's signing key, if one was generated (`ragtrail keys generate`). A key named by
/// `RAGTRAIL_SIGNING_KEY` must exist; the default file may be absent (runs are then unsigned).
pub fn signing_key(
    data_dir: &std::path::Path,
) -> anyhow::Result<Option<std::sync::Arc<ragtrail::trace::SigningKey>>> {
    let path = signing_key_path(data_dir);
    let named = std::env::var_os("RAGTRAIL_SIGNING_KEY").is_some_and(|p| !p.is_empty());
    if !named && !path.exists() {
        return Ok(None);
    }
    let key = ragtrail::trace::SigningKey::read(&path).map_err(|e| {
        anyhow::anyhow!(
            "{e}{}",
            if named {
                " (RAGTRAIL_SIGNING_KEY names it; `ragtrail keys generate` writes one there)"
            } else {
                ""
            }
        )
    })?;
    // Every key that signs is kept in the keyring, so its runs still verify after a rotation
    // moves it away (keys made before the keyring existed join it on first use).
    let keyring = ragtrail::trace::keyring_path(data_dir);
    if let Err(e) = ragtrail::trace::add_to_keyring(
        &keyring,
        &key.public_key(),
        &format!("signing key {}", path.display()),
    ) {
        eprintln!("warning: the signing key could not be kept in the keyring: {e}");
    }
    Ok(Some(std::sync::Arc::new(key)))
}

/// The public keys an audit or a replay trusts: the signing key's and every key in the data
/// directory's keyring (retired keys included).
pub fn trusted_keys(data_dir: &std::path::Path) -> anyhow::Result<Vec<ragtrail::trace::PublicKey>> {
    let mut keys = ragtrail::trace::read_keyring(&ragtrail::trace::keyring_path(data_dir))?;
    if let Some(current) = signing_key(data_dir)?.map(|k| k.public_key())
        && !keys.iter().any(|k| k.key_id() == current.key_id())
    {
        keys.push(current);
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_accept_lists_and_repeats() {
        let ctx = access_context(
            Some(" acme "),
            &["hr, finance".into(), "hr".into(), " ".into()],
        );
        assert_eq!(ctx.tenant, "acme");
        assert_eq!(ctx.roles, vec!["finance", "hr"]);
        assert_eq!(access_context(None, &[]).tenant, DEFAULT_TENANT);
    }
}
