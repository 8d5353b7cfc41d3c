//! What the kubelet reads from the kubeconfig it was given: the API
//! server's credential (which the server presents when it proxies to the
//! kubelet) and its address (which the Docker runtime relays pods to).

/// The bearer token of the kubeconfig the kubelet was given: the API
/// server's credential, which it presents when it proxies to the kubelet.
pub fn api_token(kubeconfig: &str) -> String {
    let config: serde_json::Value = serde_yaml_ng::from_str(kubeconfig).unwrap_or_default();
    config["users"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|user| user["user"]["token"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// The API server's address, from the kubeconfig the kubelet was given
/// (`server: https://127.0.0.1:<port>`).
pub fn api_address(kubeconfig: &str) -> std::net::SocketAddr {
    let config: serde_json::Value = serde_yaml_ng::from_str(kubeconfig).unwrap_or_default();
    let port = config["clusters"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|cluster| cluster["cluster"]["server"].as_str())
        .and_then(|server| server.rsplit(':').next())
        .and_then(|port| port.trim_end_matches('/').parse::<u16>().ok())
        .unwrap_or(443);
    std::net::SocketAddr::from(([127, 0, 0, 1], port))
}
