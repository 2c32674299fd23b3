//! kubelet and kube-proxy in the node's network namespace, configured for this machine:
//! cgroup v1 with the cgroupfs driver (containerd 1.6 cannot tell kubelet its driver),
//! swap allowed, pods under their own cgroup root, no image garbage collection (images
//! are imported, never pulled back), eviction only when nearly out of disk, and kube-proxy
//! masquerading all Service traffic (pods and the machine share no bridge netfilter).

use std::path::Path;

use serde_json::json;

use super::{janitor, net, system_binary, NODE_NAME};
use crate::process::Proc;
use crate::Error;

fn yaml(path: &Path, value: &serde_json::Value) -> Result<(), Error> {
    // JSON is YAML; kubelet and kube-proxy read either.
    std::fs::write(path, value.to_string())
        .map_err(Error::io(format!("writing {}", path.display())))
}

/// kubelet wants its `cgroupRoot` to exist in every hierarchy (cgroup v1 mounts one per
/// controller); a new cpuset group has no CPUs or memory nodes until given its parent's.
fn make_cgroup_root() -> Result<(), Error> {
    let base = Path::new("/sys/fs/cgroup");
    let entries = std::fs::read_dir(base).map_err(Error::io("reading /sys/fs/cgroup"))?;
    let mut hierarchies: Vec<std::path::PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .filter(|p| p.join("cgroup.procs").exists())
        .collect();
    if base.join("cgroup.procs").exists() {
        hierarchies = vec![base.to_path_buf()]; // cgroup v2: one hierarchy
    }
    for h in hierarchies {
        let dir = h.join(janitor::CGROUP);
        std::fs::create_dir_all(&dir).map_err(Error::io(format!("creating {}", dir.display())))?;
        for file in ["cpuset.cpus", "cpuset.mems"] {
            if let Ok(v) = std::fs::read_to_string(h.join(file)) {
                std::fs::write(dir.join(file), v.trim())
                    .map_err(Error::io(format!("writing {}", dir.join(file).display())))?;
            }
        }
    }
    Ok(())
}

pub fn kubelet(bin: &Path, dir: &Path, kubeconfig: &Path, socket: &Path) -> Result<Proc, Error> {
    make_cgroup_root()?;
    let root = dir.join("kubelet");
    std::fs::create_dir_all(root.join("pod-logs"))
        .map_err(Error::io(format!("creating {}", root.display())))?;
    // Pods get the cluster's DNS; nothing to forward to on a machine without a network.
    let resolv = root.join("resolv.conf");
    std::fs::write(&resolv, "").map_err(Error::io(format!("writing {}", resolv.display())))?;
    let config = root.join("config.yaml");
    yaml(
        &config,
        &json!({
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "failCgroupV1": false,
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": format!("/{}", janitor::CGROUP),
            "failSwapOn": false,
            "containerRuntimeEndpoint": format!("unix://{}", socket.display()),
            "address": net::NODE_IP.to_string(),
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            // Reached only from this machine through the link: `kubectl logs` works
            // without client certificates.
            "authentication": {"anonymous": {"enabled": true}, "webhook": {"enabled": false}},
            "authorization": {"mode": "AlwaysAllow"},
            "clusterDNS": [net::DNS_SERVICE_IP.to_string()],
            "clusterDomain": "cluster.local",
            "resolvConf": resolv.display().to_string(),
            "podLogsDir": root.join("pod-logs").display().to_string(),
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%",
                             "nodefs.inodesFree": "1%", "imagefs.available": "1%"},
            "serializeImagePulls": false,
            "maxPods": 110,
            "nodeStatusReportFrequency": "10s",
            "syncFrequency": "10s",
        }),
    )?;
    Proc::spawn(
        "kubelet",
        &system_binary("nsenter", "util-linux")?,
        vec![
            format!("--net={}", net::netns_path()),
            bin.join("kubelet").display().to_string(),
            format!("--config={}", config.display()),
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--root-dir={}", root.join("root").display()),
            format!("--cert-dir={}", root.join("pki").display()),
            format!("--hostname-override={NODE_NAME}"),
            format!("--node-ip={}", net::NODE_IP),
            "--v=1".into(),
        ],
        dir.join("kubelet.log"),
    )
}

pub fn kube_proxy(bin: &Path, dir: &Path, kubeconfig: &Path) -> Result<Proc, Error> {
    let root = dir.join("kube-proxy");
    std::fs::create_dir_all(&root).map_err(Error::io(format!("creating {}", root.display())))?;
    let config = root.join("config.yaml");
    yaml(
        &config,
        &json!({
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": kubeconfig.display().to_string()},
            "hostnameOverride": NODE_NAME,
            "mode": "iptables",
            "clusterCIDR": net::POD_CIDR,
            "iptables": {"masqueradeAll": true, "minSyncPeriod": "0s", "syncPeriod": "30s"},
            // The conntrack table size is the machine's, not this namespace's: leave it.
            "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s",
                          "tcpCloseWaitTimeout": "0s"},
            "metricsBindAddress": "127.0.0.1:10249",
            "healthzBindAddress": "127.0.0.1:10256",
        }),
    )?;
    Proc::spawn(
        "kube-proxy",
        &system_binary("nsenter", "util-linux")?,
        vec![
            format!("--net={}", net::netns_path()),
            bin.join("kube-proxy").display().to_string(),
            format!("--config={}", config.display()),
            "--v=1".into(),
        ],
        dir.join("kube-proxy.log"),
    )
}
