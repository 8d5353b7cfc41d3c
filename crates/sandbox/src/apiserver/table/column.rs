//! One column of a Table: its header, as `columnDefinitions` describes it,
//! and the function that computes its cell from an object.

use serde_json::Value;

/// A column kubectl shows; `priority` 1 and above only with `-o wide`.
pub struct Column {
    pub name: &'static str,
    pub type_: &'static str,
    pub format: &'static str,
    pub priority: i64,
    pub cell: fn(&Value) -> Value,
}

/// A string column.
pub const fn string(name: &'static str, priority: i64, cell: fn(&Value) -> Value) -> Column {
    Column {
        name,
        type_: "string",
        format: "",
        priority,
        cell,
    }
}
