//! Standard output for the commands that print.
//!
//! `println!` panics when stdout is closed (`tusk crds | head -1`: `failed
//! printing to stdout: Broken pipe`). The commands print through these
//! macros instead, which write through a locked stdout and return the
//! failure: a closed pipe comes back as [`CommandError::Output`], which
//! `main` turns into a quiet exit 0 (see [`is_closed`]). SIGPIPE is left
//! ignored, as Rust sets it: the binary also runs servers, which must
//! outlive a client that closed its socket.
//!
//! - [`outln!`] and [`out!`]: a line, or text as it is; `?` stops the
//!   command when stdout is closed, so a follow (`logs`, `backup`) ends
//!   with its reader.
//! - [`Lines`]: for a command whose exit code is a verdict (`validate`),
//!   lines are dropped once stdout is closed and the command goes on to
//!   its verdict.
//! - [`server_outln!`]: progress of a long-running server (`sandbox up`),
//!   which must not stop because nobody reads it.

use std::fmt;
use std::io::{self, Write};

use crate::commands::CommandError;

/// Writes `args` to stdout and flushes it, so a closed pipe is noticed at
/// the write that hit it.
pub fn write_fmt(args: fmt::Arguments<'_>) -> Result<(), CommandError> {
    let mut stdout = io::stdout().lock();
    stdout
        .write_fmt(args)
        .and_then(|()| stdout.flush())
        .map_err(CommandError::Output)
}

/// Whether `error` is stdout closed by its reader, which ends a command
/// quietly rather than as a failure.
pub fn is_closed(error: &CommandError) -> bool {
    matches!(error, CommandError::Output(e) if e.kind() == io::ErrorKind::BrokenPipe)
}

/// Prints a line to stdout; `Err(CommandError::Output)` when it cannot.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::output::write_fmt(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// Prints text to stdout as it is; `Err(CommandError::Output)` when it
/// cannot.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::write_fmt(format_args!($($arg)*))
    };
}

/// Prints a server's progress line; a closed stdout drops it and the
/// server runs on.
macro_rules! server_outln {
    ($($arg:tt)*) => {
        $crate::output::best_effort($crate::output::outln!($($arg)*))
    };
}

pub(crate) use {out, outln, server_outln};

/// What [`server_outln!`] does with a failed write: nothing. A server's
/// progress is for whoever reads it; a stdout nobody reads, or that cannot
/// be written, is no reason to stop serving.
pub fn best_effort(_written: Result<(), CommandError>) {}

/// Lines printed until stdout is closed, then dropped: for a command whose
/// exit code says more than its output (`validate` exits 1 for a refusal
/// whether or not anyone reads why).
#[derive(Debug, Default)]
pub struct Lines {
    closed: bool,
}

impl Lines {
    /// Prints `args` and a newline unless stdout was found closed; other
    /// failures are returned.
    pub fn line(&mut self, args: fmt::Arguments<'_>) -> Result<(), CommandError> {
        if self.closed {
            return Ok(());
        }
        match outln!("{args}") {
            Err(error) if is_closed(&error) => {
                self.closed = true;
                Ok(())
            }
            written => written,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_broken_pipe_is_a_closed_stdout() {
        let closed = CommandError::Output(io::Error::from(io::ErrorKind::BrokenPipe));
        let full = CommandError::Output(io::Error::from(io::ErrorKind::StorageFull));
        assert!(is_closed(&closed));
        assert!(!is_closed(&full));
        assert!(!is_closed(&CommandError::Kubernetes("gone".into())));
    }
}
