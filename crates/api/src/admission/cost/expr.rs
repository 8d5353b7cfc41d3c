//! The static cost of one CEL expression, estimated over the parsed AST as
//! kube-apiserver estimates it (cel-go's checker with Kubernetes' library
//! costs and presence tests free).
//!
//! Every node yields its cost range, a light type (enough to pick the
//! overload whose cost applies), its field path from `self` (`@items`,
//! `@values`, `@keys` through lists and maps) from which the schema's size
//! bounds are read, a computed size where the expression itself tells one
//! (literals, concatenations, macro results), and the sizes of a list's or
//! map's entries where known. The cost of a macro is its range's size times
//! the cost of one step, plus the rest.
//!
//! Where the real checker would pick among several overloads (a `dyn`
//! operand), the most expensive one is taken: the estimate may then be
//! higher than kube-apiserver's, never lower.

use std::collections::HashMap;

use kube::core::cel::cel::common::ast::{
    CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue,
};

use super::decl::{Decl, Kind};
use super::functions::{self, Call};
use super::range::Range;

/// What a value is, as far as costs tell kinds apart.
#[derive(Clone, Debug, PartialEq)]
pub enum Ty {
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Duration,
    Timestamp,
    Null,
    List(Box<Ty>),
    Map(Box<Ty>, Box<Ty>),
    Object(Box<Decl>),
    /// Kubernetes' quantity, URL, IP, CIDR, semver and format values.
    Library(&'static str),
    Dyn,
}

impl Ty {
    pub fn of_decl(decl: &Decl) -> Self {
        match decl.kind {
            Kind::Bool => Ty::Bool,
            Kind::Int => Ty::Int,
            Kind::Double => Ty::Double,
            Kind::String => Ty::String,
            Kind::Bytes => Ty::Bytes,
            Kind::Duration => Ty::Duration,
            Kind::Timestamp => Ty::Timestamp,
            Kind::Dyn => Ty::Dyn,
            Kind::Object => Ty::Object(Box::new(decl.clone())),
            Kind::List => Ty::List(Box::new(decl.elem.as_deref().map_or(Ty::Dyn, Ty::of_decl))),
            Kind::Map => Ty::Map(
                Box::new(Ty::String),
                Box::new(decl.elem.as_deref().map_or(Ty::Dyn, Ty::of_decl)),
            ),
        }
    }

    /// Values of a fixed size (one unit), which need no schema bound.
    fn is_scalar(&self) -> bool {
        matches!(
            self,
            Ty::Bool | Ty::Int | Ty::Uint | Ty::Double | Ty::Duration | Ty::Timestamp
        )
    }

    pub fn is_textual(&self) -> bool {
        matches!(self, Ty::String | Ty::Bytes)
    }

    /// The items of a list, or the keys of a map.
    fn element(&self) -> Ty {
        match self {
            Ty::List(item) => (**item).clone(),
            Ty::Map(key, _) => (**key).clone(),
            _ => Ty::Dyn,
        }
    }
}

/// Whether a container's entries are list items or map entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Container {
    List,
    Map,
}

/// The sizes of a list's (index, item) or a map's (key, value) entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub container: Container,
    pub key: Range,
    pub value: Range,
}

impl Entry {
    /// Both entries' sizes, when both are known.
    pub fn union_of(a: Option<Entry>, b: Option<Entry>) -> Option<Entry> {
        let (a, b) = (a?, b?);
        Some(Entry {
            container: a.container,
            key: a.key.union(b.key),
            value: a.value.union(b.value),
        })
    }
}

/// One estimated expression.
#[derive(Clone, Debug)]
pub struct Node {
    pub cost: Range,
    pub ty: Ty,
    /// The field path from the variable (`self`, `oldSelf`); empty when the
    /// value is not reached through the schema.
    pub path: Vec<String>,
    pub size: Option<Range>,
    pub entry: Option<Entry>,
    /// The schema's bound on a list's items, through the list's path.
    pub item_size: Option<Range>,
    /// The value of an integer literal.
    pub int_literal: Option<i64>,
}

impl Node {
    pub fn size_or_unknown(&self) -> Range {
        self.size.unwrap_or(Range::UNKNOWN)
    }
}

/// A variable bound by a macro.
#[derive(Clone, Debug)]
struct Local {
    path: Vec<String>,
    size: Option<Range>,
    entry: Option<Entry>,
    ty: Ty,
}

/// Estimates expressions whose `self` (and `oldSelf`) is `root`.
pub struct Estimator<'r> {
    root: &'r Decl,
    locals: HashMap<String, Vec<Local>>,
}

/// The fixed costs of the language.
const SELECT_OR_IDENT: u64 = 1;
const LIST_CREATE: u64 = 10;
const MAP_CREATE: u64 = 30;
const STRUCT_CREATE: u64 = 40;

impl<'r> Estimator<'r> {
    pub fn new(root: &'r Decl) -> Self {
        Self {
            root,
            locals: HashMap::new(),
        }
    }

    /// The cost of `expr`, and what it evaluates to.
    pub fn estimate(&mut self, expr: &IdedExpr) -> Node {
        match &expr.expr {
            Expr::Literal(literal) => literal_node(literal),
            Expr::Ident(name) => self.ident(name),
            Expr::Select(select) => {
                let operand = self.estimate(&select.operand);
                if select.test {
                    // `has()`: Kubernetes charges nothing for the test itself.
                    return self.node(operand.cost, Ty::Bool, Vec::new(), None);
                }
                let extra = match operand.ty {
                    Ty::Map(..) | Ty::Object(_) => SELECT_OR_IDENT,
                    _ => 0,
                };
                let ty = match &operand.ty {
                    Ty::Object(decl) => decl.fields.get(&select.field).map_or(Ty::Dyn, Ty::of_decl),
                    Ty::Map(_, value) => (**value).clone(),
                    _ => Ty::Dyn,
                };
                let mut path = operand.path;
                path.push(select.field.clone());
                self.node(operand.cost.plus(Range::fixed(extra)), ty, path, None)
            }
            Expr::Call(call) => self.call(call),
            Expr::List(list) => {
                let mut cost = Range::fixed(LIST_CREATE);
                let mut value = if list.elements.is_empty() {
                    Range::fixed(0)
                } else {
                    Range {
                        min: u64::MAX,
                        max: 0,
                    }
                };
                let mut item = Ty::Dyn;
                for (index, element) in list.elements.iter().enumerate() {
                    let node = self.estimate(element);
                    cost = cost.plus(node.cost);
                    value = value.union(node.size_or_unknown());
                    if index == 0 {
                        item = node.ty;
                    }
                }
                let mut node =
                    literal_sized(cost, Ty::List(Box::new(item)), list.elements.len() as u64);
                node.entry = Some(Entry {
                    container: Container::List,
                    key: Range::fixed(1),
                    value,
                });
                node
            }
            Expr::Map(map) => self.map_literal(&map.entries),
            Expr::Struct(object) => {
                let mut cost = Range::fixed(STRUCT_CREATE);
                for entry in &object.entries {
                    if let EntryExpr::StructField(field) = &entry.expr {
                        cost = cost.plus(self.estimate(&field.value).cost);
                    }
                }
                self.node(cost, Ty::Dyn, Vec::new(), None)
            }
            Expr::Comprehension(comprehension) => self.comprehension(comprehension),
            Expr::Unspecified => self.node(Range::fixed(0), Ty::Dyn, Vec::new(), None),
        }
    }

    /// A node whose size is read, in this order, from the schema through
    /// its path, from its type (scalars), or from `fallback`.
    fn node(&self, cost: Range, ty: Ty, path: Vec<String>, fallback: Option<Range>) -> Node {
        let size = self
            .size_at(&path)
            .or_else(|| ty.is_scalar().then_some(Range::fixed(1)))
            .or(fallback);
        let item_size = if path.is_empty() {
            None
        } else {
            let mut items = path.clone();
            items.push("@items".to_owned());
            self.size_at(&items)
        };
        Node {
            cost,
            ty,
            path,
            size,
            entry: None,
            item_size,
            int_literal: None,
        }
    }

    /// The schema's bound at `path`; its first element names the variable.
    fn size_at(&self, path: &[String]) -> Option<Range> {
        let (_, below) = path.split_first()?;
        let decl = self.root.at(below)?;
        Some(Range {
            min: 0,
            max: decl.max_elements,
        })
    }

    fn ident(&mut self, name: &str) -> Node {
        let cost = Range::fixed(SELECT_OR_IDENT);
        if let Some(local) = self
            .locals
            .get(name)
            .and_then(|stack| stack.last())
            .cloned()
        {
            let mut node = self.node(cost, local.ty, local.path, local.size);
            node.entry = local.entry;
            return node;
        }
        let ty = match name {
            "self" | "oldSelf" => Ty::of_decl(self.root),
            _ => Ty::Dyn,
        };
        self.node(cost, ty, vec![name.to_owned()], None)
    }

    fn map_literal(
        &mut self,
        entries: &[kube::core::cel::cel::common::ast::IdedEntryExpr],
    ) -> Node {
        let mut cost = Range::fixed(MAP_CREATE);
        let empty = Range::fixed(0);
        let start = Range {
            min: u64::MAX,
            max: 0,
        };
        let (mut key, mut value) = if entries.is_empty() {
            (empty, empty)
        } else {
            (start, start)
        };
        let mut types = (Ty::Dyn, Ty::Dyn);
        for (index, entry) in entries.iter().enumerate() {
            if let EntryExpr::MapEntry(entry) = &entry.expr {
                let k = self.estimate(&entry.key);
                let v = self.estimate(&entry.value);
                cost = cost.plus(k.cost).plus(v.cost);
                key = key.union(k.size_or_unknown());
                value = value.union(v.size_or_unknown());
                if index == 0 {
                    types = (k.ty, v.ty);
                }
            }
        }
        let mut node = literal_sized(
            cost,
            Ty::Map(Box::new(types.0), Box::new(types.1)),
            entries.len() as u64,
        );
        node.entry = Some(Entry {
            container: Container::Map,
            key,
            value,
        });
        node
    }

    fn call(&mut self, call: &CallExpr) -> Node {
        if call.func_name == "dyn" && call.target.is_none() && call.args.len() == 1 {
            let mut node = self.estimate(&call.args[0]);
            node.cost = node.cost.plus(Range::fixed(1));
            node.ty = Ty::Dyn;
            node.path = Vec::new();
            return node;
        }
        let args: Vec<Node> = call.args.iter().map(|arg| self.estimate(arg)).collect();
        let target = call.target.as_deref().map(|t| self.estimate(t));
        let mut cost = target.as_ref().map_or(Range::fixed(0), |t| t.cost);
        let arg_costs = args.iter().fold(Range::fixed(0), |sum, a| sum.plus(a.cost));
        let estimate = functions::estimate(&Call {
            name: &call.func_name,
            target: target.as_ref(),
            args: &args,
            arg_costs,
        });
        cost = cost.plus(estimate.cost);
        let mut path = Vec::new();
        let mut result_size = estimate.result_size;
        if call.func_name == "_[_]"
            && let Some(container) = args.first()
        {
            let segment = match container.ty {
                Ty::List(_) => "@items",
                _ => "@values",
            };
            result_size = container.entry.map(|e| e.value);
            path = container.path.clone();
            path.push(segment.to_owned());
        }
        let mut node = self.node(cost, estimate.ty, path, None);
        if let Some(size) = result_size {
            node.size = Some(size);
        }
        node.entry = estimate.entry;
        node
    }

    fn comprehension(&mut self, c: &ComprehensionExpr) -> Node {
        let range = self.estimate(&c.iter_range);
        let init = self.estimate(&c.accu_init);
        self.push(
            &c.accu_var,
            Local {
                path: init.path.clone(),
                size: init.size,
                entry: init.entry,
                ty: init.ty.clone(),
            },
        );
        let container = match range.entry.map(|e| e.container) {
            Some(container) => container,
            None if matches!(range.ty, Ty::List(_)) => Container::List,
            None => Container::Map,
        };
        let with = |segment: &str| {
            let mut path = range.path.clone();
            path.push(segment.to_owned());
            path
        };
        let value_ty = match &range.ty {
            Ty::List(item) => (**item).clone(),
            Ty::Map(_, value) => (**value).clone(),
            _ => Ty::Dyn,
        };
        match (&c.iter_var2, container) {
            (None, Container::List) => {
                let local = Local {
                    path: with("@items"),
                    size: range.entry.map(|e| e.value),
                    entry: None,
                    ty: range.ty.element(),
                };
                self.push(&c.iter_var, local);
            }
            (None, Container::Map) => {
                let local = Local {
                    path: with("@keys"),
                    size: range.entry.map(|e| e.key),
                    entry: None,
                    ty: range.ty.element(),
                };
                self.push(&c.iter_var, local);
            }
            (Some(second), container) => {
                let (key_segment, value_segment, key_ty) = match container {
                    Container::List => ("@indices", "@items", Ty::Int),
                    Container::Map => ("@keys", "@values", range.ty.element()),
                };
                let key = Local {
                    path: with(key_segment),
                    size: range.entry.map(|e| e.key),
                    entry: None,
                    ty: key_ty,
                };
                let value = Local {
                    path: with(value_segment),
                    size: range.entry.map(|e| e.value),
                    entry: None,
                    ty: value_ty,
                };
                self.push(&c.iter_var, key);
                self.push(second, value);
            }
        }
        let condition = self.estimate(&c.loop_cond);
        let step = self.estimate(&c.loop_step);
        self.pop(&c.iter_var);
        if let Some(second) = &c.iter_var2 {
            self.pop(second);
        }
        let result = self.estimate(&c.result);
        self.pop(&c.accu_var);
        let count = range.size_or_unknown();
        let cost = range
            .cost
            .plus(init.cost)
            .plus(result.cost)
            .plus(count.product(step.cost.plus(condition.cost)));
        let (ty, size, entry) = match &c.accu_init.expr {
            Expr::Literal(_) => (result.ty, init.size, None),
            Expr::List(_) | Expr::Map(_) => {
                let ty = match &step.ty {
                    Ty::List(item) if **item != Ty::Dyn => step.ty.clone(),
                    _ => init.ty,
                };
                (ty, Some(count), step.entry)
            }
            _ => (result.ty, None, None),
        };
        let mut node = self.node(cost, ty, Vec::new(), size);
        if size.is_some() {
            node.size = size;
        }
        node.entry = entry;
        node
    }

    fn push(&mut self, name: &str, local: Local) {
        self.locals.entry(name.to_owned()).or_default().push(local);
    }

    fn pop(&mut self, name: &str) {
        if let Some(stack) = self.locals.get_mut(name) {
            stack.pop();
        }
    }
}

fn literal_sized(cost: Range, ty: Ty, size: u64) -> Node {
    Node {
        cost,
        ty,
        path: Vec::new(),
        size: Some(Range::fixed(size)),
        entry: None,
        item_size: None,
        int_literal: None,
    }
}

fn literal_node(literal: &LiteralValue) -> Node {
    let (ty, size) = match literal {
        LiteralValue::Boolean(_) => (Ty::Bool, 1),
        LiteralValue::Int(_) => (Ty::Int, 1),
        LiteralValue::UInt(_) => (Ty::Uint, 1),
        LiteralValue::Double(_) => (Ty::Double, 1),
        LiteralValue::Null => (Ty::Null, 1),
        LiteralValue::String(text) => (Ty::String, text.inner().chars().count() as u64),
        LiteralValue::Bytes(bytes) => (Ty::Bytes, bytes.inner().len() as u64),
    };
    let mut node = literal_sized(Range::fixed(0), ty, size);
    if let LiteralValue::Int(value) = literal {
        node.int_literal = Some(*value.inner());
    }
    node
}
