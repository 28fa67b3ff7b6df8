//! A reader of safetensors files, the weights of a sentence-transformers folder.
//!
//! The format: a little-endian `u64` giving the header's length, the header (a JSON object that
//! names each tensor's `dtype`, `shape` and `data_offsets`, byte offsets into the data that
//! follows it, plus an optional `__metadata__` entry), then the data. Only what the encoder
//! needs is here: a tensor's shape, and its values as `f32` from any float type (F64, F32, F16,
//! BF16). A tensor of another type (a BERT checkpoint's `position_ids`, I64) may be present; it
//! is an error only when read. Written for ragtrail rather than taken from candle, whose tensor
//! library was the slowest crate of a release build and served only this.

use std::collections::HashMap;

use serde::Deserialize;

/// The tensors of one safetensors file, borrowed from its bytes.
pub(super) struct SafeTensors<'a> {
    data: &'a [u8],
    tensors: HashMap<String, Entry>,
}

#[derive(Deserialize)]
struct Entry {
    dtype: String,
    shape: Vec<usize>,
    data_offsets: [usize; 2],
}

impl<'a> SafeTensors<'a> {
    /// Reads the header and checks every tensor's byte range against the file.
    pub(super) fn parse(bytes: &'a [u8]) -> Result<Self, String> {
        let (len, rest) = bytes
            .split_first_chunk::<8>()
            .ok_or("the file is shorter than a safetensors header")?;
        let len = usize::try_from(u64::from_le_bytes(*len))
            .ok()
            .filter(|&len| len <= rest.len())
            .ok_or("the header's length runs past the end of the file")?;
        let (header, data) = rest.split_at(len);
        let mut raw: HashMap<String, serde_json::Value> = serde_json::from_slice(header)
            .map_err(|e| format!("the header is not a JSON object: {e}"))?;
        raw.remove("__metadata__");
        let mut tensors = HashMap::with_capacity(raw.len());
        for (name, value) in raw {
            let entry: Entry = serde_json::from_value(value)
                .map_err(|e| format!("tensor {name}: the header's entry is malformed: {e}"))?;
            let [start, end] = entry.data_offsets;
            if start > end || end > data.len() {
                return Err(format!(
                    "tensor {name}: bytes {start}..{end} lie outside the data ({} bytes)",
                    data.len()
                ));
            }
            // A float tensor's bytes must hold exactly its shape (other types are never read).
            let expected = width(&entry.dtype)
                .map(|w| entry.shape.iter().try_fold(w, |n, &d| n.checked_mul(d)));
            if expected.is_some_and(|bytes| bytes != Some(end - start)) {
                return Err(format!(
                    "tensor {name}: {} bytes do not hold a {} tensor of shape {:?}",
                    end - start,
                    entry.dtype,
                    entry.shape
                ));
            }
            tensors.insert(name, entry);
        }
        Ok(Self { data, tensors })
    }

    pub(super) fn contains(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    /// The tensor's dimensions, if the file has it.
    pub(super) fn shape(&self, name: &str) -> Option<&[usize]> {
        self.tensors.get(name).map(|e| e.shape.as_slice())
    }

    /// The tensor's values in row-major order, converted to `f32`.
    pub(super) fn to_f32(&self, name: &str) -> Result<Vec<f32>, String> {
        let entry = self
            .tensors
            .get(name)
            .ok_or_else(|| format!("no tensor {name}"))?;
        let bytes = &self.data[entry.data_offsets[0]..entry.data_offsets[1]];
        let values = match entry.dtype.as_str() {
            "F32" => bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            "F16" => bytes
                .chunks_exact(2)
                .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            "BF16" => bytes
                .chunks_exact(2)
                .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            "F64" => bytes
                .chunks_exact(8)
                .map(|b| {
                    let b: [u8; 8] = b.try_into().unwrap_or_default();
                    f64::from_le_bytes(b) as f32
                })
                .collect(),
            other => {
                return Err(format!(
                    "tensor {name} is {other}, not a float type (F64, F32, F16 or BF16)"
                ));
            }
        };
        Ok(values)
    }
}

/// Bytes per value of the float types read here.
fn width(dtype: &str) -> Option<usize> {
    match dtype {
        "F64" => Some(8),
        "F32" => Some(4),
        "F16" | "BF16" => Some(2),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A file of the given tensors (name, dtype, shape, raw bytes), written after the format.
    fn file(tensors: &[(&str, &str, Vec<usize>, Vec<u8>)]) -> Vec<u8> {
        let mut header = serde_json::Map::new();
        let mut data = Vec::new();
        for (name, dtype, shape, bytes) in tensors {
            header.insert(
                name.to_string(),
                json!({"dtype": dtype, "shape": shape, "data_offsets": [data.len(), data.len() + bytes.len()]}),
            );
            data.extend_from_slice(bytes);
        }
        header.insert("__metadata__".into(), json!({"format": "pt"}));
        let text = serde_json::Value::Object(header).to_string().into_bytes();
        let mut out = (text.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(&text);
        out.extend_from_slice(&data);
        out
    }

    fn le<const N: usize, T: Copy>(values: &[T], to: impl Fn(T) -> [u8; N]) -> Vec<u8> {
        values.iter().flat_map(|&v| to(v)).collect()
    }

    #[test]
    fn every_float_type_reads_as_f32() {
        let want = [1.5f32, -2.0, 0.25, 3.0, 0.0, -0.5];
        let bytes = file(&[
            ("a", "F32", vec![2, 3], le(&want, f32::to_le_bytes)),
            (
                "b",
                "F64",
                vec![6],
                le(&want.map(f64::from), f64::to_le_bytes),
            ),
            (
                "c",
                "F16",
                vec![3, 2],
                le(&want.map(half::f16::from_f32), half::f16::to_le_bytes),
            ),
            (
                "d",
                "BF16",
                vec![6],
                le(&want.map(half::bf16::from_f32), half::bf16::to_le_bytes),
            ),
            ("ids", "I64", vec![2], le(&[0i64, 1], i64::to_le_bytes)),
        ]);
        let st = SafeTensors::parse(&bytes).expect("parse");
        for name in ["a", "b", "c", "d"] {
            assert_eq!(st.to_f32(name).expect(name), want, "{name}");
        }
        assert_eq!(st.shape("a"), Some(&[2, 3][..]));
        assert_eq!(st.shape("c"), Some(&[3, 2][..]));
        assert!(st.contains("ids") && !st.contains("__metadata__") && !st.contains("e"));
        let err = st.to_f32("ids").expect_err("an integer tensor");
        assert!(err.contains("ids is I64"), "{err}");
        assert_eq!(st.to_f32("e").expect_err("absent"), "no tensor e");
    }

    #[test]
    fn reads_the_files_e5_folder_writes() {
        let shapes = vec![("x".to_string(), vec![2, 2]), ("y".to_string(), vec![3])];
        let mut bytes = super::super::e5_folder::safetensors_header(&shapes);
        for v in [1.0f32, 2.0, 3.0, 4.0, -1.0, -2.0, -3.0] {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        let st = SafeTensors::parse(&bytes).expect("parse");
        assert_eq!(st.to_f32("x").expect("x"), [1.0, 2.0, 3.0, 4.0]);
        assert_eq!(st.to_f32("y").expect("y"), [-1.0, -2.0, -3.0]);
    }

    #[test]
    fn a_damaged_file_is_an_error_not_a_panic() {
        let good = file(&[("a", "F32", vec![2], le(&[1.0f32, 2.0], f32::to_le_bytes))]);
        // Cut anywhere: too short for the header, or for a tensor's bytes.
        for cut in [0, 4, 8, 20, good.len() - 1] {
            assert!(SafeTensors::parse(&good[..cut]).is_err(), "cut at {cut}");
        }
        // A header length past the end, one that is not JSON, and a shape the bytes do not hold.
        let mut long = good.clone();
        long[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(SafeTensors::parse(&long).is_err());
        let mut not_json = 3u64.to_le_bytes().to_vec();
        not_json.extend_from_slice(b"abc");
        assert!(SafeTensors::parse(&not_json).is_err());
        let wrong = file(&[("a", "F32", vec![3], le(&[1.0f32, 2.0], f32::to_le_bytes))]);
        let err = SafeTensors::parse(&wrong)
            .err()
            .expect("a shape the bytes do not hold");
        assert!(
            err.contains("8 bytes do not hold a F32 tensor of shape [3]"),
            "{err}"
        );
    }
}
