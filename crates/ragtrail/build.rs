//! Turns jieba-rs's own dictionary into a table the engine reads in place (`OUT_DIR/words.bin`,
//! `include_bytes!`d by `src/text/dictionary.rs`), so a process never parses 349,000 dictionary
//! lines to segment one question. Parsing them costs about 150 ms at start; the table costs
//! nothing until a word is looked up.
//!
//! The dictionary is the one jieba-rs embeds (its `src/data/dict.txt`), read from the crate's
//! source folder, so the table and jieba's segmentation always come from the same words. The
//! engine builds jieba-rs without its embedded copy, so the build fails when that folder
//! cannot be found.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The jieba-rs version Cargo.lock names (the one the engine links).
fn locked_version(lock: &str) -> Option<String> {
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == "name = \"jieba-rs\"" {
            let version = lines.next()?.trim();
            return Some(
                version
                    .strip_prefix("version = \"")?
                    .strip_suffix('"')?
                    .to_string(),
            );
        }
    }
    None
}

fn cargo_lock() -> Option<String> {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR")?);
    // The workspace's lock file, two levels up; a crate built on its own has its own.
    for dir in manifest_dir.ancestors().take(3) {
        let path = dir.join("Cargo.lock");
        if let Ok(text) = std::fs::read_to_string(&path) {
            // Another jieba-rs version, another dictionary.
            println!("cargo::rerun-if-changed={}", path.display());
            return Some(text);
        }
    }
    None
}

/// jieba-rs's source folder in Cargo's registry cache (where a normal build unpacks it).
fn in_registry(version: &str) -> Option<PathBuf> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))?;
    let registries = std::fs::read_dir(home.join("registry").join("src")).ok()?;
    registries
        .flatten()
        .map(|r| r.path().join(format!("jieba-rs-{version}")))
        .find(|dir| dir.join("src/data/dict.txt").is_file())
}

/// jieba-rs's source folder as `cargo metadata` reports it (vendored sources, path overrides).
fn from_metadata() -> Option<PathBuf> {
    let cargo = std::env::var_os("CARGO")?;
    let manifest = Path::new(&std::env::var_os("CARGO_MANIFEST_DIR")?).join("Cargo.toml");
    let target = std::env::var("TARGET").ok()?;
    let output = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--offline",
            "--format-version",
            "1",
            "--filter-platform",
        ])
        .arg(target)
        .arg("--manifest-path")
        .arg(manifest)
        .output()
        .ok()?;
    let json = String::from_utf8(output.stdout).ok()?;
    // Cargo writes each package as one object starting with its name; no JSON parser is
    // needed to find the manifest path inside the jieba-rs one.
    let start = json.find("{\"name\":\"jieba-rs\"")?;
    let object = &json[start..];
    let object = &object[..object[1..]
        .find("{\"name\":")
        .map_or(object.len(), |i| i + 1)];
    let key = "\"manifest_path\":\"";
    let path = &object[object.find(key)? + key.len()..];
    let path = path[..path.find('"')?].replace("\\\\", "\\");
    Some(Path::new(&path).parent()?.to_path_buf())
}

/// The table: words sorted by their UTF-8 bytes (so by characters), each with its frequency
/// and part-of-speech tag, and where the words of each first character start.
fn table(dict: &str) -> Option<Vec<u8>> {
    // As jieba-rs reads its dictionary: `word freq [tag]`, whitespace-separated; a word listed
    // twice keeps its last line, while the total counts every line.
    let mut words: BTreeMap<&str, (u32, &str)> = BTreeMap::new();
    let mut total: u64 = 0;
    for line in dict.lines() {
        let mut fields = line.split_ascii_whitespace();
        let Some(word) = fields.next() else { continue };
        let freq: u64 = match fields.next() {
            Some(f) => f.parse().ok()?,
            None => 0,
        };
        total += freq;
        words.insert(
            word,
            (u32::try_from(freq).ok()?, fields.next().unwrap_or("")),
        );
    }
    let mut tags: Vec<&str> = Vec::new();
    for (_, tag) in words.values() {
        if !tags.contains(tag) {
            tags.push(tag);
        }
    }
    if tags.len() > 255 || words.len() >= u32::MAX as usize {
        return None;
    }
    let mut out = Vec::new();
    let u32s = |out: &mut Vec<u8>, v: u32| out.extend_from_slice(&v.to_le_bytes());
    out.extend_from_slice(b"RTJD");
    u32s(&mut out, 1);
    u32s(&mut out, words.len() as u32);
    out.extend_from_slice(&total.to_le_bytes());
    out.push(tags.len() as u8);
    for tag in &tags {
        out.push(u8::try_from(tag.len()).ok()?);
        out.extend_from_slice(tag.as_bytes());
    }
    // Where each first character's words start: a direct entry per BMP character (one
    // more for the end), then the characters beyond it with their starts.
    let first = |w: &str| w.chars().next().map_or(0, u32::from);
    let firsts: Vec<u32> = words.keys().map(|w| first(w)).collect();
    for c in 0..=0x1_0000u32 {
        u32s(&mut out, firsts.partition_point(|&f| f < c) as u32);
    }
    let mut astral: Vec<(u32, u32)> = Vec::new();
    for (i, &f) in firsts.iter().enumerate() {
        if f >= 0x1_0000 && astral.last().is_none_or(|&(c, _)| c != f) {
            astral.push((f, i as u32));
        }
    }
    u32s(&mut out, astral.len() as u32);
    for (c, start) in astral {
        u32s(&mut out, c);
        u32s(&mut out, start);
    }
    let mut offset = 0u32;
    for word in words.keys() {
        u32s(&mut out, offset);
        offset = offset.checked_add(word.len() as u32)?;
    }
    u32s(&mut out, offset);
    for (freq, _) in words.values() {
        u32s(&mut out, *freq);
    }
    for (_, tag) in words.values() {
        out.push(tags.iter().position(|t| t == tag)? as u8);
    }
    for word in words.keys() {
        out.extend_from_slice(word.as_bytes());
    }
    Some(out)
}

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let found = cargo_lock()
        .as_deref()
        .and_then(locked_version)
        .and_then(|v| in_registry(&v))
        .or_else(from_metadata)
        .map(|dir| dir.join("src/data/dict.txt"));
    let table = found.as_ref().and_then(|path| {
        println!("cargo::rerun-if-changed={}", path.display());
        table(&std::fs::read_to_string(path).ok()?)
    });
    // jieba-rs is built without its embedded copy: this table is the engine's only dictionary.
    let Some(table) = table else {
        panic!(
            "jieba-rs's dictionary (src/data/dict.txt of the jieba-rs version in Cargo.lock) was not found in Cargo's registry nor through `cargo metadata`: fetch the crate sources (`cargo fetch --locked`) and build again"
        );
    };
    std::fs::write(out.join("words.bin"), table).expect("OUT_DIR is writable");
}
