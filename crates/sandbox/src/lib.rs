//! A local Kubernetes-compatible control plane for one machine.
