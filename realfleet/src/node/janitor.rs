//! Removes everything a node made, in an order that lets each step succeed: the node's
//! processes (kubelet, kube-proxy, containerd and its shims, found by the node directory
//! in their command lines) and the containers (found by their cgroups), then the mounts
//! under the node directory (container root filesystems, volumes, pod network namespaces),
//! the network namespace, the cgroups and the log links kubelet leaves in
//! `/var/log/containers`.
//!
//! Synchronous on purpose: it runs from `Drop`, also when a start is interrupted, and at
//! the next start when a run was killed before it could clean up.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::net;

/// The cgroup under which kubelet puts every pod (`cgroupRoot`).
pub const CGROUP: &str = "kairship-node";

/// Everything named above; what could not be removed is logged, never fatal.
pub fn clean(dir: &Path) {
    let started = Instant::now();
    kill_processes_mentioning(dir);
    kill_cgroup_processes();
    // A shim restarted by a dying containerd, or a container that outlived its shim.
    kill_processes_mentioning(dir);
    unmount_under(dir);
    if let Err(e) = net::teardown() {
        tracing::warn!(error = %e, "removing the node's network namespace");
    }
    remove_cgroups();
    remove_log_links(dir);
    tracing::debug!(elapsed_ms = started.elapsed().as_millis() as u64, dir = %dir.display(), "node cleaned up");
}

fn pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                .collect()
        })
        .unwrap_or_default()
}

fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .stderr(std::process::Stdio::null())
        .status();
}

fn alive(pid: u32) -> bool {
    // A zombie has exited; only its parent can reap it.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// SIGTERM, then SIGKILL after a grace of two seconds, to `pids`; waits until they are gone.
fn stop(pids: Vec<u32>) {
    if pids.is_empty() {
        return;
    }
    for &p in &pids {
        signal(p, "TERM");
    }
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until && pids.iter().any(|&p| alive(p)) {
        std::thread::sleep(Duration::from_millis(50));
    }
    for &p in pids.iter().filter(|&&p| alive(p)) {
        signal(p, "KILL");
    }
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until && pids.iter().any(|&p| alive(p)) {
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn kill_processes_mentioning(dir: &Path) {
    let needle = dir.as_os_str().as_encoded_bytes();
    let me = std::process::id();
    let found: Vec<u32> = pids()
        .into_iter()
        .filter(|&p| p != me)
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| c.windows(needle.len()).any(|w| w == needle))
        })
        .collect();
    stop(found);
}

/// Every mounted hierarchy's copy of the node's cgroup (cgroup v1 mounts one per
/// controller; v2 one in all).
fn cgroup_roots() -> Vec<PathBuf> {
    let base = Path::new("/sys/fs/cgroup");
    let mut roots = vec![base.join(CGROUP)];
    if let Ok(d) = std::fs::read_dir(base) {
        roots.extend(d.flatten().map(|e| e.path().join(CGROUP)));
    }
    roots.into_iter().filter(|p| p.is_dir()).collect()
}

/// Directories under `root`, deepest first.
fn subtree(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        if let Ok(entries) = std::fs::read_dir(&d) {
            stack.extend(
                entries
                    .flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path()),
            );
        }
        out.push(d);
    }
    out.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    out
}

fn kill_cgroup_processes() {
    let mut found = Vec::new();
    for root in cgroup_roots() {
        for d in subtree(&root) {
            if let Ok(text) = std::fs::read_to_string(d.join("cgroup.procs")) {
                found.extend(text.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
            }
        }
    }
    found.sort_unstable();
    found.dedup();
    // Containers get no grace: the pods are being thrown away with the node.
    for &p in &found {
        signal(p, "KILL");
    }
    stop(found);
}

/// Mount points under `dir`, deepest first (octal escapes of mountinfo decoded).
fn mounts_under(dir: &Path) -> Vec<String> {
    let prefix = dir.display().to_string();
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut points: Vec<String> = text
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(unescape)
        .filter(|p| p == &prefix || p.starts_with(&format!("{prefix}/")))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    points.dedup();
    points
}

fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(u8::is_ascii_digit) {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn unmount_under(dir: &Path) {
    // Lazy: a mount still busy is detached now and freed when its last user goes.
    for _ in 0..3 {
        let points = mounts_under(dir);
        if points.is_empty() {
            return;
        }
        for p in points {
            let _ = Command::new("umount")
                .args(["-l", &p])
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
    let left = mounts_under(dir);
    if !left.is_empty() {
        tracing::warn!(mounts = ?left, "mounts under the node directory could not be removed");
    }
}

fn remove_cgroups() {
    for root in cgroup_roots() {
        for d in subtree(&root) {
            // rmdir fails while a process is still leaving; give it a moment.
            let until = Instant::now() + Duration::from_secs(3);
            while std::fs::remove_dir(&d).is_err() && d.exists() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        if root.exists() {
            tracing::warn!(cgroup = %root.display(), "the node's cgroup could not be removed");
        }
    }
}

/// kubelet links each container's log into `/var/log/containers`, whatever its own
/// log directory.
fn remove_log_links(dir: &Path) {
    let Ok(entries) = std::fs::read_dir("/var/log/containers") else {
        return;
    };
    for e in entries.flatten() {
        if std::fs::read_link(e.path()).is_ok_and(|t| t.starts_with(dir)) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// What a node left on the machine: the network namespace, the cgroup, mounts under its
/// directory, processes naming it. Empty when it is clean (the tests assert it).
pub fn leftovers(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    if net::exists() {
        out.push(format!("network namespace {}", net::NETNS));
    }
    out.extend(
        cgroup_roots()
            .into_iter()
            .map(|c| format!("cgroup {}", c.display())),
    );
    out.extend(mounts_under(dir).into_iter().map(|m| format!("mount {m}")));
    let needle = dir.as_os_str().as_encoded_bytes();
    let me = std::process::id();
    for p in pids().into_iter().filter(|&p| p != me && alive(p)) {
        if let Ok(c) = std::fs::read(format!("/proc/{p}/cmdline")) {
            if c.windows(needle.len()).any(|w| w == needle) {
                let cmd = String::from_utf8_lossy(&c).replace('\0', " ");
                out.push(format!("process {p}: {}", cmd.trim()));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_decoded() {
        assert_eq!(unescape(r"/tmp/a\040b"), "/tmp/a b");
        assert_eq!(unescape("/plain"), "/plain");
        assert_eq!(unescape(r"/x\0"), r"/x\0");
    }

    #[test]
    fn subtrees_list_the_deepest_first() {
        let dir = std::env::temp_dir().join(format!("janitor-test-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("a/b/c")).expect("mkdir");
        std::fs::create_dir_all(dir.join("d")).expect("mkdir");
        let t = subtree(&dir);
        assert_eq!(t.first(), Some(&dir.join("a/b/c")));
        assert_eq!(t.last(), Some(&dir));
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
