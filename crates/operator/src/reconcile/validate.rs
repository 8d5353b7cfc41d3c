//! Validate: the spec once into a [`ValidatedCluster`] (see
//! [`crate::validate`]), then against what was observed, so that a change
//! the live objects cannot take (a storage shrink) is refused before
//! anything is applied.

use tusk_api::v1alpha1::PostgresCluster;

use super::storage::refuse_shrink;
use crate::children::Children;
use crate::config::OperatorConfig;
use crate::error::Error;
use crate::validate::ValidatedCluster;

pub fn validate(
    cluster: &PostgresCluster,
    config: &OperatorConfig,
    children: &Children,
) -> Result<ValidatedCluster, Error> {
    let valid = crate::validate::validate(cluster, config)?;
    refuse_shrink(&valid, &children.volumes)?;
    Ok(valid)
}
