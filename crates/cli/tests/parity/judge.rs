//! A verdict on one manifest from each judge: an API server (kube-apiserver
//! or the sandbox's, both through kubectl, which reads YAML 1.1 as users'
//! manifests are read) and `tusk validate`.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::corpus::Case;
use crate::process::run_within;

const LIMIT: Duration = Duration::from_secs(60);

/// Accepted, or refused with the fields named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Accepted,
    Refused {
        fields: BTreeSet<String>,
        text: String,
    },
}

impl Verdict {
    pub fn refused(&self) -> bool {
        matches!(self, Verdict::Refused { .. })
    }

    pub fn fields(&self) -> BTreeSet<String> {
        match self {
            Verdict::Accepted => BTreeSet::new(),
            Verdict::Refused { fields, .. } => fields.clone(),
        }
    }
}

/// Field paths named in an API server's refusal, as kubectl prints it:
/// `... is invalid: spec.x: Invalid value: ...`, one `* spec.x: ...` line
/// per cause, or `unknown field "spec.x"` from strict decoding.
pub fn fields_in_server_error(text: &str) -> BTreeSet<String> {
    let mut fields = BTreeSet::new();
    for line in text.lines() {
        let line = line.trim_start_matches("* ");
        let line = line
            .split_once(" is invalid: ")
            .map_or(line, |(_, rest)| rest);
        let mut rest = line;
        while let Some(start) = rest.find("unknown field \"") {
            let after = &rest[start + "unknown field \"".len()..];
            if let Some(end) = after.find('"') {
                fields.insert(after[..end].to_owned());
            }
            rest = after;
        }
        if let Some((field, _)) = line.split_once(": ")
            && (field.starts_with("spec") || field.starts_with("metadata"))
        {
            fields.insert(field.to_owned());
        }
    }
    fields
}

/// An API server behind `kubeconfig`, judging through kubectl.
pub struct Server<'a> {
    pub kubeconfig: &'a Path,
    pub scratch: &'a Path,
}

impl Server<'_> {
    fn kubectl(&self, args: &[&str]) -> (bool, String) {
        let output = run_within(
            Command::new("kubectl")
                .env("KUBECONFIG", self.kubeconfig)
                .args(args),
            LIMIT,
        );
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        (output.status.success(), text)
    }

    /// Judges `case` (number `index`): a server-side dry run of a create,
    /// or of a client-side apply over the earlier version (created for real,
    /// in a namespace of its own, so that fields left out are removed as a
    /// full update would).
    pub fn judge(&self, index: usize, case: &Case) -> Verdict {
        let new = self.scratch.join(format!("{index}.yaml"));
        std::fs::write(&new, &case.text).expect("the case is written");
        let new = new.to_string_lossy().into_owned();
        let (ok, text) = match &case.old {
            None => self.kubectl(&["create", "--dry-run=server", "-n", "default", "-f", &new]),
            Some(old_text) => {
                let namespace = format!("update-{index}");
                let old = self.scratch.join(format!("{index}.old.yaml"));
                std::fs::write(&old, old_text).expect("the earlier version is written");
                let old = old.to_string_lossy().into_owned();
                let (made, text) = self.kubectl(&["create", "namespace", &namespace]);
                assert!(made, "namespace {namespace}: {text}");
                let (made, text) = self.kubectl(&["apply", "-n", &namespace, "-f", &old]);
                assert!(
                    made,
                    "the earlier version of {} is accepted: {text}",
                    case.name
                );
                self.kubectl(&["apply", "--dry-run=server", "-n", &namespace, "-f", &new])
            }
        };
        if ok {
            Verdict::Accepted
        } else {
            Verdict::Refused {
                fields: fields_in_server_error(&text),
                text,
            }
        }
    }
}

/// `tusk validate` on `case`: the CRD's rules and the operator's webhook,
/// as an API server with the webhook installed judges it.
pub fn tusk_validate(scratch: &Path, index: usize, case: &Case) -> Verdict {
    let new = scratch.join(format!("{index}.tusk.yaml"));
    std::fs::write(&new, &case.text).expect("the case is written");
    let mut command = Command::new(env!("CARGO_BIN_EXE_tusk"));
    command.arg("validate").arg("-f").arg(&new);
    if let Some(old_text) = &case.old {
        let old = scratch.join(format!("{index}.tusk.old.yaml"));
        std::fs::write(&old, old_text).expect("the earlier version is written");
        command.arg("--old").arg(old);
    }
    let output = run_within(&mut command, LIMIT);
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let prefix = format!("{}: ", new.display());
    let mut fields = BTreeSet::new();
    let mut refused = false;
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(&prefix) else {
            continue;
        };
        if rest.ends_with(": valid") || rest.ends_with(": valid update") {
            continue;
        }
        refused = true;
        // `Kind/name: field: message`
        let mut parts = rest.splitn(3, ": ");
        let _object = parts.next();
        if let (Some(field), Some(_)) = (parts.next(), parts.next())
            && (field.starts_with("spec") || field.starts_with("metadata"))
        {
            fields.insert(field.to_owned());
        }
    }
    if refused || !(output.status.success() || output.status.code() == Some(1)) {
        Verdict::Refused {
            fields,
            text: format!("{text}{}", String::from_utf8_lossy(&output.stderr)),
        }
    } else {
        Verdict::Accepted
    }
}
