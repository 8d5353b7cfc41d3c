//! The safety checks the failure tests share: every acknowledged write
//! kept, never two primaries.

use tusk_api::v1alpha1::PostgresClusterStatus;

use super::World;
use super::writer::Writer;

/// Stops `writer` and fails the test if a write it saw acknowledged is
/// missing from `cluster`'s ledger; prints how many were acknowledged and
/// stored (a write given up on may still have committed). The ids
/// acknowledged.
pub async fn every_acknowledged_write_kept(
    world: &World,
    cluster: &str,
    writer: Writer,
) -> Vec<i64> {
    let acknowledged = writer.finish().await;
    let (missing, stored) = world.missing_from_ledger(cluster, &acknowledged).await;
    println!(
        "{} writes acknowledged, {stored} rows stored",
        acknowledged.len()
    );
    assert!(missing.is_empty(), "acknowledged writes lost: {missing:?}");
    acknowledged
}

/// The instances `status` lists with the role `primary`.
pub fn primaries(status: &PostgresClusterStatus) -> Vec<&str> {
    status
        .instances
        .iter()
        .filter(|i| i.role == "primary")
        .map(|i| i.name.as_str())
        .collect()
}
