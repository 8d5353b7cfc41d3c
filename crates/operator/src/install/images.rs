//! The names of Tusk's images. scripts/build-images tags what it builds with
//! these names (the image test checks that both agree), so an image built
//! here and loaded into a cluster is the one `deploy/install.yaml` runs.

/// Repository of the operator image (which also carries the instance
/// manager that PostgreSQL pods copy in).
pub const OPERATOR_REPOSITORY: &str = "ghcr.io/tusk-dev/tusk";
/// Repository of the PostgreSQL images, tagged by major version.
pub const POSTGRES_REPOSITORY: &str = "ghcr.io/tusk-dev/postgres";

/// The operator image of this very version: an install never floats on
/// `:latest`, and the instance manager it injects matches the operator.
pub fn operator_image() -> String {
    format!("{OPERATOR_REPOSITORY}:{}", env!("CARGO_PKG_VERSION"))
}

/// `--default-postgres-image` of the installed operator: `{version}` is
/// the cluster's major version.
pub fn postgres_image_template() -> String {
    format!("{POSTGRES_REPOSITORY}:{{version}}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_operator_image_is_pinned_to_this_version() {
        let image = operator_image();
        assert!(image.ends_with(&format!(":{}", env!("CARGO_PKG_VERSION"))));
        assert!(!image.ends_with(":latest"));
    }

    #[test]
    fn the_postgres_image_is_chosen_by_major_version() {
        let config = crate::config::OperatorConfig {
            default_postgres_image: postgres_image_template(),
            ..crate::config::OperatorConfig::default()
        };
        assert_eq!(config.postgres_image(15), "ghcr.io/tusk-dev/postgres:15");
    }
}
