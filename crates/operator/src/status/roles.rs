//! `status.roles`: the declared roles as the current primary's manager
//! last reported them (`/status`, `roles`). Kept as it was while no
//! primary reports (between a failover's steps, say), so a role's last
//! known state and failure reason stay visible.

use tusk_api::v1alpha1::PostgresClusterStatus;

use super::StatusInput;

/// Copies the current primary's report of the declared roles.
pub(super) fn set_roles(status: &mut PostgresClusterStatus, input: &StatusInput<'_>) {
    let reported = status
        .current_primary
        .as_ref()
        .and_then(|primary| input.reports.get(primary))
        .and_then(|report| report.roles.clone());
    if let Some(roles) = reported {
        status.roles = roles;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use tusk_api::instance::InstanceReport;
    use tusk_api::v1alpha1::{PostgresCluster, RoleState, RoleStatus};

    use super::*;

    fn report(name: &str, roles: serde_json::Value) -> InstanceReport {
        serde_json::from_value(serde_json::json!({
            "name": name, "role": "primary", "phase": "running", "ready": true,
            "fenced": false, "roles": roles,
        }))
        .expect("a report")
    }

    #[test]
    fn the_primary_s_report_is_copied_and_kept_while_none_reports() {
        let failed = RoleStatus {
            name: "web".into(),
            state: RoleState::Failed,
            reason: Some("role \"readers\" does not exist".into()),
        };
        let reports = BTreeMap::from([
            (
                "db-1".to_owned(),
                report("db-1", serde_json::to_value([&failed]).expect("json")),
            ),
            ("db-2".to_owned(), report("db-2", serde_json::json!([]))),
        ]);
        let cluster: PostgresCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "postgres.tusk.dev/v1alpha1", "kind": "PostgresCluster",
            "metadata": {"name": "db", "namespace": "shop"},
            "spec": {"instances": 2, "postgres": {"version": 16}, "storage": {"size": "1Gi"}},
        }))
        .expect("a cluster");
        let now = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        let input = StatusInput::unplanned(&cluster, &[], 0, &reports, now);
        let mut status = PostgresClusterStatus {
            current_primary: Some("db-1".into()),
            ..PostgresClusterStatus::default()
        };
        set_roles(&mut status, &input);
        assert_eq!(status.roles, std::slice::from_ref(&failed));
        status.current_primary = None;
        set_roles(&mut status, &input);
        assert_eq!(status.roles, [failed], "kept while no primary reports");
    }
}
