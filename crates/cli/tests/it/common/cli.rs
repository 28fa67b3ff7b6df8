//! Running the `ragtrail` binary as a user would, with nothing from the caller's environment.

use std::path::Path;
use std::process::{Command, Output};

/// Runs `ragtrail ARGS` in `cwd` with every `RAGTRAIL_*` variable of the caller removed, and
/// the hashing embedder unless the test names an embedder (see [`pin_hashing`]).
pub fn ragtrail(cwd: &Path, args: &[&str]) -> Output {
    ragtrail_with_env(cwd, args, &[])
}

/// [`ragtrail`] with `env` set.
pub fn ragtrail_with_env(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ragtrail"));
    cmd.current_dir(cwd).args(args);
    // Only what each test passes: nothing from the caller's environment (an OpenTelemetry
    // endpoint of the developer's included).
    for (key, _) in std::env::vars_os() {
        let key_text = key.to_string_lossy();
        if key_text.starts_with("RAGTRAIL_") || key_text.starts_with("OTEL_") {
            cmd.env_remove(&key);
        }
    }
    let names_embedder = env.iter().any(|(k, _)| k.starts_with("RAGTRAIL_EMBED"))
        || args.iter().any(|a| a.starts_with("--embed"));
    if names_embedder {
        // Even so, never the user's model cache, and never a download.
        cmd.env("RAGTRAIL_MODEL_CACHE", NO_MODEL_CACHE);
    } else {
        pin_hashing(&mut cmd);
    }
    cmd.envs(env.iter().copied());
    cmd.output().expect("run ragtrail")
}

/// A model cache that cannot be made (a folder inside a device, even for root): a test that
/// leaves the embedder to the default neither reads the user's cache nor fetches into one.
pub const NO_MODEL_CACHE: &str = "/dev/null/ragtrail-test-model-cache";

/// The hashing embedder, for a test that is not about the embedder: with none configured,
/// `ragtrail` would use (and first install) multilingual-e5-small, a minute and more per
/// ingest of `knowledge/` in a debug build.
pub fn pin_hashing(cmd: &mut Command) {
    cmd.env("RAGTRAIL_EMBEDDER", "hashing");
    cmd.env("RAGTRAIL_MODEL_CACHE", NO_MODEL_CACHE);
}

/// [`ragtrail`] with `--data-dir DATA --knowledge KNOWLEDGE` before `args`.
pub fn ragtrail_over(cwd: &Path, data: &Path, knowledge: &Path, args: &[&str]) -> Output {
    let (data, knowledge) = (
        data.to_str().expect("utf-8"),
        knowledge.to_str().expect("utf-8"),
    );
    let mut all = vec!["--data-dir", data, "--knowledge", knowledge];
    all.extend_from_slice(args);
    ragtrail(cwd, &all)
}

/// [`ragtrail_with_env`] over a workspace's own folders in `cwd`: `data/`, `knowledge/` and
/// `traces/`.
pub fn ragtrail_in_workspace(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut all = vec![
        "--data-dir",
        "data",
        "--knowledge",
        "knowledge",
        "--trace-dir",
        "traces",
    ];
    all.extend_from_slice(args);
    ragtrail_with_env(cwd, &all, env)
}

/// (stdout, stderr) as text.
pub fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}
