//! Fleet rollouts on the simulated fleet. The plan over gRPC and REST: the instances a
//! selector picks, in waves, with their maintenance windows and what blocks them (the
//! simulated fleet's own instances are External: their owners upgrade them); a caller who
//! does not see the whole fleet gets no plan and starts no rollout. A rollout run on
//! managed instances: backed up, upgraded and soaked wave by wave, the canary first; then
//! one whose canary goes down while it soaks, halted with nothing else touched and the
//! canary rolled back to its release.

use std::time::Duration;

use kairship::crd::{FleetRollout, Phase};
use kairship::proto::instance_service_client::InstanceServiceClient;
use kairship::proto::rollout_service_client::RolloutServiceClient;
use kairship::proto::{
    CreateInstanceRequest, ListBackupsRequest, PlanRolloutRequest, RolloutName, RolloutOptions,
    RolloutSpec, StartRolloutRequest,
};
use kube::api::{Patch, PatchParams};
use serde_json::json;
use tonic::transport::Channel;

use crate::common::eventually;
use crate::upgrade::status_version;

use crate::auth::{signer, start, ADMIN, VIEWER};

fn with<T>(token: &str, msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    let v = format!("Bearer {token}").parse().expect("metadata");
    r.metadata_mut().insert("authorization", v);
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_before_anything_moves() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = signer("k1");
    let api = start(dir.path(), &json!({"keys": [key.jwk]})).await;
    let instances = api.env.instances();
    for (name, env) in [("karmada-1", "prod"), ("karmada-2", "staging")] {
        let patch = json!({"metadata": {"labels": {"env": env}}});
        instances
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("label");
    }
    // Twelve hours from now, so the window is never open while the test runs (a fixed
    // one failed CI when it ran inside it).
    let hour = (jiff::Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .hour()
        + 12)
        % 24;
    let start = format!("{hour:02}:00");
    let window = json!({"spec": {"maintenanceWindow": {"start": start, "duration": "1h", "timeZone": "UTC"}}});
    instances
        .patch("karmada-1", &PatchParams::default(), &Patch::Merge(&window))
        .await
        .expect("a window");
    let spec = RolloutSpec {
        karmada_version: "v1.18.2".into(),
        match_labels: [("env".to_string(), "prod".to_string())].into(),
        canary: 1,
        percentages: vec![100],
        ..Default::default()
    };
    let mut c = RolloutServiceClient::new(api.channel.clone());
    let plan = crate::common::eventually(
        std::time::Duration::from_secs(10),
        "the window in the Instance cache",
        || {
            let (mut c, spec, want) = (c.clone(), spec.clone(), format!("T{start}:00Z"));
            async move {
                let p = c
                    .plan_rollout(with(ADMIN, PlanRolloutRequest { spec: Some(spec) }))
                    .await
                    .expect("a plan")
                    .into_inner();
                let next = p.waves.first()?.instances.first()?.next_window.clone();
                next.contains(&want).then_some(p)
            }
        },
    )
    .await;
    assert_eq!(plan.waves.len(), 1, "{plan:?}");
    let one = &plan.waves[0].instances[0];
    assert_eq!(one.name, "karmada-1");
    assert!(
        one.blocking.iter().any(|b| b.starts_with("External")),
        "{one:?}"
    );
    assert_eq!(plan.blocked, 1);
    // REST, the same plan.
    let rest = api.https_client(ADMIN).await;
    let (code, body) = kairship_test_support::http::json(
        &rest,
        "POST",
        "/apis/kairship.io/v1alpha1/rollouts:plan",
        &json!({"spec": {"karmadaVersion": "v1.18.2", "canary": 1}}),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(v["waves"].as_array().map(Vec::len), Some(2), "{v}");
    // A plan with no release is refused, naming the field.
    let e = c
        .plan_rollout(with(
            ADMIN,
            PlanRolloutRequest {
                spec: Some(RolloutSpec::default()),
            },
        ))
        .await
        .expect_err("no release");
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(e.message().contains("karmada_version"), "{e:?}");
    // A viewer of one instance does not see the fleet: no plan, no rollout.
    let e = c
        .plan_rollout(with(
            VIEWER,
            PlanRolloutRequest {
                spec: Some(spec.clone()),
            },
        ))
        .await
        .expect_err("not the whole fleet");
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
    let start = StartRolloutRequest {
        name: "prod".into(),
        spec: Some(spec),
        options: None,
    };
    let e = c
        .start_rollout(with(VIEWER, start.clone()))
        .await
        .expect_err("a viewer starts nothing");
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
    // A plan with blocking findings does not start unless forced, saying why.
    let e = c
        .start_rollout(with(ADMIN, start))
        .await
        .expect_err("blocked");
    assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e:?}");
    assert!(
        e.message().contains("karmada-1: External"),
        "{}",
        e.message()
    );
    let (code, body) = kairship_test_support::http::json(
        &rest,
        "POST",
        "/apis/kairship.io/v1alpha1/rollouts",
        &json!({"name": "Bad Name", "spec": {"karmadaVersion": "v1.18.2"}}),
    )
    .await;
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("name"), "{body}");
    api.stop().await;
}

pub(crate) async fn step_of(
    r: &RolloutServiceClient<Channel>,
    rollout: &str,
    instance: &str,
) -> String {
    let got = r
        .clone()
        .get_rollout(RolloutName {
            name: rollout.into(),
        })
        .await
        .map(|r| r.into_inner());
    got.ok()
        .into_iter()
        .flat_map(|r| r.waves)
        .flat_map(|w| w.instances)
        .find(|i| i.name == instance)
        .map(|i| i.step)
        .unwrap_or_default()
}

/// Managed instances `names` at Karmada `version`, labelled `tier=<tier>`, once Running.
pub(crate) async fn managed_running(
    c: &InstanceServiceClient<Channel>,
    names: &[&str],
    version: &str,
    tier: &str,
) {
    for n in names {
        let mut i = crate::server::managed_instance(n);
        if let Some(s) = i.spec.as_mut() {
            s.karmada_version = version.into();
        }
        if let Some(m) = i.metadata.as_mut() {
            m.labels = [("tier".to_string(), tier.to_string())].into();
        }
        c.clone()
            .create_instance(CreateInstanceRequest { instance: Some(i) })
            .await
            .expect("create");
    }
    for n in names {
        let v = eventually(Duration::from_secs(60), &format!("{n} Running"), || {
            status_version(c, n)
        })
        .await;
        assert_eq!(v, version);
    }
}

/// The rollout `name` once it is in `phase`, waiting up to `within`.
pub(crate) async fn rollout_in(
    r: &RolloutServiceClient<Channel>,
    name: &str,
    phase: &str,
    within: Duration,
) -> kairship::proto::Rollout {
    eventually(within, &format!("{name} {phase}"), || {
        let r = r.clone();
        async move {
            let got = r
                .clone()
                .get_rollout(RolloutName { name: name.into() })
                .await
                .ok()?
                .into_inner();
            (got.phase == phase).then_some(got)
        }
    })
    .await
}

/// The (type, message) of every Event on the rollout `name`, oldest first.
async fn rollout_events(host: &kube::Client, name: &str) -> Vec<(String, String)> {
    let api: kube::Api<k8s_openapi::api::core::v1::Event> =
        kube::Api::namespaced(host.clone(), "default");
    let mut list = api.list(&Default::default()).await.expect("events").items;
    list.sort_by_key(|e| e.metadata.name.clone());
    list.into_iter()
        .filter(|e| {
            e.involved_object.kind.as_deref() == Some("FleetRollout")
                && e.involved_object.name.as_deref() == Some(name)
        })
        .map(|e| (e.type_.unwrap_or_default(), e.message.unwrap_or_default()))
        .collect()
}

type Steps = std::sync::Arc<parking_lot::Mutex<Vec<(String, String)>>>;

/// Every (instance, step) a rollout's status showed, in order, from a watch of the host.
pub(crate) fn record_steps(
    host: kube::Client,
    rollout: &str,
) -> (Steps, tokio::task::JoinHandle<()>) {
    use futures::StreamExt;
    let seen = std::sync::Arc::new(parking_lot::Mutex::new(Vec::<(String, String)>::new()));
    let api: kube::Api<FleetRollout> = kube::Api::all(host);
    let stream = kube::runtime::watcher(
        api,
        kube::runtime::watcher::Config::default().fields(&format!("metadata.name={rollout}")),
    );
    let out = seen.clone();
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(kube::runtime::WatchStreamExt::applied_objects(stream));
        while let Some(Ok(r)) = stream.next().await {
            for (n, e) in r.status.map(|s| s.instances).unwrap_or_default() {
                let mut seen = out.lock();
                let last = seen.iter().rev().find(|(i, _)| *i == n).map(|(_, s)| s);
                if last != Some(&e.step) {
                    seen.push((n, e.step));
                }
            }
        }
    });
    (seen, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_runs_in_waves_then_halts_and_rolls_back() {
    let api = crate::server::Api::start(1).await;
    let c = InstanceServiceClient::new(api.channel.clone());
    let names = ["team-a", "team-b", "team-c"];
    managed_running(&c, &names, "v1.12.0", "rollout").await;
    let mut r = RolloutServiceClient::new(api.channel.clone());
    let spec = |v: &str| RolloutSpec {
        karmada_version: v.into(),
        match_labels: [("tier".to_string(), "rollout".to_string())].into(),
        canary: 1,
        percentages: vec![100],
        ..Default::default()
    };

    // To v1.13.0: the canary alone, then the other two at once, each backed up first.
    let (seen, recorder) = record_steps(api.env.host.clone(), "to-13");
    let started = r
        .start_rollout(StartRolloutRequest {
            name: "to-13".into(),
            spec: Some(spec("v1.13.0")),
            options: Some(RolloutOptions {
                max_unavailable: 2,
                soak_seconds: 2,
                progress_deadline_seconds: 60,
                force: false,
                ..Default::default()
            }),
        })
        .await
        .expect("started")
        .into_inner();
    assert_eq!(started.phase, "Planned");
    let done = rollout_in(&r, "to-13", "Completed", Duration::from_secs(180)).await;
    recorder.abort();
    let order: Vec<(String, String)> = seen.lock().clone();
    println!("to-13 steps in order: {order:?}");
    assert_eq!(done.waves.len(), 2, "{done:?}");
    assert_eq!(done.waves[0].instances[0].name, "team-a", "the canary");
    for i in done.waves.iter().flat_map(|w| &w.instances) {
        assert_eq!(i.step, "Done", "{i:?}");
        assert_eq!(i.from_version, "v1.12.0", "{i:?}");
        assert!(!i.backup.is_empty(), "a backup before the change: {i:?}");
        let v = status_version(&c, &i.name).await;
        assert_eq!(v.as_deref(), Some("v1.13.0"), "{}", i.name);
        let backups = c
            .clone()
            .list_backups(ListBackupsRequest {
                name: i.name.clone(),
            })
            .await
            .expect("backups")
            .into_inner()
            .backups;
        let b = backups
            .iter()
            .find(|b| b.name == i.backup)
            .unwrap_or_else(|| panic!("{}'s backup {} listed: {backups:?}", i.name, i.backup));
        assert_eq!(b.phase, "Completed", "{b:?}");
        assert_eq!(
            b.karmada_version, "v1.12.0",
            "taken before the change: {b:?}"
        );
    }
    let at = |n: &str, step: &str| order.iter().position(|(i, s)| i == n && s == step);
    let canary_done = at("team-a", "Done").expect("the canary's Done seen");
    for n in ["team-b", "team-c"] {
        let began = at(n, "BackingUp").expect("backing up seen");
        assert!(
            began > canary_done,
            "{n} began before the canary was done: {order:?}"
        );
    }

    // To v1.14.0: the canary goes down while it soaks. The rollout halts naming it, the
    // second wave is never touched, and the canary is rolled back once it answers again.
    r.start_rollout(StartRolloutRequest {
        name: "to-14".into(),
        spec: Some(spec("v1.14.0")),
        options: Some(RolloutOptions {
            max_unavailable: 2,
            soak_seconds: 600,
            progress_deadline_seconds: 120,
            force: false,
            ..Default::default()
        }),
    })
    .await
    .expect("started");
    eventually(Duration::from_secs(120), "team-a soaking", || {
        let r = r.clone();
        async move { (step_of(&r, "to-14", "team-a").await == "Soaking").then_some(()) }
    })
    .await;
    let (code, body) = api
        .env
        .sim
        .set_fault("team-a", json!({"mode": "down"}))
        .await;
    assert_eq!(code, 200, "{body}");
    let halted = rollout_in(&r, "to-14", "Halted", Duration::from_secs(60)).await;
    assert!(halted.reason.contains("team-a"), "{}", halted.reason);
    // Each move is an Event on the rollout, as `kubectl describe` shows it.
    let events = rollout_events(&api.env.host, "to-13").await;
    for wanted in [
        "Progressing: wave 1 of 2",
        "Progressing: wave 2 of 2",
        "Completed",
    ] {
        assert!(
            events.iter().any(|(t, m)| t == "Normal" && m == wanted),
            "{wanted:?} in {events:?}"
        );
    }
    let events = rollout_events(&api.env.host, "to-14").await;
    assert!(
        events
            .iter()
            .any(|(t, m)| t == "Warning" && m.starts_with("Halted: instance \"team-a\" failed")),
        "{events:?}"
    );
    for n in ["team-b", "team-c"] {
        assert_eq!(step_of(&r, "to-14", n).await, "Pending", "{n} untouched");
        assert_eq!(
            status_version(&c, n).await.as_deref(),
            Some("v1.13.0"),
            "{n}"
        );
    }
    api.env.sim.clear_fault("team-a").await;
    eventually(Duration::from_secs(120), "team-a rolled back", || {
        let (r, c) = (r.clone(), c.clone());
        async move {
            let back = step_of(&r, "to-14", "team-a").await == "RolledBack";
            let v = status_version(&c, "team-a").await;
            (back && v.as_deref() == Some("v1.13.0")).then_some(())
        }
    })
    .await;
    // Aborted: it stays as it is, and says so.
    let aborted = r
        .abort_rollout(RolloutName {
            name: "to-14".into(),
        })
        .await
        .expect("abort")
        .into_inner();
    assert!(aborted.aborted);
    let e = r
        .resume_rollout(RolloutName {
            name: "to-14".into(),
        })
        .await
        .expect_err("an aborted rollout does not resume");
    assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e:?}");
    api.env
        .wait_phase("team-b", Phase::Running, Duration::from_secs(5))
        .await;
    api.stop().await;
}

/// A canary that answers Kairship's proxy with server errors while it soaks halts the
/// rollout with the share that failed, and is rolled back. Probes here tolerate a long
/// run of failures, so the instance stays Running and only the requests' failures can
/// halt it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_whose_requests_fail_while_it_soaks_halts_the_rollout() {
    let settings = kairship::context::Settings {
        unreachable_after: 1000,
        degraded_after: Duration::from_secs(600),
        ..crate::harness::fast_settings()
    };
    let api = crate::server::Api::start_settings(1, None, None, settings).await;
    let c = InstanceServiceClient::new(api.channel.clone());
    let names = ["soak-a", "soak-b"];
    for n in names {
        let mut i = crate::server::managed_instance(n);
        if let Some(s) = i.spec.as_mut() {
            s.karmada_version = "v1.12.0".into();
        }
        if let Some(m) = i.metadata.as_mut() {
            m.labels = [("tier".to_string(), "soak".to_string())].into();
        }
        c.clone()
            .create_instance(CreateInstanceRequest { instance: Some(i) })
            .await
            .expect("create");
    }
    for n in names {
        eventually(Duration::from_secs(60), &format!("{n} Running"), || {
            status_version(&c, n)
        })
        .await;
    }
    let mut r = RolloutServiceClient::new(api.channel.clone());
    r.start_rollout(StartRolloutRequest {
        name: "soak-errors".into(),
        spec: Some(RolloutSpec {
            karmada_version: "v1.13.0".into(),
            match_labels: [("tier".to_string(), "soak".to_string())].into(),
            canary: 1,
            percentages: vec![100],
            ..Default::default()
        }),
        options: Some(RolloutOptions {
            soak_seconds: 600,
            progress_deadline_seconds: 120,
            max_failed_request_percent: 10,
            min_requests: 20,
            ..Default::default()
        }),
    })
    .await
    .expect("started");
    eventually(Duration::from_secs(120), "soak-a soaking", || {
        let r = r.clone();
        async move { (step_of(&r, "soak-errors", "soak-a").await == "Soaking").then_some(()) }
    })
    .await;
    // Requests that pass through to the instance (writes), every one answered 500 or 503.
    let (code, body) = api
        .env
        .sim
        .set_fault("soak-a", json!({"mode": "errors", "error_rate": 1.0}))
        .await;
    assert_eq!(code, 200, "{body}");
    let client = api.https_client_once("unused").await;
    let path =
        "/apis/kairship.io/v1alpha1/instances/soak-a/proxy/api/v1/namespaces/default/configmaps";
    for i in 0..30 {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("soak-{i}")}});
        let (code, body) = kairship_test_support::http::json(&client, "POST", path, &cm).await;
        assert!(code >= 500, "answered with a server error: {code} {body}");
    }
    api.env.sim.clear_fault("soak-a").await;
    let halted = rollout_in(&r, "soak-errors", "Halted", Duration::from_secs(30)).await;
    assert!(
        halted.reason.contains("soak-a")
            && halted.reason.contains("requests Kairship's proxy answered")
            && halted.reason.contains("allows 10%"),
        "{}",
        halted.reason
    );
    assert_eq!(step_of(&r, "soak-errors", "soak-b").await, "Pending");
    eventually(Duration::from_secs(120), "soak-a rolled back", || {
        let (r, c) = (r.clone(), c.clone());
        async move {
            let back = step_of(&r, "soak-errors", "soak-a").await == "RolledBack";
            let v = status_version(&c, "soak-a").await;
            (back && v.as_deref() == Some("v1.12.0")).then_some(())
        }
    })
    .await;
    api.stop().await;
}
