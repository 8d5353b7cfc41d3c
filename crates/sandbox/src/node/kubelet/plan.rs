//! Planning one container: its user (runAsUser, runAsNonRoot), mounts,
//! environment, program and probes, or the configuration error that keeps
//! it from starting.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod, Probe};
use kube::ResourceExt;

use super::Context;
use super::env::{container_env, expand};
use super::images::ImageMapping;
use super::inputs::PodInputs;
use super::isolation::TOKEN_MOUNT_PATH;
use super::probes::ProbePlan;
use super::process::ProcessSpec;
use super::runtime::Launch;
use super::status::CONFIG_ERROR;
use super::termination::TerminationMessage;
use super::volumes::Mounts;

pub(super) fn security<T>(
    pod: &Pod,
    container: &Container,
    get: impl Fn(&k8s_openapi::api::core::v1::PodSecurityContext) -> Option<T>,
    get_c: impl Fn(&k8s_openapi::api::core::v1::SecurityContext) -> Option<T>,
) -> Option<T> {
    container
        .security_context
        .as_ref()
        .and_then(get_c)
        .or_else(|| pod.spec.as_ref()?.security_context.as_ref().and_then(get))
}

/// The user a container runs as: `None` for the sandbox's own user.
/// A container that asks for non-root never runs as root.
fn container_user(
    pod: &Pod,
    container: &Container,
    root: bool,
) -> Result<Option<(u32, u32)>, String> {
    let uid = security(pod, container, |p| p.run_as_user, |c| c.run_as_user);
    let gid = security(pod, container, |p| p.run_as_group, |c| c.run_as_group);
    let non_root =
        security(pod, container, |p| p.run_as_non_root, |c| c.run_as_non_root).unwrap_or(false);
    if !root {
        // Not root: every process runs as the sandbox's (non-root) user.
        return Ok(None);
    }
    // Admission refuses ids outside 0..=2^31-1; a stored object that
    // escaped it must never wrap into root.
    let id = |value: i64, field: &str| {
        u32::try_from(value).map_err(|_| format!("{field} {value} is not a valid id"))
    };
    let uid = uid.map_or(Ok(0), |u| id(u, "runAsUser"))?;
    if uid == 0 {
        if non_root {
            return Err(
                "container has runAsNonRoot and image will run as root (set runAsUser)".into(),
            );
        }
        return Ok(None);
    }
    let gid = match gid {
        Some(g) => id(g, "runAsGroup")?,
        None => nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
            .ok()
            .flatten()
            .map_or(uid, |u| u.gid.as_raw()),
    };
    Ok(Some((uid, gid)))
}

/// Everything a container's processes share: environment, mounts, user.
#[derive(Clone, Debug)]
pub struct ProcessBase {
    env: Vec<(String, String)>,
    defined: BTreeMap<String, String>,
    mounts: Mounts,
    working_dir: PathBuf,
    user: Option<(u32, u32)>,
    token_dir: Option<PathBuf>,
    root: bool,
}

impl ProcessBase {
    fn spec(
        &self,
        images: &ImageMapping,
        tusk_binary: &Path,
        image: &str,
        command: &[String],
        args: &[String],
        log: PathBuf,
    ) -> Result<ProcessSpec, (String, String)> {
        let expand_all = |items: &[String]| -> Vec<String> {
            items
                .iter()
                .map(|item| self.mounts.translate(&expand(item, &self.defined)))
                .collect()
        };
        let command = expand_all(command);
        let args = expand_all(args);
        let first = command.first().cloned().unwrap_or_default();
        // A program the pod put into one of its volumes runs from there.
        let in_volume = !first.is_empty() && self.mounts.holds(Path::new(&first));
        let mut env = self.env.clone();
        let (program, mut all_args) = if in_volume {
            images
                .available(image)
                .map_err(|e| ("ImageNotMapped".to_owned(), e.to_string()))?;
            (PathBuf::from(&first), command[1..].to_vec())
        } else {
            let program = images
                .resolve(image, &command, tusk_binary)
                .map_err(|e| ("ImageNotMapped".to_owned(), e.to_string()))?;
            if let Some(dir) = &program.bin_dir {
                for (_, value) in env.iter_mut().filter(|(name, _)| name == "PATH") {
                    *value = format!("{}:{value}", dir.display());
                }
            }
            (program.path, program.args)
        };
        all_args.extend(args);
        Ok(ProcessSpec {
            program,
            args: all_args,
            env,
            working_dir: self.working_dir.clone(),
            user: self.user,
            log,
            token_dir: self.token_dir.clone(),
            root: self.root,
        })
    }
}

/// Everything needed to (re)start one container.
#[derive(Clone, Debug)]
pub struct ContainerPlan {
    pub name: String,
    /// How to run the container, or why it cannot run (reason, message).
    pub process: Result<Launch, (String, String)>,
    pub log_dir: PathBuf,
    pub startup: Option<ProbePlan>,
    pub liveness: Option<ProbePlan>,
    pub readiness: Option<ProbePlan>,
    pub grace: Duration,
    /// How `pods/exec` runs commands in this container; `None` when the
    /// container cannot run.
    pub exec: Option<ExecTemplate>,
    /// Where the container writes why it ended, and the policy for it.
    pub termination: TerminationMessage,
}

/// How a container's `pods/exec` commands become processes: as its exec
/// probes do, with its user, environment, working directory and mounts.
#[derive(Clone, Debug)]
pub enum ExecTemplate {
    /// The process runtime's: a host process set up like the container's.
    Process {
        base: Box<ProcessBase>,
        image: String,
        images: ImageMapping,
        tusk_binary: PathBuf,
    },
    /// The Docker runtime's: `docker exec` in the named container, which
    /// runs the command with the container's user, environment, working
    /// directory, mounts and namespaces.
    Docker { container: String },
}

impl ExecTemplate {
    fn new(ctx: &Context, base: &ProcessBase, image: &str) -> Self {
        Self::Process {
            base: Box::new(base.clone()),
            image: image.to_owned(),
            images: ctx.config.images.clone(),
            tusk_binary: ctx.config.tusk_binary.clone(),
        }
    }

    /// The process for `command`; its `log` is unused (exec output goes to
    /// the caller).
    pub fn spec(&self, command: &[String]) -> Result<ProcessSpec, String> {
        match self {
            Self::Process {
                base,
                image,
                images,
                tusk_binary,
            } => base
                .spec(images, tusk_binary, image, command, &[], PathBuf::new())
                .map_err(|(_, message)| message),
            Self::Docker { container } => Ok(docker_exec(container, command, PathBuf::new())),
        }
    }
}

/// The host process that runs `command` in the Docker container
/// `container` (the `docker` client, with stdin kept open for exec
/// sessions), its output going to `log` when it is a probe's.
pub fn docker_exec(container: &str, command: &[String], log: PathBuf) -> ProcessSpec {
    let mut args = vec!["exec".to_owned(), "-i".to_owned(), container.to_owned()];
    args.extend(command.iter().cloned());
    ProcessSpec {
        program: PathBuf::from("docker"),
        args,
        env: vec![
            (
                "PATH".into(),
                std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into()),
            ),
            (
                "HOME".into(),
                std::env::temp_dir().to_string_lossy().into_owned(),
            ),
        ],
        working_dir: std::env::temp_dir(),
        user: None,
        log,
        token_dir: None,
        root: false,
    }
}

/// What every container of a pod is planned from.
#[derive(Clone, Copy)]
pub struct PodFacts<'a> {
    pub ctx: &'a Context,
    pub pod: &'a Pod,
    pub inputs: &'a PodInputs,
    pub volume_dirs: &'a BTreeMap<String, PathBuf>,
    pub pod_dir: &'a Path,
    pub pod_ip: Ipv4Addr,
    pub grace: Duration,
}

impl PodFacts<'_> {
    /// The termination message file and policy of `container`.
    pub fn termination_message(&self, container: &Container) -> TerminationMessage {
        let volumes_dir = self
            .ctx
            .pod_volumes_dir(&self.pod.uid().unwrap_or_default());
        TerminationMessage::for_container(container, &volumes_dir)
    }
}

pub fn plan_container(facts: PodFacts<'_>, container: &Container) -> ContainerPlan {
    let PodFacts {
        ctx,
        pod_dir,
        pod_ip,
        grace,
        ..
    } = facts;
    let log_dir = pod_dir.join("logs").join(&container.name);
    let mut plan = ContainerPlan {
        name: container.name.clone(),
        process: Err((String::new(), String::new())),
        log_dir: log_dir.clone(),
        startup: None,
        liveness: None,
        readiness: None,
        grace,
        exec: None,
        termination: facts.termination_message(container),
    };
    let config_error = |message: String| Err((CONFIG_ERROR.to_owned(), message));
    let base = match process_base(facts, container, &plan.termination) {
        Ok(base) => base,
        Err(message) => {
            plan.process = config_error(message);
            return plan;
        }
    };
    let image = container.image.clone().unwrap_or_default();
    plan.exec = Some(ExecTemplate::new(ctx, &base, &image));
    plan.process = base
        .spec(
            &ctx.config.images,
            &ctx.config.tusk_binary,
            &image,
            container.command.as_deref().unwrap_or(&[]),
            container.args.as_deref().unwrap_or(&[]),
            log_dir.join("0.log"),
        )
        .map(Launch::Process);
    let probe_log = log_dir.join("probes.log");
    add_probes(&mut plan, container, pod_ip, |command| {
        base.spec(
            &ctx.config.images,
            &ctx.config.tusk_binary,
            &image,
            command,
            &[],
            probe_log.clone(),
        )
        .map_err(|(_, message)| message)
    });
    plan
}

/// Plans the container's startup, liveness and readiness probes, their
/// exec commands made by `exec`; an invalid probe makes the container a
/// CreateContainerConfigError, as the kubelet reports it.
pub fn add_probes(
    plan: &mut ContainerPlan,
    container: &Container,
    pod_ip: Ipv4Addr,
    exec: impl Fn(&[String]) -> Result<ProcessSpec, String>,
) {
    let probe = |probe: Option<&Probe>| -> Result<Option<ProbePlan>, String> {
        let Some(probe) = probe else { return Ok(None) };
        match ProbePlan::new(probe, container, IpAddr::V4(pod_ip), &exec) {
            Ok(Ok(plan)) => Ok(Some(plan)),
            Ok(Err(message)) => Err(message),
            Err(e) => Err(e.to_string()),
        }
    };
    let probes = (
        probe(container.startup_probe.as_ref()),
        probe(container.liveness_probe.as_ref()),
        probe(container.readiness_probe.as_ref()),
    );
    match probes {
        (Ok(startup), Ok(liveness), Ok(readiness)) => {
            plan.startup = startup;
            plan.liveness = liveness;
            plan.readiness = readiness;
        }
        (Err(message), _, _) | (_, Err(message), _) | (_, _, Err(message)) => {
            plan.process = Err((CONFIG_ERROR.to_owned(), format!("invalid probe: {message}")));
        }
    }
}

/// The environment, mounts (its termination message file among them),
/// working directory and user of a container; the message of a
/// CreateContainerConfigError when they cannot be made.
fn process_base(
    facts: PodFacts<'_>,
    container: &Container,
    termination: &TerminationMessage,
) -> Result<ProcessBase, String> {
    let PodFacts {
        ctx,
        pod,
        inputs,
        volume_dirs,
        pod_dir,
        ..
    } = facts;
    let root = pod_dir.join("root").join(&container.name);
    let mut mounts =
        Mounts::for_container(container, volume_dirs, &root).map_err(|e| e.to_string())?;
    if let Some(file) = &termination.file {
        mounts = mounts.with_file(&file.path, &file.host);
    }
    if let Some((path, dir)) = container
        .image
        .as_deref()
        .and_then(|image| ctx.config.images.image_path(image))
    {
        mounts = mounts.with_file(&path, &dir);
    }
    let user = container_user(pod, container, ctx.root)?;
    let vars =
        container_env(pod, container, inputs, &inputs.service_env()).map_err(|e| e.to_string())?;
    let mut env: Vec<(String, String)> = vec![
        (
            "PATH".into(),
            std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into()),
        ),
        ("HOSTNAME".into(), pod.name_any()),
        ("HOME".into(), pod_dir.to_string_lossy().into_owned()),
        ("TUSK_SANDBOX_MOUNTS".into(), mounts.describe()),
    ];
    env.extend(vars.into_iter().map(|(k, v)| (k, mounts.translate(&v))));
    let defined: BTreeMap<String, String> = env.iter().cloned().collect();
    let working_dir = container.working_dir.as_deref().map_or_else(
        || pod_dir.to_owned(),
        |dir| PathBuf::from(mounts.translate(dir)),
    );
    Ok(ProcessBase {
        env,
        defined,
        mounts,
        working_dir,
        user,
        token_dir: token_dir(container, volume_dirs),
        root: ctx.root,
    })
}

/// The host directory of what the container mounts at the ServiceAccount
/// token path, if anything.
fn token_dir(container: &Container, volume_dirs: &BTreeMap<String, PathBuf>) -> Option<PathBuf> {
    let mount = container
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path.trim_end_matches('/') == TOKEN_MOUNT_PATH)?;
    let dir = volume_dirs.get(&mount.name)?;
    Some(match mount.sub_path.as_deref().filter(|s| !s.is_empty()) {
        Some(sub) => dir.join(sub),
        None => dir.clone(),
    })
}
