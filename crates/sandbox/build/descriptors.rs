//! The messages of [`crate::messages`] as the descriptor set `protoc`
//! would write for Kubernetes' `generated.proto` files: one proto2 file
//! per package, fields named by their JSON names (Kubernetes names its
//! proto fields after them), maps as nested `...Entry` messages.

use std::collections::{BTreeMap, BTreeSet};

use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{
    DescriptorProto, FieldDescriptorProto, FileDescriptorProto, FileDescriptorSet, MessageOptions,
};

use crate::json_names::JsonNames;
use crate::messages::{Field, Kind, Message, Shape};

pub fn build(packages: &BTreeMap<String, Vec<Message>>, names: &JsonNames) -> FileDescriptorSet {
    let mut files = Vec::new();
    let mut done = BTreeSet::new();
    for package in packages.keys() {
        add_file(package, packages, names, &mut done, &mut files);
    }
    FileDescriptorSet { file: files }
}

fn file_name(package: &str) -> String {
    let path = package
        .strip_prefix("k8s.io.")
        .unwrap_or(package)
        .replace('.', "/");
    format!("k8s.io/{path}/generated.proto")
}

/// Adds a package's file after the files of the packages it uses.
fn add_file(
    package: &str,
    packages: &BTreeMap<String, Vec<Message>>,
    names: &JsonNames,
    done: &mut BTreeSet<String>,
    files: &mut Vec<FileDescriptorProto>,
) {
    if !done.insert(package.to_owned()) {
        return;
    }
    let messages = packages.get(package).map(Vec::as_slice).unwrap_or_default();
    let imports: BTreeSet<&String> = messages
        .iter()
        .flat_map(|m| &m.fields)
        .filter_map(|f| match f.shape.kind() {
            Kind::Message { package: used, .. } if used != package => Some(used),
            _ => None,
        })
        .collect();
    for import in &imports {
        add_file(import, packages, names, done, files);
    }
    files.push(FileDescriptorProto {
        name: Some(file_name(package)),
        package: Some(package.to_owned()),
        dependency: imports.iter().map(|p| file_name(p)).collect(),
        message_type: messages
            .iter()
            .map(|m| message(package, m, names))
            .collect(),
        ..Default::default()
    });
}

fn message(package: &str, message: &Message, names: &JsonNames) -> DescriptorProto {
    let mut out = DescriptorProto {
        name: Some(names.type_name(package, &message.name)),
        ..Default::default()
    };
    for field in &message.fields {
        let name = names.field_name(package, &message.name, &field.rust_name);
        match &field.shape {
            Shape::Optional(kind) => {
                out.field
                    .push(plain(&name, field, kind, Label::Optional, names))
            }
            Shape::Repeated(kind) => {
                out.field
                    .push(plain(&name, field, kind, Label::Repeated, names))
            }
            Shape::Map(value) => {
                let entry = map_entry_name(&name);
                let message_name = out.name.clone().unwrap_or_default();
                out.field.push(FieldDescriptorProto {
                    name: Some(name.clone()),
                    json_name: Some(name.clone()),
                    number: Some(field.number),
                    label: Some(Label::Repeated as i32),
                    r#type: Some(Type::Message as i32),
                    type_name: Some(format!(".{package}.{message_name}.{entry}")),
                    ..Default::default()
                });
                out.nested_type.push(map_entry(entry, value, names));
            }
        }
    }
    out
}

fn plain(
    name: &str,
    field: &Field,
    kind: &Kind,
    label: Label,
    names: &JsonNames,
) -> FieldDescriptorProto {
    let (r#type, type_name) = field_type(kind, names);
    FieldDescriptorProto {
        name: Some(name.to_owned()),
        json_name: Some(name.to_owned()),
        number: Some(field.number),
        label: Some(label as i32),
        r#type: Some(r#type as i32),
        type_name,
        ..Default::default()
    }
}

fn field_type(kind: &Kind, names: &JsonNames) -> (Type, Option<String>) {
    match kind {
        Kind::Message { package, name } => (
            Type::Message,
            Some(format!(".{package}.{}", names.type_name(package, name))),
        ),
        Kind::Scalar(scalar) => (
            Type::from_str_name(&format!("TYPE_{}", scalar.to_ascii_uppercase()))
                .unwrap_or(Type::String),
            None,
        ),
    }
}

/// `protoc`'s name for the entry message of a map field: `matchLabels`
/// holds `MatchLabelsEntry`.
fn map_entry_name(field: &str) -> String {
    let mut chars = field.chars();
    let first = chars.next().map(|c| c.to_ascii_uppercase());
    first.into_iter().chain(chars).collect::<String>() + "Entry"
}

fn map_entry(name: String, value: &Kind, names: &JsonNames) -> DescriptorProto {
    let (value_type, value_type_name) = field_type(value, names);
    let field = |name: &str, number, r#type: Type, type_name| FieldDescriptorProto {
        name: Some(name.to_owned()),
        json_name: Some(name.to_owned()),
        number: Some(number),
        label: Some(Label::Optional as i32),
        r#type: Some(r#type as i32),
        type_name,
        ..Default::default()
    };
    DescriptorProto {
        name: Some(name),
        field: vec![
            field("key", 1, Type::String, None),
            field("value", 2, value_type, value_type_name),
        ],
        options: Some(MessageOptions {
            map_entry: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    }
}
