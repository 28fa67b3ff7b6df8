//! YAML front matter between `---` fences at the top of a file.

use serde::Deserialize;

use super::{DocStatus, KnowledgeError};

/// The keys a document may declare. Unknown keys are ignored (authors add their own).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct FrontMatter {
    pub title: Option<String>,
    pub tenant: Option<String>,
    #[serde(default, deserialize_with = "roles_list")]
    pub roles: Vec<String>,
    #[serde(default, deserialize_with = "scalar_string")]
    pub version: Option<String>,
    #[serde(default, deserialize_with = "scalar_string")]
    pub updated: Option<String>,
    pub status: Option<DocStatus>,
}

/// `version: 2026-03` and `version: "2026-03"`, `updated: 2026-03-15` all become strings.
fn scalar_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let value = Option::<serde_norway::Value>::deserialize(d)?;
    Ok(match value {
        None | Some(serde_norway::Value::Null) => None,
        Some(serde_norway::Value::String(s)) => Some(s),
        Some(serde_norway::Value::Number(n)) => Some(n.to_string()),
        Some(serde_norway::Value::Bool(b)) => Some(b.to_string()),
        Some(_) => {
            return Err(serde::de::Error::custom(
                "expected a plain value, not a list or map",
            ));
        }
    })
}

/// `roles: hr`, `roles: [hr, finance]` and `roles:` (empty) are all accepted.
fn roles_list<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let value = Option::<serde_norway::Value>::deserialize(d)?;
    let mut roles = match value {
        None | Some(serde_norway::Value::Null) => Vec::new(),
        Some(serde_norway::Value::String(s)) => vec![s],
        Some(serde_norway::Value::Sequence(items)) => items
            .into_iter()
            .map(|v| match v {
                serde_norway::Value::String(s) => Ok(s),
                _ => Err(serde::de::Error::custom("roles must be a list of names")),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(serde::de::Error::custom("roles must be a list of names")),
    };
    roles.iter_mut().for_each(|r| *r = r.trim().to_string());
    roles.retain(|r| !r.is_empty());
    roles.sort();
    roles.dedup();
    Ok(roles)
}

/// Splits `text` into its front matter and body. Returns the parsed front matter (default when
/// there is none), the body, and the 1-based line number where the body starts.
pub fn split_front_matter<'a>(
    file: &str,
    text: &'a str,
) -> Result<(FrontMatter, &'a str, usize), KnowledgeError> {
    let text_no_bom = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text_no_bom.split_inclusive('\n');
    let Some(first) = lines.next() else {
        return Ok((FrontMatter::default(), text_no_bom, 1));
    };
    if first.trim_end() != "---" {
        return Ok((FrontMatter::default(), text_no_bom, 1));
    }
    let mut offset = first.len();
    let yaml_start = offset;
    let mut line_no = 1;
    for line in lines {
        line_no += 1;
        let trimmed = line.trim_end();
        if trimmed == "---" || trimmed == "..." {
            let yaml = &text_no_bom[yaml_start..offset];
            let body = &text_no_bom[offset + line.len()..];
            let fm = parse_yaml(file, yaml)?;
            return Ok((fm, body, line_no + 1));
        }
        offset += line.len();
    }
    Err(KnowledgeError::FrontMatter {
        file: file.to_string(),
        line: 1,
        message: "the opening `---` has no closing `---` line".to_string(),
    })
}

fn parse_yaml(file: &str, yaml: &str) -> Result<FrontMatter, KnowledgeError> {
    if yaml.trim().is_empty() {
        return Ok(FrontMatter::default());
    }
    serde_norway::from_str::<FrontMatter>(yaml).map_err(|e| KnowledgeError::FrontMatter {
        file: file.to_string(),
        // +1: the YAML starts on the line after the opening fence.
        line: e.location().map(|l| l.line() + 1).unwrap_or(2),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_all_keys() {
        let text = "---\ntitle: 差旅费用报销制度\ntenant: default\nroles: [hr]\nversion: 2026-03\nupdated: 2026-03-15\nstatus: superseded\n---\n## 总则\n正文\n";
        let (fm, body, line) = split_front_matter("a.md", text).expect("valid");
        assert_eq!(fm.title.as_deref(), Some("差旅费用报销制度"));
        assert_eq!(fm.roles, vec!["hr"]);
        assert_eq!(fm.version.as_deref(), Some("2026-03"));
        assert_eq!(fm.updated.as_deref(), Some("2026-03-15"));
        assert_eq!(fm.status, Some(DocStatus::Superseded));
        assert!(body.starts_with("## 总则"));
        assert_eq!(line, 9);
    }

    #[test]
    fn no_front_matter_is_fine() {
        let (fm, body, line) = split_front_matter("a.md", "## x\n").expect("valid");
        assert_eq!(fm, FrontMatter::default());
        assert_eq!(body, "## x\n");
        assert_eq!(line, 1);
    }

    #[test]
    fn malformed_front_matter_names_the_line() {
        let text = "---\ntitle: ok\nroles: [hr\nstatus: active\n---\nbody\n";
        match split_front_matter("hr/x.md", text) {
            Err(KnowledgeError::FrontMatter { file, line, .. }) => {
                assert_eq!(file, "hr/x.md");
                assert!((3..=5).contains(&line), "line {line}");
            }
            other => panic!("expected a front matter error, got {other:?}"),
        }
    }

    #[test]
    fn unknown_status_is_an_error() {
        let text = "---\nstatus: archived-ish\n---\nbody\n";
        assert!(matches!(
            split_front_matter("x.md", text),
            Err(KnowledgeError::FrontMatter { line: 2, .. })
        ));
    }

    #[test]
    fn unclosed_front_matter_is_an_error() {
        assert!(matches!(
            split_front_matter("x.md", "---\ntitle: x\n"),
            Err(KnowledgeError::FrontMatter { line: 1, .. })
        ));
    }
}
