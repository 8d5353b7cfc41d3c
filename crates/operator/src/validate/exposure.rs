//! `spec.services`: load balancer source ranges only where a load
//! balancer is asked for, and each one an address block. The API server
//! would refuse the Service built from them at every reconcile; refused
//! here, naming the field.

use std::net::IpAddr;

use tusk_api::v1alpha1::{ServiceTemplate, ServiceType, ServicesSpec};

use crate::error::SpecError;

/// Said of a range that is no address block.
pub const NOT_A_CIDR: &str = "must be an address block in CIDR notation, such as 10.0.0.0/8";

/// Said of source ranges on a Service that is no load balancer.
pub const RANGES_WITHOUT_LOAD_BALANCER: &str =
    "may be set only with type: LoadBalancer (only a load balancer filters its clients)";

/// The first problem of `spec.services`, if any.
pub fn check(services: &ServicesSpec) -> Result<(), SpecError> {
    for (name, template) in [
        ("rw", &services.rw),
        ("ro", &services.ro),
        ("r", &services.r),
    ] {
        if let Some(template) = template {
            check_one(name, template)?;
        }
    }
    Ok(())
}

fn check_one(name: &str, template: &ServiceTemplate) -> Result<(), SpecError> {
    let field = format!("spec.services.{name}.loadBalancerSourceRanges");
    if !template.load_balancer_source_ranges.is_empty()
        && template.type_ != ServiceType::LoadBalancer
    {
        return Err(SpecError {
            field,
            rule: RANGES_WITHOUT_LOAD_BALANCER.to_owned(),
        });
    }
    for (index, range) in template.load_balancer_source_ranges.iter().enumerate() {
        if !is_cidr(range) {
            return Err(SpecError {
                field: format!("{field}[{index}]"),
                rule: format!("{NOT_A_CIDR}, not {range:?}"),
            });
        }
    }
    Ok(())
}

/// `address/prefix`, the prefix within the address's length.
fn is_cidr(range: &str) -> bool {
    let Some((address, prefix)) = range.split_once('/') else {
        return false;
    };
    let Ok(address) = address.parse::<IpAddr>() else {
        return false;
    };
    let bits = if address.is_ipv4() { 32 } else { 128 };
    prefix.parse::<u8>().is_ok_and(|p| p <= bits) && !prefix.starts_with('+')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(type_: ServiceType, ranges: &[&str]) -> ServiceTemplate {
        ServiceTemplate {
            type_,
            load_balancer_source_ranges: ranges.iter().map(|r| (*r).to_owned()).collect(),
            ..ServiceTemplate::default()
        }
    }

    #[test]
    fn a_load_balancer_admits_address_blocks() {
        let services = ServicesSpec {
            rw: Some(template(
                ServiceType::LoadBalancer,
                &["10.0.0.0/8", "192.168.1.7/32", "2001:db8::/32"],
            )),
            ..ServicesSpec::default()
        };
        assert_eq!(check(&services), Ok(()));
    }

    #[test]
    fn source_ranges_need_a_load_balancer() {
        let services = ServicesSpec {
            ro: Some(template(ServiceType::NodePort, &["10.0.0.0/8"])),
            ..ServicesSpec::default()
        };
        let error = check(&services).expect_err("refused");
        assert_eq!(error.field, "spec.services.ro.loadBalancerSourceRanges");
        assert_eq!(error.rule, RANGES_WITHOUT_LOAD_BALANCER);
    }

    #[test]
    fn a_range_that_is_no_address_block_is_named() {
        for bad in [
            "10.0.0.0",
            "10.0.0.0/33",
            "example.com/8",
            "::/129",
            "10.0.0.0/+8",
        ] {
            let services = ServicesSpec {
                r: Some(template(ServiceType::LoadBalancer, &["10.0.0.0/8", bad])),
                ..ServicesSpec::default()
            };
            let error = check(&services).expect_err(bad);
            assert_eq!(
                error.field, "spec.services.r.loadBalancerSourceRanges[1]",
                "{bad}"
            );
            assert!(error.rule.starts_with(NOT_A_CIDR), "{bad}: {}", error.rule);
        }
    }
}
