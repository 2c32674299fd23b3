//! Applying and clearing an experiment's fault: simulator faults through its admin API,
//! tree faults through the tree itself (only when the fleet runs in this process).

use std::time::Duration;

use serde_json::json;

use super::load::Load;
use super::spec::{Experiment, Fault, SimMode};
use crate::actors::tree::TreeHandle;

/// Where faults are sent.
pub struct Injector {
    pub sim_admin: Option<String>,
    pub tree: Option<TreeHandle>,
    /// The host cluster as its administrator (the hostile experiment sets a budget).
    pub host: Option<kube::Client>,
    /// A viewer of the victim (the hostile experiment's watcher).
    pub viewer_token: Option<String>,
    /// Where the instances' own kubeconfigs are (beside the host's), for a hostile
    /// instance that writes into itself.
    pub own_kubeconfigs: Option<std::path::PathBuf>,
}

/// A standing fault: the repeating task (if any) and what clears it.
pub struct Active {
    repeat: Option<tokio::task::JoinHandle<()>>,
    _hostile: Option<super::hostile::Hostile>,
}

impl Drop for Active {
    fn drop(&mut self) {
        if let Some(t) = self.repeat.take() {
            t.abort();
        }
    }
}

fn mode_name(m: SimMode) -> &'static str {
    match m {
        SimMode::Down => "down",
        SimMode::Latency => "latency",
        SimMode::Errors => "errors",
        SimMode::DropWatches => "drop-watches",
        SimMode::Compact => "compact",
    }
}

impl Injector {
    /// Why this experiment cannot run here, if it cannot.
    pub fn cannot_run(&self, e: &Experiment) -> Option<String> {
        if e.fault.in_process() && self.tree.is_none() {
            return Some("needs the fleet in this process (run without --endpoints)".into());
        }
        if matches!(e.fault, Fault::Leader { .. }) {
            return None;
        }
        if matches!(e.fault, Fault::Hostile { .. })
            && (self.own_kubeconfigs.is_none() || self.host.is_none())
        {
            return Some("needs the host's and the instances' own kubeconfigs".into());
        }
        if !e.fault.in_process() && self.sim_admin.is_none() {
            return Some("needs the simulator's fault API (sim_admin in endpoints.json)".into());
        }
        None
    }

    /// A client of `instance`'s own API server (not through Kairship).
    async fn own_client(&self, instance: &str) -> Result<kube::Client, String> {
        let dir = self
            .own_kubeconfigs
            .as_ref()
            .ok_or("the instances' own kubeconfigs are not known here")?;
        let path = dir.join(format!("{instance}.kubeconfig"));
        crate::host::client::from_kubeconfig(Some(&path)).await
    }

    async fn sim(
        &self,
        method: &str,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> Result<(), String> {
        let base = self.sim_admin.as_deref().ok_or("no simulator fault API")?;
        let url = format!("{base}{path}");
        let (code, answer) = tokio::time::timeout(
            Duration::from_secs(5),
            kairship_wire::fault_client::call(method, &url, body),
        )
        .await
        .map_err(|_| format!("{method} {url}: no answer within 5s"))?
        .map_err(|e| e.to_string())?;
        if code >= 300 {
            return Err(format!("{method} {url}: {code} {answer}"));
        }
        Ok(())
    }

    pub async fn apply(&self, e: &Experiment, load: &mut Load) -> Result<Active, String> {
        let victim = e.victim.clone().unwrap_or_default();
        let sim_fault = |mode: SimMode, latency_ms: Option<u64>, error_rate: Option<f64>| {
            let mut f = json!({"mode": mode_name(mode)});
            if let Some(l) = latency_ms {
                f["latency_ms"] = l.into();
            }
            if let Some(r) = error_rate {
                f["error_rate"] = r.into();
            }
            f
        };
        let (mut repeat, mut hostile) = (None, None);
        match &e.fault {
            Fault::Instance {
                mode,
                latency_ms,
                error_rate,
                repeat_ms,
            } => {
                let body = sim_fault(*mode, *latency_ms, *error_rate);
                let path = format!("/faults/{victim}");
                self.sim("POST", &path, Some(body.clone())).await?;
                if let Some(ms) = repeat_ms {
                    let me = Injector {
                        sim_admin: self.sim_admin.clone(),
                        tree: None,
                        host: None,
                        viewer_token: None,
                        own_kubeconfigs: None,
                    };
                    let period = Duration::from_millis(*ms);
                    repeat = Some(tokio::spawn(async move {
                        loop {
                            tokio::time::sleep(period).await;
                            let _ = me.sim("POST", &path, Some(body.clone())).await;
                        }
                    }));
                }
            }
            Fault::Host { mode, latency_ms } => {
                self.sim(
                    "POST",
                    "/faults/host",
                    Some(sim_fault(*mode, *latency_ms, None)),
                )
                .await?;
            }
            Fault::MemberFlap { cluster, repeat_ms } => {
                let me = Injector {
                    sim_admin: self.sim_admin.clone(),
                    tree: None,
                    host: None,
                    viewer_token: None,
                    own_kubeconfigs: None,
                };
                let path = format!("/clusters/{victim}/{cluster}");
                me.sim("POST", &path, Some(json!({"ready": false}))).await?;
                let period = Duration::from_millis(*repeat_ms);
                repeat = Some(tokio::spawn(async move {
                    let mut ready = true;
                    loop {
                        tokio::time::sleep(period).await;
                        let _ = me.sim("POST", &path, Some(json!({"ready": ready}))).await;
                        ready = !ready;
                    }
                }));
            }
            Fault::ActorPanic { repeat_ms } => {
                let tree = self.tree.clone().ok_or("no tree in this process")?;
                let period = Duration::from_millis(*repeat_ms);
                repeat = Some(tokio::spawn(async move {
                    loop {
                        let _ = tree.inject_panic(&victim).await;
                        tokio::time::sleep(period).await;
                    }
                }));
            }
            Fault::ManagerCrash { repeat_ms } => {
                let tree = self.tree.clone().ok_or("no tree in this process")?;
                let period = Duration::from_millis(*repeat_ms);
                repeat = Some(tokio::spawn(async move {
                    loop {
                        let _ = tree.crash_manager().await;
                        tokio::time::sleep(period).await;
                    }
                }));
            }
            Fault::Burst { factor } => load.start_burst(&victim, *factor),
            Fault::Hostile {
                object_bytes,
                objects_per_second,
                watchers,
                latency_ms,
                budget_bytes,
            } => {
                let host = self.host.as_ref().ok_or("no host kubeconfig")?;
                super::hostile::set_budget(host, &victim, Some(*budget_bytes)).await?;
                if let Some(ms) = latency_ms {
                    let body = sim_fault(SimMode::Latency, Some(*ms), None);
                    self.sim("POST", &format!("/faults/{victim}"), Some(body))
                        .await?;
                }
                let viewer = self.viewer_token.as_deref().ok_or("no viewer token")?;
                hostile = Some(super::hostile::start(
                    self.own_client(&victim).await?,
                    load.proxy_of(&victim, Some(viewer)).await?,
                    *object_bytes,
                    *objects_per_second,
                    *watchers,
                ));
            }
            Fault::Leader { .. } => {
                return Err("leader faults are run by chaos::leader_failover".into())
            }
        }
        Ok(Active {
            repeat,
            _hostile: hostile,
        })
    }

    /// Clears the fault; a victim the fault left Degraded gets the SRE's restart.
    pub async fn clear(
        &self,
        e: &Experiment,
        active: Active,
        load: &mut Load,
    ) -> Result<(), String> {
        drop(active);
        let victim = e.victim.clone().unwrap_or_default();
        match &e.fault {
            Fault::Instance { .. } => self.sim("DELETE", &format!("/faults/{victim}"), None).await,
            Fault::Host { .. } => self.sim("DELETE", "/faults/host", None).await,
            Fault::MemberFlap { cluster, .. } => {
                self.sim(
                    "POST",
                    &format!("/clusters/{victim}/{cluster}"),
                    Some(json!({"ready": true})),
                )
                .await
            }
            Fault::ActorPanic { .. } => {
                let tree = self.tree.as_ref().ok_or("no tree in this process")?;
                tree.restart_instance(&victim)
                    .await
                    .map_err(|e| e.to_string())
            }
            Fault::ManagerCrash { .. } | Fault::Leader { .. } => Ok(()),
            Fault::Burst { .. } => {
                load.end_burst();
                Ok(())
            }
            Fault::Hostile { latency_ms, .. } => {
                if latency_ms.is_some() {
                    self.sim("DELETE", &format!("/faults/{victim}"), None)
                        .await?;
                }
                let host = self.host.as_ref().ok_or("no host kubeconfig")?;
                // A new budget is a new actor: the victim caches again.
                super::hostile::set_budget(host, &victim, None).await?;
                super::hostile::clean(self.own_client(&victim).await?).await
            }
        }
    }
}
