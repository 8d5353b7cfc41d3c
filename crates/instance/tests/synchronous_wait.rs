//! The instance manager's own writes never wait for synchronous standbys.
//! A primary whose `synchronous_standby_names` asks for more standbys than
//! stream (`ANY 2` while its second standby is still being created, say)
//! holds every commit that waits for them; a manager whose convergence
//! loop waited on its own commit would never apply the setting that lists
//! the new standby, and the cluster would never converge.

mod common;

use std::time::Duration;

use common::{TestCluster, desired};
use tusk_instance::desired::DesiredState;
use tusk_instance::postgres::synchronous::{Synchronous, SynchronousMode, SynchronousStandbys};
use tusk_instance::settings::Password;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_waiting_for_absent_standbys_still_sets_rotated_passwords() {
    common::init_logs();
    let mut cluster = TestCluster::new();
    let mut primary = cluster.instance("db-1");
    // `ANY 2` of one candidate that does not even exist: no commit that
    // waits for synchronous standbys ever returns.
    let wanted = DesiredState {
        synchronous: Some(SynchronousStandbys {
            rule: Synchronous {
                mode: SynchronousMode::Any,
                number: 2,
            },
            candidates: vec!["db-2".into()],
        }),
        ..desired("db-1", primary.address)
    };
    primary.start(wanted.clone());
    primary
        .wait_status("a ready primary", Duration::from_secs(60), |r| r.ready)
        .await;
    primary.stop(Duration::from_secs(30)).await;
    // Rotated while the manager was down: set at its first step as primary,
    // under the synchronous setting already in force.
    primary.settings.credentials.app_owner.password = Password::new("rotated-Secret-4");
    primary.start(wanted);
    primary
        .wait_status("ready again", Duration::from_secs(60), |r| r.ready)
        .await;
    let primary = &primary;
    common::eventually(
        "the rotated password set",
        Duration::from_secs(20),
        || async move { primary.connect("app", "rotated-Secret-4", "app").await.ok() },
    )
    .await;
}
