//! Errors users meet with Postgres, each saying what to do; no message ever holds a password.

use sqlx::migrate::MigrateError;

#[derive(Debug, thiserror::Error)]
pub enum PgError {
    #[error(
        "DATABASE_URL {url} is not a valid PostgreSQL URL: {message}; expected postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE"
    )]
    BadUrl { url: String, message: String },
    #[error(
        "cannot reach PostgreSQL at {url}: {message}. Check that the server is running and accepts connections from here, and that DATABASE_URL names the right host, port, user and database (or unset DATABASE_URL to use the embedded store)"
    )]
    Unreachable { url: String, message: String },
    #[error(
        "the database at {url} cannot use the `vector` extension (pgvector): {message}. Install pgvector 0.8 or newer on the server (e.g. the postgresql-16-pgvector package), have a superuser run `create extension vector;` in this database, then run `ragtrail migrate`"
    )]
    ExtensionMissing { url: String, message: String },
    #[error(
        "the database at {url} has pgvector {found}; ragtrail needs 0.8 or newer (iterative index scans for filtered search). Upgrade pgvector on the server, then run `alter extension vector update;` in this database"
    )]
    ExtensionTooOld { url: String, found: String },
    #[error(
        "the database at {url} was migrated by a newer ragtrail (schema version {database}; this binary knows up to {binary}). Upgrade ragtrail, or point DATABASE_URL at another database"
    )]
    MigrationsNewer {
        url: String,
        database: i64,
        binary: i64,
    },
    #[error(
        "the database at {url} has {pending} migration(s) to apply; run `ragtrail migrate` (or set RAGTRAIL_PG_AUTO_MIGRATE=1)"
    )]
    MigrationsPending { url: String, pending: usize },
    #[error("migrating the database at {url} failed: {message}")]
    Migrate { url: String, message: String },
    #[error(
        "embedder {embedder} does not fit the vector column {table}.embedding, which holds vector({column_dims}) while the embedder gives {embedder_dims} dimensions. Configure the embedder that filled the column, or run `ragtrail ingest --rebuild` to re-embed everything with the new one"
    )]
    DimensionMismatch {
        embedder: String,
        table: String,
        column_dims: u32,
        embedder_dims: u32,
    },
    #[error(
        "embedder {embedder} gives {dims} dimensions; pgvector's HNSW index on `vector` takes 1 to 2000. Configure a smaller embedding dimension"
    )]
    UnsupportedDims { embedder: String, dims: u32 },
    #[error("PostgreSQL at {url}: {message}")]
    Query { url: String, message: String },
    #[error("invalid setting {name}={value}: {message}")]
    Setting {
        name: String,
        value: String,
        message: String,
    },
    #[error("cannot start the database runtime: {0}")]
    Runtime(String),
    #[error("{0}")]
    Invalid(String),
}

/// `url` with its password (userinfo or a `password=` parameter) replaced by `***`; anything
/// else unchanged. Use it for every message that shows a database URL.
pub fn redact_database_url(url: &str) -> String {
    let mut out = url.to_string();
    if let Some(scheme_end) = url.find("://") {
        let start = scheme_end + 3;
        let rest = &url[start..];
        let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let authority = &rest[..authority_end];
        if let Some(at) = authority.rfind('@') {
            let userinfo = &authority[..at];
            if let Some(colon) = userinfo.find(':') {
                out = format!(
                    "{}{}:***{}",
                    &url[..start],
                    &userinfo[..colon],
                    &url[start + at..]
                );
            }
        }
    }
    redact_password_params(&out)
}

fn redact_password_params(url: &str) -> String {
    let Some(q) = url.find('?') else {
        return url.to_string();
    };
    let (base, query) = url.split_at(q + 1);
    let params: Vec<String> = query
        .split('&')
        .map(|p| match p.split_once('=') {
            Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
            _ => p.to_string(),
        })
        .collect();
    format!("{base}{}", params.join("&"))
}

/// The password in a URL (raw and percent-decoded forms are both scrubbed from messages).
pub(super) fn password_of(url: &str) -> Option<String> {
    let rest = &url[url.find("://")? + 3..];
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let from_userinfo = authority
        .rfind('@')
        .and_then(|at| authority[..at].split_once(':'))
        .map(|(_, p)| p.to_string());
    from_userinfo.or_else(|| {
        let query = &url[url.find('?')? + 1..];
        query.split('&').find_map(|p| {
            let (k, v) = p.split_once('=')?;
            k.eq_ignore_ascii_case("password").then(|| v.to_string())
        })
    })
}

/// Removes every occurrence of the password (raw and percent-decoded) from a message.
pub(super) fn scrub(message: &str, secret: Option<&str>) -> String {
    let Some(secret) = secret.filter(|s| !s.is_empty()) else {
        return message.to_string();
    };
    let mut out = message.replace(secret, "***");
    let decoded = percent_decode(secret);
    if !decoded.is_empty() && decoded != secret {
        out = out.replace(&decoded, "***");
    }
    out
}

fn percent_decode(s: &str) -> String {
    let hex = |b: u8| (b as char).to_digit(16);
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// SQLSTATE classes that mean "could not get a working session": connection exceptions (08),
/// authentication (28), no such database (3D000), server starting or shutting down (57P0x).
fn is_connection_code(code: &str) -> bool {
    code.starts_with("08") || code.starts_with("28") || code == "3D000" || code.starts_with("57P0")
}

/// Maps a driver error to the error a user can act on.
pub(super) fn classify(e: sqlx::Error, url: &str, secret: Option<&str>) -> PgError {
    let message = scrub(&e.to_string(), secret);
    let url = url.to_string();
    match &e {
        sqlx::Error::Configuration(_) => PgError::BadUrl { url, message },
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Protocol(_) => PgError::Unreachable { url, message },
        sqlx::Error::Database(db) => {
            let code = db.code().map(|c| c.to_string()).unwrap_or_default();
            if is_connection_code(&code) {
                PgError::Unreachable { url, message }
            } else if is_extension_code(&code, db.message()) {
                PgError::ExtensionMissing { url, message }
            } else {
                PgError::Query { url, message }
            }
        }
        _ => PgError::Query { url, message },
    }
}

/// `create extension vector` failing: not installed (58P01 / 0A000), or not allowed (42501).
fn is_extension_code(code: &str, message: &str) -> bool {
    (code == "58P01" || code == "0A000" || code == "42501")
        && (message.contains("extension") || message.contains("vector"))
}

pub(super) fn classify_migrate(e: MigrateError, url: &str, secret: Option<&str>) -> PgError {
    match e {
        MigrateError::VersionMissing(v) => PgError::MigrationsNewer {
            url: url.to_string(),
            database: v,
            binary: super::MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0),
        },
        MigrateError::Execute(inner) | MigrateError::ExecuteMigration(inner, _) => {
            match classify(inner, url, secret) {
                PgError::Query { url, message } => PgError::Migrate { url, message },
                other => other,
            }
        }
        other => PgError::Migrate {
            url: url.to_string(),
            message: scrub(&other.to_string(), secret),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_survive_redaction() {
        assert_eq!(
            redact_database_url("postgres://app:s3cr%40t@db.example:5432/kb"),
            "postgres://app:***@db.example:5432/kb"
        );
        assert_eq!(
            redact_database_url("postgresql://app@db/kb?sslmode=require&password=hunter2"),
            "postgresql://app@db/kb?sslmode=require&password=***"
        );
        // No password: unchanged. An '@' in the path is not userinfo.
        assert_eq!(
            redact_database_url("postgres://app@localhost/kb"),
            "postgres://app@localhost/kb"
        );
        assert_eq!(
            redact_database_url("postgres://localhost/a@b"),
            "postgres://localhost/a@b"
        );
        assert_eq!(redact_database_url("not a url"), "not a url");
    }

    #[test]
    fn scrub_removes_raw_and_decoded_password() {
        let url = "postgres://app:s3cr%40t@db/kb";
        let secret = password_of(url);
        assert_eq!(secret.as_deref(), Some("s3cr%40t"));
        let m = scrub("auth failed for s3cr@t and s3cr%40t", secret.as_deref());
        assert_eq!(m, "auth failed for *** and ***");
        assert_eq!(
            password_of("postgres://a@h/d?password=x%20y").as_deref(),
            Some("x%20y")
        );
        assert_eq!(password_of("postgres://a@h/d"), None);
    }

    #[test]
    fn unreachable_message_says_what_to_do_without_the_password() {
        let e = classify(
            sqlx::Error::PoolTimedOut,
            &redact_database_url("postgres://u:pw@h/d"),
            Some("pw"),
        );
        let text = e.to_string();
        assert!(text.contains("postgres://u:***@h/d"), "{text}");
        assert!(!text.contains(":pw@"), "{text}");
        assert!(text.contains("Check that the server is running"), "{text}");
    }
}
