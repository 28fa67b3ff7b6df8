//! The OTLP trace request in protobuf, encoded by hand: the few messages of
//! `opentelemetry/proto/collector/trace/v1` a span export needs (request, resource spans,
//! scope spans, span, status, key-value, any-value). Written here rather than generated,
//! because OTLP/HTTP receivers such as Phoenix take only `application/x-protobuf` and the
//! protobuf and OpenTelemetry crates would add a code generator and an async stack for a few
//! hundred bytes per run.
//!
//! Wire format: every field is a tag (field number << 3 | wire type) followed by a varint
//! (type 0), eight little-endian bytes (type 1), or a length and the bytes (type 2).

use std::time::{SystemTime, UNIX_EPOCH};

use super::spans::{AttrValue, Span, SpanKind, SpanStatus};

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;

/// Appends protobuf fields to a buffer.
#[derive(Default)]
struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    fn tag(&mut self, field: u32, wire: u8) {
        self.varint(u64::from(field) << 3 | u64::from(wire));
    }

    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.tag(field, LEN);
        self.varint(b.len() as u64);
        self.buf.extend_from_slice(b);
    }

    fn string(&mut self, field: u32, s: &str) {
        self.bytes(field, s.as_bytes());
    }

    fn uint(&mut self, field: u32, v: u64) {
        self.tag(field, VARINT);
        self.varint(v);
    }

    fn fixed64(&mut self, field: u32, v: u64) {
        self.tag(field, FIXED64);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// A nested message, written by `f` into its own buffer first (its length comes first).
    fn message(&mut self, field: u32, f: impl FnOnce(&mut Writer)) {
        let mut inner = Writer::default();
        f(&mut inner);
        self.bytes(field, &inner.buf);
    }
}

/// Who sends the spans: the resource's attributes and the instrumentation scope.
pub struct Origin<'a> {
    pub resource: &'a [(String, AttrValue)],
    pub scope_name: &'a str,
    pub scope_version: &'a str,
}

/// An `ExportTraceServiceRequest` holding `spans`, all from one resource and scope.
pub fn export_request(origin: &Origin<'_>, spans: &[Span]) -> Vec<u8> {
    let mut w = Writer::default();
    // ExportTraceServiceRequest.resource_spans = 1
    w.message(1, |rs| {
        // ResourceSpans.resource = 1 { Resource.attributes = 1 }
        rs.message(1, |r| {
            for (k, v) in origin.resource {
                key_value(r, 1, k, v);
            }
        });
        // ResourceSpans.scope_spans = 2
        rs.message(2, |ss| {
            // ScopeSpans.scope = 1 { name = 1, version = 2 }
            ss.message(1, |scope| {
                scope.string(1, origin.scope_name);
                scope.string(2, origin.scope_version);
            });
            for span in spans {
                // ScopeSpans.spans = 2
                ss.message(2, |s| encode_span(s, span));
            }
        });
    });
    w.buf
}

fn encode_span(w: &mut Writer, span: &Span) {
    w.bytes(1, &span.trace_id);
    w.bytes(2, &span.span_id);
    if let Some(parent) = &span.parent_id {
        w.bytes(4, parent);
    }
    w.string(5, &span.name);
    w.uint(
        6,
        match span.kind {
            SpanKind::Internal => 1,
            SpanKind::Client => 3,
        },
    );
    w.fixed64(7, unix_nanos(span.start));
    w.fixed64(8, unix_nanos(span.end));
    for (k, v) in &span.attributes {
        key_value(w, 9, k, v);
    }
    if let SpanStatus::Error(message) = &span.status {
        // Span.status = 15 { message = 2, code = 3 (2: ERROR) }
        w.message(15, |st| {
            st.string(2, message);
            st.uint(3, 2);
        });
    }
}

/// A `KeyValue { key = 1, value = 2 }` as field `field` of the message being written.
fn key_value(w: &mut Writer, field: u32, key: &str, value: &AttrValue) {
    w.message(field, |kv| {
        kv.string(1, key);
        kv.message(2, |any| any_value(any, value));
    });
}

/// The fields of an `AnyValue`: string 1, bool 2, int 3, double 4, array 5 (`ArrayValue {
/// values = 1 }`).
fn any_value(w: &mut Writer, value: &AttrValue) {
    match value {
        AttrValue::Str(s) => w.string(1, s),
        AttrValue::Bool(b) => w.uint(2, u64::from(*b)),
        // int64 is a varint of the two's complement.
        AttrValue::Int(i) => w.uint(3, *i as u64),
        AttrValue::Double(d) => w.fixed64(4, d.to_bits()),
        AttrValue::StrArray(items) => w.message(5, |arr| {
            for item in items {
                arr.message(1, |any| any.string(1, item));
            }
        }),
    }
}

fn unix_nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_are_little_endian_groups_of_seven_bits() {
        let mut w = Writer::default();
        w.varint(1);
        w.varint(300);
        w.varint(u64::MAX);
        assert_eq!(
            w.buf,
            [
                0x01, 0xac, 0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01
            ]
        );
    }

    #[test]
    fn a_string_attribute_is_a_key_value_holding_an_any_value() {
        let mut w = Writer::default();
        key_value(&mut w, 1, "k", &AttrValue::Str("v".into()));
        // KeyValue (field 1, 8 bytes): key "k" (0a 01 6b), value AnyValue (12 03: 0a 01 76).
        assert_eq!(
            w.buf,
            [0x0a, 0x08, 0x0a, 0x01, b'k', 0x12, 0x03, 0x0a, 0x01, b'v']
        );
    }

    #[test]
    fn negative_ints_take_ten_bytes() {
        let mut w = Writer::default();
        any_value(&mut w, &AttrValue::Int(-1));
        assert_eq!(w.buf.len(), 1 + 10);
        assert_eq!(w.buf[0], 3 << 3);
    }
}
