//! The node's network: its own network namespace, joined to the machine by one veth pair.
//! Everything kube-proxy and the CNI plugins create (the pod bridge, veths, iptables
//! chains, conntrack entries) lives in that namespace, so deleting it removes them all and
//! the machine's own rules are never touched.
//!
//! ```text
//!  machine (root namespace)                 node namespace "kairship-node"
//!  API servers on 0.0.0.0                   containerd, kubelet, kube-proxy
//!  kship-host 10.233.255.1/30  <── veth ──> kship-node 10.233.255.2/30
//!  routes: pods and Services via .2         bridge kship0 10.244.0.1/24 ── pods
//! ```
//!
//! The machine reaches pods and Service IPs through the veth (kube-proxy's rules apply as
//! packets enter the node namespace); pods reach the API servers at 10.233.255.1.

use std::net::Ipv4Addr;
use std::process::Command;

use crate::Error;

pub const NETNS: &str = "kairship-node";
pub const HOST_LINK: &str = "kship-host";
pub const NODE_LINK: &str = "kship-node";
pub const BRIDGE: &str = "kship0";
/// The machine's end of the link: where pods reach the API servers.
pub const HOST_IP: Ipv4Addr = Ipv4Addr::new(10, 233, 255, 1);
/// The node's address (kubelet's `--node-ip`).
pub const NODE_IP: Ipv4Addr = Ipv4Addr::new(10, 233, 255, 2);
pub const POD_CIDR: &str = "10.244.0.0/24";
pub const POD_GATEWAY: Ipv4Addr = Ipv4Addr::new(10, 244, 0, 1);
/// As the API servers' `--service-cluster-ip-range`.
pub const SERVICE_CIDR: &str = "10.96.0.0/16";
/// The `kubernetes` Service (the first address of the range).
pub const KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 1);
pub const DNS_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 10);

/// `/var/run/netns/kairship-node`, what `nsenter --net=` enters.
pub fn netns_path() -> String {
    format!("/var/run/netns/{NETNS}")
}

fn run(args: &[&str]) -> Result<(), Error> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(Error::io(format!("running {}", args.join(" "))))?;
    if out.status.success() {
        return Ok(());
    }
    Err(Error::Invalid(format!(
        "`{}` failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    )))
}

/// Creates the namespace, the link and the routes (after the janitor removed any left
/// from an earlier run).
pub fn setup() -> Result<(), Error> {
    let host = format!("{HOST_IP}/30");
    let node = format!("{NODE_IP}/30");
    let host_ip = HOST_IP.to_string();
    let node_ip = NODE_IP.to_string();
    let steps: Vec<Vec<&str>> = vec![
        vec!["ip", "netns", "add", NETNS],
        vec![
            "ip", "link", "add", HOST_LINK, "type", "veth", "peer", "name", NODE_LINK,
        ],
        vec!["ip", "link", "set", NODE_LINK, "netns", NETNS],
        vec!["ip", "addr", "add", &host, "dev", HOST_LINK],
        vec!["ip", "link", "set", HOST_LINK, "up"],
        vec!["ip", "-n", NETNS, "link", "set", "lo", "up"],
        vec!["ip", "-n", NETNS, "addr", "add", &node, "dev", NODE_LINK],
        vec!["ip", "-n", NETNS, "link", "set", NODE_LINK, "up"],
        vec![
            "ip", "-n", NETNS, "route", "add", "default", "via", &host_ip,
        ],
        vec!["ip", "route", "add", POD_CIDR, "via", &node_ip],
        vec!["ip", "route", "add", SERVICE_CIDR, "via", &node_ip],
        // The node routes between pods, the link and Service addresses.
        vec![
            "ip",
            "netns",
            "exec",
            NETNS,
            "sysctl",
            "-q",
            "-w",
            "net.ipv4.ip_forward=1",
        ],
    ];
    for s in &steps {
        run(s)?;
    }
    Ok(())
}

/// Whether the namespace exists (left by a run that could not clean up).
pub fn exists() -> bool {
    std::path::Path::new(&netns_path()).exists()
}

/// Deletes the namespace (and with it the veth pair, the bridge, every pod link and
/// every rule in it); the machine's routes through the link go with the link.
pub fn teardown() -> Result<(), Error> {
    if exists() {
        run(&["ip", "netns", "delete", NETNS])?;
    }
    // A host end whose peer was never moved (a start interrupted in between).
    if std::path::Path::new(&format!("/sys/class/net/{HOST_LINK}")).exists() {
        run(&["ip", "link", "delete", HOST_LINK])?;
    }
    Ok(())
}
