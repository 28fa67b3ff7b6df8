// The trace browser: a page over the same API any client uses (/v1/traces…), with the
// caller's bearer token. The token is kept in sessionStorage (this tab only, gone when it
// closes) and sent as an Authorization header; it never goes into a URL, a cookie or the
// page's markup. Everything a trace holds is put on the page as text (textContent), never as
// HTML, so a question or a document cannot inject markup or script.
"use strict";

const TOKEN_KEY = "ragtrail.token";

function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

// el("tag", {attr: value, class: "…", onclick: fn}, child, "text", …)
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function show(...nodes) {
  const main = document.getElementById("main");
  main.replaceChildren(...nodes.flat().filter((n) => n !== null && n !== undefined && n !== false));
}

class SignedOut extends Error {}

// One API call with the token; a 401 forgets the token and asks for another.
async function api(method, path) {
  const response = await fetch(path, {
    method,
    headers: { Authorization: "Bearer " + token(), Accept: "application/json" },
    cache: "no-store",
    credentials: "omit",
    referrerPolicy: "no-referrer",
  });
  let body = null;
  try {
    body = await response.json();
  } catch (_) {
    body = null;
  }
  if (response.status === 401) {
    sessionStorage.removeItem(TOKEN_KEY);
    login(body && body.error ? body.error.message : "the server refused the token");
    throw new SignedOut();
  }
  if (!response.ok) {
    const message = body && body.error ? body.error.code + ": " + body.error.message : response.statusText;
    throw new Error(method + " " + path + " answered " + response.status + " (" + message + ")");
  }
  return body;
}

function login(problem) {
  document.getElementById("sign-out").hidden = true;
  const input = el("input", {
    id: "token-input", type: "password", autocomplete: "off", spellcheck: "false",
    placeholder: "rtk_…", size: 48, required: true,
  });
  const form = el("form", { id: "login" },
    el("label", {}, "Bearer token (from `ragtrail tokens add NAME --tenant T`)", input),
    el("button", { type: "submit" }, "Open traces"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, input.value.trim());
    route();
  });
  show(
    el("h1", {}, "Sign in"),
    el("p", { class: "muted" },
      "The token stays in this browser tab only (sessionStorage) and is sent as an Authorization header."),
    problem ? el("p", { id: "login-error", class: "error" }, problem) : null,
    form);
  input.focus();
}

function statusName(status) {
  return status || "incomplete";
}

function when(ts) {
  if (!ts) return "";
  return ts.replace("T", " ").replace(/:\d\d(\.\d+)?Z$/, " UTC");
}

function statusBadge(status) {
  const name = statusName(status);
  return el("span", { class: "status status-" + name }, name);
}

async function runsPage(params) {
  const query = new URLSearchParams();
  for (const key of ["status", "session", "since"]) {
    if (params.get(key)) query.set(key, params.get(key));
  }
  query.set("limit", "200");
  const list = await api("GET", "/v1/traces?" + query.toString());
  const statusSelect = el("select", { name: "status" },
    el("option", { value: "" }, "any"),
    ["answered", "evidence", "insufficient_evidence", "error", "incomplete"].map((s) =>
      el("option", { value: s, selected: params.get("status") === s }, s)));
  const session = el("input", { name: "session", value: params.get("session") || "", size: 20 });
  const since = el("input", { name: "since", value: params.get("since") || "", placeholder: "2026-11-30", size: 22 });
  const filters = el("form", { class: "filters" },
    el("label", {}, "status", statusSelect),
    el("label", {}, "session", session),
    el("label", {}, "since (date or RFC 3339)", since),
    el("button", { type: "submit" }, "Filter"));
  filters.addEventListener("submit", (event) => {
    event.preventDefault();
    const next = new URLSearchParams();
    if (statusSelect.value) next.set("status", statusSelect.value);
    if (session.value.trim()) next.set("session", session.value.trim());
    if (since.value.trim()) next.set("since", since.value.trim());
    location.hash = "#/?" + next.toString();
  });
  const rows = list.runs.map((run) =>
    el("tr", { "data-run-id": run.runId },
      el("td", { class: "question" }, el("a", { href: "#/run/" + run.runId }, run.question)),
      el("td", {}, statusBadge(run.status)),
      el("td", { class: "rounds" }, run.rounds),
      el("td", { class: "when" }, when(run.started)),
      el("td", { class: "caller" }, run.caller || "(command line)")));
  show(
    el("h1", {}, "Runs"),
    filters,
    rows.length
      ? el("table", { id: "runs" },
        el("thead", {}, el("tr", {}, ["Question", "Status", "Rounds", "When", "Who"].map((h) => el("th", {}, h)))),
        el("tbody", {}, rows))
      : el("p", { id: "no-runs", class: "muted" }, "No runs match."));
}

// The snippet with the quoted passage marked, when the snippet holds it.
function marked(snippet, quotes) {
  for (const quote of quotes) {
    const at = quote ? snippet.indexOf(quote) : -1;
    if (at >= 0) {
      return [snippet.slice(0, at), el("mark", {}, quote), snippet.slice(at + quote.length)];
    }
  }
  return [snippet];
}

function legs(metadata) {
  const found = [];
  if (metadata && metadata.bm25Rank) found.push("BM25 #" + metadata.bm25Rank);
  if (metadata && metadata.vectorRank) found.push("vector #" + metadata.vectorRank);
  return found.length ? found.join(", ") : "—";
}

function focus(id) {
  const target = document.getElementById(id);
  if (!target) return;
  for (const old of document.querySelectorAll(".focused")) old.classList.remove("focused");
  target.classList.add("focused");
  target.scrollIntoView({ block: "center" });
}

function jump(id, ...children) {
  return el("a", {
    href: "#", class: "jump", "data-target": id,
    onclick: (event) => { event.preventDefault(); focus(id); },
  }, ...children);
}

function hitId(round, chunkId) {
  return "hit-" + round + "-" + chunkId;
}

// The answer's text with each [n] a link to its citation.
function answerText(text, count) {
  const parts = [];
  let last = 0;
  for (const match of text.matchAll(/\[(\d+)\]/g)) {
    const n = Number(match[1]);
    if (n < 1 || n > count) continue;
    parts.push(text.slice(last, match.index), jump("cite-" + n, match[0]));
    last = match.index + match[0].length;
  }
  parts.push(text.slice(last));
  return parts;
}

async function runPage(runId) {
  const [trace, audit] = await Promise.all([
    api("GET", "/v1/traces/" + encodeURIComponent(runId)),
    api("GET", "/v1/traces/" + encodeURIComponent(runId) + "/audit?format=json"),
  ]);
  const run = trace.run;
  const events = trace.events;
  const searches = events.filter((e) => e.type === "search");
  const answers = events.filter((e) => e.type === "answer");
  const answer = answers.length ? answers[answers.length - 1] : null;
  const citations = answer ? answer.citations || [] : [];
  const quotesOf = (chunkId) => citations.filter((c) => c.chunkId === chunkId).map((c) => c.quote);
  // Where the run was first shown each cited chunk.
  const shownAt = (chunkId) => {
    for (const search of searches) {
      const rank = (search.hits || []).findIndex((h) => h.chunkId === chunkId);
      if (rank >= 0) return { round: search.round, rank: rank + 1 };
    }
    return null;
  };

  const integrity = audit.integrity || {};
  const head = [
    el("h1", { id: "question" }, run.question),
    el("p", {},
      statusBadge(run.status), " · ", run.reason, " · ",
      el("span", { class: "rounds" }, run.rounds + " round(s)"), " · ",
      when(run.started), " · ", run.caller || "(command line)", " · tenant ", run.access.tenant,
      " · ", el("a", { id: "replay-link", href: "#/run/" + runId + "/replay" }, "replay against today's index")),
  ];

  const answerPart = [el("h2", {}, "Answer")];
  if (answer) {
    answerPart.push(el("div", { id: "answer", class: "answer" }, answerText(answer.text, citations.length)));
    answerPart.push(el("ol", { id: "citations", class: "citations" }, citations.map((c, i) => {
      const at = shownAt(c.chunkId);
      return el("li", { id: "cite-" + (i + 1), class: "citation", "data-chunk-id": c.chunkId },
        el("span", { class: "title-path" }, c.titlePath), " ",
        el("span", { class: "muted" }, "(" + c.sourceUri + ")"), ": ",
        at ? jump(hitId(at.round, c.chunkId), el("span", { class: "quote" }, "“" + c.quote + "”"))
          : el("span", { class: "quote" }, "“" + c.quote + "”"),
        at ? el("span", { class: "muted" }, " — round " + at.round + ", hit " + at.rank) : null);
    })));
  } else {
    answerPart.push(el("p", { id: "answer", class: "muted" }, "No answer: " + (audit.answer || run.reason)));
  }

  const auditPart = [
    el("h2", {}, "Audit"),
    el("p", { id: "integrity" }, "Integrity: ",
      el("span", { class: "verdict verdict-" + integrity.status }, integrity.status),
      integrity.firstBadLine ? " (first bad line " + integrity.firstBadLine + ")" : ""),
    (integrity.problems || []).length
      ? el("ul", { class: "problems" }, integrity.problems.map((p) => el("li", { class: "error" }, p))) : null,
    audit.signature ? el("p", { id: "signature" }, "Signature: ",
      el("span", { class: "verdict verdict-signature-" + audit.signature.state.replace(/ /g, "-") }, audit.signature.state),
      " — " + audit.signature.detail) : null,
    // The verdict `ragtrail audit` ends with: the signature is part of it.
    el("p", { id: "result" }, "Result: ",
      el("span", { class: "verdict verdict-exit-" + audit.exitCode }, audit.result || "")),
    el("p", { id: "decision" }, "Decision: ", audit.decision ? audit.decision.label + " — " + audit.decision.reason : audit.status),
    el("h3", {}, "Findings"),
    (audit.findings || []).length
      ? el("ul", { id: "findings" }, audit.findings.map((f) => el("li", { class: "error" }, f)))
      : el("p", { id: "findings", class: "muted" }, "None."),
    (audit.notes || []).length ? el("h3", {}, "Notes") : null,
    (audit.notes || []).length ? el("ul", { id: "notes" }, audit.notes.map((n) => el("li", {}, n))) : null,
    (audit.citations || []).length ? el("table", { id: "audit-citations" },
      el("thead", {}, el("tr", {}, ["Cited chunk", "Quote verified", "Store today"].map((h) => el("th", {}, h)))),
      el("tbody", {}, audit.citations.map((c) => el("tr", {},
        el("td", {}, c.titlePath), el("td", {}, c.quoteVerified ? "yes" : "no"), el("td", {}, c.storeState))))) : null,
  ];

  const roundsPart = [el("h2", {}, "Rounds")];
  for (const search of searches) {
    const suff = search.sufficiency || {};
    roundsPart.push(el("section", { class: "round", id: "round-" + search.round },
      el("h3", {}, "Round " + search.round),
      el("p", { class: "keywords" }, "Keywords: ", (search.keywords || []).map((k) => el("code", {}, k)),
        el("span", { class: "muted" }, " — " + (search.reason || ""))),
      suff.reason ? el("p", { class: "muted" }, "Sufficiency: " + suff.reason) : null,
      el("table", { class: "hits" },
        el("thead", {}, el("tr", {}, ["#", "titlePath", "Score", "Found by", "Snippet"].map((h) => el("th", {}, h)))),
        el("tbody", {}, (search.hits || []).map((hit, i) =>
          el("tr", { id: hitId(search.round, hit.chunkId), class: "hit", "data-chunk-id": hit.chunkId },
            el("td", {}, i + 1),
            el("td", { class: "title-path" }, hit.titlePath),
            el("td", { class: "score" }, Number(hit.score).toFixed(3)),
            el("td", { class: "legs" }, legs(hit.metadata)),
            el("td", { class: "snippet" }, marked(hit.snippet || "", quotesOf(hit.chunkId)))))))));
  }
  if (!searches.length) roundsPart.push(el("p", { class: "muted" }, "The run searched nothing."));

  show(...head, ...answerPart, ...auditPart, ...roundsPart);
}

function sideBySide(oldLabel, oldText, newLabel, newText) {
  return el("div", { class: "side-by-side" },
    el("div", { class: "old" }, el("strong", {}, oldLabel), "\n", oldText === null ? "(none)" : oldText),
    el("div", { class: "new" }, el("strong", {}, newLabel), "\n", newText === null ? "(none)" : newText));
}

async function replayPage(runId) {
  const report = await api("POST", "/v1/traces/" + encodeURIComponent(runId) + "/replay");
  const parts = [
    el("h1", {}, "Replay: ", el("a", { href: "#/run/" + runId }, report.question)),
    el("p", { id: "reproduced" }, report.reproduced
      ? "Reproduced: today's index returns what the run was shown."
      : "Not reproduced: today's index differs from what the run was shown."),
    el("p", { class: "muted" }, "Recorded against " + report.recordedKnowledgeBase + ", replayed against " + report.currentKnowledgeBase + "."),
  ];
  if ((report.citedDrift || []).length) {
    parts.push(el("h2", {}, "Cited chunks that changed"));
    for (const d of report.citedDrift) {
      parts.push(el("div", { class: "diff drift cited" },
        el("h3", {}, d.titlePath + " (" + d.state + ")"),
        sideBySide("Recorded (what the run was shown)", d.recordedText, "Today", d.currentText)));
    }
  }
  for (const round of report.rounds) {
    const section = el("section", { class: "replay-round", id: "replay-round-" + round.round },
      el("h2", {}, "Round " + round.round + ": ",
        el("span", { class: "verdict verdict-" + round.verdict }, round.verdict)),
      el("p", { class: "keywords" }, "Keywords: ", round.keywords.map((k) => el("code", {}, k))),
      round.error ? el("p", { class: "error" }, round.error) : null);
    for (const d of round.drift) {
      section.append(el("div", { class: "diff drift" },
        el("h3", {}, d.titlePath + " (" + d.state + ")"),
        sideBySide("Recorded", d.recordedText, "Today", d.currentText)));
    }
    for (const m of round.missing) {
      section.append(el("div", { class: "diff missing" }, el("h3", {}, m.titlePath + " (no longer returned)"),
        sideBySide("Recorded, rank " + m.rank, m.text, "Today", null)));
    }
    for (const n of round.new) {
      section.append(el("div", { class: "diff new-hit" }, el("h3", {}, n.titlePath + " (new)"),
        sideBySide("Recorded", null, "Today, rank " + n.rank, n.text)));
    }
    for (const m of round.moved) {
      section.append(el("p", { class: "moved" }, m.titlePath + ": rank " + m.from + " → " + m.to));
    }
    parts.push(section);
  }
  show(el("div", { id: "replay" }, parts));
}

async function route() {
  if (!token()) {
    login(null);
    return;
  }
  document.getElementById("sign-out").hidden = false;
  const hash = location.hash.replace(/^#/, "") || "/";
  const [path, queryText] = hash.split("?");
  const params = new URLSearchParams(queryText || "");
  show(el("p", { class: "muted" }, "Loading…"));
  try {
    const replay = path.match(/^\/run\/([0-9a-fA-F-]+)\/replay$/);
    const run = path.match(/^\/run\/([0-9a-fA-F-]+)$/);
    if (replay) await replayPage(replay[1]);
    else if (run) await runPage(run[1]);
    else await runsPage(params);
  } catch (error) {
    if (error instanceof SignedOut) return;
    show(el("p", { id: "page-error", class: "error" }, String(error.message || error)));
  }
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("sign-out").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    login(null);
  });
  window.addEventListener("hashchange", route);
  route();
});
