//! The PDF reader alone on one file: sections read, wall time and peak RSS (Linux `VmHWM`), so
//! the reader's memory is measured apart from chunking, embedding and indexing.
//!
//! `cargo run -p ragtrail --example pdf_peak -- big.pdf`

use std::time::Instant;

use ragtrail::{internals::Format, internals::read_document};

fn peak_rss_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: pdf_peak FILE.pdf");
        std::process::exit(2);
    };
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("cannot read {path}: {e}");
            std::process::exit(1);
        }
    };
    let after_file = peak_rss_kb();
    let start = Instant::now();
    match read_document(Format::Pdf, &path, &bytes) {
        Ok(doc) => println!(
            "{path}: {} bytes, {} sections in {:.1} s; peak RSS {} KB (after reading the file: {} KB)",
            bytes.len(),
            doc.sections.len(),
            start.elapsed().as_secs_f64(),
            peak_rss_kb().unwrap_or(0),
            after_file.unwrap_or(0),
        ),
        Err(e) => {
            eprintln!("{path}: {e:?}");
            std::process::exit(1);
        }
    }
}
