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
///
/// Blank lines before the opening `---` are skipped. Anything else that looks like access
/// metadata but would not be applied stops the ingest instead of making the document public:
/// TOML front matter (`+++`), and a body that opens with a bare `tenant:` or `roles:` line.
pub fn split_front_matter<'a>(
    file: &str,
    text: &'a str,
) -> Result<(FrontMatter, &'a str, usize), KnowledgeError> {
    let text_no_bom = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text_no_bom.split_inclusive('\n');
    let mut offset = 0;
    let mut line_no = 0;
    let first = loop {
        let Some(line) = lines.next() else {
            return Ok((FrontMatter::default(), text_no_bom, 1));
        };
        line_no += 1;
        if !line.trim().is_empty() {
            break line;
        }
        offset += line.len();
    };
    let opening_line = line_no;
    match first.trim_end() {
        "---" => {}
        "+++" => {
            return Err(error_at(
                file,
                opening_line,
                "TOML front matter (`+++`) is not read: write it as YAML between `---` lines"
                    .to_string(),
            ));
        }
        _ => {
            check_body_start(file, text_no_bom, 1)?;
            return Ok((FrontMatter::default(), text_no_bom, 1));
        }
    }
    offset += first.len();
    let yaml_start = offset;
    for line in lines {
        line_no += 1;
        let trimmed = line.trim_end();
        if trimmed == "---" || trimmed == "..." {
            let yaml = &text_no_bom[yaml_start..offset];
            let body = &text_no_bom[offset + line.len()..];
            let fm = parse_yaml_at(file, yaml, opening_line)?;
            check_body_start(file, body, line_no + 1)?;
            return Ok((fm, body, line_no + 1));
        }
        offset += line.len();
    }
    Err(error_at(
        file,
        opening_line,
        "the opening `---` has no closing `---` line".to_string(),
    ))
}

fn error_at(file: &str, line: usize, message: String) -> KnowledgeError {
    KnowledgeError::FrontMatter {
        file: file.to_string(),
        line,
        message,
    }
}

/// A body whose first line is `tenant: …` or `roles: …` is front matter written without its
/// fences (or after them): indexing it as text would leave the document public.
fn check_body_start(file: &str, body: &str, first_line: usize) -> Result<(), KnowledgeError> {
    let Some((i, line)) = body.lines().enumerate().find(|(_, l)| !l.trim().is_empty()) else {
        return Ok(());
    };
    let Some((key, _)) = line.trim_start_matches('\u{feff}').split_once(':') else {
        return Ok(());
    };
    if matches!(key, "tenant" | "roles") {
        return Err(error_at(
            file,
            first_line + i,
            format!(
                "`{key}:` outside front matter: it would be indexed as text and not applied; \
                 put the keys between `---` lines at the top of the file"
            ),
        ));
    }
    Ok(())
}

/// A sidecar's front matter (`policy.pdf.yaml` beside `policy.pdf`): the same keys, read and
/// checked as a Markdown file's front matter is; the `---` fences are optional.
pub(super) fn parse_sidecar(file: &str, text: &str) -> Result<FrontMatter, KnowledgeError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let first = text.lines().map(str::trim_end).find(|l| !l.is_empty());
    if matches!(first, Some("---" | "+++")) {
        return split_front_matter(file, text).map(|(fm, _, _)| fm);
    }
    parse_yaml_at(file, text, 0)
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
    parse_yaml_at(file, &yaml, 0)
}

/// Whether a metadata name is, or looks like, one that decides who may read a document.
pub(super) fn is_access_like(key: &str) -> bool {
    KNOWN_ACCESS_KEYS.contains(&key) || resembles_access_key(key)
}

/// A page's own front matter from two places (a `---` block above the markup and its
/// `<meta>` tags): each key from whichever gives it. Access (tenant and roles together) given
/// in both places must agree, or the page is refused: neither may silently win.
pub(super) fn merge_declared(
    file: &str,
    block: FrontMatter,
    tags: FrontMatter,
) -> Result<FrontMatter, KnowledgeError> {
    let declares = |fm: &FrontMatter| fm.tenant.is_some() || !fm.roles.is_empty();
    let (tenant, roles) = match (declares(&block), declares(&tags)) {
        (true, true) if (&block.tenant, &block.roles) != (&tags.tenant, &tags.roles) => {
            return Err(error_at(
                file,
                1,
                "the `---` block and the `<meta>` tags give different access (tenant, roles): \
                 keep one"
                    .to_string(),
            ));
        }
        (false, true) => (tags.tenant, tags.roles),
        _ => (block.tenant, block.roles),
    };
    Ok(FrontMatter {
        title: block.title.or(tags.title),
        tenant,
        roles,
        version: block.version.or(tags.version),
        updated: block.updated.or(tags.updated),
        status: block.status.or(tags.status),
    })
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

/// Parses front matter whose first line is line `fence_line + 1` of `file` (the line after
/// the opening `---`, or line 1 of a sidecar without fences), for messages.
fn parse_yaml_at(file: &str, yaml: &str, fence_line: usize) -> Result<FrontMatter, KnowledgeError> {
    if yaml.trim().is_empty() {
        return Ok(FrontMatter::default());
    }
    let error = |line: usize, message: String| error_at(file, line, message);
    // The line of the first `key:` at the top level (or anywhere in a line, for nested keys).
    let line_of = |key: &str, nested: bool| {
        yaml.lines()
            .position(|l| {
                if nested {
                    l.contains(&format!("{key}:"))
                } else {
                    l.strip_prefix(key)
                        .is_some_and(|rest| rest.trim_start().starts_with(':'))
                }
            })
            .map_or(fence_line + 1, |i| fence_line + i + 1)
    };
    let fm = serde_norway::from_str::<FrontMatter>(yaml).map_err(|e| {
        error(
            e.location()
                .map_or(fence_line + 1, |l| fence_line + l.line()),
            e.to_string(),
        )
    })?;
    if let Ok(serde_norway::Value::Mapping(map)) = serde_norway::from_str(yaml) {
        for (key, value) in &map {
            let Some(key) = key.as_str() else {
                continue;
            };
            if key == "<<" {
                return Err(error(
                    line_of(key, false),
                    "a YAML merge key (`<<`) is not applied in front matter: write `tenant` \
                     and `roles` out"
                        .to_string(),
                ));
            }
            if key == "tenant" && value.is_null() {
                return Err(error(
                    line_of(key, false),
                    "`tenant` is empty; name the tenant or leave the key out".to_string(),
                ));
            }
            if KNOWN_KEYS.contains(&key) {
                continue;
            }
            if resembles_access_key(key) {
                return Err(error(
                    line_of(key, false),
                    format!(
                        "unknown key `{key}`: access keys are matched exactly (`tenant`, \
                         `roles`, lowercase), and ignoring this one would widen who may read \
                         the document"
                    ),
                ));
            }
            if let Some(inner) = nested_access_key(value) {
                return Err(error(
                    line_of(&inner, true),
                    format!(
                        "`{key}` holds `{inner}`: access is read only from `tenant` and `roles` \
                         at the top level of front matter (merge keys are not applied), and \
                         ignoring this one would widen who may read the document"
                    ),
                ));
            }
        }
    }
    if fm.tenant.as_deref().is_some_and(|t| t.trim().is_empty()) {
        return Err(error(
            line_of("tenant", false),
            "`tenant` is blank; name the tenant or leave the key out".to_string(),
        ));
    }
    Ok(fm)
}

/// The first key inside `value` (maps and lists, any depth) that is or resembles an access key,
/// or is a merge key.
fn nested_access_key(value: &serde_norway::Value) -> Option<String> {
    match value {
        serde_norway::Value::Mapping(map) => map.iter().find_map(|(k, v)| match k.as_str() {
            Some(k) if k == "<<" || KNOWN_ACCESS_KEYS.contains(&k) || resembles_access_key(k) => {
                Some(k.to_string())
            }
            _ => nested_access_key(v),
        }),
        serde_norway::Value::Sequence(items) => items.iter().find_map(nested_access_key),
        serde_norway::Value::Tagged(tagged) => nested_access_key(&tagged.value),
        _ => None,
    }
}

/// The keys that decide who may read a document.
const KNOWN_ACCESS_KEYS: [&str; 2] = ["tenant", "roles"];

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
    fn blank_lines_before_the_fence_still_open_front_matter() {
        let text = "\n  \n---\ntenant: globex\nroles: [hr]\n---\nbody\n";
        let (fm, body, line) = split_front_matter("x.md", text).expect("valid");
        assert_eq!(
            (fm.tenant.as_deref(), fm.roles, body, line),
            (Some("globex"), vec!["hr".to_string()], "body\n", 7)
        );
        // Line numbers count the blank lines.
        match split_front_matter("x.md", "\n\n---\nTenant: globex\n---\nbody\n") {
            Err(KnowledgeError::FrontMatter { line: 4, .. }) => {}
            other => panic!("expected an error on line 4, got {other:?}"),
        }
    }

    /// Each way of writing access that would not be applied: the error names the file, the
    /// line and what to write instead.
    #[test]
    fn access_that_would_not_be_applied_is_an_error() {
        for (text, line, says) in [
            (
                "+++\ntenant = \"globex\"\nroles = [\"hr\"]\n+++\nbody\n",
                1,
                "TOML",
            ),
            ("\n+++\ntenant = \"globex\"\n+++\nbody\n", 2, "TOML"),
            (
                "---\ntitle: x\n<<: {tenant: globex, roles: [hr]}\n---\nbody\n",
                3,
                "merge key",
            ),
            (
                "---\nbase: &b {tenant: globex}\n<<: *b\n---\nbody\n",
                2,
                "`base` holds `tenant`",
            ),
            (
                "---\ntitle: x\nmeta:\n  tenant: globex\n  roles: [hr]\n---\nbody\n",
                4,
                "`meta` holds `tenant`",
            ),
            (
                "---\naccess:\n  - {Roles: [hr]}\n---\nbody\n",
                3,
                "`access` holds `Roles`",
            ),
            (
                "---\ntitle: x\ntenant:\n---\nbody\n",
                3,
                "`tenant` is empty",
            ),
            ("---\ntenant: ~\n---\nbody\n", 2, "`tenant` is empty"),
            (
                "tenant: globex\nroles: [hr]\n\nbody\n",
                1,
                "outside front matter",
            ),
            (
                "---\ntitle: x\n---\n\nroles: [hr]\nbody\n",
                5,
                "outside front matter",
            ),
        ] {
            match split_front_matter("hr/x.md", text) {
                Err(e @ KnowledgeError::FrontMatter { line: l, .. }) if l == line => {
                    let shown = e.to_string();
                    assert!(
                        shown.starts_with(&format!("hr/x.md:{line}:")) && shown.contains(says),
                        "{text:?}: {shown}"
                    );
                }
                other => panic!("{text:?}: expected an error on line {line}, got {other:?}"),
            }
        }
        // Nested author keys without access keys, and anchors, stay fine.
        let text = "---\ntitle: x\nseo: {keywords: [a], rules: b}\ntenant: &t acme\n---\nbody\n";
        let (fm, _, _) = split_front_matter("x.md", text).expect("valid");
        assert_eq!(fm.tenant.as_deref(), Some("acme"));
    }

    #[test]
    fn unclosed_front_matter_is_an_error() {
        assert!(matches!(
            split_front_matter("x.md", "---\ntitle: x\n"),
            Err(KnowledgeError::FrontMatter { line: 1, .. })
        ));
    }
}
