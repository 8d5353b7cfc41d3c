//! YAML as kubectl reads it: a manifest turned into the JSON an API server
//! receives, with YAML 1.1's reading of plain (unquoted) scalars, as
//! `sigs.k8s.io/yaml` (go-yaml v2) does it.
//!
//! YAML 1.2 parsers read an unquoted `off`, `yes` or `0777` as a string;
//! kubectl reads them as `false`, `true` and 511, and the API server then
//! refuses a string field given a boolean. Reading manifests here the way
//! kubectl does lets `tusk validate` and `tusk sandbox up --apply` see what
//! a real cluster is sent.
//!
//! What a plain scalar becomes:
//! - null: nothing, `~`, `null`, `Null`, `NULL`;
//! - true: `y Y yes Yes YES true True TRUE on On ON`; false: `n N no No NO
//!   false False FALSE off Off OFF` (other spellings, `yEs`, stay strings);
//! - an integer, by Go's rules once every `_` is dropped: `1_000`, `+12`,
//!   `0x1F`, `0o17`, `0b101`, and a leading zero for octal (`0777` is 511);
//! - a float: `1.5`, `1e3`, `.5`, `-2.5E-3`, and digits too large for 64
//!   bits. JSON carries a whole float as an integer, so `1e3` reaches the
//!   API server as the integer 1000;
//! - `.inf`, `-.inf` and `.nan` are floats JSON cannot hold: kubectl
//!   refuses the file, and so does [`documents`];
//! - anything else stays a string, timestamps (`2024-01-02`) and
//!   sexagesimal numbers (`1:30`) included.
//!
//! Quoted and block scalars are strings. `!!str` keeps a plain scalar a
//! string; `!!bool`, `!!int` and `!!float` read even a quoted one as that
//! type, or refuse it; other tags leave the text a string. Map keys are
//! read the same way, then written as JSON keys do: `yes:` becomes `"true"`,
//! `0x1F:` becomes `"31"` (a float key keeps its text), and a null key, a
//! sequence or a mapping as a key is refused. Anchors, aliases and merge
//! keys (`<<`) work as in go-yaml v2: a merge sets its entries where it
//! stands, so a key written after it wins, and in a list of merged
//! mappings the earlier ones win.
//!
//! Each [`Document`] lists, in [`Document::resolved`], every plain scalar
//! YAML 1.1 read as a boolean or a number, and every key it rewrote, so a
//! refusal of that field can say to quote it.

mod plain;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use saphyr_parser::{Event, Parser, ScalarStyle, Span, StrInput, Tag};
use serde_json::{Map, Value};

use plain::float_value;
pub use plain::{Plain, resolve_plain};

/// How deep collections may nest. No manifest comes close; the limit keeps
/// a hostile file from exhausting the stack.
const MAX_DEPTH: usize = 256;

/// How many nodes aliases may copy into one document, against alias bombs
/// (go-yaml refuses "excessive aliasing" too).
const MAX_ALIASED_NODES: usize = 1_000_000;

/// One YAML document, as the JSON kubectl would send.
#[derive(Clone, Debug, PartialEq)]
pub struct Document {
    pub value: Value,
    /// Every plain scalar read as a boolean or a number, and every map key
    /// written differently from how it reads, in document order.
    pub resolved: Vec<Resolved>,
}

/// A plain scalar YAML 1.1 read as something other than its text.
#[derive(Clone, Debug, PartialEq)]
pub struct Resolved {
    /// Where it is: the value's path or, for a key, its entry's path.
    pub path: Vec<Segment>,
    /// The scalar as written.
    pub written: String,
    /// What it became: a boolean or a number; for a key, the key.
    pub value: Value,
    /// Whether it is a map key.
    pub key: bool,
}

/// One step of a path into a document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Segment {
    Key(String),
    Index(usize),
}

impl Resolved {
    /// What YAML 1.1 made of it, for messages: `YAML 1.1 reads an unquoted
    /// off as a boolean`.
    pub fn reading(&self) -> String {
        if self.key {
            return format!(
                "YAML 1.1 reads the unquoted key {} as {}",
                self.written, self.value
            );
        }
        let what = match &self.value {
            Value::Bool(_) => "a boolean".to_owned(),
            Value::Number(number) if number.to_string() != self.written => {
                format!("the number {number}")
            }
            _ => "a number".to_owned(),
        };
        format!("YAML 1.1 reads an unquoted {} as {what}", self.written)
    }
}

/// A path in Kubernetes' field notation: `spec.tolerations[0].key`.
pub fn field_path(path: &[Segment]) -> String {
    let mut out = String::new();
    for segment in path {
        match segment {
            Segment::Key(key) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Segment::Index(index) => {
                let _ = write!(out, "[{index}]");
            }
        }
    }
    out
}

/// Why a manifest cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    /// Which document (from 0) of the stream.
    pub document: usize,
    pub message: String,
}

/// Every document of `text` (an empty one as `null`), read as kubectl
/// reads it.
pub fn documents(text: &str) -> Result<Vec<Document>, Error> {
    let mut reader = Reader {
        parser: Parser::new_from_str(text),
        anchors: HashMap::new(),
        aliased: 0,
    };
    let mut documents = Vec::new();
    loop {
        let document = documents.len();
        let fail = |message| Error { document, message };
        let (event, span) = reader.next().map_err(fail)?;
        match event {
            Event::StreamStart | Event::Nothing => {}
            Event::StreamEnd => return Ok(documents),
            Event::DocumentStart(_) => {
                let root = reader.document().map_err(fail)?;
                documents.push(root.into_document());
            }
            other => return Err(fail(located(span, &[], &format!("unexpected {other:?}")))),
        }
    }
}

/// A document's tree while it is read: values, with what each plain
/// scalar was written as where YAML 1.1 changed it.
#[derive(Clone, Debug)]
enum Node {
    Scalar {
        value: Value,
        /// The text, when it read as a boolean or a number.
        written: Option<String>,
    },
    Sequence(Vec<Node>),
    Mapping(BTreeMap<String, Entry>),
}

#[derive(Clone, Debug)]
struct Entry {
    /// The key as written, when it reads as something else.
    written_key: Option<String>,
    node: Node,
}

impl Node {
    fn null() -> Self {
        Node::Scalar {
            value: Value::Null,
            written: None,
        }
    }

    fn size(&self) -> usize {
        match self {
            Node::Scalar { .. } => 1,
            Node::Sequence(items) => 1 + items.iter().map(Node::size).sum::<usize>(),
            Node::Mapping(entries) => 1 + entries.values().map(|e| e.node.size()).sum::<usize>(),
        }
    }

    fn into_document(self) -> Document {
        let mut resolved = Vec::new();
        let value = self.into_value(&mut Vec::new(), &mut resolved);
        Document { value, resolved }
    }

    fn into_value(self, path: &mut Vec<Segment>, resolved: &mut Vec<Resolved>) -> Value {
        match self {
            Node::Scalar { value, written } => {
                if let Some(written) = written {
                    resolved.push(Resolved {
                        path: path.clone(),
                        written,
                        value: value.clone(),
                        key: false,
                    });
                }
                value
            }
            Node::Sequence(items) => Value::Array(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(index, item)| {
                        path.push(Segment::Index(index));
                        let value = item.into_value(path, resolved);
                        path.pop();
                        value
                    })
                    .collect(),
            ),
            Node::Mapping(entries) => {
                let mut map = Map::new();
                for (key, entry) in entries {
                    path.push(Segment::Key(key.clone()));
                    if let Some(written) = entry.written_key {
                        resolved.push(Resolved {
                            path: path.clone(),
                            written,
                            value: Value::String(key.clone()),
                            key: true,
                        });
                    }
                    let value = entry.node.into_value(path, resolved);
                    path.pop();
                    map.insert(key, value);
                }
                Value::Object(map)
            }
        }
    }
}

/// A map key as read: a merge (`<<`) or a named entry.
enum Key {
    Merge,
    Named {
        key: String,
        written: Option<String>,
    },
}

struct Reader<'input> {
    parser: Parser<'input, StrInput<'input>>,
    /// The current document's anchors.
    anchors: HashMap<usize, Node>,
    /// Nodes aliases copied into the current document.
    aliased: usize,
}

impl<'input> Reader<'input> {
    fn next(&mut self) -> Result<(Event<'input>, Span), String> {
        match self.parser.next_event() {
            Some(Ok(event)) => Ok(event),
            Some(Err(error)) => Err(error.to_string()),
            None => Err("unexpected end of the YAML stream".to_owned()),
        }
    }

    /// One document, its start read.
    fn document(&mut self) -> Result<Node, String> {
        self.anchors.clear();
        self.aliased = 0;
        let (event, span) = self.next()?;
        if matches!(event, Event::DocumentEnd) {
            return Ok(Node::null());
        }
        let root = self.node(event, span, &mut Vec::new())?;
        match self.next()? {
            (Event::DocumentEnd, _) => Ok(root),
            (other, span) => Err(located(span, &[], &format!("unexpected {other:?}"))),
        }
    }

    fn node(
        &mut self,
        event: Event<'input>,
        span: Span,
        path: &mut Vec<Segment>,
    ) -> Result<Node, String> {
        if path.len() > MAX_DEPTH {
            return Err(located(
                span,
                path,
                &format!("nested more than {MAX_DEPTH} levels deep"),
            ));
        }
        let (node, anchor) = match event {
            Event::Alias(anchor) => {
                let node = self
                    .anchors
                    .get(&anchor)
                    .cloned()
                    .ok_or_else(|| located(span, path, "an alias of an unknown anchor"))?;
                self.aliased += node.size();
                if self.aliased > MAX_ALIASED_NODES {
                    return Err(located(
                        span,
                        path,
                        &format!("aliases copy more than {MAX_ALIASED_NODES} nodes"),
                    ));
                }
                return Ok(node);
            }
            Event::Scalar(text, style, anchor, tag) => {
                let node = scalar(&text, style, tag.as_deref())
                    .map_err(|message| located(span, path, &message))?;
                (node, anchor)
            }
            Event::SequenceStart(anchor, _) => {
                let mut items = Vec::new();
                loop {
                    let (event, span) = self.next()?;
                    if matches!(event, Event::SequenceEnd) {
                        break;
                    }
                    path.push(Segment::Index(items.len()));
                    let item = self.node(event, span, path);
                    path.pop();
                    items.push(item?);
                }
                (Node::Sequence(items), anchor)
            }
            Event::MappingStart(anchor, _) => (self.mapping(path)?, anchor),
            other => return Err(located(span, path, &format!("unexpected {other:?}"))),
        };
        if anchor != 0 {
            self.anchors.insert(anchor, node.clone());
        }
        Ok(node)
    }

    /// A mapping's entries up to its end, its start read.
    fn mapping(&mut self, path: &mut Vec<Segment>) -> Result<Node, String> {
        let mut entries = BTreeMap::new();
        loop {
            let (event, span) = self.next()?;
            if matches!(event, Event::MappingEnd) {
                break;
            }
            let key = self.key(event, span, path)?;
            let (event, span) = self.next()?;
            match key {
                Key::Merge => {
                    path.push(Segment::Key("<<".to_owned()));
                    let merged = self.node(event, span, path);
                    path.pop();
                    merge(&mut entries, merged?).map_err(|message| located(span, path, message))?;
                }
                Key::Named { key, written } => {
                    path.push(Segment::Key(key.clone()));
                    let node = self.node(event, span, path);
                    path.pop();
                    entries.insert(
                        key,
                        Entry {
                            written_key: written,
                            node: node?,
                        },
                    );
                }
            }
        }
        Ok(Node::Mapping(entries))
    }

    fn key(
        &mut self,
        event: Event<'input>,
        span: Span,
        path: &mut Vec<Segment>,
    ) -> Result<Key, String> {
        let unsupported = |path: &[Segment], what: &str| {
            located(
                span,
                path,
                &format!("a map key that is {what}: JSON keys are strings"),
            )
        };
        match &event {
            Event::Scalar(text, ScalarStyle::Plain, _, None) if text == "<<" => {
                return Ok(Key::Merge);
            }
            Event::Scalar(_, _, _, Some(tag))
                if tag.is_yaml_core_schema() && tag.suffix == "merge" =>
            {
                return Ok(Key::Merge);
            }
            Event::SequenceStart(..) => return Err(unsupported(path, "a sequence")),
            Event::MappingStart(..) => return Err(unsupported(path, "a mapping")),
            _ => {}
        }
        // A float key keeps its text (Go writes it in a form of its own),
        // infinities included: a key is no JSON number.
        if let Event::Scalar(text, ScalarStyle::Plain, _, None) = &event
            && matches!(resolve_plain(text), Plain::Float(_))
        {
            return Ok(Key::Named {
                key: text.to_string(),
                written: None,
            });
        }
        match self.node(event, span, path)? {
            Node::Scalar {
                value: Value::String(key),
                ..
            } => Ok(Key::Named { key, written: None }),
            Node::Scalar {
                value: Value::Null, ..
            } => Err(unsupported(path, "null")),
            Node::Scalar { value, written } => {
                let key = value.to_string();
                let written = written.filter(|written| *written != key);
                Ok(Key::Named { key, written })
            }
            Node::Sequence(_) => Err(unsupported(path, "a sequence")),
            Node::Mapping(_) => Err(unsupported(path, "a mapping")),
        }
    }
}

/// Sets a merge key's entries where it stands: over the keys before it,
/// under the keys after it; of a list of mappings, the earlier ones win.
fn merge(entries: &mut BTreeMap<String, Entry>, merged: Node) -> Result<(), &'static str> {
    const WANT: &str = "a merge key (<<) takes a mapping or a sequence of mappings";
    match merged {
        Node::Mapping(merged) => entries.extend(merged),
        Node::Sequence(items) => {
            for item in items.into_iter().rev() {
                let Node::Mapping(merged) = item else {
                    return Err(WANT);
                };
                entries.extend(merged);
            }
        }
        Node::Scalar { .. } => return Err(WANT),
    }
    Ok(())
}

/// One scalar's value: plain ones by YAML 1.1's rules, tagged ones by
/// their tag, quoted and block ones as strings.
fn scalar(text: &str, style: ScalarStyle, tag: Option<&Tag>) -> Result<Node, String> {
    let string = || Node::Scalar {
        value: Value::String(text.to_owned()),
        written: None,
    };
    let plain = match tag {
        None if style == ScalarStyle::Plain => resolve_plain(text),
        Some(tag) if tag.is_yaml_core_schema() => {
            let wanted = tag.suffix.as_str();
            if !matches!(wanted, "bool" | "int" | "float") {
                return Ok(string());
            }
            let plain = resolve_plain(text);
            let fits = match plain {
                Plain::Bool(_) => wanted == "bool",
                Plain::Int(_) | Plain::Uint(_) => wanted == "int" || wanted == "float",
                Plain::Float(_) => wanted == "float",
                Plain::Null | Plain::Str => false,
            };
            if !fits {
                let read = match plain {
                    Plain::Null => "!!null",
                    Plain::Bool(_) => "!!bool",
                    Plain::Int(_) | Plain::Uint(_) => "!!int",
                    Plain::Float(_) => "!!float",
                    Plain::Str => "!!str",
                };
                return Err(format!("cannot decode {read} `{text}` as a !!{wanted}"));
            }
            plain
        }
        _ => return Ok(string()),
    };
    let value = match plain {
        Plain::Str => return Ok(string()),
        Plain::Null => return Ok(Node::null()),
        Plain::Bool(value) => Value::Bool(value),
        Plain::Int(value) => Value::from(value),
        Plain::Uint(value) => Value::from(value),
        Plain::Float(value) => float_value(value).ok_or_else(|| {
            format!(
                "an unquoted {text} is a float JSON cannot carry, which kubectl refuses: quote it, \"{text}\""
            )
        })?,
    };
    Ok(Node::Scalar {
        value,
        written: Some(text.to_owned()),
    })
}

/// `line N: path: message`.
fn located(span: Span, path: &[Segment], message: &str) -> String {
    let line = span.start.line();
    if path.is_empty() {
        format!("line {line}: {message}")
    } else {
        format!("line {line}: {}: {message}", field_path(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn one(text: &str) -> Document {
        let mut documents = documents(text).expect("valid YAML");
        assert_eq!(documents.len(), 1, "{documents:?}");
        documents.remove(0)
    }

    fn value_of(scalar: &str) -> Value {
        one(&format!("v: {scalar}\n")).value["v"].clone()
    }

    #[test]
    fn every_yaml_1_1_boolean_spelling_is_a_boolean() {
        for word in [
            "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON",
        ] {
            assert_eq!(value_of(word), json!(true), "{word}");
        }
        for word in [
            "n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF",
        ] {
            assert_eq!(value_of(word), json!(false), "{word}");
        }
    }

    #[test]
    fn other_spellings_of_booleans_stay_strings() {
        for word in ["yEs", "oN", "tRUE", "nO", "offf", "yes please", "O"] {
            assert_eq!(value_of(word), json!(word), "{word}");
        }
    }

    #[test]
    fn quoted_and_block_scalars_stay_strings() {
        let document = one("a: 'off'\nb: \"yes\"\nc: |\n  on\nd: >\n  0777\ne: \"\"\n");
        assert_eq!(
            document.value,
            json!({"a": "off", "b": "yes", "c": "on\n", "d": "0777\n", "e": ""})
        );
        assert!(document.resolved.is_empty(), "{:?}", document.resolved);
    }

    #[test]
    fn integers_follow_go_base_prefixes_and_drop_underscores() {
        for (written, value) in [
            ("12", json!(12)),
            ("+12", json!(12)),
            ("-12", json!(-12)),
            ("0", json!(0)),
            ("-0", json!(0)),
            ("0777", json!(511)),
            ("0o17", json!(15)),
            ("0O17", json!(15)),
            ("0x1F", json!(31)),
            ("0X1f", json!(31)),
            ("-0x1F", json!(-31)),
            ("0b101", json!(5)),
            ("1_000", json!(1000)),
            ("1__0_", json!(10)),
            ("0x_1F", json!(31)),
            ("9223372036854775807", json!(i64::MAX)),
            ("-9223372036854775808", json!(i64::MIN)),
            ("18446744073709551615", json!(u64::MAX)),
        ] {
            assert_eq!(value_of(written), value, "{written}");
        }
    }

    #[test]
    fn floats_reach_the_server_as_json_numbers() {
        for (written, value) in [
            ("1.5", json!(1.5)),
            ("-2.5E-3", json!(-0.0025)),
            (".5", json!(0.5)),
            ("+.5", json!(0.5)),
            ("-.5", json!(-0.5)),
            ("1.", json!(1)),
            ("1e3", json!(1000)),
            ("1_000.5", json!(1000.5)),
            // Not octal: a float, which JSON writes as a whole number.
            ("08", json!(8)),
            ("0999", json!(999)),
            // Beyond 64 bits: a float.
            ("123456789012345678901234", json!(1.2345678901234568e23)),
            ("6.02e23", json!(6.02e23)),
        ] {
            assert_eq!(value_of(written), value, "{written}");
        }
    }

    #[test]
    fn what_is_no_number_stays_a_string() {
        for word in [
            "1:30",
            "190:20:30.15",
            "2024-01-02",
            "2001-12-14t21:59:43.10-05:00",
            "1.2.3",
            "0x",
            "0xG",
            "0b102",
            "1e",
            "e3",
            ".",
            ".e3",
            ".5_0",
            "+-1",
            "1e400",
            "1e-400",
            "12Mi",
            "100m",
            "0.0.0.0/0",
            "_1",
            "Infinity",
            "NaN",
        ] {
            assert_eq!(value_of(word), json!(word), "{word}");
        }
    }

    #[test]
    fn a_lone_sign_stays_a_string() {
        for word in ["+", "-", "+_", "-_"] {
            assert_eq!(resolve_plain(word), Plain::Str, "{word}");
        }
    }

    #[test]
    fn nulls_are_null() {
        let document = one("a:\nb: ~\nc: null\nd: Null\ne: NULL\nf: nULL\n");
        assert_eq!(
            document.value,
            json!({"a": null, "b": null, "c": null, "d": null, "e": null, "f": "nULL"})
        );
        assert!(document.resolved.is_empty());
    }

    #[test]
    fn infinities_and_nan_are_refused_as_kubectl_refuses_them() {
        for word in [".inf", "-.Inf", "+.INF", ".nan", ".NaN"] {
            let error = documents(&format!("a:\n  b: {word}\n")).expect_err(word);
            assert_eq!(error.document, 0);
            assert!(error.message.contains("line 2: a.b:"), "{}", error.message);
            assert!(
                error.message.contains(&format!("quote it, \"{word}\"")),
                "{}",
                error.message
            );
        }
        assert_eq!(value_of("'.inf'"), json!(".inf"));
    }

    #[test]
    fn tags_decide_over_the_plain_reading() {
        let document = one(
            "a: !!str off\nb: !!bool \"yes\"\nc: !!int '0x1F'\nd: !!float 1\ne: !custom on\nf: ! 12\ng: !!str 12\n",
        );
        assert_eq!(
            document.value,
            json!({"a": "off", "b": true, "c": 31, "d": 1, "e": "on", "f": "12", "g": "12"})
        );
        let error = documents("a: !!int yes\n").expect_err("a boolean is no integer");
        assert!(
            error
                .message
                .contains("cannot decode !!bool `yes` as a !!int"),
            "{}",
            error.message
        );
    }

    #[test]
    fn resolved_scalars_are_listed_with_their_paths() {
        let document = one(
            "spec:\n  postgres:\n    parameters: {jit: off, work_mem: 4MB, port: '5432'}\n  list: [1, 'a', yes]\n",
        );
        let listed: Vec<(String, &str, &Value)> = document
            .resolved
            .iter()
            .map(|r| (field_path(&r.path), r.written.as_str(), &r.value))
            .collect();
        assert_eq!(
            listed,
            vec![
                ("spec.list[0]".to_owned(), "1", &json!(1)),
                ("spec.list[2]".to_owned(), "yes", &json!(true)),
                (
                    "spec.postgres.parameters.jit".to_owned(),
                    "off",
                    &json!(false)
                ),
            ]
        );
    }

    #[test]
    fn readings_tell_what_yaml_1_1_made_of_a_scalar() {
        let document = one("a: off\nb: 0777\nc: 16\nyes: 1\n");
        let readings: Vec<String> = document.resolved.iter().map(Resolved::reading).collect();
        assert_eq!(
            readings,
            [
                "YAML 1.1 reads an unquoted off as a boolean",
                "YAML 1.1 reads an unquoted 0777 as the number 511",
                "YAML 1.1 reads an unquoted 16 as a number",
                "YAML 1.1 reads the unquoted key yes as \"true\"",
                "YAML 1.1 reads an unquoted 1 as a number",
            ]
        );
    }

    #[test]
    fn keys_are_read_then_written_as_json_keys() {
        let document = one("yes: a\n0x1F: b\n12: c\n1.50: d\n.inf: e\n'on': f\n");
        assert_eq!(
            document.value,
            json!({"true": "a", "31": "b", "12": "c", "1.50": "d", ".inf": "e", "on": "f"})
        );
        let keys: Vec<(&str, &Value)> = document
            .resolved
            .iter()
            .filter(|r| r.key)
            .map(|r| (r.written.as_str(), &r.value))
            .collect();
        assert_eq!(keys, vec![("0x1F", &json!("31")), ("yes", &json!("true"))]);
    }

    #[test]
    fn keys_json_cannot_have_are_refused() {
        for text in [
            "~: a\n",
            "? [a]\n: b\n",
            "? {a: b}\n: c\n",
            "a: {null: b}\n",
        ] {
            let error = documents(text).expect_err(text);
            assert!(
                error.message.contains("JSON keys are strings"),
                "{text}: {}",
                error.message
            );
        }
    }

    #[test]
    fn anchors_aliases_and_merges_work_as_in_go_yaml_v2() {
        let document = one(concat!(
            "base: &base {a: 1, b: off}\n",
            "other: &other {b: 2, c: 3}\n",
            "copy: *base\n",
            "merged: {<<: *base, a: 9}\n",
            "before: {a: 9, <<: *base}\n",
            "list: {<<: [*base, *other]}\n",
        ));
        assert_eq!(document.value["copy"], json!({"a": 1, "b": false}));
        assert_eq!(document.value["merged"], json!({"a": 9, "b": false}));
        assert_eq!(document.value["before"], json!({"a": 1, "b": false}));
        assert_eq!(document.value["list"], json!({"a": 1, "b": false, "c": 3}));
        let off_at: Vec<String> = document
            .resolved
            .iter()
            .filter(|r| r.written == "off")
            .map(|r| field_path(&r.path))
            .collect();
        assert_eq!(
            off_at,
            ["base.b", "before.b", "copy.b", "list.b", "merged.b"]
        );
        let error = documents("a: {<<: 1}\n").expect_err("a scalar cannot be merged");
        assert!(error.message.contains("merge key"), "{}", error.message);
        assert_eq!(one("'<<': 1\n").value, json!({"<<": 1}));
    }

    #[test]
    fn alias_bombs_and_deep_nesting_are_refused() {
        let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for level in 1..9 {
            let previous = format!("*a{}", level - 1);
            let items = [previous.as_str(); 10].join(", ");
            bomb.push_str(&format!("a{level}: &a{level} [{items}]\n"));
        }
        let error = documents(&bomb).expect_err("an alias bomb");
        assert!(
            error.message.contains("aliases copy more"),
            "{}",
            error.message
        );

        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 2), "]".repeat(MAX_DEPTH + 2));
        documents(&deep).expect_err("too deep");
    }

    #[test]
    fn documents_are_counted_and_errors_name_theirs() {
        let read = documents("---\na: 1\n---\n---\nb: on\n").expect("valid YAML");
        let values: Vec<&Value> = read.iter().map(|d| &d.value).collect();
        assert_eq!(
            values,
            vec![&json!({"a": 1}), &Value::Null, &json!({"b": true})]
        );
        assert_eq!(documents("").expect("empty"), vec![]);

        let error = documents("a: 1\n---\nkind: [unclosed\n").expect_err("broken YAML");
        assert_eq!(error.document, 1, "{error:?}");
    }
}
