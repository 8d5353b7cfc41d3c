//! Error categories (STYLE: one enum per module, a stable `category()` on
//! the top-level error). The category decides retry behaviour, the Event
//! and condition reason, and the metric label; it is a property of the
//! error, not a guess by the caller.

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
    /// Someone else changed an object meanwhile (409); retried at once.
    Conflict,
    /// An instance manager did not answer; retried.
    InstanceUnreachable,
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
            Self::Conflict => "Conflict",
            Self::InstanceUnreachable => "InstanceUnreachable",
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
            ErrorCategory::Conflict,
            ErrorCategory::InstanceUnreachable,
        ] {
            assert!(transient.is_transient(), "{transient:?}");
        }
    }
}

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    InvalidSpec(#[from] crate::validate::SpecError),
    #[error("{0}")]
    Refused(String),
    #[error("{action}: {source}")]
    Kube {
        action: String,
        #[source]
        source: kube::Error,
    },
    #[error("the finalizer could not run: {0}")]
    Finalizer(String),
    #[error("the {0} cache has not synced yet")]
    CacheNotReady(String),
    #[error("a cached object does not decode: {0}")]
    CacheEntry(String),
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
                _ => ErrorCategory::ApiError,
            },
            Self::Finalizer(_) | Self::CacheNotReady(_) | Self::CacheEntry(_) => {
                ErrorCategory::ApiError
            }
        }
    }
}
