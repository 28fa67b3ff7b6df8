//! `ragtrail serve` as a real process on a real socket (127.0.0.1, a port the OS picks), and a
//! blocking HTTP client for it.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

/// The `ragtrail` command of a test workspace: data, knowledge and traces in `root`, nothing
/// from the caller's environment, the hashing embedder, the offline planner and a fixed date.
pub fn command(root: &Path) -> Command {
    command_with_data(root, "data")
}

/// [`command`] with the index and store in `root/DATA`.
pub fn command_with_data(root: &Path, data: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ragtrail"));
    cmd.current_dir(root);
    for (key, _) in std::env::vars_os() {
        let key_text = key.to_string_lossy();
        if key_text.starts_with("RAGTRAIL_")
            || key_text.starts_with("OPENAI_")
            || key_text.starts_with("OTEL_")
        {
            cmd.env_remove(&key);
        }
    }
    cmd.env_remove("DATABASE_URL");
    // Not about the embedder: hashing (a test that is sets its own, or removes this).
    super::cli::pin_hashing(&mut cmd);
    cmd.args([
        "--data-dir",
        data,
        "--knowledge",
        "knowledge",
        "--trace-dir",
        "traces",
    ]);
    cmd
}

/// Makes a token with `ragtrail tokens add` and returns it (the last line printed).
pub fn add_token(root: &Path, name: &str, tenant: &str, roles: &[&str]) -> String {
    add_token_with(command(root), name, tenant, roles)
}

/// [`add_token`] through `cmd`, which chooses the directories and the environment.
pub fn add_token_with(mut cmd: Command, name: &str, tenant: &str, roles: &[&str]) -> String {
    cmd.args(["tokens", "add", name, "--tenant", tenant]);
    for r in roles {
        cmd.args(["--role", r]);
    }
    let out = cmd.output().expect("run tokens add");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .last()
        .expect("token line")
        .trim()
        .to_string()
}

/// A running `ragtrail serve`, killed when dropped.
pub struct Serve {
    child: Child,
    pub base: String,
    client: reqwest::blocking::Client,
}

impl Serve {
    /// `serve` with the offline planner.
    pub fn start(root: &Path) -> Self {
        Self::start_with(root, &["--planner", "offline"], &[])
    }

    /// `serve` with these extra arguments (a planner) and environment variables.
    pub fn start_with(root: &Path, args: &[&str], envs: &[(&str, &str)]) -> Self {
        let mut cmd = command(root);
        // A test that names an embedder gets it, not the hashing pin.
        if envs.iter().any(|(k, _)| k.starts_with("RAGTRAIL_EMBED")) {
            cmd.env_remove("RAGTRAIL_EMBEDDER");
        }
        cmd.envs(envs.iter().copied());
        Self::spawn(cmd, args)
    }

    /// `serve` with these extra arguments, its model the scripted chat server at `base_url`
    /// (model "scripted", no retries).
    pub fn with_chat(root: &Path, args: &[&str], base_url: &str) -> Self {
        Self::start_with(
            root,
            args,
            &[
                ("RAGTRAIL_LLM_BASE_URL", base_url),
                ("RAGTRAIL_LLM_MODEL", "scripted"),
                ("RAGTRAIL_LLM_MAX_RETRIES", "0"),
            ],
        )
    }

    /// `cmd serve …` on a port the OS picks, the fixed date, and `args`: `cmd` chooses the
    /// directories and the environment.
    pub fn spawn(mut cmd: Command, args: &[&str]) -> Self {
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--today", "2026-11-30"])
            .args(args);
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn serve");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let base = loop {
            let Some(Ok(line)) = lines.next() else {
                let status = child.wait().expect("wait");
                panic!("serve exited before listening: {status}");
            };
            if let Some(addr) = line.strip_prefix("listening on ") {
                break addr.trim().to_string();
            }
        };
        Self {
            child,
            base,
            client: super::http::blocking(),
        }
    }

    /// `METHOD path` with an optional bearer token and raw body: (status, body as JSON or as
    /// a string value).
    pub fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        token: Option<&str>,
        body: Option<String>,
    ) -> (u16, Value) {
        let mut req = self.client.request(method, format!("{}{path}", self.base));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.header("content-type", "application/json").body(b);
        }
        let resp = req.send().expect("send");
        let status = resp.status().as_u16();
        let text = resp.text().expect("body");
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, value)
    }

    pub fn post(&self, path: &str, token: &str, body: Value) -> (u16, Value) {
        self.call(
            reqwest::Method::POST,
            path,
            Some(token),
            Some(body.to_string()),
        )
    }

    pub fn get(&self, path: &str, token: &str) -> (u16, Value) {
        self.call(reqwest::Method::GET, path, Some(token), None)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `error.code` of an error answer.
pub fn error_code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or("")
}
