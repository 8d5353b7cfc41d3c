use super::*;

fn member(name: &str, outdated: bool) -> Member {
    Member {
        name: name.to_owned(),
        reasons: if outdated {
            vec!["spec.resources"]
        } else {
            Vec::new()
        },
        lowers_minimums: false,
        ready: true,
        streaming: true,
        position: Some(100),
    }
}

fn input(members: Vec<Member>) -> Input {
    Input {
        members,
        primary: "db-1".to_owned(),
        settled: true,
        method: PrimaryUpdateMethod::Switchover,
        paused: false,
        slot: false,
        previous: None,
    }
}

/// What a case is, its input, the action expected, and the step and
/// instance status should say.
type Case<'a> = (&'a str, Input, Action, Option<(&'a str, Option<&'a str>)>);

fn step_of(rollout: &Rollout) -> Option<(&str, Option<&str>)> {
    rollout
        .status
        .as_ref()
        .map(|s| (s.step.as_str(), s.instance.as_deref()))
}

/// Each case's action and the step status says.
fn check(cases: Vec<Case<'_>>) {
    for (case, input, action, step) in cases {
        let rollout = decide(&input);
        assert_eq!(rollout.action, action, "{case}");
        assert_eq!(step_of(&rollout), step, "{case}");
    }
}

/// A rolling update replaces the replicas first, one at a time ...
#[test]
fn a_rolling_update_replaces_replicas_first_one_at_a_time() {
    use Action::*;
    let with = |f: &dyn Fn(&mut Input)| {
        let mut i = input(vec![
            member("db-1", true),
            member("db-2", true),
            member("db-3", true),
        ]);
        f(&mut i);
        i
    };
    check(vec![
        (
            "up to date: nothing to do",
            input(vec![member("db-1", false), member("db-2", false)]),
            Wait,
            None,
        ),
        (
            "replicas first, lowest serial first",
            with(&|_| {}),
            Replace("db-2".into()),
            Some(("ReplacingReplica", Some("db-2"))),
        ),
        (
            "the next replica waits until the last one is ready",
            with(&|i| i.members[1].ready = false),
            Wait,
            Some(("WaitingForReplica", Some("db-2"))),
        ),
        (
            "...and streaming again",
            with(&|i| i.members[1].streaming = false),
            Wait,
            Some(("WaitingForReplica", Some("db-2"))),
        ),
        (
            "nothing while another change or a promotion moves",
            with(&|i| i.settled = false),
            Wait,
            Some(("WaitingForReplica", None)),
        ),
        (
            "paused",
            with(&|i| i.paused = true),
            Wait,
            Some(("Paused", None)),
        ),
    ]);
}

/// ... then switches over and replaces the former primary.
#[test]
fn a_rolling_update_switches_over_then_replaces_the_former_primary() {
    use Action::*;
    check(vec![
        (
            "the primary last: switchover to the most advanced updated replica",
            input(vec![
                member("db-1", true),
                Member {
                    position: Some(90),
                    ..member("db-2", false)
                },
                member("db-3", false),
            ]),
            Switchover("db-3".into()),
            Some(("Switchover", Some("db-3"))),
        ),
        (
            "the former primary, now a replica, is replaced after the switchover",
            Input {
                primary: "db-3".into(),
                ..input(vec![
                    member("db-1", true),
                    member("db-2", false),
                    member("db-3", false),
                ])
            },
            Replace("db-1".into()),
            Some(("ReplacingReplica", Some("db-1"))),
        ),
        (
            "primaryUpdateMethod: restart restarts the primary in place",
            Input {
                method: PrimaryUpdateMethod::Restart,
                ..input(vec![member("db-1", true), member("db-2", false)])
            },
            Replace("db-1".into()),
            Some(("RestartingPrimary", Some("db-1"))),
        ),
        (
            "a single instance restarts in place",
            input(vec![member("db-1", true)]),
            Replace("db-1".into()),
            Some(("RestartingPrimary", Some("db-1"))),
        ),
    ]);
}

#[test]
fn an_operator_upgrade_rolls_only_with_a_slot_and_says_why() {
    let operator = |name: &str| Member {
        reasons: vec![OPERATOR_VERSION],
        ..member(name, true)
    };
    let mut waiting = input(vec![operator("db-1"), operator("db-2")]);
    let rollout = decide(&waiting);
    assert_eq!(rollout.action, Action::Wait);
    let status = rollout.status.expect("a rollout");
    assert_eq!(status.step, "WaitingForSlot");
    assert!(status.operator_upgrade);
    assert_eq!(status.reason, "changed: the operator's version");
    assert_eq!(status.outdated, ["db-1", "db-2"]);
    waiting.slot = true;
    assert_eq!(decide(&waiting).action, Action::Replace("db-2".into()));

    // A change of the spec rolls at once, whatever the operator does.
    let mixed = input(vec![operator("db-1"), member("db-2", true)]);
    assert!(!operator_only(&mixed.members));
    let rollout = decide(&mixed);
    assert_eq!(rollout.action, Action::Replace("db-2".into()));
    assert_eq!(
        rollout.status.expect("a rollout").reason,
        "changed: spec.resources, the operator's version"
    );
}

#[test]
fn an_operator_upgrade_keeps_its_slot_until_the_last_pod_replaced_serves() {
    let previous = |operator_upgrade: bool| RolloutStatus {
        step: "RestartingPrimary".to_owned(),
        instance: Some("db-1".to_owned()),
        reason: "changed: the operator's version".to_owned(),
        outdated: vec!["db-1".to_owned()],
        operator_upgrade,
    };
    let starting = Member {
        ready: false,
        ..member("db-1", false)
    };
    let serving = member("db-1", false);
    let starting = std::slice::from_ref(&starting);
    assert!(needs_slot(starting, Some(&previous(true))));
    assert!(
        !needs_slot(&[serving], Some(&previous(true))),
        "given back once it serves"
    );
    assert!(
        !needs_slot(starting, Some(&previous(false))),
        "a spec change needs none"
    );
    assert!(!needs_slot(starting, None));
}

#[test]
fn the_last_pod_replaced_is_followed_until_it_serves_again() {
    let previous = |step: &str| RolloutStatus {
        step: step.to_owned(),
        instance: Some("db-1".to_owned()),
        reason: "changed: spec.resources".to_owned(),
        outdated: vec!["db-1".to_owned()],
        operator_upgrade: false,
    };
    let restarting = Member {
        ready: false,
        ..member("db-1", false)
    };
    let mut waiting = input(vec![restarting, member("db-2", false)]);
    waiting.previous = Some(previous("RestartingPrimary"));
    let rollout = decide(&waiting);
    assert_eq!(rollout.action, Action::Wait);
    assert_eq!(step_of(&rollout), Some(("RestartingPrimary", Some("db-1"))));
    waiting.previous = Some(previous("ReplacingReplica"));
    assert_eq!(
        step_of(&decide(&waiting)),
        Some(("WaitingForReplica", Some("db-1")))
    );
    waiting.members[0].ready = true;
    assert_eq!(decide(&waiting).status, None, "done once it serves");
}

/// Settings waiting for a restart roll like a template change, replicas
/// first; one that lowers a standby minimum restarts the primary first,
/// in place, whatever the update method.
#[test]
fn pending_settings_roll_replicas_first_unless_a_standby_minimum_is_lowered() {
    use Action::*;
    let pending = |name: &str, lowers_minimums: bool| Member {
        reasons: vec![PENDING_RESTART],
        lowers_minimums,
        ..member(name, true)
    };
    check(vec![
        (
            "raised: a replica first",
            input(vec![
                pending("db-1", false),
                pending("db-2", false),
                pending("db-3", false),
            ]),
            Replace("db-2".into()),
            Some(("ReplacingReplica", Some("db-2"))),
        ),
        (
            "lowered: the primary first, in place",
            input(vec![
                pending("db-1", true),
                pending("db-2", true),
                pending("db-3", true),
            ]),
            Replace("db-1".into()),
            Some(("RestartingPrimary", Some("db-1"))),
        ),
        (
            "lowered, the primary done: the replicas",
            input(vec![
                member("db-1", false),
                pending("db-2", true),
                pending("db-3", true),
            ]),
            Replace("db-2".into()),
            Some(("ReplacingReplica", Some("db-2"))),
        ),
        (
            "a lowering replica never jumps the queue",
            input(vec![
                pending("db-1", false),
                pending("db-2", true),
                member("db-3", false),
            ]),
            Replace("db-2".into()),
            Some(("ReplacingReplica", Some("db-2"))),
        ),
    ]);
    let rollout = decide(&input(vec![pending("db-1", false), pending("db-2", false)]));
    assert_eq!(
        rollout.status.expect("a rollout").reason,
        "changed: settings that need a restart"
    );
}

/// While the primary restarts in place its standbys stop streaming too:
/// the status names the primary, not the first standby.
#[test]
fn a_primary_restarting_in_place_is_what_status_names() {
    let previous = RolloutStatus {
        step: "RestartingPrimary".to_owned(),
        instance: Some("db-3".to_owned()),
        reason: "changed: settings that need a restart".to_owned(),
        outdated: vec!["db-1".to_owned(), "db-2".to_owned(), "db-3".to_owned()],
        operator_upgrade: false,
    };
    let down = |name: &str| Member {
        ready: false,
        streaming: false,
        reasons: vec![PENDING_RESTART],
        lowers_minimums: true,
        ..member(name, true)
    };
    let mut waiting = input(vec![down("db-1"), down("db-2"), down("db-3")]);
    waiting.primary = "db-3".to_owned();
    waiting.previous = Some(previous);
    let rollout = decide(&waiting);
    assert_eq!(rollout.action, Action::Wait);
    assert_eq!(step_of(&rollout), Some(("RestartingPrimary", Some("db-3"))));
}
