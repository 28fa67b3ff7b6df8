//! Database URLs.

/// `url` with its database name replaced by `name`, keeping the user, password, host, port and
/// query parameters: for making (and dropping) a database of one's own on a given server.
///
/// ```
/// use ragtrail::internals::with_database;
///
/// assert_eq!(
///     with_database("postgres://u:p@h:5432/postgres?sslmode=disable", "bench"),
///     "postgres://u:p@h:5432/bench?sslmode=disable"
/// );
/// assert_eq!(with_database("postgres://h", "z"), "postgres://h/z");
/// ```
pub fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.find('?') {
        Some(q) => (&url[..q], &url[q..]),
        None => (url, ""),
    };
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let path_start = base[scheme_end..]
        .find('/')
        .map_or(base.len(), |i| scheme_end + i);
    format!("{}/{name}{query}", &base[..path_start])
}
