//! `ragtrail search`.

use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use super::{GlobalArgs, open_current_engine, output};
use crate::config;
use ragtrail::search::SearchRequest;
use ragtrail::search::fusion::Fusion;

#[derive(Debug, Args)]
pub struct SearchArgs {
    /// Keywords: words or short phrases, each taken literally (no query syntax).
    #[arg(required = true, value_name = "KEYWORD")]
    pub keywords: Vec<String>,
    /// How many hits to show (1 to 50).
    #[arg(long, short = 'k', default_value_t = 5, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..=ragtrail::search::MAX_TOP_K as u64))]
    pub top_k: u64,
    /// Print a JSON array of SearchHit records instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also search documents whose front matter says `status: superseded`.
    #[arg(long)]
    pub include_superseded: bool,
    /// How to combine the legs: `minmax:W` (weighted min-max, BM25 weight W; `minmax` alone
    /// is 0.3), `rrf` (reciprocal rank fusion, k = 60), `bm25` or `vector` (one leg alone).
    /// Default: `minmax:0.3` with the hashing embedder, `minmax:0.5` with a model embedder.
    #[arg(long, value_name = "FUSION")]
    pub fusion: Option<Fusion>,
}

pub fn run(global: &GlobalArgs, args: &SearchArgs) -> anyhow::Result<ExitCode> {
    let engine = open_current_engine(global)?;
    let access = config::access_context(global.tenant.as_deref(), &global.roles);
    let mut req = SearchRequest::new(args.keywords.clone(), args.top_k as usize, access);
    req.include_superseded = args.include_superseded;
    req.fusion = args.fusion;
    let resp = engine.search_docs(&req).context("searching")?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&resp.hits)?);
    } else if resp.hits.is_empty() {
        println!("No hits for {:?}.", args.keywords);
    } else {
        print!("{}", output::hits_table(&resp.hits));
    }
    if !args.json {
        let s = &resp.sufficiency;
        eprintln!(
            "evidence: {} ({})",
            if s.sufficient {
                "sufficient"
            } else {
                "insufficient"
            },
            s.reason
        );
    }
    Ok(ExitCode::SUCCESS)
}
