//! The migrations of `migrations/`, embedded in the binary.
//!
//! Listed here rather than found by `sqlx::migrate!`: that macro makes a build compile a
//! proc-macro copy of sqlx-core and sqlx-postgres of its own. Each entry is what the macro
//! would make of the file (version and description from its name, the SHA-384 of its text as
//! the checksum), so a database migrated by an earlier build sees the same checksums. A test
//! checks this list against the folder, so a new file cannot be left out.

use std::borrow::Cow;
use std::sync::LazyLock;

use sqlx::SqlSafeStr;
use sqlx::migrate::{Migration, MigrationType, Migrator};

/// The files of `migrations/` (name, text), in version order.
macro_rules! embedded {
    ($($file:literal),* $(,)?) => {
        &[$(($file, include_str!(concat!("../../../migrations/", $file)))),*]
    };
}

const FILES: &[(&str, &str)] = embedded![
    "20261130000001_system_of_record.sql",
    "20261201000001_embedding_marking.sql",
    "20261201000002_text_format.sql",
    "20261201160000_abandoned_runs.sql",
    "20261201200000_chunk_versions.sql",
];

/// The migrations of `migrations/`, embedded in the binary.
pub static MIGRATOR: LazyLock<Migrator> = LazyLock::new(|| {
    Migrator::with_migrations(FILES.iter().map(|&(f, s)| migration(f, s)).collect())
});

/// `20261130000001_system_of_record.sql` → version 20261130000001, "system of record".
fn migration(file: &'static str, sql: &'static str) -> Migration {
    let (version, rest) = file
        .split_once('_')
        .expect("a migration's file name is VERSION_DESCRIPTION.sql (tested)");
    let version = version
        .parse()
        .expect("a migration's version is a number (tested)");
    let description = rest.trim_end_matches(".sql").replace('_', " ");
    Migration::new(
        version,
        Cow::Owned(description),
        MigrationType::Simple,
        sql.into_sql_str(),
        sql.starts_with("-- no-transaction"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_of_the_folder_is_embedded_once_in_version_order() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/migrations");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .expect("migrations folder")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".sql"))
            .collect();
        on_disk.sort();
        let listed: Vec<&str> = FILES.iter().map(|(name, _)| *name).collect();
        assert_eq!(listed, on_disk);
        for (name, sql) in FILES {
            let text = std::fs::read_to_string(format!("{dir}/{name}")).expect("read");
            assert_eq!(*sql, text, "{name}");
            assert!(
                !name.contains(".up.") && !name.contains(".down."),
                "{name} is reversible"
            );
        }
    }

    #[test]
    fn entries_read_as_sqlx_reads_the_folder() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/migrations");
        let resolved = sqlx::migrate::resolve_blocking(std::path::Path::new(dir)).expect("resolve");
        let ours: Vec<&Migration> = MIGRATOR.iter().collect();
        assert_eq!(ours.len(), resolved.len());
        for (ours, (theirs, _path)) in ours.iter().zip(&resolved) {
            assert_eq!(ours.version, theirs.version);
            assert_eq!(ours.description, theirs.description);
            assert_eq!(ours.migration_type, theirs.migration_type);
            assert_eq!(ours.checksum, theirs.checksum);
            assert_eq!(ours.no_tx, theirs.no_tx);
            assert_eq!(ours.sql.as_str(), theirs.sql.as_str());
        }
    }
}
