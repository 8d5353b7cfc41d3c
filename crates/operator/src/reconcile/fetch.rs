//! Fetch: what the cluster looks like now. Its children come from the
//! watch caches (no API reads, see [`crate::children`]); each instance
//! manager is asked for its report (DESIGN: the instance reports, the
//! operator decides).

use std::collections::BTreeMap;

use tusk_api::instance::InstanceReport;
use tusk_api::v1alpha1::PostgresCluster;

use crate::children::Children;
use crate::context::Context;
use crate::error::Error;
use crate::observe::{poll_briefly, poll_instances};

/// Everything one pass observed.
#[derive(Default)]
pub struct Observed {
    pub children: Children,
    /// Reports of the instance managers that answered, by instance name.
    pub reports: BTreeMap<String, InstanceReport>,
}

pub async fn fetch(cluster: &PostgresCluster, ctx: &Context) -> Result<Observed, Error> {
    let children = Children::fetch(&ctx.stores, cluster).await?;
    let brief = poll_briefly(cluster.status.as_ref(), &children.pods);
    let reports = poll_instances(&ctx.http, &children.pods, &brief, &ctx.metrics).await;
    Ok(Observed { children, reports })
}
