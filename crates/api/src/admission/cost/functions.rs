//! The cost of each function call: Kubernetes' library functions first
//! (string, list, regex, quantity, URL, IP and CIDR functions), then the
//! language's own operators whose cost grows with their operands (string
//! comparison and concatenation, `in` over a list, `matches`, `contains`,
//! `startsWith`), and one unit for everything else, as kube-apiserver
//! charges. Arguments' own costs are added to every call; the target's is
//! added by the caller.

use super::expr::{Entry, Node, Ty};
use super::range::Range;

/// Per character of a string walked.
const STRING_TRAVERSAL: f64 = 0.1;
/// Per character of a regular expression, for each character matched.
const REGEX_LENGTH: f64 = 0.25;
/// The longest format string and name-format regex Kubernetes allows.
const MAX_FORMAT_SIZE: u64 = 64;
const MAX_NAME_FORMAT_REGEX_SIZE: f64 = 128.0;

/// One call, its operands estimated.
pub struct Call<'a> {
    pub name: &'a str,
    pub target: Option<&'a Node>,
    pub args: &'a [Node],
    /// The sum of the arguments' costs.
    pub arg_costs: Range,
}

/// What a call costs and yields.
pub struct Estimate {
    /// The call's cost with its arguments' (not its target's).
    pub cost: Range,
    pub ty: Ty,
    pub result_size: Option<Range>,
    pub entry: Option<Entry>,
}

impl Call<'_> {
    fn arg(&self, index: usize) -> Option<&Node> {
        self.args.get(index)
    }

    fn size(node: &Node) -> Range {
        node.size_or_unknown()
    }

    fn done(&self, cost: Range, ty: Ty) -> Estimate {
        Estimate {
            cost: cost.plus(self.arg_costs),
            ty,
            result_size: None,
            entry: None,
        }
    }

    fn sized(&self, cost: Range, ty: Ty, size: Range) -> Estimate {
        Estimate {
            result_size: Some(size),
            ..self.done(cost, ty)
        }
    }
}

/// The cost of `call`.
pub fn estimate(call: &Call) -> Estimate {
    if let Some(estimate) = library(call) {
        return estimate;
    }
    operators(call)
}

fn operand_ty(call: &Call, index: usize) -> Ty {
    call.arg(index).map_or(Ty::Dyn, |a| a.ty.clone())
}

/// Kubernetes' CEL libraries.
fn library(call: &Call) -> Option<Estimate> {
    let one = Range::fixed(1);
    let target = call.target;
    let first = call.arg(0);
    Some(match call.name {
        "isSorted" | "sum" | "max" | "min" | "indexOf" | "lastIndexOf" | "includes" => {
            let target = target?;
            let ty = match call.name {
                "isSorted" | "includes" => Ty::Bool,
                "indexOf" | "lastIndexOf" => Ty::Int,
                _ => match &target.ty {
                    Ty::List(item) => (**item).clone(),
                    _ => Ty::Dyn,
                },
            };
            if let Some((item, item_size)) = list_element_sized(target) {
                let mut element = one;
                if item.is_textual() {
                    element = element.plus(item_size.times(STRING_TRAVERSAL));
                }
                call.done(Call::size(target).product(element), ty)
            } else if call.name == "includes" {
                call.done(Call::size(target).product(one), ty)
            } else {
                call.done(Call::size(target).times(STRING_TRAVERSAL), ty)
            }
        }
        "url" | "jsonpatch.escapeKey" => {
            let size = Call::size(first?);
            let ty = if call.name == "url" {
                Ty::Library("url")
            } else {
                Ty::String
            };
            call.sized(size.times(STRING_TRAVERSAL), ty, size)
        }
        "lowerAscii" | "upperAscii" | "substring" | "trim" => {
            let size = Call::size(target?);
            call.sized(size.times(STRING_TRAVERSAL), Ty::String, size)
        }
        "replace" if target.is_some() && call.args.len() >= 2 => replace(call, target?),
        "split" => {
            let size = Call::size(target?);
            // A literal limit bounds the parts, as kube-apiserver reads it.
            let max = match call.arg(1).and_then(|limit| limit.int_literal) {
                Some(limit) => limit as u64,
                None => size.max,
            };
            call.sized(
                size.times(2.0 * STRING_TRAVERSAL),
                Ty::List(Box::new(Ty::String)),
                Range { min: 0, max },
            )
        }
        "join" => {
            let target = target?;
            let list = Call::size(target);
            let mut size = match list_element_sized(target) {
                Some((_, item)) => list.product(item),
                None => Range::fixed(0),
            };
            if let Some(separator) = first {
                let separators = Range {
                    min: list.min.saturating_sub(1),
                    max: list.max.saturating_sub(1),
                };
                size = size.plus(Call::size(separator).product(separators));
            }
            call.sized(size.times(STRING_TRAVERSAL), Ty::String, size)
        }
        "find" | "findAll" if target.is_some() && first.is_some() => {
            let size = Call::size(target?);
            let text = size.plus(Range::fixed(1)).times(STRING_TRAVERSAL);
            let regex = Call::size(first?).times(REGEX_LENGTH);
            let ty = if call.name == "find" {
                Ty::String
            } else {
                Ty::List(Box::new(Ty::String))
            };
            call.sized(
                text.product(regex),
                ty,
                Range {
                    min: 0,
                    max: size.max,
                },
            )
        }
        "cidr" | "isIP" | "isCIDR" => {
            let ty = if call.name == "cidr" {
                Ty::Library("cidr")
            } else {
                Ty::Bool
            };
            call.done(Call::size(first?).times(STRING_TRAVERSAL), ty)
        }
        "ip" if first.is_none() => call.done(one, Ty::Library("ip")),
        "ip" => call.done(
            Call::size(first?).times(STRING_TRAVERSAL),
            Ty::Library("ip"),
        ),
        "ip.isCanonical" => call.done(Call::size(first?).times(2.0 * STRING_TRAVERSAL), Ty::Bool),
        "masked"
        | "prefixLength"
        | "family"
        | "isUnspecified"
        | "isLoopback"
        | "isLinkLocalMulticast"
        | "isLinkLocalUnicast"
        | "isGlobalUnicast" => {
            let ty = match call.name {
                "masked" => Ty::Library("cidr"),
                "prefixLength" | "family" => Ty::Int,
                _ => Ty::Bool,
            };
            call.done(one, ty)
        }
        "containsIP" | "containsCIDR" => {
            first?;
            let bytes = Range { min: 4, max: 16 };
            let mut cost = bytes.plus(bytes).times(STRING_TRAVERSAL);
            if call.name == "containsCIDR" {
                cost = cost.plus(bytes.times(STRING_TRAVERSAL)).plus(one);
            }
            if let Some(arg) = first.filter(|a| a.ty == Ty::String) {
                cost = cost.plus(Call::size(arg).times(STRING_TRAVERSAL));
            }
            call.done(cost, Ty::Bool)
        }
        "quantity" | "isQuantity" | "semver" | "isSemver" => {
            let ty = match call.name {
                "quantity" => Ty::Library("quantity"),
                "semver" => Ty::Library("semver"),
                _ => Ty::Bool,
            };
            call.done(Call::size(first?).times(STRING_TRAVERSAL), ty)
        }
        "validate" => {
            let size = Call::size(first?);
            call.done(
                size.times(STRING_TRAVERSAL)
                    .times(MAX_NAME_FORMAT_REGEX_SIZE * REGEX_LENGTH),
                Ty::Dyn,
            )
        }
        "format.named" => call.done(one, Ty::Library("format")),
        "sign" | "asInteger" | "compareTo" | "major" | "minor" | "patch" => call.done(one, Ty::Int),
        "isInteger" | "isGreaterThan" | "isLessThan" => call.done(one, Ty::Bool),
        "asApproximateFloat" => call.done(one, Ty::Double),
        "add" | "sub" => call.done(one, Ty::Library("quantity")),
        "getScheme" | "getHostname" | "getHost" | "getPort" | "getEscapedPath" => {
            call.done(one, Ty::String)
        }
        "getQuery" => call.done(one, Ty::Dyn),
        "_==_" => {
            let (lhs, rhs) = (call.arg(0)?, call.arg(1)?);
            let (Ty::Library(left), Ty::Library(right)) = (&lhs.ty, &rhs.ty) else {
                return None;
            };
            if left != right {
                return None;
            }
            match *left {
                "format" => call.done(
                    Range {
                        min: 1,
                        max: MAX_FORMAT_SIZE,
                    }
                    .times(STRING_TRAVERSAL),
                    Ty::Bool,
                ),
                "url" => {
                    let size = rhs.size.unwrap_or(one);
                    call.done(
                        Range {
                            min: 1,
                            max: size.max,
                        }
                        .times(STRING_TRAVERSAL),
                        Ty::Bool,
                    )
                }
                _ => call.done(one, Ty::Bool),
            }
        }
        _ => return None,
    })
}

/// A list target's item type and size bound, read from the schema through
/// the list's path (unknown without one).
fn list_element_sized(target: &Node) -> Option<(Ty, Range)> {
    let Ty::List(item) = &target.ty else {
        return None;
    };
    Some(((**item).clone(), target.item_size.unwrap_or(Range::UNKNOWN)))
}

fn replace(call: &Call, target: &Node) -> Estimate {
    let size = Call::size(target);
    let (from, with) = (
        call.arg(0).map_or(Range::UNKNOWN, Call::size),
        call.arg(1).map_or(Range::UNKNOWN, Call::size),
    );
    let (mut count, mut kept) = (Range::fixed(0), Range::fixed(0));
    if from.min == 0 {
        count.max = size.max.saturating_add(u64::from(size.max < u64::MAX));
        kept.max = size.max;
    } else if with.max <= from.min {
        kept.max = size.max;
    } else {
        count.max = (size.max as f64 / from.min as f64).ceil() as u64;
    }
    if from.max == 0 {
        count.min = size.min.saturating_add(u64::from(size.min < u64::MAX));
        kept.min = size.min;
    } else if from.max <= with.min {
        kept.min = size.min;
    } else {
        count.min = (size.min as f64 / from.max as f64).ceil() as u64;
    }
    let result = count.product(with).plus(kept);
    call.sized(size.times(2.0 * STRING_TRAVERSAL), Ty::String, result)
}

/// The language's operators and functions.
fn operators(call: &Call) -> Estimate {
    let one = Range::fixed(1);
    let lhs = operand_ty(call, 0);
    let rhs = operand_ty(call, 1);
    let textual_or_dyn = |ty: &Ty| ty.is_textual() || *ty == Ty::Dyn;
    match (call.name, call.target, call.args) {
        ("format", Some(target), _) => {
            call.done(Call::size(target).times(STRING_TRAVERSAL), Ty::String)
        }
        ("bytes", None, [arg]) if arg.ty == Ty::String => {
            let size = Call::size(arg);
            call.sized(
                size.times(STRING_TRAVERSAL),
                Ty::Bytes,
                Range {
                    min: size.min,
                    max: size.max.saturating_mul(4),
                },
            )
        }
        ("string", None, [arg]) if arg.ty == Ty::Bytes => {
            let size = Call::size(arg);
            call.sized(
                size.times(STRING_TRAVERSAL),
                Ty::String,
                Range {
                    min: size.min / 4,
                    max: size.max,
                },
            )
        }
        ("strings.quote", None, [arg]) => {
            let size = Call::size(arg);
            call.sized(
                size.times(STRING_TRAVERSAL),
                Ty::String,
                Range {
                    min: size.min.saturating_add(2),
                    max: size.max.saturating_mul(2).saturating_add(2),
                },
            )
        }
        ("startsWith" | "endsWith", Some(_), [arg]) => {
            call.done(Call::size(arg).times(STRING_TRAVERSAL), Ty::Bool)
        }
        ("@in", None, [_, container]) => match container.ty {
            Ty::Map(..) => call.done(one, Ty::Bool),
            _ => call.done(Call::size(container).times(1.0), Ty::Bool),
        },
        ("matches", target, args) => {
            // The member form is charged by its text and pattern; the
            // global form, which kube-apiserver charges one unit, is charged
            // the same here: never lower.
            let (text, pattern) = match (target, args) {
                (Some(text), [pattern]) => (text, pattern),
                (None, [text, pattern]) => (text, pattern),
                _ => return call.done(one, Ty::Bool),
            };
            let text = Call::size(text).plus(one).times(STRING_TRAVERSAL);
            let pattern = Call::size(pattern).times(REGEX_LENGTH);
            call.done(text.product(pattern), Ty::Bool)
        }
        ("contains", Some(target), [arg]) => {
            let text = Call::size(target).times(STRING_TRAVERSAL);
            let part = Call::size(arg).times(STRING_TRAVERSAL);
            call.done(text.product(part), Ty::Bool)
        }
        ("_&&_" | "_||_", None, [left, right]) => Estimate {
            cost: Range {
                min: left.cost.min,
                max: left.cost.plus(right.cost).max,
            },
            ty: Ty::Bool,
            result_size: None,
            entry: None,
        },
        ("_?_:_", None, [condition, yes, no]) => Estimate {
            cost: condition.cost.plus(yes.cost.union(no.cost)),
            ty: if yes.ty == Ty::Dyn {
                no.ty.clone()
            } else {
                yes.ty.clone()
            },
            result_size: Some(Call::size(yes).union(Call::size(no))),
            entry: Entry::union_of(yes.entry, no.entry),
        },
        ("_+_", None, [left, right])
            if matches!(lhs, Ty::String | Ty::Bytes | Ty::List(_))
                || matches!(rhs, Ty::String | Ty::Bytes | Ty::List(_))
                || (lhs == Ty::Dyn && rhs == Ty::Dyn) =>
        {
            let size = Call::size(left).plus(Call::size(right));
            let entry = Entry::union_of(left.entry, right.entry);
            let list = matches!(lhs, Ty::List(_)) || matches!(rhs, Ty::List(_));
            let ty = match (&lhs, &rhs) {
                (Ty::List(item), other) if **item == Ty::Dyn => other.clone(),
                (Ty::Dyn, other) => other.clone(),
                (ty, _) => ty.clone(),
            };
            let cost = if list {
                one
            } else {
                size.times(STRING_TRAVERSAL)
            };
            Estimate {
                entry,
                ..call.sized(cost, ty, size)
            }
        }
        ("_==_" | "_!=_", None, [left, right]) => compare_sizes(call, left, right),
        ("_<_" | "_<=_" | "_>_" | "_>=_", None, [left, right])
            if textual_or_dyn(&lhs) && textual_or_dyn(&rhs) =>
        {
            compare_sizes(call, left, right)
        }
        _ => call.done(one, default_ty(call, lhs)),
    }
}

/// Comparing two values walks the shorter.
fn compare_sizes(call: &Call, left: &Node, right: &Node) -> Estimate {
    let shorter = Call::size(left).max.min(Call::size(right).max);
    let cost = Range {
        min: u64::from(shorter > 0),
        max: shorter,
    };
    call.done(cost.times(STRING_TRAVERSAL), Ty::Bool)
}

/// What a one-unit function yields.
fn default_ty(call: &Call, lhs: Ty) -> Ty {
    match call.name {
        "_<_" | "_<=_" | "_>_" | "_>=_" | "!_" | "@not_strictly_false" | "@in" => Ty::Bool,
        "size" | "int" => Ty::Int,
        "charAt" | "string" | "reverse" => Ty::String,
        "uint" => Ty::Uint,
        "double" => Ty::Double,
        "duration" => Ty::Duration,
        "timestamp" => Ty::Timestamp,
        "_[_]" => match lhs {
            Ty::List(item) => *item,
            Ty::Map(_, value) => *value,
            _ => Ty::Dyn,
        },
        "-_" | "_-_" | "_*_" | "_/_" | "_%_" | "_+_" => lhs,
        _ => Ty::Dyn,
    }
}
