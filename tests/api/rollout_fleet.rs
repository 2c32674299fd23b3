//! A class change rolled across 50 managed simulated instances in four waves (a canary,
//! then a quarter, half and all of them), with Kairship restarted in the middle of a
//! wave: the new tree picks the rollout up from its status, finishes it without redoing
//! a finished instance (each backed up exactly once, the backup its entry names), and no
//! instance of a wave starts before every instance of the waves before it is done.

use std::collections::BTreeMap;
use std::time::Duration;

use kairship::crd::{FleetRollout, Instance, InstanceClass, InstanceClassSpec, Phase};
use kairship::proto::instance_service_client::InstanceServiceClient;
use kairship::proto::rollout_service_client::RolloutServiceClient;
use kairship::proto::{
    CreateInstanceRequest, ListBackupsRequest, RolloutOptions, RolloutSpec, StartRolloutRequest,
};
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::common::eventually;

const FLEET: usize = 50;

/// The rollout as the host has it.
async fn status(host: &kube::Client, name: &str) -> kairship::crd::FleetRolloutStatus {
    let api: kube::Api<FleetRollout> = kube::Api::all(host.clone());
    api.get(name)
        .await
        .ok()
        .and_then(|r| r.status)
        .unwrap_or_default()
}

/// A rollout that halts never completes: the test says so at once, with why.
fn not_halted(s: &kairship::crd::FleetRolloutStatus) {
    assert!(
        !matches!(s.phase.as_str(), "Halted" | "Aborted"),
        "fleet-13 {}: {} {:?}",
        s.phase,
        s.reason,
        unfinished(s)
    );
}

/// The instances not yet done, with their step and why.
fn unfinished(s: &kairship::crd::FleetRolloutStatus) -> Vec<String> {
    s.instances
        .iter()
        .filter(|(_, e)| e.step != "Done")
        .map(|(n, e)| format!("{n} {} since {:?}: {:?}", e.step, e.since, e.reason))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_instances_in_four_waves_survive_a_restart_mid_wave() {
    // The tests' settings refresh each status every second: 50 writes a second that
    // Kairship's own Instance watch reads back, which a loaded CI machine fell behind on.
    let settings = kairship::context::Settings {
        status_refresh: Duration::from_secs(10),
        ..crate::harness::fast_settings()
    };
    let mut api = crate::server::Api::start_settings(1, None, None, settings).await;
    let host = api.env.host.clone();
    let classes: kube::Api<InstanceClass> = kube::Api::all(host.clone());
    crate::server::create_class(
        &host,
        "fleet",
        InstanceClassSpec {
            karmada_version: Some("v1.12.0".into()),
            karmada_spec: Some(json!({"featureGates": {"Failover": true}})),
            ..Default::default()
        },
    )
    .await;
    let c = InstanceServiceClient::new(api.channel.clone());
    let names: Vec<String> = (0..FLEET).map(|i| format!("fleet-{i:02}")).collect();
    for (i, n) in names.iter().enumerate() {
        let inst = crate::server::managed_instance_of(n, "fleet");
        let req = CreateInstanceRequest {
            instance: Some(inst),
        };
        // The class reaches Kairship's watch before the first create.
        let wait = if i == 0 { 10 } else { 1 };
        eventually(Duration::from_secs(wait), &format!("{n} created"), || {
            let (c, req) = (c.clone(), req.clone());
            async move { c.clone().create_instance(req).await.ok() }
        })
        .await;
    }
    let instances: kube::Api<Instance> = kube::Api::all(host.clone());
    let running_at = |v: &'static str| {
        let instances = instances.clone();
        async move {
            let list = instances.list(&Default::default()).await.ok()?;
            let at = list
                .items
                .iter()
                .filter(|i| {
                    i.status.as_ref().is_some_and(|s| {
                        s.phase == Phase::Running && s.karmada_version.as_deref() == Some(v)
                    })
                })
                .count();
            (at == FLEET).then_some(())
        }
    };
    eventually(Duration::from_secs(180), "all 50 Running v1.12.0", || {
        running_at("v1.12.0")
    })
    .await;

    // The class moves on; nothing moves until the rollout.
    let patch = json!({"spec": {"karmadaVersion": "v1.13.0", "karmadaSpec": {"featureGates": {"Failover": true, "PropagationPolicyPreemption": true}}}});
    classes
        .patch("fleet", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("class changed");
    let r = RolloutServiceClient::new(api.channel.clone());
    // Kairship's Instance cache may lag the host under load: it refuses the rollout
    // (FailedPrecondition, naming the instances not Running yet) until it sees them all.
    kairship_test_support::poll(Duration::from_secs(60), Duration::from_millis(200), || {
        let r = r.clone();
        async move {
            r.clone()
                .start_rollout(StartRolloutRequest {
                    name: "fleet-13".into(),
                    spec: Some(RolloutSpec {
                        class_name: "fleet".into(),
                        canary: 1,
                        percentages: vec![25, 50, 100],
                        ..Default::default()
                    }),
                    options: Some(RolloutOptions {
                        max_unavailable: 13,
                        soak_seconds: 2,
                        progress_deadline_seconds: 300,
                        ..Default::default()
                    }),
                })
                .await
        }
    })
    .await
    .unwrap_or_else(|e| panic!("the rollout did not start within 60s: {e:?}"));
    let (seen, recorder) = crate::rollouts::record_steps(host.clone(), "fleet-13");

    // Mid-wave: the third wave under way, some of it done and some not.
    let waves = eventually(Duration::from_secs(300), "the third wave under way", || {
        let host = host.clone();
        async move {
            let s = status(&host, "fleet-13").await;
            not_halted(&s);
            let third = s.waves.get(2)?;
            let steps: Vec<&str> = third
                .iter()
                .filter_map(|n| s.instances.get(n).map(|e| e.step.as_str()))
                .collect();
            let started = steps.iter().any(|s| *s != "Pending");
            let unfinished = steps.iter().any(|s| *s != "Done");
            (started && unfinished).then_some(s.waves.clone())
        }
    })
    .await;
    let sizes: Vec<usize> = waves.iter().map(Vec::len).collect();
    assert_eq!(sizes.len(), 4, "four waves: {sizes:?}");
    assert_eq!(sizes[0], 1, "the canary alone: {sizes:?}");
    assert_eq!(sizes.iter().sum::<usize>(), FLEET, "{sizes:?}");

    // Kairship stops and starts again against the same host.
    api.restart().await;
    let at_restart = status(&host, "fleet-13").await;
    println!(
        "restarted with {} of {FLEET} done",
        at_restart
            .instances
            .values()
            .filter(|e| e.step == "Done")
            .count()
    );

    // On a timeout, which instances it is waiting on.
    let done =
        kairship_test_support::poll(Duration::from_secs(400), Duration::from_millis(500), || {
            let host = host.clone();
            async move {
                let s = status(&host, "fleet-13").await;
                not_halted(&s);
                if s.phase == "Completed" {
                    Ok(s)
                } else {
                    Err(format!("{} ({}): {:?}", s.phase, s.reason, unfinished(&s)))
                }
            }
        })
        .await
        .unwrap_or_else(|seen| {
            panic!("timed out after 400s waiting for fleet-13 Completed: {seen}")
        });
    recorder.abort();
    eventually(Duration::from_secs(60), "all 50 Running v1.13.0", || {
        running_at("v1.13.0")
    })
    .await;
    assert_eq!(done.waves, waves, "the waves were not planned again");
    let order: Vec<(String, String)> = seen.lock().clone();
    let first = |n: &str, step: &str| order.iter().position(|(i, s)| i == n && s == step);
    let last_done = |wave: &[String]| {
        wave.iter()
            .map(|n| first(n, "Done").unwrap_or_else(|| panic!("{n}'s Done seen: {order:?}")))
            .max()
            .unwrap_or(0)
    };
    for k in 1..waves.len() {
        let before = last_done(&waves[k - 1]);
        for n in &waves[k] {
            let began = first(n, "BackingUp").unwrap_or_else(|| panic!("{n} began"));
            assert!(
                began > before,
                "{n} of wave {} began before wave {k} was done",
                k + 1
            );
        }
    }
    // Each instance backed up once, before its change, the backup its entry names; a
    // backup the restart cut short is abandoned and taken again, never counted as done.
    let c = InstanceServiceClient::new(api.channel.clone());
    let mut backups_per: BTreeMap<String, usize> = BTreeMap::new();
    for n in &names {
        let entry = &done.instances[n];
        assert_eq!(entry.step, "Done", "{n}: {entry:?}");
        let listed = c
            .clone()
            .list_backups(ListBackupsRequest { name: n.clone() })
            .await
            .expect("backups")
            .into_inner()
            .backups;
        assert!(
            listed.iter().any(|b| Some(&b.name) == entry.backup.as_ref()
                && b.phase == "Completed"
                && b.karmada_version == "v1.12.0"),
            "{n}: {entry:?} {listed:?}"
        );
        let others: Vec<_> = listed.iter().filter(|b| b.phase != "Completed").collect();
        assert!(
            others
                .iter()
                .all(|b| b.phase == "Failed" && b.message.starts_with("abandoned")),
            "{n}: a backup neither completed nor abandoned by the restart: {others:?}"
        );
        if !others.is_empty() {
            println!(
                "{n}: {} backup(s) abandoned by the restart, taken again",
                others.len()
            );
        }
        backups_per.insert(n.clone(), listed.len() - others.len());
    }
    let redone: Vec<_> = backups_per.iter().filter(|(_, k)| **k != 1).collect();
    assert!(
        redone.is_empty(),
        "completed backups other than one: {redone:?}"
    );
    let i = instances.get("fleet-07").await.expect("fleet-07");
    let ks = i.spec.managed.and_then(|m| m.karmada_spec).expect("spec");
    assert_eq!(
        ks["featureGates"]["PropagationPolicyPreemption"], true,
        "{ks}"
    );
    api.stop().await;
}
