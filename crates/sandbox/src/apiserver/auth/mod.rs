//! Authentication and authorization, after kube-apiserver.
//!
//! - [`user`]: who a request comes from ([`UserInfo`]) and the well-known
//!   users and groups;
//! - [`tokens`]: ServiceAccount tokens (signed JWTs) and the key kept in
//!   the data directory;
//! - [`token_request`]: the TokenRequest endpoint and the Rust API to
//!   issue a token;
//! - [`authn`]: the bearer token of a request, as the admin, a
//!   ServiceAccount or anonymous;
//! - [`attributes`]: what a request asks to do (verb, group, resource,
//!   subresource, name, namespace, or a non-resource path);
//! - [`rules`]: RBAC rule matching and coverage (pure);
//! - [`resolver`]: the rules that apply to a user, from the bindings;
//! - [`authorizer`]: the decision and kube-apiserver's 403;
//! - [`escalation`]: no Role or binding write grants more than its author
//!   holds;
//! - [`reviews`]: SelfSubjectAccessReview and the other reviews, with
//!   [`protobuf`] reading the bodies kubectl sends them in;
//! - [`bootstrap`]: the default ClusterRoles and bindings.

pub mod attributes;
pub mod authn;
pub mod authorizer;
pub mod bootstrap;
pub mod escalation;
pub mod protobuf;
pub mod resolver;
pub mod reviews;
pub mod rules;
pub mod token_request;
pub mod tokens;
pub mod user;

use std::collections::HashMap;

use axum::http::Method;

pub use attributes::Attributes;
pub use authn::authenticate;
pub use token_request::{BoundObject, IssuedToken, TokenOptions};
pub use user::UserInfo;

use crate::apiserver::error::ApiError;
use crate::apiserver::routing::Route;
use crate::apiserver::state::Api;

/// Authorizes a request of `user` for `path` (routed to `route`), or
/// refuses it with kube-apiserver's 403.
pub fn authorize_request(
    api: &Api,
    user: &UserInfo,
    method: &Method,
    path: &str,
    route: &Route,
    query: &HashMap<String, String>,
) -> Result<(), ApiError> {
    if user.is_master() {
        return Ok(());
    }
    let attributes = Attributes::of_request(method, path, route, query);
    authorizer::authorize(&api.store, user, &attributes)?;
    // A WebSocket exec, attach or port-forward opens with a GET, which
    // kube-apiserver (AuthorizePodWebsocketUpgradeCreatePermission, on by
    // default since 1.31) also authorizes as `create`, as the POST it
    // replaces: `get` on pods/exec alone does not run commands.
    if let Some(create) = upgrade_as_create(&attributes) {
        authorizer::authorize(&api.store, user, &create)?;
    }
    Ok(())
}

/// The `create` a GET on `pods/exec`, `attach` or `portforward` also needs.
fn upgrade_as_create(attributes: &Attributes) -> Option<Attributes> {
    let target = attributes.resource()?;
    let streams = matches!(
        target.subresource.as_str(),
        "exec" | "attach" | "portforward"
    );
    (attributes.verb == "get" && target.group.is_empty() && target.resource == "pods" && streams)
        .then(|| Attributes {
            verb: "create".to_owned(),
            target: attributes.target.clone(),
        })
}
