//! WAL positions: the typed `Lsn` lives in `tusk_api::lsn`, shared with the
//! operator, which compares the positions instance managers report.

pub use tusk_api::lsn::{Lsn, LsnParseError};
