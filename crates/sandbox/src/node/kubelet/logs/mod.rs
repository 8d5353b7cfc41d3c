//! Container logs as the kubelet keeps them: one file per container
//! instance, `<pod dir>/logs/<container>/<restartCount>.log`, each line in
//! the CRI log format `<RFC3339Nano time> <stdout|stderr> <F|P> <content>`
//! (`F` a full line, `P` a part of a longer one or an unterminated end).
//!
//! `writer` turns a process's stdout and stderr pipes into such lines;
//! `read` selects and renders them for `pods/log` (tail, since, limit,
//! timestamps). The file of the previous instance stays after a restart,
//! so `kubectl logs --previous` reads the one numbered one less.

mod format;
pub mod read;
mod writer;

pub use format::Stream;
pub use writer::{LogSink, copy_output};
