//! `tusk install --helm-dir`: the Helm chart of the same installation as
//! `deploy/install.yaml`.
//!
//! The chart is derived from the rendered parts, not written by hand: the
//! CRDs go to `crds/` as they are (Helm installs them first and never
//! upgrades them), the RBAC and operator parts become templates in which
//! a few fixed values are replaced by template expressions (the release
//! namespace, the image, its pull policy, the default PostgreSQL image,
//! replicas, resources, scheduling). Each replacement must match the
//! rendered text, so a builder change that a replacement no longer fits
//! fails generation instead of silently leaving a value fixed. Tests
//! render the chart with `helm template` and compare it with
//! `install.yaml`.

use std::path::Path;

use serde::Serialize;
use tusk_operator::install;

use super::parts::{HEADER, Part, yaml};
use crate::commands::CommandError;

/// `image` and `TUSK_OPERATOR_IMAGE`: the chart's appVersion unless a tag
/// is set.
const IMAGE: &str =
    "\"{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}\"";

/// Writes `Chart.yaml`, `values.yaml`, `crds/` and `templates/` into `dir`.
pub(super) fn write_chart(dir: &Path, parts: &[Part]) -> Result<(), CommandError> {
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| CommandError::Write {
                path: parent.display().to_string(),
                source,
            })?;
        }
        std::fs::write(&path, text).map_err(|source| CommandError::Write {
            path: path.display().to_string(),
            source,
        })
    };
    write("Chart.yaml", &chart())?;
    write("values.yaml", &values()?)?;
    for part in parts {
        let text = part.documents.join("---\n");
        match part.file {
            // The release namespace exists before the chart is installed
            // (`helm install --create-namespace`); docs/install.md says how
            // to label it as install.yaml does.
            "namespace.yaml" => {}
            "crds.yaml" => write("crds/crds.yaml", &format!("{HEADER}{text}"))?,
            file => write(
                &format!("templates/{file}"),
                &format!("{HEADER}{}", templated(file, &text)?),
            )?,
        }
    }
    Ok(())
}

fn chart() -> String {
    let version = env!("CARGO_PKG_VERSION");
    format!(
        "{HEADER}apiVersion: v2\nname: tusk\ndescription: The Tusk operator, PostgreSQL clusters on Kubernetes\ntype: application\nversion: {version}\nappVersion: \"{version}\"\n"
    )
}

/// The chart's values, with the defaults install.yaml has.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Values {
    image: Image,
    postgres_image: String,
    replicas: i32,
    resources: serde_json::Value,
    node_selector: serde_json::Map<String, serde_json::Value>,
    tolerations: Vec<serde_json::Value>,
    affinity: serde_json::Map<String, serde_json::Value>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Image {
    repository: String,
    tag: String,
    pull_policy: String,
}

fn values() -> Result<String, CommandError> {
    let deployment = serde_json::to_value(install::deployment())
        .map_err(|e| CommandError::Kubernetes(format!("cannot render the Deployment: {e}")))?;
    let container = deployment
        .pointer("/spec/template/spec/containers/0")
        .cloned()
        .unwrap_or_default();
    let text = |pointer: &str| {
        container
            .pointer(pointer)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_owned()
    };
    let values = Values {
        image: Image {
            repository: install::OPERATOR_REPOSITORY.to_owned(),
            tag: String::new(),
            pull_policy: text("/imagePullPolicy"),
        },
        postgres_image: install::postgres_image_template(),
        replicas: deployment
            .pointer("/spec/replicas")
            .and_then(serde_json::Value::as_i64)
            .and_then(|n| i32::try_from(n).ok())
            .unwrap_or(1),
        resources: container
            .get("resources")
            .cloned()
            .unwrap_or_else(|| serde_json::json!({})),
        node_selector: serde_json::Map::new(),
        tolerations: Vec::new(),
        affinity: serde_json::Map::new(),
    };
    Ok(format!(
        "{HEADER}# image.tag empty means the chart's appVersion. postgresImage is the\n# default image of PostgreSQL pods; {{version}} is the cluster's major version.\n{}",
        yaml(&values)?
    ))
}

/// One change of the rendered text into a template.
enum Edit {
    /// Every whole scalar `value` after `key: ` becomes `expression`.
    Scalar {
        key: &'static str,
        value: String,
        expression: String,
    },
    /// The block under `key:` (the line and the deeper-indented lines
    /// after it) becomes `key:` with `expression` at the next indentation.
    Block {
        key: &'static str,
        expression: &'static str,
    },
    /// Every list item `- value` becomes `- expression`.
    Item {
        value: &'static str,
        expression: &'static str,
    },
    /// Lines inserted after the line `key: value`, at its indentation.
    After {
        key: &'static str,
        value: &'static str,
        lines: &'static [&'static str],
    },
}

fn edits(file: &str) -> Vec<Edit> {
    let namespace = Edit::Scalar {
        key: "namespace",
        value: install::NAMESPACE.to_owned(),
        expression: "{{ .Release.Namespace }}".to_owned(),
    };
    match file {
        "operator.yaml" => vec![
            namespace,
            Edit::Scalar {
                key: "image",
                value: install::operator_image(),
                expression: IMAGE.to_owned(),
            },
            Edit::Scalar {
                key: "value",
                value: install::operator_image(),
                expression: IMAGE.to_owned(),
            },
            Edit::Scalar {
                key: "value",
                value: install::postgres_image_template(),
                expression: "{{ .Values.postgresImage | quote }}".to_owned(),
            },
            Edit::Scalar {
                key: "imagePullPolicy",
                value: "IfNotPresent".to_owned(),
                expression: "{{ .Values.image.pullPolicy }}".to_owned(),
            },
            Edit::Scalar {
                key: "replicas",
                value: "2".to_owned(),
                expression: "{{ .Values.replicas }}".to_owned(),
            },
            Edit::Block {
                key: "resources",
                expression: "toYaml .Values.resources",
            },
            Edit::After {
                key: "serviceAccountName",
                value: install::NAME,
                lines: &[
                    "{{- with .Values.nodeSelector }}",
                    "nodeSelector:",
                    "  {{- toYaml . | nindent 8 }}",
                    "{{- end }}",
                    "{{- with .Values.tolerations }}",
                    "tolerations:",
                    "  {{- toYaml . | nindent 8 }}",
                    "{{- end }}",
                    "{{- with .Values.affinity }}",
                    "affinity:",
                    "  {{- toYaml . | nindent 8 }}",
                    "{{- end }}",
                ],
            },
        ],
        // The namespace selector leaves the release's namespace out.
        "webhook.yaml" => vec![
            namespace,
            Edit::Item {
                value: install::NAMESPACE,
                expression: "{{ .Release.Namespace }}",
            },
        ],
        _ => vec![namespace],
    }
}

/// `text` with the edits of `file` applied; an edit that matches nothing is
/// an error.
fn templated(file: &str, text: &str) -> Result<String, CommandError> {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    for edit in edits(file) {
        let (changed, key) = match &edit {
            Edit::Scalar {
                key,
                value,
                expression,
            } => (replace_scalar(&mut lines, key, value, expression), *key),
            Edit::Block { key, expression } => (replace_block(&mut lines, key, expression), *key),
            Edit::Item { value, expression } => {
                (replace_item(&mut lines, value, expression), *value)
            }
            Edit::After {
                key,
                value,
                lines: extra,
            } => (insert_after(&mut lines, key, value, extra), *key),
        };
        if !changed {
            return Err(CommandError::Parse {
                path: format!("templates/{file}"),
                message: format!(
                    "no `{key}` line to make a template of; the chart's edits no longer fit the rendered objects"
                ),
            });
        }
    }
    Ok(lines.join("\n") + "\n")
}

/// The indentation, key and value of a `key: value` line (a list item's
/// `- ` counts as indentation).
fn split_line(line: &str) -> Option<(&str, &str, &str)> {
    let body = line.trim_start_matches([' ', '-']);
    let indent = &line[..line.len() - body.len()];
    let (key, value) = body.split_once(':')?;
    Some((indent, key, value.trim()))
}

fn unquoted(value: &str) -> &str {
    value.trim_matches(|c| c == '\'' || c == '"')
}

fn replace_scalar(lines: &mut [String], key: &str, value: &str, expression: &str) -> bool {
    let mut changed = false;
    for line in lines.iter_mut() {
        if let Some((indent, k, v)) = split_line(line)
            && k == key
            && unquoted(v) == value
        {
            *line = format!("{indent}{key}: {expression}");
            changed = true;
        }
    }
    changed
}

fn replace_item(lines: &mut [String], value: &str, expression: &str) -> bool {
    let mut changed = false;
    for line in lines.iter_mut() {
        let body = line.trim_start();
        if body.strip_prefix("- ").map(unquoted) == Some(value) {
            let indent = &line[..line.len() - body.len()];
            *line = format!("{indent}- {expression}");
            changed = true;
        }
    }
    changed
}

fn depth(line: &str) -> usize {
    line.len() - line.trim_start_matches([' ', '-']).len()
}

fn replace_block(lines: &mut Vec<String>, key: &str, expression: &str) -> bool {
    let Some(start) = lines
        .iter()
        .position(|line| split_line(line).is_some_and(|(_, k, v)| k == key && v.is_empty()))
    else {
        return false;
    };
    let indent = depth(&lines[start]);
    let end = lines[start + 1..]
        .iter()
        .position(|line| depth(line) <= indent)
        .map_or(lines.len(), |offset| start + 1 + offset);
    let pad = " ".repeat(indent + 2);
    lines.splice(
        start + 1..end,
        [format!(
            "{pad}{{{{- {expression} | nindent {} }}}}",
            indent + 2
        )],
    );
    true
}

fn insert_after(lines: &mut Vec<String>, key: &str, value: &str, extra: &[&str]) -> bool {
    let Some(at) = lines
        .iter()
        .position(|line| split_line(line).is_some_and(|(_, k, v)| k == key && v == value))
    else {
        return false;
    };
    let pad = " ".repeat(depth(&lines[at]));
    let inserted: Vec<String> = extra.iter().map(|l| format!("{pad}{l}")).collect();
    lines.splice(at + 1..at + 1, inserted);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_owned).collect()
    }

    #[test]
    fn a_block_is_replaced_up_to_the_next_line_at_its_depth() {
        let mut text = lines("a:\n  resources:\n    limits:\n      memory: 1Gi\n  next: 1");
        assert!(replace_block(&mut text, "resources", "toYaml .Values.r"));
        assert_eq!(
            text,
            [
                "a:",
                "  resources:",
                "    {{- toYaml .Values.r | nindent 4 }}",
                "  next: 1"
            ]
        );
    }

    #[test]
    fn scalars_match_whole_values_quoted_or_not() {
        let mut text = lines("- name: X\n  value: 'img:1'\n  value: img:10");
        assert!(replace_scalar(&mut text, "value", "img:1", "{{ .V }}"));
        assert_eq!(text, ["- name: X", "  value: {{ .V }}", "  value: img:10"]);
    }

    #[test]
    fn an_edit_that_fits_nothing_is_an_error() {
        let error = templated("operator.yaml", "kind: Deployment\n").expect_err("no namespace");
        assert!(error.to_string().contains("`namespace`"), "{error}");
    }
}
