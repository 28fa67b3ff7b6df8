//! Writes the packed multilingual-e5-small (`e5-small-q4.bin`, [`super::e5_file`]) out as a
//! sentence-transformers folder that [`super::local::LocalEmbedder`] loads: the 4-bit weights
//! dequantized to `f32` safetensors, a `config.json` of the BERT encoder it is, and a
//! `tokenizer.json` (SentencePiece unigram) built from the file's vocabulary and its
//! normalization table.
//!
//! It exists to hold the folder loader to the packed file (the folder-loading test, issue 39):
//! the two paths must give the same vectors up to the 4-bit path's 8-bit activations. A user
//! gains little from the copy (400 MB of `f32` standing for 4-bit weights), so no command
//! writes it.
//!
//! The `tokenizer.json` reproduces the packed file's tokenizer ([`super::xlmr_tokenizer`]):
//! * the normalization table becomes a SentencePiece `precompiled_charsmap` (a double-array trie
//!   of each character's UTF-8 bytes, darts-clone's unit layout, whose values point into a blob
//!   of NUL-terminated replacements), the form Hugging Face's `Precompiled` normalizer reads;
//! * runs of spaces become one, a `▁` is put before the text and replaces every space
//!   (`Metaspace`), the pieces are found by the unigram model, and `<s>` … `</s>` surround
//!   them (`RobertaProcessing`);
//! * no added tokens: the packed tokenizer matches `<s>` and `</s>` written in a text as
//!   ordinary pieces, and so does the unigram model.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::Path;

use serde_json::json;

use super::EmbedError;
use super::bert::dequantize_q4;
use super::e5_file::{E5File, TensorType};

/// The model's name in the written `config.json` (`_name_or_path`), as Hugging Face names it.
pub const NAME_OR_PATH: &str = "intfloat/multilingual-e5-small";

/// Writes the folder for the packed model `model_file` into `dir` (created if missing; files
/// already there are replaced).
pub fn write_folder(model_file: &Path, dir: &Path) -> Result<(), EmbedError> {
    let err = |message: String| EmbedError::Model {
        path: dir.display().to_string(),
        message,
    };
    let file = E5File::open(model_file).map_err(|e| EmbedError::Model {
        path: model_file.display().to_string(),
        message: e.to_string(),
    })?;
    std::fs::create_dir_all(dir.join("1_Pooling"))
        .map_err(|e| err(format!("cannot create the folder: {e}")))?;
    let write = |name: &str, value: serde_json::Value| -> Result<(), EmbedError> {
        let text = serde_json::to_vec_pretty(&value).map_err(|e| err(e.to_string()))?;
        std::fs::write(dir.join(name), text).map_err(|e| err(format!("cannot write {name}: {e}")))
    };
    let s = &file.shape;
    write(
        "config.json",
        json!({
            "_name_or_path": NAME_OR_PATH,
            "architectures": ["BertModel"],
            "model_type": "bert",
            "tokenizer_class": "XLMRobertaTokenizer",
            "vocab_size": s.vocab_rows,
            "hidden_size": s.hidden,
            "num_hidden_layers": s.layers,
            "num_attention_heads": s.heads,
            "intermediate_size": s.intermediate,
            "hidden_act": "gelu",
            "max_position_embeddings": s.max_positions,
            "type_vocab_size": s.token_types,
            "layer_norm_eps": s.layer_norm_eps,
            "pad_token_id": file.specials.pad,
            "position_embedding_type": "absolute",
        }),
    )?;
    write(
        "modules.json",
        json!([
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
        ]),
    )?;
    write(
        "1_Pooling/config.json",
        json!({"word_embedding_dimension": s.hidden, "pooling_mode_mean_tokens": true}),
    )?;
    write(
        "sentence_bert_config.json",
        json!({"max_seq_length": s.max_positions, "do_lower_case": false}),
    )?;
    write(
        "config_sentence_transformers.json",
        json!({"prompts": {"query": super::e5::QUERY_PREFIX, "passage": super::e5::PASSAGE_PREFIX}}),
    )?;
    write("tokenizer.json", tokenizer_json(&file))?;
    write_weights(&file, &dir.join("model.safetensors"))
        .map_err(|e| err(format!("cannot write model.safetensors: {e}")))
}

/// The tokenizer as Hugging Face's `tokenizer.json` describes a SentencePiece unigram model.
fn tokenizer_json(file: &E5File) -> serde_json::Value {
    let vocab: Vec<serde_json::Value> = file
        .pieces()
        .map(|(piece, score)| json!([piece, score as f64]))
        .collect();
    let sp = file.specials;
    let piece = |id: u32| {
        file.piece_bytes(id as usize)
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default()
    };
    json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": [],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Precompiled", "precompiled_charsmap": base64(&precompiled_charsmap(file.normalization()))},
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
        ]},
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u{2581}", "prepend_scheme": "always", "split": true},
        "post_processor": {
            "type": "RobertaProcessing",
            "sep": [piece(sp.eos), sp.eos],
            "cls": [piece(sp.bos), sp.bos],
            "trim_offsets": true,
            "add_prefix_space": true,
        },
        "decoder": {"type": "Metaspace", "replacement": "\u{2581}", "prepend_scheme": "always", "split": true},
        "model": {"type": "Unigram", "unk_id": sp.unk, "vocab": vocab, "byte_fallback": false},
    })
}

/// `(name in the folder, name in the packed file, shape)` of every weight, in file order.
fn weight_names(file: &E5File) -> Vec<(String, String, Vec<usize>)> {
    let s = &file.shape;
    let (h, i) = (s.hidden, s.intermediate);
    let mut out = vec![
        (
            "embeddings.word_embeddings.weight".into(),
            "emb.word".into(),
            vec![s.vocab_rows, h],
        ),
        (
            "embeddings.position_embeddings.weight".into(),
            "emb.pos".into(),
            vec![s.max_positions, h],
        ),
        (
            "embeddings.token_type_embeddings.weight".into(),
            "emb.type".into(),
            vec![s.token_types, h],
        ),
        (
            "embeddings.LayerNorm.weight".into(),
            "emb.ln.w".into(),
            vec![h],
        ),
        (
            "embeddings.LayerNorm.bias".into(),
            "emb.ln.b".into(),
            vec![h],
        ),
    ];
    for l in 0..s.layers {
        let p = format!("encoder.layer.{l}.");
        for (hf, ours, rows, cols) in [
            ("attention.self.query", "q", h, h),
            ("attention.self.key", "k", h, h),
            ("attention.self.value", "v", h, h),
            ("attention.output.dense", "ao", h, h),
            ("intermediate.dense", "fi", i, h),
            ("output.dense", "fo", h, i),
        ] {
            out.push((
                format!("{p}{hf}.weight"),
                format!("l{l}.{ours}.w"),
                vec![rows, cols],
            ));
            out.push((
                format!("{p}{hf}.bias"),
                format!("l{l}.{ours}.b"),
                vec![rows],
            ));
        }
        for (hf, ours) in [
            ("attention.output.LayerNorm", "aln"),
            ("output.LayerNorm", "oln"),
        ] {
            out.push((format!("{p}{hf}.weight"), format!("l{l}.{ours}.w"), vec![h]));
            out.push((format!("{p}{hf}.bias"), format!("l{l}.{ours}.b"), vec![h]));
        }
    }
    out
}

/// Every weight as `f32` safetensors, the 4-bit ones dequantized row by row as they are written.
fn write_weights(file: &E5File, path: &Path) -> std::io::Result<()> {
    let names = weight_names(file);
    let shapes: Vec<(String, Vec<usize>)> = names
        .iter()
        .map(|(name, _, shape)| (name.clone(), shape.clone()))
        .collect();
    let invalid = |e: super::e5_file::E5FileError| std::io::Error::other(e.to_string());
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    out.write_all(&safetensors_header(&shapes))?;
    for (_, ours, shape) in &names {
        let elements: usize = shape.iter().product();
        let cols = *shape.last().unwrap_or(&1);
        let q4 = file.tensor(ours, TensorType::Q4_0, elements);
        let mut row = vec![0.0f32; cols];
        match q4 {
            Ok(blocks) => {
                for b in
                    blocks.chunks_exact(cols / super::e5_file::BLOCK * super::e5_file::BLOCK_BYTES)
                {
                    dequantize_q4(b, &mut row);
                    write_f32s(&mut out, &row)?;
                }
            }
            Err(_) => {
                let values = file.f32s(ours, elements).map_err(invalid)?;
                write_f32s(&mut out, &values)?;
            }
        }
    }
    out.flush()
}

fn write_f32s(out: &mut impl Write, values: &[f32]) -> std::io::Result<()> {
    let mut bytes = Vec::with_capacity(values.len() * 4);
    for v in values {
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    out.write_all(&bytes)
}

/// The header of a safetensors file of `f32` tensors written one after another in this order:
/// its length (u64), then the JSON naming each tensor's shape and byte range, padded with
/// spaces to a multiple of 8 bytes.
pub(super) fn safetensors_header(tensors: &[(String, Vec<usize>)]) -> Vec<u8> {
    let mut entries = serde_json::Map::new();
    let mut at = 0usize;
    for (name, shape) in tensors {
        let bytes = shape.iter().product::<usize>() * 4;
        entries.insert(
            name.clone(),
            json!({"dtype": "F32", "shape": shape, "data_offsets": [at, at + bytes]}),
        );
        at += bytes;
    }
    entries.insert("__metadata__".into(), json!({"format": "pt"}));
    let mut text = serde_json::Value::Object(entries).to_string().into_bytes();
    while !(text.len() + 8).is_multiple_of(8) {
        text.push(b' ');
    }
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&text);
    out
}

/// SentencePiece's `precompiled_charsmap` for a table of single characters: a u32 (the trie's
/// size in bytes), the double-array trie's units, then the replacements, each ending in NUL.
pub(super) fn precompiled_charsmap(table: &[(char, Vec<char>)]) -> Vec<u8> {
    // The replacements, each stored once.
    let mut blob: Vec<u8> = Vec::new();
    let mut at: HashMap<String, u32> = HashMap::new();
    // A byte trie of the characters' UTF-8: node 0 is the root.
    let mut children: Vec<BTreeMap<u8, usize>> = vec![BTreeMap::new()];
    let mut value: Vec<Option<u32>> = vec![None];
    for (from, to) in table {
        let to: String = to.iter().collect();
        let offset = *at.entry(to.clone()).or_insert_with(|| {
            let o = blob.len() as u32;
            blob.extend_from_slice(to.as_bytes());
            blob.push(0);
            o
        });
        let mut node = 0;
        let mut buf = [0u8; 4];
        for &b in from.encode_utf8(&mut buf).as_bytes() {
            node = match children[node].get(&b) {
                Some(&n) => n,
                None => {
                    children.push(BTreeMap::new());
                    value.push(None);
                    let n = children.len() - 1;
                    children[node].insert(b, n);
                    n
                }
            };
        }
        value[node] = Some(offset);
    }
    let units = double_array(&children, &value);
    let mut out = ((units.len() * 4) as u32).to_le_bytes().to_vec();
    for u in &units {
        out.extend_from_slice(&u.to_le_bytes());
    }
    out.extend_from_slice(&blob);
    out
}

/// Lays a byte trie out as darts-clone's double array: the unit at `p` holds its label (bits
/// 0–7), whether it has a value (bit 8) and the offset to its children (bits 10–30), which lie
/// at `p ^ offset ^ label`; a value is the unit at label 0 (bit 31 set, the value below it).
/// Each node's children get a base of their own, so a lookup never lands on a cousin.
fn double_array(children: &[BTreeMap<u8, usize>], value: &[Option<u32>]) -> Vec<u32> {
    const LEAF: u32 = 1 << 31;
    let mut units: Vec<u32> = vec![0; 256];
    let mut used: Vec<bool> = vec![false; 256];
    used[0] = true;
    let mut bases = std::collections::HashSet::new();
    let mut first_free = 1;
    // (node, its position), breadth first.
    let mut queue = std::collections::VecDeque::from([(0usize, 0usize)]);
    while let Some((node, pos)) = queue.pop_front() {
        let mut labels: Vec<u8> = Vec::new();
        if value[node].is_some() {
            labels.push(0);
        }
        labels.extend(children[node].keys());
        if labels.is_empty() {
            continue;
        }
        while used.get(first_free).copied().unwrap_or(false) {
            first_free += 1;
        }
        let mut free = first_free;
        let base = loop {
            let base = free ^ labels[0] as usize;
            let fits = base != 0
                && !bases.contains(&base)
                && labels.iter().all(|&l| {
                    let p = base ^ l as usize;
                    p != 0 && !used.get(p).copied().unwrap_or(false)
                });
            if fits {
                break base;
            }
            free += 1;
            while used.get(free).copied().unwrap_or(false) {
                free += 1;
            }
        };
        bases.insert(base);
        // Every lookup from this base stays within its block of 256 units.
        let end = (base | 0xFF) + 1;
        if units.len() < end {
            units.resize(end, 0);
            used.resize(end, false);
        }
        let offset = (pos ^ base) as u32;
        assert!(offset < 1 << 21, "the trie is too large for its offsets");
        units[pos] |= offset << 10 | if value[node].is_some() { 1 << 8 } else { 0 };
        for &l in &labels {
            let p = base ^ l as usize;
            used[p] = true;
            if l == 0 {
                units[p] = LEAF | value[node].unwrap_or(0);
            } else {
                units[p] = l as u32;
                queue.push_back((children[node][&l], p));
            }
        }
    }
    units
}

/// Standard base64 with padding (the charsmap's form in `tokenizer.json`).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | (b as u32) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_of_known_strings() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64(&[0xff, 0xfe]), "//4=");
    }

    #[test]
    fn the_charsmap_normalizes_as_its_table_under_hugging_faces_reader() {
        // Control characters dropped, full-width forms to ASCII, a ligature to two letters,
        // characters of every UTF-8 length.
        let mut table: Vec<(char, Vec<char>)> = vec![
            ('\u{1}', vec![]),
            ('\t', vec![' ']),
            ('\u{fb01}', vec!['f', 'i']),
            ('\u{3000}', vec![' ']),
            ('\u{1d400}', vec!['A']),
        ];
        table.extend(('\u{ff01}'..='\u{ff5e}').map(|c| {
            (
                c,
                vec![char::from_u32(c as u32 - 0xff01 + 0x21).expect("ascii")],
            )
        }));
        table.sort_by_key(|(c, _)| *c);
        let json = json!({"type": "Precompiled", "precompiled_charsmap": base64(&precompiled_charsmap(&table))});
        let n: tokenizers::normalizers::NormalizerWrapper =
            serde_json::from_value(json).expect("Hugging Face reads the charsmap");
        use tokenizers::Normalizer;
        let normalize = |s: &str| {
            let mut ns = tokenizers::NormalizedString::from(s);
            n.normalize(&mut ns).expect("normalize");
            ns.get().to_string()
        };
        assert_eq!(
            normalize("Ａ\u{1}ｂ\tc\u{3000}\u{fb01}x𝐀 年假"),
            "Ab c fixA 年假"
        );
        for (from, to) in &table {
            let want: String = to.iter().collect();
            assert_eq!(normalize(&from.to_string()), want, "{from:?}");
        }
        // Characters outside the table pass through.
        assert_eq!(normalize("plain 中文 é"), "plain 中文 é");
    }
}
