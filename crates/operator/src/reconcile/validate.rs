//! Validate: the spec once into a [`ValidatedCluster`] (see
//! [`crate::validate`]), then against what was observed, so that a change
//! the live objects cannot take (a storage shrink, a major version the data
//! does not have) is refused or held before anything is applied.

use std::collections::BTreeMap;

use tusk_api::instance::InstanceReport;
use tusk_api::v1alpha1::PostgresCluster;

use super::fetch::Observed;
use super::storage::refuse_shrink;
use crate::config::OperatorConfig;
use crate::error::Error;
use crate::validate::{MajorTarget, ValidatedCluster};

pub fn validate(
    cluster: &PostgresCluster,
    config: &OperatorConfig,
    observed: &Observed,
) -> Result<ValidatedCluster, Error> {
    let mut valid = crate::validate::validate(cluster, config)?;
    refuse_shrink(&valid, &observed.children.volumes)?;
    let running = running_major(cluster, &observed.reports);
    if let Some(running) = running.filter(|r| *r != valid.version) {
        crate::validate::check_parameters_for(cluster, running)?;
    }
    hold_major_version(&mut valid, config, running, cluster.spec.postgres.version);
    Ok(valid)
}

/// The major version the cluster's data runs: as recorded in status, or
/// for a cluster from before that record, as its instances report it.
/// `None` for a cluster with no data yet.
pub fn running_major(
    cluster: &PostgresCluster,
    reports: &BTreeMap<String, InstanceReport>,
) -> Option<u32> {
    let recorded = cluster
        .status
        .as_ref()
        .and_then(|s| s.postgres_version)
        .and_then(|v| u32::try_from(v).ok());
    recorded.or_else(|| {
        reports
            .values()
            .filter_map(|r| r.postgres_version.as_deref())
            .filter_map(|v| tusk_postgres::version::parse_version_output(v).ok())
            .map(|v| v.major)
            .min()
    })
}

/// A declared major version the data does not have is a major upgrade
/// ([`crate::upgrade`]): the pods keep the running version's binaries (an
/// instance started with another major's refuses its data and never
/// starts) until the upgrade moves the data, and the declared version and
/// image become the upgrade's target. A declared version older than the
/// data's (admission refuses the change) is not acted on (R30).
fn hold_major_version(
    valid: &mut ValidatedCluster,
    config: &OperatorConfig,
    running: Option<u32>,
    declared: i32,
) {
    let Some(running) = running.filter(|r| *r != valid.version) else {
        return;
    };
    let target = MajorTarget {
        version: valid.version,
        image: std::mem::replace(&mut valid.image, config.postgres_image(running)),
    };
    valid.version = running;
    if target.version > running {
        valid.major_upgrade = Some(target);
    } else {
        valid.unsupported.push(format!(
            "spec.postgres.version {declared} (older than the data's {running}: the instances \
             keep running PostgreSQL {running} with the image {})",
            valid.image
        ));
    }
}
