//! `tusk install-manager DEST`: copies this binary to DEST. The init
//! container of every PostgreSQL pod runs it, so the PostgreSQL container
//! (any image of the right major) can run `tusk instance run` from a shared
//! volume.

use std::path::PathBuf;
use std::process::ExitCode;

use super::CommandError;
use crate::output::outln;

#[derive(clap::Args)]
pub struct Args {
    /// Where to put the binary, e.g. /controller/tusk.
    pub destination: PathBuf,
}

pub fn run(args: &Args) -> Result<ExitCode, CommandError> {
    let source = std::env::current_exe().map_err(|source| CommandError::Read {
        path: "the running executable".to_owned(),
        source,
    })?;
    let write_error = |source| CommandError::Write {
        path: args.destination.display().to_string(),
        source,
    };
    // Copy to a temporary name and rename, so a half-copied binary is never
    // executed after a crash of the init container.
    let partial = args.destination.with_extension("partial");
    std::fs::copy(&source, &partial).map_err(write_error)?;
    set_executable(&partial).map_err(write_error)?;
    std::fs::rename(&partial, &args.destination).map_err(write_error)?;
    outln!(
        "installed {} to {}",
        source.display(),
        args.destination.display()
    )?;
    Ok(ExitCode::SUCCESS)
}

fn set_executable(path: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
}
