//! What a pass decided to tell people (R22), as data: the pure planners
//! return notes, and [`crate::events`] publishes them as Events.

/// One event a pass decided to publish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// A warning (something went wrong or was refused) rather than news.
    pub warning: bool,
    pub reason: String,
    pub text: String,
}

impl Note {
    pub fn normal(reason: &str, text: String) -> Self {
        Self {
            warning: false,
            reason: reason.to_owned(),
            text,
        }
    }

    pub fn warning(reason: &str, text: String) -> Self {
        Self {
            warning: true,
            ..Self::normal(reason, text)
        }
    }
}
