//! Who a request comes from: a user name, a uid, groups and extra
//! attributes, as kube-apiserver's authenticators produce them.

use std::collections::BTreeMap;

/// The group whose members may do anything (kube-apiserver's
/// `system:masters`), bypassing authorization and escalation checks.
pub const MASTERS: &str = "system:masters";
/// Every authenticated user is in this group.
pub const AUTHENTICATED: &str = "system:authenticated";
/// Requests without credentials are in this group.
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
/// The user of requests without credentials.
pub const ANONYMOUS: &str = "system:anonymous";
/// The user the sandbox's own token (its kubeconfig) authenticates as.
pub const ADMIN: &str = "sandbox-admin";
/// Every ServiceAccount is in this group.
pub const SERVICE_ACCOUNTS: &str = "system:serviceaccounts";

const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// An authenticated (or anonymous) user.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// The sandbox administrator (the kubeconfig's token).
    pub fn admin() -> Self {
        Self {
            name: ADMIN.to_owned(),
            uid: String::new(),
            groups: vec![MASTERS.to_owned(), AUTHENTICATED.to_owned()],
            extra: BTreeMap::new(),
        }
    }

    /// A request without credentials, where anonymous requests are allowed.
    pub fn anonymous() -> Self {
        Self {
            name: ANONYMOUS.to_owned(),
            uid: String::new(),
            groups: vec![UNAUTHENTICATED.to_owned()],
            extra: BTreeMap::new(),
        }
    }

    /// A ServiceAccount, with the groups Kubernetes gives it.
    pub fn service_account(namespace: &str, name: &str, uid: &str) -> Self {
        Self {
            name: service_account_user(namespace, name),
            uid: uid.to_owned(),
            groups: vec![
                SERVICE_ACCOUNTS.to_owned(),
                format!("{SERVICE_ACCOUNTS}:{namespace}"),
                AUTHENTICATED.to_owned(),
            ],
            extra: BTreeMap::new(),
        }
    }

    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }

    /// The pod a ServiceAccount token is bound to, as `(namespace, name)`.
    pub fn bound_pod(&self) -> Option<(String, String)> {
        let (namespace, _) = split_service_account(&self.name)?;
        let pod = self
            .extra
            .get("authentication.kubernetes.io/pod-name")?
            .first()?;
        Some((namespace.to_owned(), pod.clone()))
    }

    /// Whether the user is in `system:masters`.
    pub fn is_master(&self) -> bool {
        self.in_group(MASTERS)
    }
}

/// `system:serviceaccount:{namespace}:{name}`.
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}")
}

/// The namespace and name of a ServiceAccount user name.
pub fn split_service_account(user: &str) -> Option<(&str, &str)> {
    let rest = user.strip_prefix(SERVICE_ACCOUNT_PREFIX)?;
    let (namespace, name) = rest.split_once(':')?;
    (!namespace.is_empty() && !name.is_empty() && !name.contains(':')).then_some((namespace, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_account_names_round_trip() {
        let user = UserInfo::service_account("db", "operator", "u1");
        assert_eq!(user.name, "system:serviceaccount:db:operator");
        assert_eq!(split_service_account(&user.name), Some(("db", "operator")));
        assert_eq!(
            user.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:db",
                "system:authenticated"
            ]
        );
        assert_eq!(split_service_account("system:serviceaccount:db"), None);
        assert_eq!(split_service_account("alice"), None);
        assert!(UserInfo::admin().is_master());
        assert!(!user.is_master());
    }
}
