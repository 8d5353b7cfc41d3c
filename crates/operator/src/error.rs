//! Error categories (`CONTRIBUTING.md`, 5: one enum per module, a stable
//! `category()` on the top-level error). The category decides retry
//! behaviour, the Event and condition reason, and the metric label; it is
//! a property of the error, not a guess by the caller.

/// Why a reconcile did not converge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCategory {
    /// The spec cannot be acted on; the user must change it.
    InvalidSpec,
    /// The spec asks for something unsafe now (e.g. shrinking a volume).
    RefusedChange,
    /// The API server refused or failed a request; retried with back-off.
    ApiError,
    /// The API server asked us to slow down (429); retried with back-off.
    Throttled,
    /// The operator's ServiceAccount may not do what the reconcile needs
    /// (403): its ClusterRole lacks a permission. Retried with back-off,
    /// so restoring the permission is enough to recover.
    Forbidden,
    /// The cluster's namespace is being deleted: the API server refuses
    /// to create anything in it (403, cause `NamespaceTerminating`).
    /// Retried seldom, and not on every change of a child the namespace's
    /// deletion removes: the cluster itself is deleted next, and its
    /// cleanup runs then.
    NamespaceTerminating,
    /// Someone else changed an object meanwhile (409); retried at once.
    Conflict,
    /// An instance manager did not answer; retried.
    InstanceUnreachable,
    /// A volume the cluster needs exists but was not made for it; never
    /// adopted, retried until someone removes or renames it.
    VolumeConflict,
    /// A credentials Secret exists that Tusk did not create for the
    /// cluster; never used, retried until someone removes or renames it.
    SecretConflict,
}

impl ErrorCategory {
    /// Transient errors are retried with back-off; permanent ones wait for
    /// a spec change.
    pub fn is_transient(self) -> bool {
        !matches!(self, Self::InvalidSpec | Self::RefusedChange)
    }

    /// CamelCase reason for conditions and Events, and the metric label.
    pub fn reason(self) -> &'static str {
        match self {
            Self::InvalidSpec => "InvalidSpec",
            Self::RefusedChange => "RefusedChange",
            Self::ApiError => "ApiError",
            Self::Throttled => "Throttled",
            Self::Forbidden => "Forbidden",
            Self::NamespaceTerminating => "NamespaceTerminating",
            Self::Conflict => "Conflict",
            Self::InstanceUnreachable => "InstanceUnreachable",
            Self::VolumeConflict => "VolumeConflict",
            Self::SecretConflict => "SecretConflict",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_spec_problems_are_permanent() {
        assert!(!ErrorCategory::InvalidSpec.is_transient());
        assert!(!ErrorCategory::RefusedChange.is_transient());
        for transient in [
            ErrorCategory::ApiError,
            ErrorCategory::Throttled,
            ErrorCategory::Forbidden,
            ErrorCategory::NamespaceTerminating,
            ErrorCategory::Conflict,
            ErrorCategory::InstanceUnreachable,
            ErrorCategory::VolumeConflict,
            ErrorCategory::SecretConflict,
        ] {
            assert!(transient.is_transient(), "{transient:?}");
        }
    }
}

/// A spec the controller cannot act on, naming the field and the rule.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {rule}")]
pub struct SpecError {
    pub field: String,
    pub rule: String,
}

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    InvalidSpec(#[from] SpecError),
    #[error("{0}")]
    Refused(String),
    #[error("{action}: {}", describe(source))]
    Kube {
        action: String,
        #[source]
        source: kube::Error,
    },
    #[error("the finalizer could not run: {0}")]
    Finalizer(String),
    #[error("the {0} cache has not synced yet")]
    CacheNotReady(String),
    #[error("{0}")]
    VolumeConflict(String),
    #[error("{0}")]
    SecretConflict(String),
    #[error("a cached object does not decode: {0}")]
    CacheEntry(String),
}

/// An API error as people read it: the API server's message and reason
/// (`services "orders-rw" is forbidden: User "system:serviceaccount:..."
/// cannot patch resource "services" ...: Forbidden`), other errors as
/// kube-rs words them.
fn describe(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => format!("{status} ({})", status.code),
        other => other.to_string(),
    }
}

/// The cause the API server gives for refusing to create an object in a
/// namespace being deleted (NamespaceLifecycle admission).
const NAMESPACE_TERMINATING: &str = "NamespaceTerminating";

/// Whether the API server refused a request because the namespace is
/// being deleted: a 403 whose causes say so, or, from a server that gives
/// no causes, whose message does.
fn namespace_terminating(status: &kube::core::Status) -> bool {
    let caused = status
        .details
        .iter()
        .flat_map(|d| &d.causes)
        .any(|c| c.reason == NAMESPACE_TERMINATING);
    status.code == 403 && (caused || status.message.ends_with("because it is being terminated"))
}

impl Error {
    /// Wraps an API error with what the operator was doing.
    pub fn kube(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let action = action.into();
        move |source| Self::Kube { action, source }
    }

    pub fn category(&self) -> ErrorCategory {
        match self {
            Self::InvalidSpec(_) => ErrorCategory::InvalidSpec,
            Self::Refused(_) => ErrorCategory::RefusedChange,
            Self::Kube { source, .. } => match source {
                kube::Error::Api(status) if status.code == 429 => ErrorCategory::Throttled,
                kube::Error::Api(status) if status.code == 409 => ErrorCategory::Conflict,
                kube::Error::Api(status) if namespace_terminating(status) => {
                    ErrorCategory::NamespaceTerminating
                }
                kube::Error::Api(status) if status.code == 403 => ErrorCategory::Forbidden,
                _ => ErrorCategory::ApiError,
            },
            Self::Finalizer(_) | Self::CacheNotReady(_) | Self::CacheEntry(_) => {
                ErrorCategory::ApiError
            }
            Self::VolumeConflict(_) => ErrorCategory::VolumeConflict,
            Self::SecretConflict(_) => ErrorCategory::SecretConflict,
        }
    }
}

#[cfg(test)]
mod error_tests {
    use super::*;

    /// What kube-apiserver answers a create in a namespace being deleted.
    fn refused_in_terminating_namespace(causes: bool) -> kube::Error {
        let mut status = kube::core::Status::failure(
            "pods \"orders-1\" is forbidden: unable to create new content in namespace shop because it is being terminated",
            "Forbidden",
        )
        .with_code(403);
        if causes {
            status = status.with_details(kube::core::response::StatusDetails {
                name: "orders-1".into(),
                group: String::new(),
                kind: "pods".into(),
                uid: String::new(),
                causes: vec![kube::core::response::StatusCause {
                    reason: "NamespaceTerminating".into(),
                    message: "namespace shop is being terminated".into(),
                    field: "metadata.namespace".into(),
                }],
                retry_after_seconds: 0,
            });
        }
        kube::Error::Api(Box::new(status))
    }

    #[test]
    fn a_namespace_being_deleted_is_its_own_category_not_a_missing_permission() {
        for causes in [true, false] {
            let error =
                Error::kube("create Pod orders-1")(refused_in_terminating_namespace(causes));
            assert_eq!(error.category(), ErrorCategory::NamespaceTerminating);
            assert_eq!(error.category().reason(), "NamespaceTerminating");
        }
    }

    #[test]
    fn a_forbidden_request_is_reported_with_the_servers_words() {
        let status = kube::core::Status::failure(
            "services \"orders-rw\" is forbidden: User \"system:serviceaccount:tusk-system:tusk-operator\" cannot patch resource \"services\" in API group \"\" in the namespace \"shop\"",
            "Forbidden",
        )
        .with_code(403);
        let error = Error::kube("apply Service orders-rw")(kube::Error::Api(Box::new(status)));
        assert_eq!(error.category(), ErrorCategory::Forbidden);
        assert_eq!(error.category().reason(), "Forbidden");
        assert!(error.category().is_transient());
        assert_eq!(
            error.to_string(),
            "apply Service orders-rw: services \"orders-rw\" is forbidden: User \"system:serviceaccount:tusk-system:tusk-operator\" cannot patch resource \"services\" in API group \"\" in the namespace \"shop\": Forbidden (403)"
        );
    }
}
