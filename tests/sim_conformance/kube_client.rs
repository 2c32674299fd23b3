//! The `kube` crate against the simulator: `Api` CRUD, watcher/reflector, resuming from a
//! resourceVersion, recovering from 410 Gone by relisting, bookmarks and pagination.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::runtime::{reflector, watcher, WatchStreamExt};
use serde_json::json;

use crate::common::{eventually, Sim};

async fn configmaps(sim: &Sim) -> Api<ConfigMap> {
    Api::namespaced(sim.client("karmada-1").await, "default")
}

/// The list resourceVersion: where a watch that saw everything so far resumes.
async fn current_rv(api: &Api<ConfigMap>) -> String {
    api.list(&ListParams::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("rv")
}

fn cm(name: &str, labels: serde_json::Value) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}),
    )
    .expect("configmap")
}

#[tokio::test]
async fn api_crud_with_conflicts() {
    let sim = Sim::start(1).await;
    let api = configmaps(&sim).await;
    let created = api
        .create(&PostParams::default(), &cm("a", json!({"app": "x"})))
        .await
        .expect("create");
    let rv1 = created.metadata.resource_version.clone().expect("rv");
    let listed = api
        .list(&ListParams::default().labels("app=x"))
        .await
        .expect("list");
    assert_eq!(listed.items.len(), 1);

    let mut changed = created.clone();
    changed.data = Some([("k".to_string(), "v2".to_string())].into());
    let replaced = api
        .replace("a", &PostParams::default(), &changed)
        .await
        .expect("replace");
    assert!(
        replaced
            .metadata
            .resource_version
            .as_deref()
            .expect("rv")
            .parse::<u64>()
            .expect("num")
            > rv1.parse::<u64>().expect("num")
    );
    // `changed` still carries rv1: a second replace is stale.
    match api.replace("a", &PostParams::default(), &changed).await {
        Err(kube::Error::Api(s)) => assert_eq!((s.code, s.reason.as_str()), (409, "Conflict")),
        other => panic!("stale replace must be 409, got {other:?}"),
    }
    let patched = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"extra": "1"}})),
        )
        .await
        .expect("patch");
    assert_eq!(
        patched
            .data
            .as_ref()
            .and_then(|d| d.get("extra"))
            .map(String::as_str),
        Some("1")
    );
    api.delete("a", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(api.get_opt("a").await.expect("get_opt").is_none());
}

#[tokio::test]
async fn reflector_tracks_adds_and_deletes() {
    let sim = Sim::start(1).await;
    let api = configmaps(&sim).await;
    let (reader, writer) = reflector::store();
    let stream =
        reflector(writer, watcher(api.clone(), watcher::Config::default())).applied_objects();
    let task = tokio::spawn(stream.for_each(|_| async {}));
    reader.wait_until_ready().await.expect("store ready");
    for n in ["r1", "r2", "r3"] {
        api.create(&PostParams::default(), &cm(n, json!({})))
            .await
            .expect("create");
    }
    eventually(
        Duration::from_secs(10),
        "three objects in the reflector",
        || async { (reader.state().len() == 3).then_some(()) },
    )
    .await;
    api.delete("r2", &DeleteParams::default())
        .await
        .expect("delete");
    eventually(
        Duration::from_secs(10),
        "r2 gone from the reflector",
        || async {
            let names: Vec<String> = reader
                .state()
                .iter()
                .filter_map(|c| c.metadata.name.clone())
                .collect();
            (names.len() == 2 && !names.contains(&"r2".to_string())).then_some(())
        },
    )
    .await;
    task.abort();
}

#[tokio::test]
async fn watch_resumes_from_a_resource_version() {
    let sim = Sim::start(1).await;
    let api = configmaps(&sim).await;
    api.create(&PostParams::default(), &cm("before", json!({})))
        .await
        .expect("create");
    let rv = current_rv(&api).await;
    api.create(&PostParams::default(), &cm("after1", json!({})))
        .await
        .expect("create");
    api.create(&PostParams::default(), &cm("after2", json!({})))
        .await
        .expect("create");
    // Changes made before the watch opened are replayed from history, in order.
    let mut stream = api
        .watch(&WatchParams::default().timeout(5), &rv)
        .await
        .expect("watch")
        .boxed();
    let mut names = Vec::new();
    while names.len() < 2 {
        match tokio::time::timeout(Duration::from_secs(10), stream.try_next())
            .await
            .expect("event in time")
            .expect("ok")
        {
            Some(WatchEvent::Added(c)) => names.push(c.metadata.name.expect("name")),
            Some(WatchEvent::Bookmark(_)) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(names, vec!["after1", "after2"]);
}

#[tokio::test]
async fn too_old_version_is_410_and_the_watcher_relists() {
    let sim = Sim::start(1).await;
    let api = configmaps(&sim).await;
    let old_rv = current_rv(&api).await;
    api.create(&PostParams::default(), &cm("x", json!({})))
        .await
        .expect("create");

    // A running watcher: compaction cuts it with 410, it relists and keeps tracking.
    let inits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (reader, writer) = reflector::store();
    let counter = inits.clone();
    let stream =
        reflector(writer, watcher(api.clone(), watcher::Config::default())).inspect_ok(move |ev| {
            if matches!(ev, watcher::Event::Init) {
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        });
    let task = tokio::spawn(stream.for_each(|_| async {}));
    reader.wait_until_ready().await.expect("ready");

    let (code, _) = sim.set_fault("karmada-1", json!({"mode": "compact"})).await;
    assert_eq!(code, 200);
    match api
        .watch(&WatchParams::default().timeout(5), &old_rv)
        .await
        .expect("watch opens")
        .boxed()
        .try_next()
        .await
    {
        Ok(Some(WatchEvent::Error(e))) => assert_eq!(e.code, 410),
        other => {
            panic!("watch from a compacted version must yield a 410 error event, got {other:?}")
        }
    }
    sim.clear_fault("karmada-1").await;
    eventually(
        Duration::from_secs(15),
        "the watcher to relist after 410",
        || async { (inits.load(std::sync::atomic::Ordering::SeqCst) >= 2).then_some(()) },
    )
    .await;
    api.create(&PostParams::default(), &cm("after-compaction", json!({})))
        .await
        .expect("create");
    eventually(
        Duration::from_secs(15),
        "the relisted watcher to see new objects",
        || async {
            reader
                .state()
                .iter()
                .any(|c| c.metadata.name.as_deref() == Some("after-compaction"))
                .then_some(())
        },
    )
    .await;
    task.abort();
}

#[tokio::test]
async fn bookmarks_carry_the_current_version() {
    let sim = Sim::start(1).await;
    let api = configmaps(&sim).await;
    let rv = current_rv(&api).await;
    // Another resource changes meanwhile: the bookmark moves past it.
    let other: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(sim.client("karmada-1").await, "default");
    let mut stream = api
        .watch(&WatchParams::default().timeout(10), &rv)
        .await
        .expect("watch")
        .boxed();
    other
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "s"}})).expect("secret"),
        )
        .await
        .expect("create");
    let bookmark = loop {
        match tokio::time::timeout(Duration::from_secs(10), stream.try_next())
            .await
            .expect("bookmark in time")
            .expect("ok")
        {
            Some(WatchEvent::Bookmark(b))
                if b.metadata.resource_version.parse::<u64>().ok() > rv.parse().ok() =>
            {
                break b
            }
            Some(WatchEvent::Bookmark(_)) => continue,
            other => panic!("expected only bookmarks, got {other:?}"),
        }
    };
    assert!(
        bookmark
            .metadata
            .resource_version
            .parse::<u64>()
            .expect("num")
            > rv.parse::<u64>().expect("num")
    );
}

#[tokio::test]
async fn pagination_with_limit_and_continue() {
    let sim = Sim::start(1).await;
    let api = configmaps(&sim).await;
    for i in 0..25 {
        api.create(
            &PostParams::default(),
            &cm(&format!("p{i:02}"), json!({"page": "yes"})),
        )
        .await
        .expect("create");
    }
    let mut names = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut lp = ListParams::default().labels("page=yes").limit(10);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = api.list(&lp).await.expect("page");
        pages += 1;
        names.extend(page.items.iter().filter_map(|c| c.metadata.name.clone()));
        token = page.metadata.continue_.filter(|c| !c.is_empty());
        if token.is_none() {
            break;
        }
        assert!(page.metadata.remaining_item_count.is_some());
    }
    assert_eq!(pages, 3);
    assert_eq!(names.len(), 25);
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "pages come in a stable order");
}

#[tokio::test]
async fn streaming_list_initial_events() {
    let sim = Sim::start(1).await;
    let api = configmaps(&sim).await;
    api.create(&PostParams::default(), &cm("s1", json!({})))
        .await
        .expect("create");
    let (reader, writer) = reflector::store();
    let stream = reflector(
        writer,
        watcher(api.clone(), watcher::Config::default().streaming_lists()),
    )
    .applied_objects();
    let task = tokio::spawn(stream.for_each(|_| async {}));
    tokio::time::timeout(Duration::from_secs(10), reader.wait_until_ready())
        .await
        .expect("ready in time")
        .expect("ready");
    assert_eq!(reader.state().len(), 1);
    task.abort();
}
