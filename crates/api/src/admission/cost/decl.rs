//! The size model kube-apiserver estimates CEL cost with: each schema node
//! becomes a declared type with the largest number of elements it can hold
//! (characters of a string, items of a list, entries of a map) and the
//! smallest size its JSON can take.
//!
//! A bound the schema states is used (`maxItems`, `maxProperties`, and
//! `maxLength` counted as four bytes a character); an unbounded node is
//! sized from the largest request the API server accepts (3 MiB) divided by
//! the smallest serialized size of one element. Map keys are declared as
//! plain strings with no size of their own (zero elements), as
//! kube-apiserver declares them.

use std::collections::BTreeMap;

use serde_json::Value;

/// The largest request body kube-apiserver accepts, in bytes.
pub const MAX_REQUEST_SIZE_BYTES: u64 = 3 * 1024 * 1024;

/// What a declared value is, as far as cost estimation tells kinds apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Bool,
    Int,
    Double,
    String,
    Bytes,
    Duration,
    Timestamp,
    List,
    Map,
    Object,
    /// `x-kubernetes-int-or-string`: typed at runtime.
    Dyn,
}

/// One schema node as a CEL declaration with its size bounds.
#[derive(Clone, Debug, PartialEq)]
pub struct Decl {
    pub kind: Kind,
    /// The most elements (characters, bytes, items, entries) it holds; 0
    /// for scalars and objects.
    pub max_elements: u64,
    /// The fewest bytes its JSON can take.
    pub min_serialized_size: u64,
    /// Properties of an object, under their CEL-escaped names.
    pub fields: BTreeMap<String, Decl>,
    /// Items of a list, values of a map.
    pub elem: Option<Box<Decl>>,
    /// Keys of a map.
    pub key: Option<Box<Decl>>,
}

impl Decl {
    fn simple(kind: Kind, min_serialized_size: u64, max_elements: u64) -> Self {
        Self {
            kind,
            max_elements,
            min_serialized_size,
            fields: BTreeMap::new(),
            elem: None,
            key: None,
        }
    }

    /// The declaration of a map key: a string of no declared size.
    pub fn map_key() -> Self {
        Self::simple(Kind::String, 2, 0)
    }

    /// The declaration of `schema`; `resource_root` adds `apiVersion`,
    /// `kind` and `metadata.name`/`generateName`, which rules at the root of
    /// a resource may always read. `None` where CEL sees no value (a list
    /// without items, a node without a type).
    pub fn of_schema(schema: &Value, resource_root: bool) -> Option<Self> {
        if flag(schema, "x-kubernetes-int-or-string") {
            let max = match uint(schema, "maxLength") {
                Some(length) => length.saturating_mul(4),
                None => MAX_REQUEST_SIZE_BYTES - 2,
            };
            return Some(Self::simple(Kind::Dyn, 1, max));
        }
        let with_meta;
        let schema = if resource_root {
            with_meta = with_type_and_object_meta(schema);
            &with_meta
        } else {
            schema
        };
        match schema.get("type").and_then(Value::as_str)? {
            "array" => {
                let items = schema.get("items")?;
                let elem = Self::of_schema(items, flag(items, "x-kubernetes-embedded-resource"))?;
                let max = uint(schema, "maxItems").unwrap_or_else(|| {
                    (MAX_REQUEST_SIZE_BYTES - 2) / (elem.min_serialized_size + 1)
                });
                let mut list = Self::simple(Kind::List, 2, max);
                list.elem = Some(Box::new(elem));
                Some(list)
            }
            "object" => Self::object(schema),
            "string" => Some(Self::string(schema)),
            "boolean" => Some(Self::simple(Kind::Bool, 4, 0)),
            "number" => Some(Self::simple(Kind::Double, 1, 0)),
            "integer" => Some(Self::simple(Kind::Int, 1, 0)),
            _ => None,
        }
    }

    fn object(schema: &Value) -> Option<Self> {
        if let Some(values) = schema.get("additionalProperties").filter(|a| a.is_object()) {
            let elem = Self::of_schema(values, flag(values, "x-kubernetes-embedded-resource"))?;
            let max = uint(schema, "maxProperties")
                .unwrap_or_else(|| (MAX_REQUEST_SIZE_BYTES - 2) / (elem.min_serialized_size + 6));
            let mut map = Self::simple(Kind::Map, 2, max);
            map.elem = Some(Box::new(elem));
            map.key = Some(Box::new(Self::map_key()));
            return Some(map);
        }
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut object = Self::simple(Kind::Object, 2, 0);
        for (name, property) in schema
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let embedded = flag(property, "x-kubernetes-embedded-resource");
            let Some(field) = Self::of_schema(property, embedded) else {
                continue;
            };
            if required.contains(&name.as_str()) && property.get("default").is_none() {
                object.min_serialized_size += name.len() as u64 + field.min_serialized_size + 4;
            }
            if let Some(escaped) = escape_field_name(name) {
                object.fields.insert(escaped, field);
            }
        }
        Some(object)
    }

    fn string(schema: &Value) -> Self {
        let max_length = uint(schema, "maxLength");
        let unbounded = MAX_REQUEST_SIZE_BYTES - 2;
        match schema.get("format").and_then(Value::as_str) {
            Some("byte") => Self::simple(Kind::Bytes, 2, max_length.unwrap_or(unbounded)),
            Some("duration") => Self::simple(Kind::Duration, 3, 32),
            Some("date") => Self::simple(Kind::Timestamp, 12, 12),
            Some("date-time") => Self::simple(Kind::Timestamp, 21, 32),
            _ => {
                let max = match max_length {
                    Some(length) => length.saturating_mul(4),
                    None => match schema.get("enum").and_then(Value::as_array) {
                        Some(values) if !values.is_empty() => values
                            .iter()
                            .filter_map(Value::as_str)
                            .map(|v| v.len() as u64)
                            .max()
                            .unwrap_or(0),
                        _ => unbounded,
                    },
                };
                Self::simple(Kind::String, 2, max)
            }
        }
    }

    /// The declaration at `path` below this one: field names, `@items`,
    /// `@values` and `@keys`.
    pub fn at(&self, path: &[String]) -> Option<&Decl> {
        let mut node = self;
        for segment in path {
            node = match segment.as_str() {
                "@items" | "@values" => node.elem.as_deref()?,
                "@keys" => node.key.as_deref()?,
                name => node.fields.get(name)?,
            };
        }
        Some(node)
    }
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key) == Some(&Value::Bool(true))
}

/// A non-negative bound; a negative one counts as zero.
fn uint(schema: &Value, key: &str) -> Option<u64> {
    let value = schema.get(key)?;
    value
        .as_u64()
        .or_else(|| value.as_i64().map(|_| 0))
        .or_else(|| value.as_f64().map(|f| if f > 0.0 { f as u64 } else { 0 }))
}

/// The root of a resource as CEL sees it: `apiVersion`, `kind` and
/// `metadata` with `name` and `generateName`, whatever the schema says of
/// them (unless it declares all of them as strings already).
fn with_type_and_object_meta(schema: &Value) -> Value {
    let string = serde_json::json!({"type": "string"});
    let is =
        |pointer: &str, type_: &str| schema.pointer(pointer).and_then(Value::as_str) == Some(type_);
    if is("/properties/kind/type", "string")
        && is("/properties/apiVersion/type", "string")
        && is("/properties/metadata/type", "object")
        && is("/properties/metadata/properties/name/type", "string")
        && is(
            "/properties/metadata/properties/generateName/type",
            "string",
        )
    {
        return schema.clone();
    }
    let mut result = schema.clone();
    if let Some(object) = result.as_object_mut() {
        let properties = object
            .entry("properties")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(properties) = properties.as_object_mut() {
            properties.insert("kind".into(), string.clone());
            properties.insert("apiVersion".into(), string.clone());
            properties.insert(
                "metadata".into(),
                serde_json::json!({"type": "object", "properties": {
                    "name": string.clone(), "generateName": string,
                }}),
            );
        }
    }
    result
}

const RESERVED: [&str; 25] = [
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
    "int",
    "uint",
    "double",
    "bool",
];

/// A property's name as CEL reads it (`x-y` is `x__dash__y`), or `None`
/// where CEL cannot name it.
fn escape_field_name(name: &str) -> Option<String> {
    let mut chars = name.chars();
    let first = chars.next()?;
    if !(first.is_ascii_alphabetic() || first == '_') {
        return None;
    }
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut out = String::new();
    let mut rest = name;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("__") {
            out.push_str("__underscores__");
            rest = after;
            continue;
        }
        let Some(c) = rest.chars().next() else { break };
        match c {
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            _ => return None,
        }
        rest = &rest[c.len_utf8()..];
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn max_length_counts_four_bytes_a_character() {
        let decl = Decl::of_schema(&json!({"type": "string", "maxLength": 63}), false);
        assert_eq!(decl.map(|d| d.max_elements), Some(252));
    }

    #[test]
    fn unbounded_strings_are_sized_from_the_request_limit() {
        let decl = Decl::of_schema(&json!({"type": "string"}), false);
        assert_eq!(decl.map(|d| d.max_elements), Some(3_145_726));
    }

    #[test]
    fn an_enum_bounds_a_string_by_its_longest_value() {
        let decl = Decl::of_schema(&json!({"type": "string", "enum": ["a", "abcd"]}), false);
        assert_eq!(decl.map(|d| d.max_elements), Some(4));
    }

    #[test]
    fn unbounded_maps_and_lists_are_sized_from_their_elements() {
        let map = Decl::of_schema(
            &json!({"type": "object", "additionalProperties": {"type": "string"}}),
            false,
        );
        // Each entry is at least `"":""` and a comma: 2 + 6 bytes.
        assert_eq!(map.map(|d| d.max_elements), Some(3_145_726 / 8));
        let list = Decl::of_schema(
            &json!({"type": "array", "items": {"type": "integer"}}),
            false,
        );
        assert_eq!(list.map(|d| d.max_elements), Some(3_145_726 / 2));
    }

    #[test]
    fn required_fields_without_defaults_make_an_object_bigger() {
        let decl = Decl::of_schema(
            &json!({"type": "object", "required": ["a", "b"], "properties": {
                "a": {"type": "string"}, "b": {"type": "integer", "default": 1}
            }}),
            false,
        );
        // {} plus "a":"" and its comma.
        assert_eq!(decl.map(|d| d.min_serialized_size), Some(2 + 1 + 2 + 4));
    }

    #[test]
    fn the_resource_root_declares_metadata_name() {
        let decl = Decl::of_schema(&json!({"type": "object", "properties": {}}), true);
        let name = decl
            .as_ref()
            .and_then(|d| d.at(&["metadata".into(), "name".into()]));
        assert_eq!(name.map(|n| n.kind), Some(Kind::String));
    }

    #[test]
    fn field_names_are_escaped_as_cel_reads_them() {
        assert_eq!(
            escape_field_name("a-b.c").as_deref(),
            Some("a__dash__b__dot__c")
        );
        assert_eq!(
            escape_field_name("namespace").as_deref(),
            Some("__namespace__")
        );
        assert_eq!(escape_field_name("1a"), None);
    }
}
