//! Fault injection and request counting, in process, for tests.
//!
//! Controllers must survive throttling, server errors, slow responses and
//! dropped watches; these handles make the sandbox produce each of them on
//! demand. The counter records every request by verb and resource, so a test
//! can prove that a converged reconcile makes no writes.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use crate::apiserver::error::ApiError;
use crate::apiserver::partitions::Partitions;

/// The status an injected failure answers with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// 429 with `Retry-After: seconds`.
    TooManyRequests { retry_after_seconds: u64 },
    /// 500.
    Internal,
    /// 503.
    Unavailable,
}

#[derive(Debug)]
struct Rule {
    verb: String,
    resource: String,
    remaining: usize,
    failure: Failure,
}

#[derive(Debug, Default)]
struct State {
    rules: Vec<Rule>,
    delay: Option<Duration>,
    counts: BTreeMap<(String, String), u64>,
}

/// Shared handle; clone it freely.
#[derive(Clone, Debug)]
pub struct Faults {
    state: Arc<Mutex<State>>,
    watch_generation: Arc<watch::Sender<u64>>,
    partitions: Partitions,
}

impl Default for Faults {
    fn default() -> Self {
        let (sender, _) = watch::channel(0);
        Self {
            state: Arc::default(),
            watch_generation: Arc::new(sender),
            partitions: Partitions::default(),
        }
    }
}

fn matches(pattern: &str, value: &str) -> bool {
    pattern == "*" || pattern == value
}

impl Faults {
    /// Fails the next `count` requests whose verb (`get`, `list`, `watch`,
    /// `create`, `update`, `patch`, `delete`, `deletecollection`, or `*`) and
    /// resource (plural, with `/status` for the subresource, or `*`) match.
    pub fn fail_next(&self, count: usize, verb: &str, resource: &str, failure: Failure) {
        if let Ok(mut state) = self.state.lock() {
            state.rules.push(Rule {
                verb: verb.to_owned(),
                resource: resource.to_owned(),
                remaining: count,
                failure,
            });
        }
    }

    /// Delays every response by `delay` (`None` to stop).
    pub fn set_delay(&self, delay: Option<Duration>) {
        if let Ok(mut state) = self.state.lock() {
            state.delay = delay;
        }
    }

    /// Pods and nodes cut off from the API server.
    pub fn partitions(&self) -> &Partitions {
        &self.partitions
    }

    /// Ends every open watch now; clients must resume.
    pub fn close_watches(&self) {
        self.watch_generation.send_modify(|g| *g += 1);
    }

    /// Signals watches to end when [`Faults::close_watches`] is called.
    pub fn watch_closer(&self) -> watch::Receiver<u64> {
        self.watch_generation.subscribe()
    }

    /// How many requests were made with this verb on this resource.
    pub fn count(&self, verb: &str, resource: &str) -> u64 {
        self.state
            .lock()
            .map(|s| {
                s.counts
                    .iter()
                    .filter(|((v, r), _)| matches(verb, v) && matches(resource, r))
                    .map(|(_, n)| *n)
                    .sum()
            })
            .unwrap_or(0)
    }

    /// Every count, keyed by (verb, resource).
    pub fn counts(&self) -> BTreeMap<(String, String), u64> {
        self.state
            .lock()
            .map(|s| s.counts.clone())
            .unwrap_or_default()
    }

    /// Writes (create, update, patch, delete, deletecollection) counted so far.
    pub fn writes(&self) -> u64 {
        ["create", "update", "patch", "delete", "deletecollection"]
            .iter()
            .map(|verb| self.count(verb, "*"))
            .sum()
    }

    pub fn reset_counts(&self) {
        if let Ok(mut state) = self.state.lock() {
            state.counts.clear();
        }
    }

    /// Counts the request and returns the injected failure, if any, and the
    /// delay to apply.
    pub(crate) fn on_request(
        &self,
        verb: &str,
        resource: &str,
    ) -> (Option<ApiError>, Option<Duration>) {
        let Ok(mut state) = self.state.lock() else {
            return (None, None);
        };
        *state
            .counts
            .entry((verb.to_owned(), resource.to_owned()))
            .or_default() += 1;
        let delay = state.delay;
        let failure = state
            .rules
            .iter_mut()
            .find(|r| r.remaining > 0 && matches(&r.verb, verb) && matches(&r.resource, resource))
            .map(|rule| {
                rule.remaining -= 1;
                rule.failure
            });
        state.rules.retain(|r| r.remaining > 0);
        let error = failure.map(|failure| match failure {
            Failure::TooManyRequests {
                retry_after_seconds,
            } => ApiError::Injected {
                code: 429,
                message: "Too many requests, please try again later.".into(),
                retry_after: Some(retry_after_seconds),
            },
            Failure::Internal => ApiError::Injected {
                code: 500,
                message: "Internal error occurred: injected failure".into(),
                retry_after: None,
            },
            Failure::Unavailable => ApiError::Injected {
                code: 503,
                message: "The server is currently unable to handle the request".into(),
                retry_after: None,
            },
        });
        (error, delay)
    }
}
