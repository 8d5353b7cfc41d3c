//! The JSON names of Kubernetes' fields as `k8s-openapi` reads them: each
//! type's file holds its struct and a `Deserialize` impl matching
//! `"podIP" => Field::Key_pod_ip`. `k8s-pb`'s Rust names are snake case,
//! which loses the capitals of names like `podIP`; these put them back.

use std::collections::{BTreeMap, BTreeSet};
use std::error::Error;
use std::path::Path;

use syn::visit::Visit;

/// Fields of messages `k8s-openapi` has no type for, whose spelling snake
/// case loses: message, `k8s-pb` field name, Kubernetes' name.
const UNMODELLED: &[(&str, &str, &str)] = &[
    // Pod log options travel as query parameters, not as an object.
    (
        "PodLogOptions",
        "insecure_skip_tls_verify_backend",
        "insecureSkipTLSVerifyBackend",
    ),
    // k8s-openapi holds managed fields as plain JSON; the message's one
    // field is named after the Go field.
    ("FieldsV1", "raw", "Raw"),
];

/// JSON field names by type and overall, keyed by [`key`].
#[derive(Default)]
pub struct JsonNames {
    /// By package and lower-case type name: the type's name as spelled in
    /// Kubernetes and its fields.
    types: BTreeMap<(String, String), (String, BTreeMap<String, String>)>,
    /// Every spelling of a field name in any type.
    all: BTreeMap<String, BTreeSet<String>>,
}

/// Names compared without case or underscores: `pod_ip` and `podIP`
/// are both `podip`.
pub fn key(name: &str) -> String {
    name.trim_start_matches("r#")
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

impl JsonNames {
    /// The Kubernetes spelling of a type `k8s-pb` names `rust_name`.
    pub fn type_name(&self, package: &str, rust_name: &str) -> String {
        self.types
            .get(&(package.to_owned(), key(rust_name)))
            .map_or_else(|| rust_name.to_owned(), |(name, _)| name.clone())
    }

    /// The JSON name of a field: as the type spells it, else as every type
    /// that has it spells it, else the snake-case name in lower camel case.
    pub fn field_name(&self, package: &str, type_name: &str, field: &str) -> String {
        let unmodelled = UNMODELLED
            .iter()
            .find(|(message, rust, _)| *message == type_name && *rust == field);
        if let Some((_, _, name)) = unmodelled {
            return (*name).to_owned();
        }
        let field_key = key(field);
        let own = self
            .types
            .get(&(package.to_owned(), key(type_name)))
            .and_then(|(_, fields)| fields.get(&field_key));
        if let Some(name) = own {
            return name.clone();
        }
        match self.all.get(&field_key) {
            Some(names) if names.len() == 1 => names.iter().next().cloned().unwrap_or_default(),
            _ => lower_camel(field),
        }
    }
}

fn lower_camel(snake: &str) -> String {
    let mut out = String::new();
    let mut upper = false;
    for c in snake.trim_start_matches("r#").chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.push(c.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// Reads every type under `src/v1_XX/` of `k8s-openapi`.
pub fn read(root: &Path) -> Result<JsonNames, Box<dyn Error>> {
    let mut names = JsonNames::default();
    read_dir(root, &[], &mut names)?;
    Ok(names)
}

fn read_dir(dir: &Path, module: &[String], names: &mut JsonNames) -> Result<(), Box<dyn Error>> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if path.is_dir() {
            let mut inner = module.to_vec();
            inner.push(stem.to_owned());
            read_dir(&path, &inner, names)?;
        } else if path.extension().is_some_and(|e| e == "rs") && stem != "mod" {
            read_file(&path, &format!("k8s.io.{}", module.join(".")), names)?;
        }
    }
    Ok(())
}

fn read_file(path: &Path, package: &str, names: &mut JsonNames) -> Result<(), Box<dyn Error>> {
    let text = std::fs::read_to_string(path)?;
    let syntax = syn::parse_file(&text).map_err(|e| format!("parsing {}: {e}", path.display()))?;
    let mut visitor = Visitor::default();
    visitor.visit_file(&syntax);
    let Some(type_name) = visitor.type_name else {
        return Ok(());
    };
    for json in visitor.fields.values() {
        names.all.entry(key(json)).or_default().insert(json.clone());
    }
    names.types.insert(
        (package.to_owned(), key(&type_name)),
        (type_name, visitor.fields),
    );
    Ok(())
}

/// The first struct of a file, and the JSON names its `Deserialize` impl
/// matches (`"podIP" => Field::Key_pod_ip`), by [`key`].
#[derive(Default)]
struct Visitor {
    type_name: Option<String>,
    fields: BTreeMap<String, String>,
}

impl<'ast> Visit<'ast> for Visitor {
    fn visit_item_struct(&mut self, item: &'ast syn::ItemStruct) {
        if self.type_name.is_none() && matches!(item.vis, syn::Visibility::Public(_)) {
            self.type_name = Some(item.ident.to_string());
        }
        syn::visit::visit_item_struct(self, item);
    }

    fn visit_arm(&mut self, arm: &'ast syn::Arm) {
        if let syn::Pat::Lit(pattern) = &arm.pat
            && let syn::Lit::Str(json) = &pattern.lit
            && let syn::Expr::Path(body) = arm.body.as_ref()
            && body
                .path
                .segments
                .last()
                .is_some_and(|s| s.ident.to_string().starts_with("Key_"))
        {
            let json = json.value();
            self.fields.insert(key(&json), json);
        }
        syn::visit::visit_arm(self, arm);
    }
}
