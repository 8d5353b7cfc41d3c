use k8s_openapi::jiff::Timestamp;

use tusk_postgres::synchronous::SynchronousMode;

use super::*;

fn at(text: &str) -> Timestamp {
    text.parse().expect("timestamp")
}

#[test]
fn the_delay_runs_a_second_longer_than_whole_second_timestamps_could_hide() {
    let since = Unavailable::recorded(at("2026-12-02T10:00:03Z"));
    let left = |now: &str| delay_left(since, at(now), 5).map(|d| d.as_millis());
    assert_eq!(left("2026-12-02T10:00:03Z"), Some(6000));
    assert_eq!(left("2026-12-02T10:00:08.250Z"), Some(750));
    assert_eq!(left("2026-12-02T10:00:09Z"), None);
    assert_eq!(left("2026-12-02T10:00:30Z"), None);
    // No delay: only the rounding second.
    assert_eq!(
        delay_left(since, since.since, 0).map(|d| d.as_millis()),
        Some(1000)
    );
    // A time of this operator's own clock needs no rounding second.
    let precise = Unavailable::precise(at("2026-12-02T10:00:03.400Z"));
    assert_eq!(
        delay_left(precise, at("2026-12-02T10:00:08Z"), 5).map(|d| d.as_millis()),
        Some(400)
    );
    assert_eq!(delay_left(precise, at("2026-12-02T10:00:08.400Z"), 5), None);
    assert_eq!(delay_left(precise, precise.since, 0), None);
}

#[test]
fn unavailability_counts_from_the_first_evidence() {
    let now = at("2026-12-02T10:00:10Z");
    let kubelet = at("2026-12-02T10:00:03Z");
    let operator = at("2026-12-02T10:00:06Z");
    let recorded = Unavailable::recorded;
    // The kubelet saw it first: the delay runs from its verdict.
    assert_eq!(
        unavailable_since(Some(operator), Some(kubelet), None, None, now),
        recorded(kubelet)
    );
    assert_eq!(
        unavailable_since(Some(kubelet), Some(operator), None, None, now),
        recorded(kubelet)
    );
    // A ready pod whose manager reports it unhealthy: the operator's view.
    assert_eq!(
        unavailable_since(Some(operator), None, None, None, now),
        recorded(operator)
    );
    // First noticed now.
    assert_eq!(
        unavailable_since(None, None, None, None, now),
        Unavailable::precise(now)
    );
    // A clock ahead of ours never makes the wait negative.
    let ahead = at("2026-12-02T10:00:20Z");
    assert_eq!(
        unavailable_since(None, Some(ahead), None, None, now),
        Unavailable::precise(now)
    );
}

#[test]
fn a_quiet_lease_dates_the_failure_from_its_last_renewal() {
    let now = at("2026-12-02T10:00:10Z");
    let renewed = at("2026-12-02T10:00:01.600Z");
    let kubelet = at("2026-12-02T10:00:03Z");
    let since = unavailable_since(None, Some(kubelet), Some(renewed), None, now);
    assert_eq!(since, Unavailable::precise(renewed));
    // Renewed after the kubelet's verdict: the earlier evidence counts.
    let late = at("2026-12-02T10:00:04Z");
    assert_eq!(
        unavailable_since(None, Some(kubelet), Some(late), None, now),
        Unavailable::recorded(kubelet)
    );
    // A renewal from its time as a standby's holder does not count.
    let promoted = at("2026-12-02T10:00:02Z");
    assert_eq!(
        unavailable_since(None, None, Some(renewed), Some(promoted), now),
        Unavailable::recorded(promoted)
    );
}

#[test]
fn a_new_primary_is_not_judged_by_its_time_as_a_standby() {
    let now = at("2026-12-02T10:00:10Z");
    // Its pod turned unready when the former primary died, while it
    // was a standby; it was promoted at :09 and is not ready yet.
    let unready_as_standby = at("2026-12-02T10:00:04Z");
    let promoted = at("2026-12-02T10:00:09Z");
    let since = unavailable_since(None, Some(unready_as_standby), None, Some(promoted), now);
    assert_eq!(since, Unavailable::recorded(promoted));
    assert!(
        delay_left(since, now, 3).is_some(),
        "a fresh primary gets its whole delay"
    );
    // Evidence from after the promotion counts as always.
    let after = at("2026-12-02T10:00:09.5Z");
    assert_eq!(
        unavailable_since(Some(after), None, None, Some(promoted), now),
        Unavailable::recorded(after)
    );
    // A promotion recorded ahead of our clock never makes the wait negative.
    let ahead = at("2026-12-02T10:00:20Z");
    assert_eq!(
        unavailable_since(None, None, None, Some(ahead), now),
        Unavailable::precise(now)
    );
}

fn standby(name: &str, received: &str, replayed: &str) -> InstanceReport {
    InstanceReport {
        name: name.into(),
        role: InstanceRole::Replica,
        phase: InstancePhase::Running,
        // The primary is gone: the WAL receiver stopped, so not ready.
        ready: false,
        fenced: false,
        target_primary: Some("db-1".into()),
        postgres_version: None,
        system_identifier: None,
        timeline: Some(1),
        current_lsn: None,
        received_lsn: Some(received.into()),
        replayed_lsn: Some(replayed.into()),
        lag_bytes: None,
        lag_seconds: None,
        replayed_commit_time: None,
        streaming: Some(false),
        upstream: None,
        pending_restart: vec![],
        pending_restart_lowered: vec![],
        held_minimums: vec![],
        standbys: vec![],
        crash_count: 0,
        last_error: None,
        desired_state_errors: vec![],
        kept_copy: None,
        kept_wal: None,
        archiving: None,
        api_server_reachable: None,
        backup: None,
        backup_server: None,
        roles: None,
    }
}

/// The primary ran `ANY number` (quorum) or `FIRST number` over `members`
/// and last reported them all synchronous.
fn sync(quorum: bool, number: u32, members: &[&str]) -> Option<SyncSet> {
    let mode = if quorum {
        SynchronousMode::Any
    } else {
        SynchronousMode::First
    };
    let members: Vec<String> = members.iter().map(|m| (*m).to_owned()).collect();
    Some(SyncSet {
        declared: vec![Some(DeclaredSet {
            rule: Synchronous { mode, number },
            members: members.clone(),
        })],
        reported: members,
        flushed: None,
    })
}

fn decide_with(
    reports: &[InstanceReport],
    primary_lsn: &str,
    synchronous: Option<SyncSet>,
    durability: DataDurability,
    approved: bool,
) -> Decision {
    decide_excluding(reports, primary_lsn, synchronous, durability, approved, &[])
}

fn decide_excluding(
    reports: &[InstanceReport],
    primary_lsn: &str,
    synchronous: Option<SyncSet>,
    durability: DataDurability,
    approved: bool,
    excluded: &[&str],
) -> Decision {
    let pairs: Vec<(&str, &InstanceReport)> =
        reports.iter().map(|r| (r.name.as_str(), r)).collect();
    let last = LastKnown {
        primary: "db-1",
        lsn: Some(primary_lsn),
        timeline: Some(1),
        synchronous,
        excluded: excluded.iter().map(|e| (*e).to_owned()).collect(),
    };
    decide(&last, &pairs, durability, approved)
}

fn promoted(decision: &Decision) -> Option<(&str, u64)> {
    match decision {
        Decision::Promote {
            instance,
            lsn_gap_bytes,
            ..
        } => Some((instance.as_str(), *lsn_gap_bytes)),
        _ => None,
    }
}

#[test]
fn the_most_advanced_standby_is_chosen() {
    let reports = [
        standby("db-2", "0/3000000", "0/3000000"),
        standby("db-3", "0/3000100", "0/3000000"),
    ];
    let decision = decide_with(
        &reports,
        "0/3000100",
        sync(true, 1, &["db-2", "db-3"]),
        DataDurability::Required,
        false,
    );
    assert_eq!(promoted(&decision), Some(("db-3", 0)));
}

#[test]
fn replayed_position_then_synchronous_state_break_ties() {
    let reports = [
        standby("db-2", "0/3000100", "0/3000000"),
        standby("db-3", "0/3000100", "0/3000080"),
    ];
    let decision = decide_with(
        &reports,
        "0/3000100",
        None,
        DataDurability::Preferred,
        false,
    );
    assert_eq!(promoted(&decision), Some(("db-3", 0)));
    let equal = [
        standby("db-2", "0/3000100", "0/3000100"),
        standby("db-3", "0/3000100", "0/3000100"),
    ];
    let decision = decide_with(
        &equal,
        "0/3000100",
        sync(false, 1, &["db-3"]),
        DataDurability::Required,
        false,
    );
    assert_eq!(promoted(&decision), Some(("db-3", 0)));
}

#[test]
fn required_durability_blocks_an_asynchronous_standby() {
    let behind = [standby("db-2", "0/3000000", "0/3000000")];
    let decision = decide_with(&behind, "0/3000400", None, DataDurability::Required, false);
    assert_eq!(
        decision,
        Decision::Blocked {
            best: "db-2".into(),
            lsn_gap_bytes: 0x400
        }
    );
    // Even level with the last known position: that position may be
    // older than the primary's last acknowledged commit.
    let level = [standby("db-2", "0/3000400", "0/3000400")];
    let decision = decide_with(&level, "0/3000400", None, DataDurability::Required, false);
    assert!(matches!(decision, Decision::Blocked { .. }), "{decision:?}");
}

#[test]
fn approval_unblocks_and_preferred_promotes_with_the_gap_recorded() {
    let reports = [standby("db-2", "0/3000000", "0/3000000")];
    let approved = decide_with(&reports, "0/3000400", None, DataDurability::Required, true);
    assert_eq!(promoted(&approved), Some(("db-2", 0x400)));
    let preferred = decide_with(
        &reports,
        "0/3000400",
        None,
        DataDurability::Preferred,
        false,
    );
    assert_eq!(promoted(&preferred), Some(("db-2", 0x400)));
}

#[test]
fn a_priority_synchronous_standby_holds_every_acknowledged_commit() {
    // The primary's last known position may include unacknowledged WAL
    // that a synchronous standby never received: nothing acknowledged
    // is lost. A more advanced potential standby is promoted: it holds
    // everything the sync one does.
    let reports = [
        standby("db-2", "0/3000000", "0/3000000"),
        standby("db-3", "0/3000200", "0/3000200"),
    ];
    let decision = decide_with(
        &reports,
        "0/3000400",
        sync(false, 1, &["db-2"]),
        DataDurability::Required,
        false,
    );
    assert_eq!(promoted(&decision), Some(("db-3", 0)));
}

#[test]
fn a_quorum_proves_nothing_unless_enough_of_its_members_answer() {
    // ANY 1 of db-2, db-3: each commit is on one of them, not both.
    let both = [
        standby("db-2", "0/3000000", "0/3000000"),
        standby("db-3", "0/3000100", "0/3000100"),
    ];
    let members = sync(true, 1, &["db-2", "db-3"]);
    let decision = decide_with(
        &both,
        "0/3000400",
        members.clone(),
        DataDurability::Required,
        false,
    );
    assert_eq!(promoted(&decision), Some(("db-3", 0)));
    let one = [standby("db-2", "0/3000000", "0/3000000")];
    let decision = decide_with(&one, "0/3000400", members, DataDurability::Required, false);
    assert_eq!(
        decision,
        Decision::Blocked {
            best: "db-2".into(),
            lsn_gap_bytes: 0x400
        }
    );
    // ANY 2 of three: any two of them suffice.
    let two_of_three = [
        standby("db-2", "0/3000000", "0/3000000"),
        standby("db-4", "0/3000000", "0/3000000"),
    ];
    let decision = decide_with(
        &two_of_three,
        "0/3000400",
        sync(true, 2, &["db-2", "db-3", "db-4"]),
        DataDurability::Required,
        false,
    );
    assert_eq!(promoted(&decision), Some(("db-2", 0)));
}

#[test]
fn stopped_fenced_or_diverged_standbys_are_not_candidates() {
    let mut stopped = standby("db-2", "0/3000000", "0/3000000");
    stopped.role = InstanceRole::Stopped;
    let mut fenced = standby("db-3", "0/3000000", "0/3000000");
    fenced.fenced = true;
    let mut other_timeline = standby("db-4", "0/3000000", "0/3000000");
    other_timeline.timeline = Some(3);
    let mut primary = standby("db-5", "0/3000000", "0/3000000");
    primary.role = InstanceRole::Primary;
    let mut rejoining = standby("db-6", "0/3000000", "0/3000000");
    rejoining.phase = InstancePhase::Rejoining;
    let decision = decide_with(
        &[stopped, fenced, other_timeline, primary, rejoining],
        "0/3000000",
        None,
        DataDurability::Preferred,
        false,
    );
    assert_eq!(decision, Decision::NoCandidate);
}

#[test]
fn the_recovery_point_is_where_the_promoted_standby_stopped_receiving() {
    let mut report = standby("db-2", "0/3000100", "0/3000100");
    report.replayed_commit_time = Some("2026-12-02T10:00:00.123456Z".into());
    let decision = decide_with(
        &[report],
        "0/3000100",
        None,
        DataDurability::Preferred,
        false,
    );
    let Decision::Promote { recovery_point, .. } = decision else {
        panic!("promotes: {decision:?}");
    };
    assert_eq!(recovery_point.lsn, "0/3000100");
    let time = recovery_point.time.expect("a commit time");
    assert_eq!(time.0.to_string(), "2026-12-02T10:00:00.123456Z");
}

#[test]
fn lsns_compare_numerically_across_the_slash() {
    assert!(lsn("1/0").expect("valid") > lsn("0/FFFFFFFF").expect("valid"));
    assert_eq!(lsn("0/10"), Some(16));
    assert_eq!(lsn("garbage"), None);
}

#[test]
fn excluded_instances_are_never_chosen() {
    // db-3 is the most advanced, but its pod is being deleted or its
    // promotion was abandoned: the next best is chosen, never it.
    let reports = [
        standby("db-2", "0/3000000", "0/3000000"),
        standby("db-3", "0/3000100", "0/3000100"),
        standby("db-4", "0/3000080", "0/3000080"),
    ];
    // (excluded, chosen)
    let cases: [(&[&str], Option<&str>); 4] = [
        (&[], Some("db-3")),
        (&["db-3"], Some("db-4")),
        (&["db-3", "db-4"], Some("db-2")),
        (&["db-2", "db-3", "db-4"], None),
    ];
    for (excluded, chosen) in cases {
        let decision = decide_excluding(
            &reports,
            "0/3000100",
            None,
            DataDurability::Preferred,
            false,
            excluded,
        );
        assert_eq!(promoted(&decision).map(|(i, _)| i), chosen, "{excluded:?}");
        if chosen.is_none() {
            assert_eq!(decision, Decision::NoCandidate);
        }
    }
}

#[test]
fn a_standby_cut_off_from_the_api_server_is_not_chosen_but_vouches_once_stopped() {
    // db-2 cannot reach the API server (it could not take the lease over);
    // both stopped streaming when the primary's lease lapsed.
    let mut cut = standby("db-2", "0/3000100", "0/3000100");
    cut.api_server_reachable = Some(false);
    let mut seen = standby("db-3", "0/3000100", "0/3000080");
    seen.api_server_reachable = Some(true);
    let quorum = || sync(true, 1, &["db-2", "db-3"]);
    let decision = decide_with(
        &[cut.clone(), seen.clone()],
        "0/3000100",
        quorum(),
        DataDurability::Required,
        false,
    );
    // ANY 1 of 2 needs both to answer: db-2 is no candidate, yet its final
    // position vouches that db-3 holds every commit it confirmed.
    assert_eq!(promoted(&decision), Some(("db-3", 0)), "{decision:?}");

    // Had db-2 confirmed commits db-3 lacks, promoting db-3 loses them.
    let mut ahead = cut.clone();
    ahead.received_lsn = Some("0/3000200".into());
    let decision = decide_with(
        &[ahead, seen.clone()],
        "0/3000100",
        quorum(),
        DataDurability::Required,
        false,
    );
    assert_eq!(
        decision,
        Decision::Blocked {
            best: "db-3".into(),
            lsn_gap_bytes: 0
        }
    );

    // One still streaming may confirm more at any moment: it vouches for
    // nothing, and the failover waits.
    let mut streaming = cut.clone();
    streaming.streaming = Some(true);
    let decision = decide_with(
        &[streaming, seen.clone()],
        "0/3000100",
        quorum(),
        DataDurability::Required,
        false,
    );
    assert!(matches!(decision, Decision::Blocked { .. }), "{decision:?}");

    // An abandoned promotion's standby vouches the same way.
    let decision = decide_excluding(
        &[standby("db-2", "0/3000100", "0/3000100"), seen],
        "0/3000100",
        quorum(),
        DataDurability::Required,
        false,
        &["db-2"],
    );
    assert_eq!(promoted(&decision), Some(("db-3", 0)), "{decision:?}");
}

fn reported(name: &str, state: &str, flush: &str) -> (String, String, String) {
    (name.to_owned(), state.to_owned(), flush.to_owned())
}

fn sync_set(mode: SynchronousMode, number: u32, standbys: &[(String, String, String)]) -> SyncSet {
    SyncSet::new(
        Vec::new(),
        &Synchronous { mode, number },
        standbys.iter().map(|(name, state, flush)| ReportedStandby {
            name,
            sync_state: Some(state),
            flush_lsn: Some(flush),
        }),
    )
}

#[test]
fn the_synchronous_flush_position_is_what_every_acknowledged_commit_reached() {
    use SynchronousMode::{Any, First};
    let standbys = [
        reported("db-2", "quorum", "0/3000300"),
        reported("db-3", "quorum", "0/3000100"),
        reported("db-4", "quorum", "0/3000200"),
        reported("db-5", "async", "0/3000900"),
    ];
    // (mode, number, flush position acknowledged commits reached)
    let cases = [
        (Any, 1, 0x300_0300),
        (Any, 2, 0x300_0200),
        (Any, 3, 0x300_0100),
        // Fewer listed than the number: the lowest of them.
        (Any, 4, 0x300_0100),
    ];
    for (mode, number, flushed) in cases {
        let set = sync_set(mode, number, &standbys);
        assert_eq!(set.flushed, Some(flushed), "{mode:?} {number}");
        assert_eq!(set.reported, ["db-2", "db-3", "db-4"]);
    }
    let first = sync_set(
        First,
        1,
        &[
            reported("db-2", "sync", "0/3000100"),
            reported("db-3", "potential", "0/3000800"),
        ],
    );
    assert_eq!(first.flushed, Some(0x300_0100));
    assert_eq!(sync_set(First, 1, &[]).flushed, None);
}

#[test]
fn required_durability_needs_the_last_synchronous_flush_position_received() {
    // FIRST 1, db-2 sync: membership alone proves db-2 holds every
    // commit, but the primary last reported db-2 had flushed up to
    // 0/3000200, so a db-2 that says it received less is not trusted.
    let with_flush =
        |flushed: Option<u64>| sync(false, 1, &["db-2"]).map(|s| SyncSet { flushed, ..s });
    /// db-2 received, the last reported sync flush, durability; promoted
    /// with this gap, blocked.
    type Case = (&'static str, Option<u64>, DataDurability, Option<u64>, bool);
    let cases: [Case; 6] = [
        (
            "0/3000200",
            Some(0x300_0200),
            DataDurability::Required,
            Some(0),
            false,
        ),
        (
            "0/3000300",
            Some(0x300_0200),
            DataDurability::Required,
            Some(0),
            false,
        ),
        (
            "0/3000100",
            Some(0x300_0200),
            DataDurability::Required,
            None,
            true,
        ),
        // No flush position reported (an older status): membership decides.
        ("0/3000100", None, DataDurability::Required, Some(0), false),
        // Preferred promotes, recording the gap to the last known position.
        (
            "0/3000100",
            Some(0x300_0200),
            DataDurability::Preferred,
            Some(0x300),
            false,
        ),
        (
            "0/3000200",
            Some(0x300_0200),
            DataDurability::Preferred,
            Some(0),
            false,
        ),
    ];
    for (received, flushed, durability, gap, blocked) in cases {
        let reports = [standby("db-2", received, received)];
        let decision = decide_with(
            &reports,
            "0/3000400",
            with_flush(flushed),
            durability,
            false,
        );
        assert_eq!(
            promoted(&decision).map(|(_, g)| g),
            gap,
            "{received} {flushed:?} {durability:?}: {decision:?}"
        );
        assert_eq!(
            matches!(decision, Decision::Blocked { .. }),
            blocked,
            "{received}"
        );
    }
}

#[test]
fn a_standby_listed_just_before_the_loss_must_answer() {
    // The primary listed db-4 in its synchronous set (it joined just
    // before) and last reported only db-2 and db-3 as quorum: db-4 may
    // have confirmed the last commits with the other lost one. Declared
    // ANY 1 of three, FIRST 1 of three: every one must answer.
    let reports = [
        standby("db-2", "0/3000100", "0/3000100"),
        standby("db-3", "0/3000100", "0/3000100"),
    ];
    for quorum in [true, false] {
        let mut set = sync(quorum, 1, &["db-2", "db-3", "db-4"]);
        if let Some(set) = &mut set {
            set.reported = vec!["db-2".into(), "db-3".into()];
        }
        let decision = decide_with(
            &reports,
            "0/3000100",
            set.clone(),
            DataDurability::Required,
            false,
        );
        assert!(
            matches!(decision, Decision::Blocked { .. }),
            "quorum {quorum}: {decision:?}"
        );
        // db-4 answers, stopped where the primary left it: proven.
        let mut four = reports.to_vec();
        four.push(standby("db-4", "0/3000080", "0/3000080"));
        let decision = decide_with(&four, "0/3000100", set, DataDurability::Required, false);
        assert_eq!(
            promoted(&decision).map(|(_, gap)| gap),
            Some(0),
            "{decision:?}"
        );
    }
}
