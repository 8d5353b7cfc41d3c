use tusk_operator::reconcile::preview::{EventLine, StatusChange, Step};

use super::*;

fn preview() -> Preview {
    Preview {
        cluster: "tiny".into(),
        namespace: "default".into(),
        at: "2026-12-05T03:00:00Z".into(),
        held: None,
        refused: None,
        steps: Vec::new(),
        status: Vec::new(),
        events: Vec::new(),
        unreached: Vec::new(),
        notes: Vec::new(),
    }
}

#[test]
fn a_converged_cluster_has_nothing_to_do() {
    assert_eq!(
        render(&preview()),
        "Plan for default/tiny (from the live objects at 2026-12-05T03:00:00Z; nothing was applied)\n\
         Nothing to do: the cluster is as declared.\n"
    );
}

#[test]
fn steps_status_events_and_what_was_missing_are_listed_in_that_order() {
    let mut preview = preview();
    preview.held = Some("spec.paused is true: these steps wait until it is unset".into());
    preview.steps = vec![
        Step {
            action: "update",
            object: "PersistentVolumeClaim/tiny-1".into(),
            why: "grow from 1Gi to 2Gi (spec.storage.size)".into(),
        },
        Step {
            action: "create",
            object: "Pod/tiny-3".into(),
            why: "a new instance: 3 declared, 2 with a pod".into(),
        },
    ];
    preview.status = vec![StatusChange {
        field: "phase".into(),
        from: "Ready".into(),
        to: "Scaling".into(),
    }];
    preview.events = vec![EventLine {
        type_: "Normal",
        reason: "RollingUpdate".into(),
        message: "replacing the pod of tiny-2".into(),
    }];
    preview.unreached = vec!["tiny-2: 403 Forbidden".into()];
    preview.notes = vec!["a note".into()];
    assert_eq!(
        render(&preview),
        "Plan for default/tiny (from the live objects at 2026-12-05T03:00:00Z; nothing was applied)\n\
         Held: spec.paused is true: these steps wait until it is unset\n\
         \n\
         Steps:\n\
         \x20 update  PersistentVolumeClaim/tiny-1  grow from 1Gi to 2Gi (spec.storage.size)\n\
         \x20 create  Pod/tiny-3                    a new instance: 3 declared, 2 with a pod\n\
         \n\
         Status:\n\
         \x20 phase: Ready -> Scaling\n\
         \n\
         Events:\n\
         \x20 Normal  RollingUpdate  replacing the pod of tiny-2\n\
         \n\
         Decided without the report of:\n\
         - tiny-2: 403 Forbidden\n\
         \n\
         Notes:\n\
         - a note\n"
    );
}

#[test]
fn a_refused_spec_is_said_before_the_steps_that_keep_the_last_valid_one() {
    let mut preview = preview();
    preview.refused = Some(
        "spec.postgres.parameters.shared_buffers: must be an integer; nothing of this change \
         is applied: the cluster is kept as its last valid spec (generation 3) declares it"
            .into(),
    );
    preview.steps = vec![Step {
        action: "create",
        object: "Pod/tiny-1".into(),
        why: "recreate the pod of tiny-1".into(),
    }];
    let text = render(&preview);
    let refused = text.find("Refused: spec.postgres.parameters.shared_buffers");
    let steps = text.find("Steps:");
    assert!(
        refused.is_some_and(|r| steps.is_some_and(|s| r < s)),
        "{text}"
    );
    assert!(!text.contains("Held:"), "the steps are carried out: {text}");
}
