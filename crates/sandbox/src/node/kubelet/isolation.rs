//! A container's own view of the ServiceAccount token path.
//!
//! In-cluster clients (kube-rs's `Config::incluster`, client-go's
//! `rest.InClusterConfig`, kubectl) read the token, CA and namespace from
//! the fixed directory [`TOKEN_MOUNT_PATH`], which path translation cannot
//! reach. So a container that mounts a volume there runs in a mount
//! namespace of its own, set up in the child between fork and exec: `/` is
//! made recursively private (nothing leaks to the host), a tmpfs covers
//! `/var/run/secrets` (hiding whatever the host keeps there) and the
//! volume's host directory is bind-mounted read-only at the token path.
//! Then the child drops to the container's user and execs; other processes
//! of the host never see these mounts.
//!
//! As root, the namespace is a plain mount namespace. Otherwise the child
//! first enters a user namespace mapping only its own uid and gid (Linux's
//! unprivileged user namespaces), which lets it mount in a mount namespace
//! it owns. Where neither is possible the container does not start: its
//! waiting message says why. It never falls back to another credential.
//!
//! The code that runs in the child only makes system calls on values
//! prepared beforehand: after fork in a threaded program, allocating could
//! deadlock.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use nix::sys::stat::Mode;
use nix::unistd::{Gid, Uid};

pub use crate::apiserver::admission::service_account::TOKEN_MOUNT_PATH;

/// The directory the tmpfs covers.
const SECRETS_DIR: &str = "/var/run/secrets";

#[derive(Debug, thiserror::Error)]
pub enum IsolationError {
    #[error(
        "the container mounts {TOKEN_MOUNT_PATH}, which needs a mount namespace of its own: {SECRETS_DIR} does not exist and only root can create it (run as root, or create it once with: sudo mkdir -p {SECRETS_DIR})"
    )]
    NoSecretsDir,
    #[error("cannot create {SECRETS_DIR} for pods' token mounts: {0}")]
    CreateSecretsDir(std::io::Error),
    #[error("path {0} contains a NUL byte")]
    Nul(String),
}

/// Everything the child needs, prepared before fork.
#[derive(Debug)]
pub struct TokenMount {
    source: CString,
    secrets_dir: CString,
    parent: CString,
    target: CString,
    /// `Some` in a user namespace: ("uid uid 1", "gid gid 1").
    maps: Option<(Vec<u8>, Vec<u8>)>,
    user: Option<(u32, u32)>,
}

fn c_path(path: &str) -> Result<CString, IsolationError> {
    CString::new(path).map_err(|_| IsolationError::Nul(path.to_owned()))
}

impl TokenMount {
    /// Prepares the mount of `source` at the token path for a process
    /// that runs as `user` (`None`: the sandbox's own user). `root` tells
    /// whether the sandbox runs as root.
    pub fn new(
        source: &Path,
        user: Option<(u32, u32)>,
        root: bool,
    ) -> Result<Self, IsolationError> {
        if root {
            std::fs::create_dir_all(SECRETS_DIR).map_err(IsolationError::CreateSecretsDir)?;
        } else if !Path::new(SECRETS_DIR).is_dir() {
            return Err(IsolationError::NoSecretsDir);
        }
        let maps = (!root).then(|| {
            let uid = nix::unistd::geteuid().as_raw();
            let gid = nix::unistd::getegid().as_raw();
            (
                format!("{uid} {uid} 1\n").into_bytes(),
                format!("{gid} {gid} 1\n").into_bytes(),
            )
        });
        let source = CString::new(source.as_os_str().as_bytes())
            .map_err(|_| IsolationError::Nul(source.display().to_string()))?;
        Ok(Self {
            source,
            secrets_dir: c_path(SECRETS_DIR)?,
            parent: c_path(&format!("{SECRETS_DIR}/kubernetes.io"))?,
            target: c_path(TOKEN_MOUNT_PATH)?,
            maps,
            // In a user namespace the process already is the sandbox's user.
            user: if root { user } else { None },
        })
    }

    /// Runs in the child between fork and exec: enters the namespaces,
    /// mounts, then becomes the container's user.
    pub fn enter(&self) -> std::io::Result<()> {
        self.namespaces().map_err(std::io::Error::from)?;
        self.mounts().map_err(std::io::Error::from)?;
        if let Some((uid, gid)) = self.user {
            nix::unistd::setgroups(&[]).map_err(std::io::Error::from)?;
            nix::unistd::setgid(Gid::from_raw(gid)).map_err(std::io::Error::from)?;
            nix::unistd::setuid(Uid::from_raw(uid)).map_err(std::io::Error::from)?;
        }
        Ok(())
    }

    fn namespaces(&self) -> Result<(), Errno> {
        let Some((uid_map, gid_map)) = &self.maps else {
            return unshare(CloneFlags::CLONE_NEWNS);
        };
        unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS)?;
        write_proc(c"/proc/self/setgroups", b"deny")?;
        write_proc(c"/proc/self/uid_map", uid_map)?;
        write_proc(c"/proc/self/gid_map", gid_map)
    }

    fn mounts(&self) -> Result<(), Errno> {
        let none: Option<&std::ffi::CStr> = None;
        mount(
            none,
            c"/",
            none,
            MsFlags::MS_REC | MsFlags::MS_PRIVATE,
            none,
        )?;
        mount(
            Some(c"tmpfs"),
            self.secrets_dir.as_c_str(),
            Some(c"tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            Some(c"mode=0755"),
        )?;
        let mode = Mode::from_bits_truncate(0o755);
        nix::unistd::mkdir(self.parent.as_c_str(), mode)?;
        nix::unistd::mkdir(self.target.as_c_str(), mode)?;
        mount(
            Some(self.source.as_c_str()),
            self.target.as_c_str(),
            none,
            MsFlags::MS_BIND,
            none,
        )?;
        let read_only = MsFlags::MS_BIND
            | MsFlags::MS_REMOUNT
            | MsFlags::MS_RDONLY
            | MsFlags::MS_NOSUID
            | MsFlags::MS_NODEV
            | MsFlags::MS_NOEXEC;
        let remounted = mount(none, self.target.as_c_str(), none, read_only, none);
        // In a user namespace, flags locked by the host's mount of the
        // data directory (atime ones) can refuse the remount; the files
        // stay read-only by mode then.
        if self.maps.is_none() {
            remounted?;
        }
        Ok(())
    }
}

fn write_proc(path: &std::ffi::CStr, content: &[u8]) -> Result<(), Errno> {
    let fd = nix::fcntl::open(path, OFlag::O_WRONLY, Mode::empty())?;
    nix::unistd::write(&fd, content)?;
    Ok(())
}
