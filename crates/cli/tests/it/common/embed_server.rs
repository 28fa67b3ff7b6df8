//! The real multilingual-e5-small embeddings server of `scripts/embed-server.sh`.
//!
//! `scripts/test.sh` starts one and sets `RAGTRAIL_TEST_EMBED_BASE_URL` (and `…_MODEL`,
//! `…_MARKING`). When it is unset (a plain `cargo test`), the development server of
//! `scripts/embed-server.sh ensure` is started or reused. When no server can be had the test
//! fails, loudly: it never passes by skipping.

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

/// Where a server listens and how it wants queries and passages marked.
#[derive(Debug, Clone)]
pub struct Settings {
    pub base_url: String,
    pub model: String,
    pub marking: String,
}

fn parse(stdout: &str) -> Option<Settings> {
    let get = |name: &str| {
        stdout
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix('='))
            .map(str::to_string)
    };
    Some(Settings {
        base_url: get("RAGTRAIL_EMBED_BASE_URL")?,
        model: get("RAGTRAIL_EMBED_MODEL")?,
        marking: get("RAGTRAIL_EMBED_MARKING")?,
    })
}

fn script(args: &[&str]) -> Settings {
    let path = super::repo_root().join("scripts/embed-server.sh");
    let out = Command::new("bash")
        .arg(&path)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", path.display()));
    match (
        out.status.success(),
        parse(&String::from_utf8_lossy(&out.stdout)),
    ) {
        (true, Some(s)) => s,
        _ => panic!(
            "`scripts/embed-server.sh {}` could not start the embeddings server.\n\
             Run the suite with `bash scripts/test.sh`, or point RAGTRAIL_TEST_EMBED_BASE_URL at an OpenAI-compatible multilingual-e5-small server.\n\
             stderr:\n{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

/// The suite's server.
pub fn shared() -> &'static Settings {
    static SETTINGS: OnceLock<Settings> = OnceLock::new();
    SETTINGS.get_or_init(|| {
        if let Ok(url) = std::env::var("RAGTRAIL_TEST_EMBED_BASE_URL")
            && !url.trim().is_empty()
        {
            let var = |name: &str, default: &str| {
                std::env::var(name)
                    .ok()
                    .filter(|v| !v.trim().is_empty())
                    .unwrap_or_else(|| default.to_string())
            };
            return Settings {
                base_url: url.trim().to_string(),
                model: var("RAGTRAIL_TEST_EMBED_MODEL", "multilingual-e5-small"),
                marking: var("RAGTRAIL_TEST_EMBED_MARKING", "input-type"),
            };
        }
        script(&["ensure"])
    })
}

/// A server of the test's own, which the test may stop and start again (on the same port).
pub struct OwnServer {
    dir: tempfile::TempDir,
    pub port: u16,
    pub settings: Settings,
}

impl OwnServer {
    pub fn start() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let run = dir.path().join("run");
        let settings = script(&["start", &run.display().to_string()]);
        let port = settings
            .base_url
            .trim_end_matches("/v1")
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("port in the base URL");
        Self {
            dir,
            port,
            settings,
        }
    }

    fn run_dir(&self) -> std::path::PathBuf {
        self.dir.path().join("run")
    }

    /// Stops the server (the port is free afterwards).
    pub fn stop(&self) {
        stop(&self.run_dir());
    }

    /// Starts it again on the same port.
    pub fn restart(&self) {
        script(&[
            "start",
            &self.run_dir().display().to_string(),
            &self.port.to_string(),
        ]);
    }
}

fn stop(run: &Path) {
    let path = super::repo_root().join("scripts/embed-server.sh");
    let status = Command::new("bash")
        .arg(&path)
        .arg("stop")
        .arg(run)
        .status()
        .expect("run embed-server.sh stop");
    assert!(status.success(), "embed-server.sh stop failed");
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        stop(&self.run_dir());
    }
}
