//! Fetch: what the cluster looks like now. Its children come from the
//! watch caches (no API reads, see [`crate::children`]); each instance
//! manager is asked for its report (`CONTRIBUTING.md`, 8: the instance
//! reports, the operator decides).

use std::collections::BTreeMap;
use std::time::Instant;

use k8s_openapi::jiff::Timestamp;

use tusk_api::contract::TlsSecret;
use tusk_api::instance::InstanceReport;
use tusk_api::v1alpha1::{PostgresBackup, PostgresCluster};

use kube::ResourceExt;

use crate::children::{Children, named, pod_ready};
use crate::context::Context;
use crate::error::Error;
use crate::failover;
use crate::freshness::cluster_key;
use crate::observe::{poll_briefly, poll_instances};
use crate::primacy::{self, LeaseState};

/// The longest a pass waits for the PostgresBackup cache's first list.
const BACKUP_CACHE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Everything one pass observed.
#[derive(Default)]
pub struct Observed {
    pub children: Children,
    /// Reports of the instance managers that answered, by instance name.
    pub reports: BTreeMap<String, InstanceReport>,
    /// The primary lease, read only while the primary is failing.
    pub lease: Option<LeaseState>,
    /// The last renewal of the primary lease this operator saw, when its
    /// holder has stopped renewing since (microseconds).
    pub lease_quiet_since: Option<Timestamp>,
    /// How long until the holder of the quiet primary lease has stopped
    /// PostgreSQL, had it lost the lease ([`primacy::LeaseObservations::fenced_in`]).
    pub lease_fenced_in: Option<std::time::Duration>,
    /// The PostgresBackups naming the cluster; `None` until their cache
    /// has listed (no backup is decided on then).
    pub backups: Option<Vec<PostgresBackup>>,
    /// The restore rehearsal under way (its pod or scratch volume).
    pub rehearsal: Option<crate::rehearsal::Observed>,
    /// The major upgrade's pods, while an upgrade is declared or on record.
    pub upgrade: super::upgrade::UpgradePods,
    /// An instance an earlier pass created that the caches do not show
    /// yet (see [`crate::expectations`]).
    pub awaited: Option<String>,
}

pub async fn fetch(cluster: &PostgresCluster, ctx: &Context) -> Result<Observed, Error> {
    let children = Children::fetch(&ctx.stores, cluster).await?;
    let namespace = cluster.namespace().unwrap_or_default();
    let name = cluster.name_any();
    let lease_key = primacy::lease_key(&namespace, &tusk_api::primacy::lease_name(&name));
    let lease_quiet_since = ctx.leases.quiet_since(&lease_key, Instant::now());
    let lease_fenced_in = ctx.leases.fenced_in(&lease_key, Instant::now());
    let mut brief = poll_briefly(cluster.status.as_ref(), &children.pods);
    // A holder that stopped renewing is most likely frozen: do not let its
    // silence hold this pass for the full poll timeout.
    if let Some(primary) = lease_quiet_since
        .and(cluster.status.as_ref())
        .and_then(|s| s.current_primary.clone())
    {
        brief.push(primary);
    }
    let authority = named(
        &children.secrets,
        &TlsSecret::CaKey.secret_name(name.as_str()),
    );
    let token_key = named(
        &children.secrets,
        &TlsSecret::TokenKey.secret_name(name.as_str()),
    );
    let access = ctx
        .instances
        .access(&namespace, &name, authority, token_key);
    let reports = poll_instances(&access, &children.pods, &brief, &ctx.metrics).await;
    let lease = if primary_failing(cluster, &children, &reports) {
        let read = primacy::read(&ctx.client, &ctx.leases, &namespace, &name);
        Some(read.await.map_err(|source| Error::Kube {
            action: "read the primary lease".to_owned(),
            source,
        })?)
    } else {
        None
    };
    let backups = tokio::time::timeout(BACKUP_CACHE_WAIT, ctx.backups.wait_until_ready())
        .await
        .is_ok_and(|ready| ready.is_ok())
        .then(|| crate::backups::of_cluster(&ctx.backups, &namespace, &name));
    let rehearsal = super::rehearsal::fetch_unless_absent(cluster, ctx).await?;
    let upgrade = super::upgrade::fetch(cluster, &ctx.client).await?;
    let awaited = ctx.expectations.awaited(
        &cluster_key(cluster),
        |instance| {
            named(&children.pods, instance).is_some()
                && named(&children.volumes, instance).is_some()
        },
        Instant::now(),
    );
    Ok(Observed {
        children,
        reports,
        lease,
        lease_quiet_since,
        lease_fenced_in,
        backups,
        rehearsal,
        upgrade,
        awaited,
    })
}

/// The recorded primary does not serve (the failover check judges it),
/// or a promotion is under way (a failover may choose again).
pub fn primary_failing(
    cluster: &PostgresCluster,
    children: &Children,
    reports: &BTreeMap<String, InstanceReport>,
) -> bool {
    let status = cluster.status.as_ref();
    if status.is_some_and(crate::status::promotion_under_way) {
        return true;
    }
    let Some(primary) = status.and_then(|s| s.current_primary.as_deref()) else {
        return false;
    };
    let ready = named(&children.pods, primary).is_some_and(pod_ready);
    !failover::primary_healthy(ready, reports.get(primary))
}
