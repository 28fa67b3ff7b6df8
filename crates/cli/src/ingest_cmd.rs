//! `ragtrail ingest`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::global::GlobalArgs;
use crate::open::{ModelUse, open_engine_as, run_ingest};
use crate::output;
use crate::output::Lang;
use ragtrail::IngestOptions;

#[derive(Debug, Args)]
pub struct IngestArgs {
    /// Folder to ingest [default: the --knowledge folder].
    pub dir: Option<PathBuf>,
    /// Re-read and re-index every document, even unchanged ones.
    #[arg(long)]
    pub rebuild: bool,
    /// Skip files larger than this many bytes.
    #[arg(long, env = "RAGTRAIL_MAX_FILE_BYTES", default_value_t = 5 * 1024 * 1024, value_name = "BYTES")]
    pub max_file_bytes: u64,
    /// How many past texts of each chunk to keep: N (0 keeps only today's text) or `forever`.
    /// Every chunk text ever indexed is kept by its content hash, so `audit` can show what a
    /// run was shown after its document changed; with N, older ones are pruned at the end of
    /// this ingest, and audits of runs that saw them say "pruned" (see docs/evidence-versions.md).
    #[arg(
        long,
        env = "RAGTRAIL_KEEP_VERSIONS",
        default_value = "forever",
        value_name = "N"
    )]
    pub keep_versions: ragtrail::KeepVersions,
    /// Print the summary as JSON: added, changed, removed (source paths), unchanged, chunks,
    /// generation, versionsPruned, formats ({"pdf": {"read": 2, "skipped": 1}, …}) and skipped ([{"path",
    /// "reason"}]).
    #[arg(long)]
    pub json: bool,
}

pub fn run(global: &GlobalArgs, args: &IngestArgs) -> anyhow::Result<ExitCode> {
    let dir = args.dir.clone().unwrap_or_else(|| global.knowledge.clone());
    let mut engine = open_engine_as(global, args.rebuild, ModelUse::Ingest, Lang::En)?;
    let mut options = IngestOptions {
        rebuild: args.rebuild,
        ..global.ingest_options()
    };
    options.scan.max_file_bytes = args.max_file_bytes;
    options.keep_versions = args.keep_versions;
    let summary = run_ingest(&mut engine, &dir, &options, Lang::En)?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&output::ingest_summary_json(&summary))?
        );
    } else {
        println!("{}", output::ingest_summary_line(&summary, Lang::En));
    }
    Ok(ExitCode::SUCCESS)
}
