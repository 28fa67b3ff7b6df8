//! YAML front matter between `---` fences at the top of a file.

use serde::Deserialize;

use super::{DocStatus, KnowledgeError};

/// The keys a document may declare, matched exactly. Other keys are ignored (authors add their
/// own: `keywords`, `permalink` …), except one that looks like an access key (`Roles`, `role`,
/// `Tenant`, `tenants` …): ignoring that would make a restricted document public or put it in
/// the default tenant, so it is an error.
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
    // A blank name grants nothing, and dropping it would make the document public: say so.
    if roles.iter().any(String::is_empty) {
        return Err(serde::de::Error::custom(
            "roles contains an empty or blank name; write `roles: []` (or leave roles out) for \
             a document everyone in the tenant may read",
        ));
    }
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

/// A sidecar's front matter (`policy.pdf.yaml` beside `policy.pdf`): the same keys, read and
/// checked as a Markdown file's front matter is; the `---` fences are optional.
pub(super) fn parse_sidecar(file: &str, text: &str) -> Result<FrontMatter, KnowledgeError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.lines().next().map(str::trim_end) == Some("---") {
        return split_front_matter(file, text).map(|(fm, _, _)| fm);
    }
    parse_yaml(file, text)
}

/// Front matter given as name/value pairs (an HTML page's `<meta name=… content=…>`), checked as
/// YAML front matter is: a miscased or misspelt access key is an error, never ignored. `roles`
/// is a comma-separated list; names that are neither known keys nor look like access keys
/// (`viewport`, `generator`) are not front matter and are left out.
pub(super) fn front_matter_from_pairs(
    file: &str,
    pairs: &[(String, String)],
) -> Result<FrontMatter, KnowledgeError> {
    let mut map = serde_norway::Mapping::new();
    for (key, value) in pairs {
        if !(KNOWN_KEYS.contains(&key.as_str()) || resembles_access_key(key)) || key == "title" {
            continue;
        }
        let value = if key == "roles" {
            serde_norway::Value::Sequence(
                value
                    .split(',')
                    .map(|r| serde_norway::Value::String(r.trim().to_string()))
                    .filter(|r| r.as_str().is_some_and(|r| !r.is_empty()))
                    .collect(),
            )
        } else {
            serde_norway::Value::String(value.trim().to_string())
        };
        map.insert(serde_norway::Value::String(key.clone()), value);
    }
    if map.is_empty() {
        return Ok(FrontMatter::default());
    }
    let yaml = serde_norway::to_string(&map).map_err(|e| KnowledgeError::FrontMatter {
        file: file.to_string(),
        line: 1,
        message: e.to_string(),
    })?;
    parse_yaml(file, &yaml)
}

/// The keys [`FrontMatter`] reads.
const KNOWN_KEYS: [&str; 6] = ["title", "tenant", "roles", "version", "updated", "status"];

/// Whether an unknown key is probably a miscased, singular/plural, separated (`tenant_id`) or
/// misspelt (`tennant`) access key.
fn resembles_access_key(key: &str) -> bool {
    let folded: String = key
        .chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect();
    // Misspellings only for `tenant`: words one letter from `roles` (`rules`, `notes` is two)
    // are ordinary author keys.
    [
        "tenant",
        "tenants",
        "tenantid",
        "role",
        "roles",
        "rolenames",
    ]
    .contains(&folded.as_str())
        || edit_distance(&folded, "tenant") <= 1
}

/// Levenshtein distance (short keys only).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

fn parse_yaml(file: &str, yaml: &str) -> Result<FrontMatter, KnowledgeError> {
    if yaml.trim().is_empty() {
        return Ok(FrontMatter::default());
    }
    let error = |line: usize, message: String| KnowledgeError::FrontMatter {
        file: file.to_string(),
        line,
        message,
    };
    let fm = serde_norway::from_str::<FrontMatter>(yaml).map_err(|e| {
        // +1: the YAML starts on the line after the opening fence.
        error(
            e.location().map(|l| l.line() + 1).unwrap_or(2),
            e.to_string(),
        )
    })?;
    if let Ok(serde_norway::Value::Mapping(map)) = serde_norway::from_str(yaml) {
        for key in map.keys().filter_map(serde_norway::Value::as_str) {
            if !KNOWN_KEYS.contains(&key) && resembles_access_key(key) {
                let line = yaml
                    .lines()
                    .position(|l| {
                        l.starts_with(key) && l[key.len()..].trim_start().starts_with(':')
                    })
                    .map_or(2, |i| i + 2);
                return Err(error(
                    line,
                    format!(
                        "unknown key `{key}`: access keys are matched exactly (`tenant`, \
                         `roles`, lowercase), and ignoring this one would widen who may read \
                         the document"
                    ),
                ));
            }
        }
    }
    if fm.tenant.as_deref().is_some_and(|t| t.trim().is_empty()) {
        let line = yaml
            .lines()
            .position(|l| l.starts_with("tenant"))
            .map_or(2, |i| i + 2);
        return Err(error(
            line,
            "`tenant` is blank; name the tenant or leave the key out".to_string(),
        ));
    }
    Ok(fm)
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
    fn a_key_resembling_an_access_key_is_an_error_naming_file_and_key() {
        for key in [
            "Roles",
            "role",
            "ROLES",
            "Role",
            "tenant_id",
            "Tenant",
            "tenants",
            "TENANT",
            "tennant",
            "Tenants",
        ] {
            let text = format!("---\ntitle: x\n{key}: [hr]\n---\nbody\n");
            match split_front_matter("hr/x.md", &text) {
                Err(e @ KnowledgeError::FrontMatter { line: 3, .. }) => {
                    let shown = e.to_string();
                    assert!(
                        shown.contains("hr/x.md") && shown.contains(&format!("`{key}`")),
                        "{shown}"
                    );
                }
                other => panic!("{key}: expected an error on line 3, got {other:?}"),
            }
        }
        // Authors' own keys stay ignored.
        let text = "---\ntitle: x\nkeywords: [a]\ncSpell: x\nrules: [a]\nredirect_from: [/a]\nquestions: [q]\n---\nbody\n";
        assert!(split_front_matter("x.md", text).is_ok());
    }

    #[test]
    fn blank_roles_and_a_blank_tenant_are_errors() {
        for roles in ["[\"\", \" \"]", "[hr, \"\"]", "\" \""] {
            let text = format!("---\nroles: {roles}\n---\nbody\n");
            assert!(
                matches!(
                    split_front_matter("x.md", &text),
                    Err(KnowledgeError::FrontMatter { line: 2, .. })
                ),
                "{roles}"
            );
        }
        assert!(split_front_matter("x.md", "---\nroles: []\n---\nbody\n").is_ok());
        assert!(split_front_matter("x.md", "---\nroles:\n---\nbody\n").is_ok());
        assert!(matches!(
            split_front_matter("x.md", "---\ntitle: t\ntenant: \" \"\n---\nbody\n"),
            Err(KnowledgeError::FrontMatter { line: 3, .. })
        ));
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
