//! Files and folders that hold document text (chunks, vectors, past chunk texts, sessions,
//! traces) or say who may read what (tokens): the owner's alone, since they carry passages of
//! role-restricted documents. Files are 0600 and folders 0700 on unix; elsewhere the platform's
//! defaults apply.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

/// Creates `dir` and any missing parent, each owner-only. A folder that exists is left as it
/// is (it may be the operator's own, shared on purpose).
pub fn create_dir_all(dir: &Path) -> io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// [`create_dir_all`], then narrows `dir` itself to owner-only if others may enter it: for the
/// folders ragtrail owns (the store, the index, the sessions), so one an older version made
/// readable is closed too. A folder that cannot be changed (a read-only copy) stays as it is.
pub fn own_dir(dir: &Path) -> io::Result<()> {
    create_dir_all(dir)?;
    narrow(dir, 0o700);
    Ok(())
}

/// Opens `path` with `options`, creating it owner-only; an existing file others may read is
/// narrowed to owner-only as it is opened.
pub fn open(path: &Path, options: &mut OpenOptions) -> io::Result<File> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let file = options.open(path)?;
    narrow(path, 0o600);
    Ok(file)
}

/// Creates (or truncates) `path`, owner-only, and writes `bytes` to it.
pub fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    open(
        path,
        OpenOptions::new().write(true).create(true).truncate(true),
    )?
    .write_all(bytes)
}

/// Sets `mode` when the group or others have any permission; best effort (the file may be
/// another user's, or on a read-only filesystem).
fn narrow(path: &Path, mode: u32) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path)
            && meta.permissions().mode() & 0o077 != 0
        {
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode));
        }
    }
    #[cfg(not(unix))]
    let _ = (path, mode);
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path)
            .expect("metadata")
            .permissions()
            .mode()
            & 0o777
    }

    #[test]
    fn new_files_and_folders_are_the_owners_and_old_ones_are_narrowed() {
        let root = tempfile::tempdir().expect("tempdir");
        let nested = root.path().join("a/b");
        create_dir_all(&nested).expect("mkdir");
        assert_eq!(
            (mode(&root.path().join("a")), mode(&nested)),
            (0o700, 0o700)
        );

        let file = nested.join("f.json");
        write(&file, b"{}").expect("write");
        assert_eq!(mode(&file), 0o600);

        // Made readable by an older version: narrowed when opened or owned again.
        let old = root.path().join("old");
        std::fs::create_dir(&old).expect("mkdir");
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        std::fs::write(old.join("x"), b"x").expect("write");
        std::fs::set_permissions(old.join("x"), std::fs::Permissions::from_mode(0o644))
            .expect("chmod");
        open(&old.join("x"), OpenOptions::new().append(true)).expect("open");
        own_dir(&old).expect("own");
        assert_eq!((mode(&old), mode(&old.join("x"))), (0o700, 0o600));

        // A folder that exists is not the helper's to narrow unless owned.
        let shared = root.path().join("shared");
        std::fs::create_dir(&shared).expect("mkdir");
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        create_dir_all(&shared).expect("exists");
        assert_eq!(mode(&shared), 0o755);
    }
}
