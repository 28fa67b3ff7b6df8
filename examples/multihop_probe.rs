//! A probe for the offline planner's multi-hop following, *not* the product planner: round 1
//! is the offline planner's own search; every later round follows a name that the best hits
//! introduce (a capitalised span not in the question, from the sentence that matches the
//! question best), with the question words those hits did not contain. Nothing here knows a
//! data set. It measures what that strategy would add to joint recall; the answer step is left
//! out (it gives up after its searches), since `eval multihop` scores the searches only.
//!
//!   cargo run --release --example multihop_probe -- ../shared/data/hotpotqa-dev103 [SPLIT]
use std::collections::HashSet;
use std::path::Path;

use ragtrail::agent::offline::OfflinePlanner;
use ragtrail::agent::{
    AgentRagOptions, Observation, Planner, PlannerAction, PlannerContext, PlannerError,
    PlannerStep, RunSettings,
};
use ragtrail::engine::Engine;
use ragtrail::eval::{multihop, retrieval};
use ragtrail::text;

struct Probe {
    first: OfflinePlanner,
    followed: HashSet<String>,
}

/// Words that may join the capitalised words of one name ("Kiss and Tell", "Bank of England").
const JOINERS: &[&str] = &["of", "and", "the", "de", "von", "van", "for", "in", "&"];

/// Capitalised spans of a sentence: runs of capitalised words, joiners allowed inside.
fn names(sentence: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut run: Vec<&str> = Vec::new();
    let flush = |run: &mut Vec<&str>, out: &mut Vec<String>| {
        while run.last().is_some_and(|w| JOINERS.contains(w)) {
            run.pop();
        }
        if !run.is_empty() {
            out.push(run.join(" "));
        }
        run.clear();
    };
    for raw in sentence.split_whitespace() {
        let word = raw.trim_matches(|c: char| !c.is_alphanumeric());
        let capital = word.chars().next().is_some_and(char::is_uppercase);
        if capital || (!run.is_empty() && JOINERS.contains(&word)) {
            run.push(word);
        } else {
            flush(&mut run, &mut out);
        }
        // A sentence or clause boundary ends a name.
        if raw.ends_with([',', '.', ';', ':', ')', '"']) {
            flush(&mut run, &mut out);
        }
    }
    flush(&mut run, &mut out);
    out
}

fn analysed(s: &str) -> HashSet<String> {
    text::terms(s)
        .into_iter()
        .map(|t| t.text)
        .filter(|t| !text::is_stop_term(t))
        .collect()
}

impl Planner for Probe {
    fn kind(&self) -> &'static str {
        "probe"
    }

    fn next(
        &mut self,
        ctx: &PlannerContext<'_>,
        observations: &[Observation],
    ) -> Result<PlannerStep, PlannerError> {
        let give_up = || PlannerStep {
            actions: vec![PlannerAction::GiveUp {
                reason: "probe: searches done".into(),
            }],
            ..PlannerStep::default()
        };
        if ctx.searches_done == 0 {
            return self.first.next(ctx, observations);
        }
        if ctx.answer_only {
            return Ok(give_up());
        }
        let n = ctx.lookup.num_chunks().max(1) as f64;
        let idf = |t: &str| {
            let df = ctx.lookup.doc_freq(t) as f64;
            ((n - df + 0.5) / (df + 0.5) + 1.0).ln()
        };
        let question = analysed(ctx.question);
        let mut seen_titles: HashSet<String> = HashSet::new();
        let mut hits = Vec::new();
        for o in ctx.rounds {
            if let Observation::Hits { hits: h, .. } = o {
                seen_titles.extend(h.iter().map(|x| x.title_path.to_lowercase()));
                hits.extend(h.iter().take(3));
            }
        }
        let mut best: Option<(f64, String, String)> = None;
        for hit in &hits {
            let Some(body) = ctx.lookup.returned_chunk_text(&hit.chunk_id) else {
                continue;
            };
            let hit_terms = analysed(&format!("{}\n{}", hit.title_path, body));
            for sentence in body.split_inclusive(". ") {
                let overlap: f64 = analysed(sentence)
                    .iter()
                    .filter(|t| question.contains(*t))
                    .map(|t| idf(t))
                    .sum();
                for name in names(sentence) {
                    let terms = analysed(&name);
                    if terms.is_empty()
                        || terms.iter().all(|t| question.contains(t))
                        || seen_titles.contains(&name.to_lowercase())
                        || self.followed.contains(&name)
                    {
                        continue;
                    }
                    let rarity = terms.iter().map(|t| idf(t)).fold(0.0, f64::max);
                    let score = overlap + 0.1 * rarity;
                    if best.as_ref().is_none_or(|(s, _, _)| score > *s) {
                        // The question words this hit lacks: what the next paragraph must hold.
                        let residual: Vec<String> = text::jieba()
                            .cut(ctx.question, false)
                            .into_iter()
                            .map(|w| w.word.trim().to_string())
                            .filter(|w| {
                                let t = analysed(w);
                                !t.is_empty() && t.iter().all(|x| !hit_terms.contains(x))
                            })
                            .take(3)
                            .collect();
                        best = Some((score, name, residual.join(" ")));
                    }
                }
            }
        }
        let Some((_, name, residual)) = best else {
            return Ok(give_up());
        };
        self.followed.insert(name.clone());
        let mut keywords = vec![name.clone()];
        if !residual.is_empty() {
            keywords.push(residual);
        }
        Ok(PlannerStep {
            actions: vec![PlannerAction::Search {
                keywords,
                reason: format!("follow {name}"),
                top_k: None,
            }],
            ..PlannerStep::default()
        })
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let dir = args
        .get(1)
        .map(String::as_str)
        .unwrap_or("../shared/data/hotpotqa-dev103");
    let set = retrieval::load(Path::new(dir), args.get(2).map(String::as_str))?;
    let tmp = tempfile::tempdir()?;
    let mut engine = Engine::open(tmp.path())?;
    let (_, map) = retrieval::ingest(&mut engine, &set, Default::default(), &mut |_| {})?;
    let settings = RunSettings::new(AgentRagOptions::default(), Default::default(), "2026-11-30");
    for (label, probe) in [("offline planner", false), ("probe", true)] {
        let report = multihop::evaluate(&engine, &map, &set, &settings, &mut || {
            if probe {
                Box::new(Probe {
                    first: OfflinePlanner::new(),
                    followed: HashSet::new(),
                }) as Box<dyn Planner>
            } else {
                Box::new(OfflinePlanner::new())
            }
        })?;
        println!(
            "{label}: joint recall by round {:?}, any {:?}, mean rounds {:.2}",
            report
                .joint_recall_by_round
                .iter()
                .map(|x| format!("{x:.3}"))
                .collect::<Vec<_>>(),
            report
                .any_recall_by_round
                .iter()
                .map(|x| format!("{x:.3}"))
                .collect::<Vec<_>>(),
            report.mean_rounds
        );
    }
    Ok(())
}
