//! What a repetition does to the primary, named by the benchmark's
//! argument (`freeze` by default): the cases of the failover matrix that
//! end in a failover.

use super::common::{NS, World};

/// The container every instance runs in.
const CONTAINER: &str = "postgres";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Every process of the pod stopped (SIGSTOP): a hung node.
    Freeze,
    /// The postmaster and the instance manager stopped, PostgreSQL's
    /// backends running on with their connections: a primary that can
    /// neither renew its lease nor fence itself.
    Hang,
    /// Every process of the pod killed (SIGKILL), again and again until
    /// another instance is chosen: the kubelet restarts the container in
    /// place each time, as after crashes in a row.
    Kill,
    /// Its pod cut off from the API server, its clients still reaching
    /// it: its manager can renew nothing, so it fences itself.
    Cut,
}

impl Fault {
    /// The fault the arguments name.
    pub fn from_args() -> Self {
        let args: Vec<String> = std::env::args().skip(1).collect();
        if args.iter().any(|a| a == "hang") {
            Fault::Hang
        } else if args.iter().any(|a| a == "kill") {
            Fault::Kill
        } else if args.iter().any(|a| a == "cut") {
            Fault::Cut
        } else {
            Fault::Freeze
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Fault::Freeze => "whole process tree frozen",
            Fault::Hang => "postmaster and instance manager frozen, backends running",
            Fault::Kill => "every process killed until another instance is chosen",
            Fault::Cut => "cut off from the API server, clients still reaching it",
        }
    }

    /// Does it to `pod`, once.
    pub fn strike(self, world: &World, pod: &str) {
        let faults = world.node.as_ref().expect("a node").faults();
        let done = match self {
            Fault::Freeze => faults.freeze(NS, pod, CONTAINER).map(|_| 1),
            // PostgreSQL's children retitle themselves "postgres: ...";
            // the postmaster and the instance manager keep their command
            // lines, and so does the manager's fence watchdog, a process
            // of its own that this fault leaves running.
            Fault::Hang => faults.freeze_where(NS, pod, CONTAINER, |line| {
                !line.starts_with("postgres: ") && !line.contains(" instance watchdog")
            }),
            Fault::Kill => faults.kill(NS, pod, CONTAINER).map(|_| 1),
            Fault::Cut => {
                world.partitions().cut_pod(NS, pod);
                Ok(1)
            }
        };
        match (self, done) {
            (Fault::Hang, Ok(frozen)) => {
                assert!(frozen >= 2, "the postmaster and the manager: {frozen}")
            }
            // Between two restarts nothing runs to be killed.
            (Fault::Kill, _) | (_, Ok(_)) => {}
            (_, Err(error)) => panic!("{self:?} {pod}: {error}"),
        }
    }

    /// Whether to strike again while no other instance is chosen.
    pub fn repeats(self) -> bool {
        self == Fault::Kill
    }

    /// Undoes it: the stopped processes continue, the cut heals (a killed
    /// container restarts by itself).
    pub fn heal(self, world: &World, pod: &str) {
        let faults = world.node.as_ref().expect("a node").faults();
        match self {
            Fault::Freeze | Fault::Hang => faults.thaw(NS, pod, CONTAINER).expect("thaw"),
            Fault::Cut => world.partitions().heal_pod(NS, pod),
            Fault::Kill => {}
        }
    }
}
