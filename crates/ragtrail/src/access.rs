//! The operator's access context. It comes from flags, environment or configuration, never from
//! the model's tool arguments; both search legs filter by it before ranking.

use serde::{Deserialize, Serialize};

pub mod private;

/// Tenant documents belong to when their front matter names none.
pub const DEFAULT_TENANT: &str = "default";

/// Who is asking: one tenant and the roles the operator granted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessContext {
    pub tenant: String,
    #[serde(default)]
    pub roles: Vec<String>,
}

impl Default for AccessContext {
    fn default() -> Self {
        Self {
            tenant: DEFAULT_TENANT.to_string(),
            roles: Vec::new(),
        }
    }
}

impl AccessContext {
    pub fn new(
        tenant: impl Into<String>,
        roles: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        let mut roles: Vec<String> = roles.into_iter().map(Into::into).collect();
        roles.sort();
        roles.dedup();
        Self {
            tenant: tenant.into(),
            roles,
        }
    }

    /// Whether a document of `tenant` restricted to `doc_roles` (empty: everyone in the tenant)
    /// may be shown to this context.
    pub fn allows(&self, tenant: &str, doc_roles: &[String]) -> bool {
        tenant == self.tenant
            && (doc_roles.is_empty() || doc_roles.iter().any(|r| self.roles.contains(r)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_and_roles_both_gate() {
        let staff = AccessContext::new("default", Vec::<String>::new());
        let hr = AccessContext::new("default", ["hr"]);
        let other = AccessContext::new("globex", ["hr"]);
        let hr_only = vec!["hr".to_string()];
        assert!(staff.allows("default", &[]));
        assert!(!staff.allows("default", &hr_only));
        assert!(hr.allows("default", &hr_only));
        assert!(!other.allows("default", &[]));
        assert!(!other.allows("default", &hr_only));
    }
}
