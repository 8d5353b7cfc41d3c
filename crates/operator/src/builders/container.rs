//! Pieces every container Tusk runs shares, the instances' and the
//! operator's own: the restricted security context and environment entries.

use k8s_openapi::api::core::v1::{
    Capabilities, EnvVar, EnvVarSource, ObjectFieldSelector, SeccompProfile, SecurityContext,
};

/// The seccomp profile of the container runtime's default.
pub fn runtime_default() -> SeccompProfile {
    SeccompProfile {
        type_: "RuntimeDefault".to_owned(),
        ..SeccompProfile::default()
    }
}

/// What the restricted Pod Security Standard asks of a container (R19):
/// non-root, no privilege escalation, every capability dropped, seccomp
/// RuntimeDefault, and a read-only root file system.
pub fn restricted() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        privileged: Some(false),
        read_only_root_filesystem: Some(true),
        run_as_non_root: Some(true),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".to_owned()]),
            ..Capabilities::default()
        }),
        seccomp_profile: Some(runtime_default()),
        ..SecurityContext::default()
    }
}

/// An environment variable read from the pod's own fields (downward API).
pub fn field_env(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.to_owned(),
                ..ObjectFieldSelector::default()
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

/// An environment variable with a literal value.
pub fn value_env(name: &str, value: String) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value),
        ..EnvVar::default()
    }
}
