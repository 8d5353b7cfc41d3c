//! The protobuf messages of Kubernetes packages as `k8s-pb` declares
//! them: one Rust module per proto package (`api::core::v1` is
//! `k8s.io.api.core.v1`), one struct per message, each field's number,
//! label and type in its `#[prost(...)]` attribute.

use std::collections::{BTreeMap, BTreeSet};
use std::error::Error;
use std::path::Path;

use syn::punctuated::Punctuated;
use syn::{Expr, Lit, Meta, Token, Type};

/// A message: its package, Rust struct name and fields in tag order.
pub struct Message {
    pub name: String,
    pub fields: Vec<Field>,
}

pub struct Field {
    /// The Rust field name (snake case, maybe a raw identifier).
    pub rust_name: String,
    pub number: i32,
    pub shape: Shape,
}

pub enum Shape {
    Optional(Kind),
    Repeated(Kind),
    /// A map from string keys to values of this kind.
    Map(Kind),
}

#[derive(Clone)]
pub enum Kind {
    /// A scalar by its protobuf name (`string`, `int64`, `bytes`, ...).
    Scalar(String),
    /// A message by package and Rust struct name.
    Message { package: String, name: String },
}

/// The messages of the given packages and of every package their fields
/// refer to, by package.
pub fn read(
    source: &Path,
    roots: &[&str],
) -> Result<BTreeMap<String, Vec<Message>>, Box<dyn Error>> {
    let mut packages = BTreeMap::new();
    let mut pending: Vec<String> = roots.iter().map(|p| (*p).to_owned()).collect();
    while let Some(package) = pending.pop() {
        if packages.contains_key(&package) {
            continue;
        }
        let messages = package_messages(source, &package)?;
        for message in &messages {
            for field in &message.fields {
                if let Kind::Message { package, .. } = field.shape.kind() {
                    pending.push(package.clone());
                }
            }
        }
        packages.insert(package, messages);
    }
    Ok(packages)
}

impl Shape {
    pub fn kind(&self) -> &Kind {
        match self {
            Shape::Optional(kind) | Shape::Repeated(kind) | Shape::Map(kind) => kind,
        }
    }
}

/// The module path of a package: `k8s.io.api.core.v1` is `api/core/v1`.
fn module_path(package: &str) -> Result<Vec<String>, Box<dyn Error>> {
    let rest = package
        .strip_prefix("k8s.io.")
        .ok_or_else(|| format!("{package} is not a Kubernetes package"))?;
    Ok(rest.split('.').map(str::to_owned).collect())
}

fn package_messages(source: &Path, package: &str) -> Result<Vec<Message>, Box<dyn Error>> {
    let module = module_path(package)?;
    let file = module
        .iter()
        .fold(source.to_path_buf(), |dir, part| dir.join(part))
        .join("mod.rs");
    let text =
        std::fs::read_to_string(&file).map_err(|e| format!("reading {}: {e}", file.display()))?;
    let syntax = syn::parse_file(&text).map_err(|e| format!("parsing {}: {e}", file.display()))?;
    let mut messages = Vec::new();
    for item in syntax.items {
        let syn::Item::Struct(item) = item else {
            continue;
        };
        let mut fields = Vec::new();
        for field in &item.fields {
            if let Some(field) = message_field(field, &module)? {
                fields.push(field);
            }
        }
        fields.sort_by_key(|f| f.number);
        messages.push(Message {
            name: item.ident.to_string(),
            fields,
        });
    }
    Ok(messages)
}

/// A struct field's protobuf declaration, when it has a `#[prost]` one.
fn message_field(field: &syn::Field, module: &[String]) -> Result<Option<Field>, Box<dyn Error>> {
    let Some(attr) = field.attrs.iter().find(|a| a.path().is_ident("prost")) else {
        return Ok(None);
    };
    let rust_name = field
        .ident
        .as_ref()
        .map(|i| i.to_string())
        .ok_or("a prost field without a name")?;
    let metas = attr.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)?;
    let mut words = BTreeSet::new();
    let mut values = BTreeMap::new();
    for meta in metas {
        match meta {
            Meta::Path(path) => {
                words.insert(path_name(&path));
            }
            Meta::NameValue(pair) => {
                if let Expr::Lit(expr) = &pair.value
                    && let Lit::Str(text) = &expr.lit
                {
                    values.insert(path_name(&pair.path), text.value());
                }
            }
            Meta::List(_) => {}
        }
    }
    let number: i32 = values
        .get("tag")
        .ok_or_else(|| format!("{rust_name} has no tag"))?
        .parse()?;
    let message = || innermost(&field.ty, module);
    let shape = if let Some(map) = values.get("btree_map").or(values.get("hash_map")) {
        let value = map.split(',').nth(1).map(str::trim).unwrap_or_default();
        Shape::Map(kind(value, message)?)
    } else {
        let scalar = words
            .iter()
            .find(|w| !matches!(w.as_str(), "optional" | "repeated" | "required" | "boxed"))
            .cloned()
            .or_else(|| values.get("bytes").map(|_| "bytes".to_owned()))
            .ok_or_else(|| format!("{rust_name} has no type"))?;
        let kind = kind(&scalar, message)?;
        if words.contains("repeated") {
            Shape::Repeated(kind)
        } else {
            Shape::Optional(kind)
        }
    };
    Ok(Some(Field {
        rust_name,
        number,
        shape,
    }))
}

fn kind(
    name: &str,
    message: impl Fn() -> Result<Kind, Box<dyn Error>>,
) -> Result<Kind, Box<dyn Error>> {
    match name {
        "message" => message(),
        "string" | "bool" | "int32" | "int64" | "uint32" | "uint64" | "double" | "float"
        | "bytes" | "sint32" | "sint64" | "fixed32" | "fixed64" | "sfixed32" | "sfixed64" => {
            Ok(Kind::Scalar(name.to_owned()))
        }
        other => Err(format!("prost type {other:?} is not supported").into()),
    }
}

fn path_name(path: &syn::Path) -> String {
    path.segments
        .last()
        .map(|s| s.ident.to_string())
        .unwrap_or_default()
}

/// The message a field holds: the innermost type argument of its
/// `Option`, `Box`, `Vec` or map, resolved from the module it is used in.
fn innermost(ty: &Type, module: &[String]) -> Result<Kind, Box<dyn Error>> {
    let Type::Path(path) = ty else {
        return Err("a message field of an unexpected type".into());
    };
    let last = path.path.segments.last().ok_or("an empty type path")?;
    if let syn::PathArguments::AngleBracketed(args) = &last.arguments {
        let inner = args.args.iter().rev().find_map(|arg| match arg {
            syn::GenericArgument::Type(ty) => Some(ty),
            _ => None,
        });
        return innermost(inner.ok_or("a generic type without arguments")?, module);
    }
    let mut package = module.to_vec();
    let segments: Vec<String> = path
        .path
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    let (name, modules) = segments.split_last().ok_or("an empty type path")?;
    for segment in modules {
        if segment == "super" {
            package.pop();
        } else if segment == "crate" {
            package.clear();
        } else {
            package.push(segment.clone());
        }
    }
    Ok(Kind::Message {
        package: format!("k8s.io.{}", package.join(".")),
        name: name.clone(),
    })
}
