//! A real control plane for tests: etcd, kube-apiserver and, when asked,
//! kube-controller-manager and kube-scheduler (v1.36), started by the
//! `kube-up` script of the shared Kubernetes folder (`../shared/k8s` beside
//! the repository, or `$TUSK_KUBE_UP`).
//!
//! The real API server decides what it alone can decide (CRD structural
//! and CEL checks with their cost estimates, defaulting, RBAC, server-side
//! apply): tests that take it as the referee start one with
//! [`KubeUp::start`]. Where the folder is absent, [`KubeUp::start`] says so
//! plainly on standard error and returns `None`; the caller then returns
//! (this is the one lane allowed to stand down for a missing component).
//!
//! `kube-up` serves until its standard input closes. It watches that from
//! a background job, which a non-interactive bash gives `/dev/null` for
//! input unless job control is on, so it is started with job control
//! (`BASH_ENV` pointing at a file that says `set -m`), its input a pipe
//! this value holds. Dropping the value stops it: kube-up is sent SIGTERM,
//! and every process still running from its directory is killed, so a
//! test does not wait out kube-apiserver's graceful shutdown.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use kube::Client;
use serde::Deserialize;
use tempfile::TempDir;

/// The components to start beside etcd and kube-apiserver.
#[derive(Clone, Copy, Debug, Default)]
pub struct Components {
    pub controller_manager: bool,
    pub scheduler: bool,
    /// kube-apiserver writes an audit log (every request, at level
    /// Metadata) that [`KubeUp::audit`] reads.
    pub audit: bool,
}

/// One request as kube-apiserver's audit log records it.
#[derive(Clone, Debug, Deserialize)]
pub struct AuditEvent {
    pub stage: String,
    pub verb: String,
    #[serde(rename = "requestURI")]
    pub request_uri: String,
    pub user: AuditUser,
    #[serde(rename = "responseStatus", default)]
    pub response_status: Option<AuditStatus>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct AuditUser {
    pub username: String,
}

#[derive(Clone, Debug, Deserialize)]
pub struct AuditStatus {
    #[serde(default)]
    pub code: u16,
}

impl AuditEvent {
    /// A request that changes state (rather than reads or watches it).
    pub fn is_write(&self) -> bool {
        matches!(
            self.verb.as_str(),
            "create" | "update" | "patch" | "delete" | "deletecollection"
        )
    }
}

/// How long kube-up may take to answer (it unpacks the binaries once).
const START: Duration = Duration::from_secs(180);

/// What kube-up prints once the API server is ready.
#[derive(Debug, Deserialize)]
struct Ready {
    kubeconfig: PathBuf,
    server: String,
}

/// A running control plane, stopped when dropped.
pub struct KubeUp {
    child: Child,
    /// Held open: kube-up stops when it closes.
    _stdin: ChildStdin,
    /// The admin kubeconfig (a client certificate in `system:masters`).
    pub kubeconfig: PathBuf,
    /// The API server's URL.
    pub server: String,
    /// Certificates, logs and etcd's data; `log/` has each component's log.
    pub dir: TempDir,
}

/// The kube-up script: `$TUSK_KUBE_UP`, or `../shared/k8s/kube-up` beside
/// the repository.
pub fn script() -> PathBuf {
    if let Some(path) = std::env::var_os("TUSK_KUBE_UP") {
        return PathBuf::from(path);
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/k8s/kube-up")
}

impl KubeUp {
    /// Starts a control plane with `components`, or returns `None` after
    /// saying why on standard error when the shared Kubernetes folder is
    /// absent. Panics when kube-up is there but fails.
    pub fn start(components: Components) -> Option<Self> {
        let script = script();
        if !script.exists() {
            eprintln!(
                "NOT RUN: this test needs a real kube-apiserver from {} (the shared Kubernetes \
                 folder), which is absent on this machine",
                script.display()
            );
            return None;
        }
        Some(Self::start_from(&script, components))
    }

    fn start_from(script: &Path, components: Components) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("tusk-kube-up-")
            .tempdir()
            .expect("a directory for kube-up");
        let job_control = dir.path().join("job-control.sh");
        std::fs::write(&job_control, "set -m\n").expect("kube-up's BASH_ENV file is written");
        let mut command = Command::new("bash");
        command
            .arg(script)
            .arg(dir.path().join("k8s"))
            .env("BASH_ENV", &job_control)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(
                std::fs::File::create(dir.path().join("kube-up.log"))
                    .expect("kube-up's log is created"),
            );
        if components.controller_manager {
            command.arg("--controller-manager");
        }
        if components.scheduler {
            command.arg("--scheduler");
        }
        // kube-apiserver calls kubelets (logs, exec) with a client
        // certificate of kube-up's CA, as a cluster's does.
        let pki = dir.path().join("k8s/pki");
        make_ca(&pki);
        let (cert, key) = sign_client_certificate(
            &pki,
            "apiserver-kubelet-client",
            "/O=system:masters/CN=kube-apiserver-kubelet-client",
        );
        // No kube-proxy runs on this control plane, so Service addresses
        // route nowhere: kube-apiserver reaches a Service (the operator's
        // admission webhook) at its endpoints, as the sandbox does.
        let mut apiserver_args = format!(
            "--kubelet-client-certificate={} --kubelet-client-key={} --enable-aggregator-routing=true",
            cert.display(),
            key.display()
        );
        if components.audit {
            let policy = dir.path().join("audit-policy.yaml");
            std::fs::write(
                &policy,
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n",
            )
            .expect("the audit policy is written");
            apiserver_args.push_str(&format!(
                " --audit-policy-file={} --audit-log-path={}",
                policy.display(),
                dir.path().join("audit.log").display()
            ));
        }
        command.env("KUBE_UP_APISERVER_ARGS", apiserver_args);
        let mut child = command.spawn().expect("kube-up starts");
        let stdin = child.stdin.take().expect("kube-up's stdin is piped");
        let stdout = child.stdout.take().expect("kube-up's stdout is piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(START).unwrap_or_default();
        let mut up = Self {
            child,
            _stdin: stdin,
            kubeconfig: PathBuf::new(),
            server: String::new(),
            dir,
        };
        let ready: Ready = serde_json::from_str(line.trim()).unwrap_or_else(|e| {
            let log =
                std::fs::read_to_string(up.dir.path().join("kube-up.log")).unwrap_or_default();
            panic!("kube-up did not print its JSON line within {START:?} ({e}): {log}")
        });
        up.kubeconfig = ready.kubeconfig;
        up.server = ready.server;
        up
    }

    /// A client with the admin's credentials.
    pub async fn client(&self) -> Client {
        crate::client::from_kubeconfig(&self.kubeconfig)
            .await
            .expect("a client for kube-apiserver builds")
    }

    /// A kubeconfig for the kubelet of the node `name`: a client
    /// certificate for `system:node:<name>` in group `system:nodes`,
    /// signed by kube-up's CA, so kube-apiserver's Node authorizer decides
    /// what it may do.
    pub fn node_kubeconfig(&self, name: &str) -> PathBuf {
        let pki = self.pki();
        let subject = format!("/O=system:nodes/CN=system:node:{name}");
        let (cert, key) = sign_client_certificate(&pki, &format!("node-{name}"), &subject);
        let kubeconfig = self.dir.path().join(format!("k8s/node-{name}.kubeconfig"));
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: kube-up\n  cluster: {{server: \"{server}\", certificate-authority: {ca}}}\n\
             users:\n- name: node\n  user: {{client-certificate: {cert}, client-key: {key}}}\n\
             contexts:\n- name: kube-up\n  context: {{cluster: kube-up, user: node}}\ncurrent-context: kube-up\n",
            server = self.server,
            ca = pki.join("ca.crt").display(),
            cert = cert.display(),
            key = key.display(),
        );
        std::fs::write(&kubeconfig, text).expect("the node's kubeconfig is written");
        kubeconfig
    }

    /// A client certificate and key for `subject` (`/O=group/CN=user`),
    /// signed by kube-up's CA: an identity the API server and kubelets
    /// authenticate, with no rights unless RBAC grants them.
    pub fn client_certificate(&self, name: &str, subject: &str) -> (PathBuf, PathBuf) {
        sign_client_certificate(&self.pki(), name, subject)
    }

    /// kube-up's CA certificate, which kubelets trust for kube-apiserver's
    /// client certificate.
    pub fn ca_file(&self) -> PathBuf {
        self.pki().join("ca.crt")
    }

    fn pki(&self) -> PathBuf {
        self.dir.path().join("k8s/pki")
    }

    /// `kubectl` with the admin's kubeconfig.
    pub fn kubectl(&self) -> Command {
        let mut command = Command::new("kubectl");
        command.env("KUBECONFIG", &self.kubeconfig);
        command
    }

    /// Every completed request in the audit log so far (empty unless
    /// started with [`Components::audit`]).
    pub fn audit(&self) -> Vec<AuditEvent> {
        let text = std::fs::read_to_string(self.dir.path().join("audit.log")).unwrap_or_default();
        text.lines()
            .filter_map(|line| serde_json::from_str::<AuditEvent>(line).ok())
            .filter(|event| event.stage == "ResponseComplete")
            .collect()
    }

    /// The last `lines` lines of a component's log (`kube-apiserver`,
    /// `etcd`, ...), for a failure message.
    pub fn log_tail(&self, component: &str, lines: usize) -> String {
        let path = self.dir.path().join(format!("k8s/log/{component}.log"));
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for KubeUp {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        kill_processes_mentioning(self.dir.path());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        kill_processes_mentioning(self.dir.path());
    }
}

/// Runs `openssl` with `args`; panics with its words when it fails.
fn openssl(args: &[&std::ffi::OsStr]) {
    let output = Command::new("openssl")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("openssl runs");
    assert!(
        output.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Makes kube-up's CA in `pki` ahead of kube-up (which keeps a CA it
/// finds), so certificates for kube-apiserver's flags can be signed
/// before it starts.
fn make_ca(pki: &Path) {
    std::fs::create_dir_all(pki).expect("kube-up's pki directory");
    let (key, cert) = (pki.join("ca.key"), pki.join("ca.crt"));
    openssl(&[
        "req".as_ref(),
        "-x509".as_ref(),
        "-newkey".as_ref(),
        "rsa:2048".as_ref(),
        "-nodes".as_ref(),
        "-keyout".as_ref(),
        key.as_os_str(),
        "-out".as_ref(),
        cert.as_os_str(),
        "-days".as_ref(),
        "2".as_ref(),
        "-subj".as_ref(),
        "/CN=kube-up-ca".as_ref(),
    ]);
    std::fs::write(
        pki.join("client-auth.ext"),
        "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n",
    )
    .expect("the client certificate extensions are written");
}

/// A client certificate `<name>.crt` and key for `subject`, signed by the
/// CA in `pki`: its certificate and key paths.
fn sign_client_certificate(pki: &Path, name: &str, subject: &str) -> (PathBuf, PathBuf) {
    let (key, csr, cert) = (
        pki.join(format!("{name}.key")),
        pki.join(format!("{name}.csr")),
        pki.join(format!("{name}.crt")),
    );
    openssl(&[
        "req".as_ref(),
        "-newkey".as_ref(),
        "rsa:2048".as_ref(),
        "-nodes".as_ref(),
        "-keyout".as_ref(),
        key.as_os_str(),
        "-out".as_ref(),
        csr.as_os_str(),
        "-subj".as_ref(),
        subject.as_ref(),
    ]);
    openssl(&[
        "x509".as_ref(),
        "-req".as_ref(),
        "-in".as_ref(),
        csr.as_os_str(),
        "-CA".as_ref(),
        pki.join("ca.crt").as_os_str(),
        "-CAkey".as_ref(),
        pki.join("ca.key").as_os_str(),
        "-CAcreateserial".as_ref(),
        "-days".as_ref(),
        "2".as_ref(),
        "-extfile".as_ref(),
        pki.join("client-auth.ext").as_os_str(),
        "-out".as_ref(),
        cert.as_os_str(),
    ]);
    (cert, key)
}

/// SIGKILLs every process whose command line mentions `dir`: the control
/// plane's components, whose certificates and data live there.
fn kill_processes_mentioning(dir: &Path) {
    let needle = dir.to_string_lossy().into_owned();
    let me = std::process::id() as i32;
    for pid in crate::procfs::pids() {
        let mentions = crate::procfs::command_line(pid).is_some_and(|line| line.contains(&needle));
        if mentions && pid != me {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}
