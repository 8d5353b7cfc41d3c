//! The pods this kubelet serves logs and exec sessions for: each pod's
//! directory, its live container states and how its containers run
//! commands. Pod workers register and unregister their pod; the kubelet's
//! server (`server`) only reads.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use super::plan::ExecTemplate;
use super::status::{ContainerReport, PodState};

/// One pod as the server sees it.
#[derive(Clone, Debug)]
pub struct ServedPod {
    pub uid: String,
    pub pod_dir: PathBuf,
    pub state: Arc<Mutex<PodState>>,
    /// Per container; filled once the pod's containers are planned.
    pub exec: BTreeMap<String, ExecTemplate>,
}

impl ServedPod {
    /// A pod whose containers are not planned yet.
    pub fn new(uid: &str, pod_dir: &std::path::Path, state: &Arc<Mutex<PodState>>) -> Self {
        Self {
            uid: uid.to_owned(),
            pod_dir: pod_dir.to_owned(),
            state: state.clone(),
            exec: BTreeMap::new(),
        }
    }

    /// The container's current report, from init and main containers.
    pub fn report(&self, container: &str) -> Option<ContainerReport> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state
            .init
            .iter()
            .chain(&state.main)
            .find(|r| r.name == container)
            .cloned()
    }

    /// Where the instance numbered `instance` of `container` logs.
    pub fn log_file(&self, container: &str, instance: i32) -> PathBuf {
        super::logs::run_log(&self.pod_dir.join("logs").join(container), instance)
    }
}

type Key = (String, String);

/// Every pod a worker runs, by namespace and name.
#[derive(Clone, Debug, Default)]
pub struct ServedPods(Arc<Mutex<HashMap<Key, ServedPod>>>);

impl ServedPods {
    fn pods(&self) -> std::sync::MutexGuard<'_, HashMap<Key, ServedPod>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn register(&self, namespace: &str, name: &str, pod: ServedPod) {
        self.pods()
            .insert((namespace.to_owned(), name.to_owned()), pod);
    }

    /// Records how the pod's containers run commands.
    pub fn set_exec(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        exec: BTreeMap<String, ExecTemplate>,
    ) {
        if let Some(pod) = self
            .pods()
            .get_mut(&(namespace.to_owned(), name.to_owned()))
            .filter(|p| p.uid == uid)
        {
            pod.exec = exec;
        }
    }

    /// Forgets the pod, unless a newer pod of the same name took its place.
    pub fn unregister(&self, namespace: &str, name: &str, uid: &str) {
        let mut pods = self.pods();
        let key = (namespace.to_owned(), name.to_owned());
        if pods.get(&key).is_some_and(|p| p.uid == uid) {
            pods.remove(&key);
        }
    }

    pub fn get(&self, namespace: &str, name: &str) -> Option<ServedPod> {
        self.pods()
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }
}
