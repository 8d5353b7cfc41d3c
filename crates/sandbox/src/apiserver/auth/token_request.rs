//! TokenRequest (`POST .../serviceaccounts/{name}/token`) and the Rust
//! API behind it: a token for an existing ServiceAccount, for the
//! requested audiences and lifetime, optionally bound to a Pod or Secret
//! whose uid it records, with kube-apiserver's validation and errors.

use serde_json::{Value, json};

use crate::apiserver::auth::tokens::{API_AUDIENCE, Claims, ISSUER, KubernetesClaim, ObjectRef};
use crate::apiserver::auth::user::service_account_user;
use crate::apiserver::error::{ApiError, Cause};
use crate::apiserver::state::Api;
use crate::apiserver::storage::ObjectKey;

/// The qualified kind in TokenRequest errors.
const KIND: &str = "TokenRequest.authentication.k8s.io";
const API_VERSION: &str = "authentication.k8s.io/v1";
/// kube-apiserver's bounds on `spec.expirationSeconds`.
pub const MIN_EXPIRATION_SECONDS: i64 = 600;
pub const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;

/// The object a token is bound to: it stops authenticating when that
/// object is gone (or replaced by one with another uid).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BoundObject {
    /// `Pod` or `Secret`.
    pub kind: String,
    pub name: String,
    /// Checked against the object when set.
    pub uid: String,
}

/// What a token is for. The HTTP endpoint enforces kube-apiserver's
/// bounds on the lifetime; the Rust API does not, so tests can make
/// tokens that are already expired.
#[derive(Clone, Debug)]
pub struct TokenOptions {
    /// Empty means the API server's own audience.
    pub audiences: Vec<String>,
    pub expiration_seconds: i64,
    pub bound_object: Option<BoundObject>,
    /// Unix seconds; now when unset.
    pub issued_at: Option<i64>,
}

impl Default for TokenOptions {
    fn default() -> Self {
        Self {
            audiences: Vec::new(),
            expiration_seconds: DEFAULT_EXPIRATION_SECONDS,
            bound_object: None,
            issued_at: None,
        }
    }
}

/// A signed token and when it expires (Unix seconds).
#[derive(Clone, Debug)]
pub struct IssuedToken {
    pub token: String,
    pub expires_at: i64,
    pub audiences: Vec<String>,
}

/// Issues a token for the ServiceAccount `namespace/name`, which must
/// exist, as TokenRequest does.
pub fn issue(
    api: &Api,
    namespace: &str,
    name: &str,
    options: &TokenOptions,
) -> Result<IssuedToken, ApiError> {
    let account = api
        .store
        .get(&ObjectKey::new("/serviceaccounts", namespace, name))?
        .ok_or_else(|| ApiError::not_found("serviceaccounts", name))?;
    let uid = uid_of(&account);
    let mut claim = KubernetesClaim {
        namespace: namespace.to_owned(),
        serviceaccount: ObjectRef {
            name: name.to_owned(),
            uid,
        },
        pod: None,
        secret: None,
    };
    if let Some(bound) = &options.bound_object {
        bind(api, namespace, name, bound, &mut claim)?;
    }
    let audiences = if options.audiences.is_empty() {
        vec![API_AUDIENCE.to_owned()]
    } else {
        options.audiences.clone()
    };
    let now = options
        .issued_at
        .unwrap_or_else(|| jiff::Timestamp::now().as_second());
    let claims = Claims {
        iss: ISSUER.to_owned(),
        sub: service_account_user(namespace, name),
        aud: audiences.clone(),
        exp: now + options.expiration_seconds,
        iat: now,
        nbf: now,
        jti: uuid::Uuid::new_v4().to_string(),
        kubernetes: claim,
    };
    let token = api.tokens.sign(&claims).map_err(ApiError::internal)?;
    Ok(IssuedToken {
        token,
        expires_at: claims.exp,
        audiences,
    })
}

fn uid_of(object: &Value) -> String {
    object
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

/// Records the bound object in the claims, after checking it exists, has
/// the given uid and (for a Pod) runs as this ServiceAccount.
fn bind(
    api: &Api,
    namespace: &str,
    account: &str,
    bound: &BoundObject,
    claim: &mut KubernetesClaim,
) -> Result<(), ApiError> {
    let (key, plural) = match bound.kind.as_str() {
        "Pod" => ("/pods", "pods"),
        "Secret" => ("/secrets", "secrets"),
        other => {
            return Err(ApiError::bad_request(format!(
                "cannot bind token to object of type /v1, Kind={other}"
            )));
        }
    };
    let object = api
        .store
        .get(&ObjectKey::new(key, namespace, &bound.name))?
        .ok_or_else(|| ApiError::not_found(plural, &bound.name))?;
    if bound.kind == "Pod" {
        let runs_as = object
            .pointer("/spec/serviceAccountName")
            .and_then(Value::as_str)
            .unwrap_or("default");
        if runs_as != account {
            return Err(ApiError::bad_request(format!(
                "cannot bind token for serviceaccount \"{account}\" to pod running with different serviceaccount name."
            )));
        }
    }
    let uid = uid_of(&object);
    if !bound.uid.is_empty() && bound.uid != uid {
        return Err(ApiError::conflict(
            &bound.kind,
            &bound.name,
            format!(
                "Operation cannot be fulfilled on {} \"{}\": the UID in the bound object reference ({}) does not match the UID in record. The object might have been deleted and then recreated",
                bound.kind, bound.name, bound.uid
            ),
        ));
    }
    let reference = ObjectRef {
        name: bound.name.clone(),
        uid,
    };
    if bound.kind == "Pod" {
        claim.pod = Some(reference);
    } else {
        claim.secret = Some(reference);
    }
    Ok(())
}

/// `POST /api/v1/namespaces/{namespace}/serviceaccounts/{name}/token`:
/// the TokenRequest with `status.token` and `status.expirationTimestamp`.
pub fn create(api: &Api, namespace: &str, name: &str, body: &Value) -> Result<Value, ApiError> {
    let options = decode(namespace, name, body)?;
    let issued = issue(api, namespace, name, &options)?;
    let expires = jiff::Timestamp::from_second(issued.expires_at)
        .map_err(ApiError::internal)?
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let mut spec = json!({
        "audiences": issued.audiences,
        "expirationSeconds": options.expiration_seconds,
    });
    if let Some(bound) = body.pointer("/spec/boundObjectRef") {
        spec["boundObjectRef"] = bound.clone();
    }
    Ok(json!({
        "kind": "TokenRequest",
        "apiVersion": API_VERSION,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "creationTimestamp": crate::apiserver::objects::now(),
        },
        "spec": spec,
        "status": {"token": issued.token, "expirationTimestamp": expires},
    }))
}

/// The request body as [`TokenOptions`], with kube-apiserver's checks.
fn decode(namespace: &str, name: &str, body: &Value) -> Result<TokenOptions, ApiError> {
    check_type(body)?;
    let invalid = |field: &str, message: String| {
        ApiError::invalid(KIND, name, vec![Cause::invalid(field, message)])
    };
    if let Some(given) = body.pointer("/metadata/name").and_then(Value::as_str)
        && !given.is_empty()
        && given != name
    {
        return Err(invalid(
            "metadata.name",
            format!("Invalid value: \"{given}\": must match the service account name if specified"),
        ));
    }
    if let Some(given) = body.pointer("/metadata/namespace").and_then(Value::as_str)
        && !given.is_empty()
        && given != namespace
    {
        return Err(invalid(
            "metadata.namespace",
            format!(
                "Invalid value: \"{given}\": must match the service account namespace if specified"
            ),
        ));
    }
    let spec = body.get("spec").cloned().unwrap_or_else(|| json!({}));
    Ok(TokenOptions {
        audiences: audiences(&spec)?,
        expiration_seconds: expiration(&spec)?,
        bound_object: bound_object(&spec)?,
        issued_at: None,
    })
}

fn check_type(body: &Value) -> Result<(), ApiError> {
    if !body.is_object() {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    }
    if let Some(version) = body.get("apiVersion").and_then(Value::as_str)
        && version != API_VERSION
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({version}) does not match the expected API version ({API_VERSION})"
        )));
    }
    if let Some(kind) = body.get("kind").and_then(Value::as_str)
        && kind != "TokenRequest"
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind (TokenRequest)"
        )));
    }
    Ok(())
}

fn audiences(spec: &Value) -> Result<Vec<String>, ApiError> {
    match spec.get("audiences") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str().map(str::to_owned).ok_or_else(|| {
                    ApiError::bad_request("spec.audiences: expected a list of strings")
                })
            })
            .collect(),
        Some(_) => Err(ApiError::bad_request(
            "spec.audiences: expected a list of strings",
        )),
    }
}

/// `spec.expirationSeconds`: 3600 when unset, at least 10 minutes and at
/// most 2^32 seconds (an empty name in the error, as kube-apiserver gives).
fn expiration(spec: &Value) -> Result<i64, ApiError> {
    let seconds = match spec.get("expirationSeconds") {
        None | Some(Value::Null) => return Ok(DEFAULT_EXPIRATION_SECONDS),
        Some(value) => value.as_i64().ok_or_else(|| {
            ApiError::bad_request(format!(
                "spec.expirationSeconds: expected an integer, got {value}"
            ))
        })?,
    };
    let problem = if seconds < MIN_EXPIRATION_SECONDS {
        format!("Invalid value: {seconds}: may not specify a duration less than 10 minutes")
    } else if seconds > MAX_EXPIRATION_SECONDS {
        format!("Invalid value: {seconds}: may not specify a duration larger than 2^32 seconds")
    } else {
        return Ok(seconds);
    };
    Err(ApiError::invalid(
        KIND,
        "",
        vec![Cause::invalid("spec.expirationSeconds", problem)],
    ))
}

fn bound_object(spec: &Value) -> Result<Option<BoundObject>, ApiError> {
    let Some(reference) = spec.get("boundObjectRef").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let text = |field: &str| {
        reference
            .get(field)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let api_version = text("apiVersion");
    let kind = text("kind");
    if !matches!(api_version.as_str(), "" | "v1") {
        let (group, version) = api_version.split_once('/').unwrap_or(("", &api_version));
        return Err(ApiError::bad_request(format!(
            "cannot bind token to object of type {group}/{version}, Kind={kind}"
        )));
    }
    Ok(Some(BoundObject {
        kind,
        name: text("name"),
        uid: text("uid"),
    }))
}
