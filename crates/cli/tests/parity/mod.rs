//! The three judges of admission and what they must agree on.

pub mod corpus;
pub mod judge;
pub mod webhook;
