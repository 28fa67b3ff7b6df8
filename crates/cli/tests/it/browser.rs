//! The trace browser at `/` in a real browser: Debian's Chromium driven over WebDriver
//! (chromedriver) by fantoccini, against a real `ragtrail serve`. The test asserts on what the
//! page shows (question, status, who, a citation's titlePath and quoted text, the audit's
//! verdict and findings, the replay's old and new text) and saves a screenshot of each page
//! under `target/tmp/screenshots/trace-browser/` for a person to look at.
//!
//! chromedriver comes from `RAGTRAIL_TEST_CHROMEDRIVER` (set by scripts/test.sh, which installs
//! the packages with scripts/install-browser.sh) or the PATH. Without it the test fails, unless
//! the install script said why it could not install them (`RAGTRAIL_TEST_BROWSER_SKIP`): then
//! it skips, loudly.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

use crate::common::server::{Serve, add_token, command};
use crate::common::{LEAVE_EN, TRAVEL, Workspace};

const ANSWERED: &str = "How many days of annual leave do I get?";
const UNANSWERED: &str = "What colour is the office parrot?";
/// A question that is markup: the page must show it as text, never run or render it.
const MARKUP: &str = "<img src=x onerror=\"document.title='owned'\"> annual leave?";

/// How long the page may take to show something.
const WAIT: Duration = Duration::from_secs(30);

fn chromedriver() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("RAGTRAIL_TEST_CHROMEDRIVER").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("chromedriver"))
        .find(|p| p.is_file())
}

/// A chromedriver on a free loopback port, killed when dropped.
struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    fn start(binary: &Path) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut child = Command::new(binary)
            .arg(format!("--port={port}"))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", binary.display()));
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        loop {
            match lines.next() {
                Some(Ok(line)) if line.contains("started successfully") => break,
                Some(Ok(_)) => continue,
                _ => {
                    let status = child.wait().expect("wait");
                    panic!("chromedriver exited before it was ready: {status}");
                }
            }
        }
        // Keep reading its stdout so it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn screenshots() -> PathBuf {
    screenshots_of("trace-browser")
}

fn screenshots_of(what: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("screenshots")
        .join(what);
    std::fs::create_dir_all(&dir).expect("screenshot dir");
    dir
}

/// Saves the page as `NAME.png`, after checking it shows no value the script failed to fill.
async fn screenshot(client: &Client, name: &str) {
    let body = text_of(client, "body").await;
    for word in ["null", "undefined", "NaN", "[object Object]"] {
        assert!(!body.contains(word), "{name} shows {word:?}:\n{body}");
    }
    let png = client.screenshot().await.expect("screenshot");
    let path = screenshots().join(format!("{name}.png"));
    std::fs::write(&path, png).expect("write screenshot");
    eprintln!("screenshot: {}", path.display());
}

async fn text_of(client: &Client, css: &str) -> String {
    client
        .wait()
        .at_most(WAIT)
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .text()
        .await
        .expect("text")
}

/// Waits until the element `css` shows a text containing `wanted`, and returns that text.
async fn wait_for_text(client: &Client, css: &str, wanted: &str) -> String {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let text = match client.find(Locator::Css(css)).await {
            Ok(e) => e.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        if text.contains(wanted) {
            return text;
        }
        if std::time::Instant::now() > deadline {
            let page = client.source().await.unwrap_or_default();
            panic!("{css} never showed {wanted:?}; it shows {text:?}; page:\n{page}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn sign_in(client: &Client, token: &str) {
    let input = client
        .wait()
        .at_most(WAIT)
        .for_element(Locator::Css("#token-input"))
        .await
        .expect("the sign-in form");
    input.clear().await.expect("clear");
    input.send_keys(token).await.expect("type the token");
    client
        .find(Locator::Css("#login button[type=submit]"))
        .await
        .expect("submit button")
        .click()
        .await
        .expect("submit");
}

/// A workspace with one answered run and one unanswered run by `alice` over HTTP, then the
/// leave policy changed and ingested again, so the replay of the answered run has a diff.
fn recorded_runs() -> (Workspace, String, String) {
    let ws = Workspace::new();
    ws.write("travel.md", TRAVEL);
    ws.write("leave.md", LEAVE_EN);
    let root = ws.dir.path();
    let alice = add_token(root, "alice", "default", &[]);
    let run_id = {
        let serve = Serve::start(root);
        let (status, answered) = serve.post("/v1/ask", &alice, json!({ "question": ANSWERED }));
        assert_eq!(status, 200, "{answered}");
        assert_eq!(answered["status"], "answered", "{answered}");
        let (status, refused) = serve.post("/v1/ask", &alice, json!({ "question": UNANSWERED }));
        assert_eq!(status, 200, "{refused}");
        assert_eq!(refused["status"], "insufficient_evidence", "{refused}");
        let (status, markup) = serve.post("/v1/ask", &alice, json!({ "question": MARKUP }));
        assert_eq!(status, 200, "{markup}");
        answered["runId"].as_str().expect("runId").to_string()
    };
    ws.write(
        "leave.md",
        &LEAVE_EN.replace("earn 10 days", "earn 15 days"),
    );
    let out = command(root).arg("ingest").output().expect("ingest");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (ws, alice, run_id)
}

/// The chromedriver to use, or `None` (after saying so) when the install script could not
/// install one and said why; panics when there is none and no reason.
fn chromedriver_or_skip(test: &str) -> Option<PathBuf> {
    if let Some(bin) = chromedriver() {
        return Some(bin);
    }
    match std::env::var("RAGTRAIL_TEST_BROWSER_SKIP") {
        Ok(why) if !why.is_empty() => {
            eprintln!("\n!!!! SKIPPED {test}: {why} !!!!\n");
            None
        }
        _ => panic!(
            "no chromedriver: run `bash scripts/install-browser.sh` (apt-get install chromium chromium-driver) or set RAGTRAIL_TEST_CHROMEDRIVER"
        ),
    }
}

#[test]
fn the_trace_browser_shows_runs_rounds_citations_audit_and_replay() {
    let Some(driver_bin) =
        chromedriver_or_skip("the_trace_browser_shows_runs_rounds_citations_audit_and_replay")
    else {
        return;
    };
    let (ws, alice, run_id) = recorded_runs();
    let serve = Serve::start(ws.dir.path());
    let driver = Driver::start(&driver_bin);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(browse(&driver.url, &serve.base, &alice, &run_id));
}

/// A headless Chromium session from chromedriver at `driver`.
async fn chromium(driver: &str) -> Client {
    let mut chrome_options = json!({
        "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1280,1400"],
    });
    if let Some(binary) = std::env::var_os("RAGTRAIL_TEST_CHROMIUM").filter(|b| !b.is_empty()) {
        chrome_options["binary"] = Value::String(binary.to_string_lossy().into_owned());
    }
    let mut caps = serde_json::Map::new();
    caps.insert("browserName".into(), json!("chrome"));
    caps.insert("goog:chromeOptions".into(), chrome_options);
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    ClientBuilder::new(connector)
        .capabilities(caps)
        .connect(driver)
        .await
        .expect("a Chromium session from chromedriver")
}

async fn browse(driver: &str, base: &str, alice: &str, run_id: &str) {
    let client = chromium(driver).await;

    // Signed out: the page asks for a token; a wrong one is refused with the server's reason.
    client.goto(&format!("{base}/")).await.expect("open /");
    text_of(&client, "#login").await;
    screenshot(&client, "01-sign-in").await;
    sign_in(&client, "rtk_not_a_real_token").await;
    wait_for_text(&client, "#login-error", "unknown or revoked").await;

    // The runs list: question, status, rounds, when, who.
    sign_in(&client, alice).await;
    let runs = wait_for_text(&client, "#runs", ANSWERED).await;
    for wanted in [
        UNANSWERED,
        "answered",
        "insufficient_evidence",
        "alice",
        "UTC",
    ] {
        assert!(
            runs.contains(wanted),
            "the runs list lacks {wanted:?}:\n{runs}"
        );
    }
    let injected = client
        .execute(
            "return [document.querySelectorAll('main img').length, document.title];",
            vec![],
        )
        .await
        .expect("read the page");
    assert_eq!(injected, json!([0, "ragtrail traces"]));
    screenshot(&client, "02-runs").await;
    // The token lives in this tab's sessionStorage only: not in the URL, not in a cookie.
    let url = client.current_url().await.expect("url");
    assert!(!url.as_str().contains(alice), "{url}");
    let stored = client
        .execute(
            "return [sessionStorage.getItem('ragtrail.token'), document.cookie, localStorage.length];",
            vec![],
        )
        .await
        .expect("read storage");
    assert_eq!(stored, json!([alice, "", 0]));

    // The status filter goes through /v1/traces?status=….
    client
        .goto(&format!("{base}/#/?status=insufficient_evidence"))
        .await
        .expect("filter");
    let filtered = wait_for_text(&client, "#runs", UNANSWERED).await;
    assert!(!filtered.contains(ANSWERED), "{filtered}");

    // A run: its question, rounds with keywords and hits, the answer with its citation linked
    // to the quoted passage, the audit's verdict and findings.
    client.goto(&format!("{base}/#/")).await.expect("runs");
    client
        .wait()
        .at_most(WAIT)
        .for_element(Locator::LinkText(ANSWERED))
        .await
        .expect("the answered run's link")
        .click()
        .await
        .expect("open the run");
    assert_eq!(text_of(&client, "#question").await, ANSWERED);
    let title = text_of(&client, "#cite-1 .title-path").await;
    assert_eq!(title, "Leave Policy / Annual leave");
    let quote = text_of(&client, "#cite-1 .quote").await;
    assert!(quote.contains("10 days of annual leave"), "{quote}");
    let integrity = text_of(&client, "#integrity").await;
    assert_eq!(integrity, "Integrity: clean");
    // The cited chunk changed after the run: the audit says so.
    let findings = text_of(&client, "#findings").await;
    assert!(findings.contains("changed since the run"), "{findings}");
    let rounds = text_of(&client, ".round .keywords").await;
    assert!(rounds.contains("annual"), "{rounds}");
    let legs = text_of(&client, ".round .hit .legs").await;
    assert!(legs.contains("BM25 #1"), "{legs}");
    // Following the citation lands on the hit that showed the passage, the quote marked.
    client
        .find(Locator::Css("#cite-1 a.jump"))
        .await
        .expect("the citation's link")
        .click()
        .await
        .expect("follow the citation");
    let focused = text_of(&client, "tr.hit.focused .title-path").await;
    assert_eq!(focused, "Leave Policy / Annual leave");
    let mark = text_of(&client, "tr.hit.focused mark").await;
    assert_eq!(format!("“{mark}”"), quote);
    screenshot(&client, "03-run").await;

    // The replay: today's text beside the recorded one.
    client
        .find(Locator::Css("#replay-link"))
        .await
        .expect("the replay link")
        .click()
        .await
        .expect("open the replay");
    wait_for_text(&client, "#reproduced", "Not reproduced").await;
    let old = text_of(&client, ".drift .old").await;
    let new = text_of(&client, ".drift .new").await;
    assert!(old.contains("earn 10 days"), "{old}");
    assert!(new.contains("earn 15 days"), "{new}");
    let url = client.current_url().await.expect("url");
    assert!(
        url.as_str().ends_with(&format!("#/run/{run_id}/replay")),
        "{url}"
    );
    screenshot(&client, "04-replay").await;

    // Signing out forgets the token.
    client
        .find(Locator::Css("#sign-out"))
        .await
        .expect("sign out")
        .click()
        .await
        .expect("click");
    text_of(&client, "#login").await;
    let stored = client
        .execute("return sessionStorage.getItem('ragtrail.token');", vec![])
        .await
        .expect("read storage");
    assert_eq!(stored, Value::Null);
    client.close().await.expect("close the browser");
}

/// A run exported to a real Phoenix (crates/cli/tests/it/telemetry.rs) as its UI shows it:
/// the agent span with its chat and retrieval spans in the trace tree, then a retrieval span's
/// documents. Screenshots go to `target/tmp/screenshots/phoenix/`.
#[test]
fn phoenix_shows_an_exported_run_its_rounds_and_documents() {
    let Some(driver_bin) =
        chromedriver_or_skip("phoenix_shows_an_exported_run_its_rounds_and_documents")
    else {
        return;
    };
    let ws = crate::telemetry::workspace();
    let project = crate::telemetry::fresh_project("ui");
    let capture = [(
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
        "true".to_string(),
    )];
    let (outcome, _) = crate::telemetry::llm_ask_exported(&ws, &project, &capture);
    let run_id = outcome["runId"].as_str().expect("runId").to_string();
    let chunk = outcome["rounds"][0]["hits"][0]["chunkId"]
        .as_str()
        .expect("a hit")
        .to_string();
    // Phoenix holds the whole trace before the page is opened.
    crate::telemetry::spans_of(&project, &run_id, 4);
    let driver = Driver::start(&driver_bin);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let client = chromium(&driver.url).await;
        let trace_id = run_id.replace('-', "");
        let url = format!(
            "{}/redirects/traces/{trace_id}",
            crate::telemetry::phoenix()
        );
        client.goto(&url).await.expect("open the trace in Phoenix");
        wait_for_text(&client, "body", "invoke_agent ragtrail").await;
        let page = wait_for_text(&client, "body", "retrieval").await;
        assert!(
            page.contains(&trace_id),
            "the page names the trace (the run id)"
        );
        assert!(page.contains("chat scripted-model"), "{page}");
        let png = client.screenshot().await.expect("screenshot");
        let path = screenshots_of("phoenix").join("01-run.png");
        std::fs::write(&path, png).expect("write screenshot");
        eprintln!("screenshot: {}", path.display());

        // The round's span: its documents, by chunk id, with the snippet captured.
        client
            .find(Locator::XPath("//*[normalize-space(text())='retrieval']"))
            .await
            .expect("the retrieval span in the tree")
            .click()
            .await
            .expect("select it");
        let page = wait_for_text(&client, "body", &chunk).await;
        assert!(
            page.contains("earn 10 days"),
            "the captured snippet: {page}"
        );
        let png = client.screenshot().await.expect("screenshot");
        let path = screenshots_of("phoenix").join("02-retrieval-documents.png");
        std::fs::write(&path, png).expect("write screenshot");
        eprintln!("screenshot: {}", path.display());
        client.close().await.expect("close the browser");
    });
}
