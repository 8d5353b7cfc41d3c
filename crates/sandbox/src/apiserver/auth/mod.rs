//! Authentication and authorization, after kube-apiserver.
//!
//! - [`user`]: who a request comes from ([`UserInfo`]) and the well-known
//!   users and groups;
//! - [`tokens`]: ServiceAccount tokens (signed JWTs) and the key kept in
//!   the data directory;
//! - [`token_request`]: the TokenRequest endpoint and the Rust API to
//!   issue a token;
//! - [`authn`]: the bearer token of a request, as the admin, a
//!   ServiceAccount or anonymous.

pub mod authn;
pub mod token_request;
pub mod tokens;
pub mod user;

pub use authn::authenticate;
pub use token_request::{BoundObject, IssuedToken, TokenOptions};
pub use user::UserInfo;
