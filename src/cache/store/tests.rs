use super::*;
use crate::cache::feed::EventType;

fn obj(ns: &str, name: &str, rv: u64) -> RawObject {
    labelled(ns, name, rv, serde_json::Value::Null)
}

#[test]
fn relists_replace_the_objects_and_reset_watchers() {
    let store = ObjectStore::default();
    store.apply(watcher::Event::Init);
    store.apply(watcher::Event::InitApply(obj("b", "x", 5)));
    store.apply(watcher::Event::InitApply(obj("a", "y", 3)));
    assert!(
        store.is_empty(),
        "served from the old objects until the list completes"
    );
    store.apply(watcher::Event::InitDone);
    let names: Vec<_> = store
        .state()
        .iter()
        .map(|o| (o.namespace().map(String::from), o.name().to_string()))
        .collect();
    assert_eq!(
        names,
        [
            (Some("a".to_string()), "y".to_string()),
            (Some("b".to_string()), "x".to_string())
        ]
    );
    assert_eq!(store.feed().last_rv(), 5);
    let mut sub = store.subscribe();
    store.apply(watcher::Event::Init);
    store.apply(watcher::Event::InitDone);
    assert!(store.is_empty());
    assert!(matches!(sub.changes.try_recv(), Ok(FeedEvent::Reset)));
}

#[test]
fn changes_carry_what_watchers_knew_and_share_their_lines() {
    let store = ObjectStore::default();
    store.apply(watcher::Event::Init);
    store.apply(watcher::Event::InitDone);
    let mut sub = store.subscribe();
    store.apply(watcher::Event::Apply(obj("a", "x", 7)));
    store.apply(watcher::Event::Apply(obj("a", "x", 9)));
    store.apply(watcher::Event::Delete(obj("a", "x", 11)));
    let Ok(FeedEvent::Change(added)) = sub.changes.try_recv() else {
        panic!("a change")
    };
    assert!(added.prev.is_none() && !added.deleted);
    let Ok(FeedEvent::Change(modified)) = sub.changes.try_recv() else {
        panic!("a change")
    };
    assert_eq!(
        modified.prev.as_ref().map(|p| p.resource_version()),
        Some(7)
    );
    let a = modified.json_line(EventType::Modified);
    let b = modified.json_line(EventType::Modified);
    assert_eq!(a.as_ptr(), b.as_ptr(), "encoded once, shared");
    assert!(a.starts_with(b"{\"type\":\"MODIFIED\",\"object\":{\"apiVersion\":\"v1\""));
    let Ok(FeedEvent::Change(deleted)) = sub.changes.try_recv() else {
        panic!("a change")
    };
    assert!(deleted.deleted);
    assert_eq!(store.feed().last_rv(), 11);
    assert!(store.is_empty());
}

fn labelled(ns: &str, name: &str, rv: u64, labels: serde_json::Value) -> RawObject {
    let o = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "resourceVersion": rv.to_string(), "labels": labels}});
    RawObject::from_json(&o.to_string()).expect("object")
}

fn names(s: &Selected) -> Vec<String> {
    s.objects
        .iter()
        .map(|o| format!("{}/{}", o.namespace().unwrap_or_default(), o.name()))
        .collect()
}

#[test]
fn label_selected_reads_follow_every_change_in_list_order() {
    let store = ObjectStore::default();
    store.apply(watcher::Event::Init);
    for (ns, name, tier) in [("b", "x", "web"), ("a", "z", "web"), ("a", "y", "db")] {
        store.apply(watcher::Event::InitApply(labelled(
            ns,
            name,
            1,
            serde_json::json!({"tier": tier, "id": name}),
        )));
    }
    store.apply(watcher::Event::InitDone);
    let web = |after, limit| store.select(after, limit, Some(("tier", "web")), |_| true);
    assert_eq!(names(&web(None, None)), ["a/z", "b/x"]);
    // Paging through the index: from a position, with what remains counted.
    let first = web(None, Some(1));
    assert_eq!((names(&first), first.remaining), (vec!["a/z".into()], 1));
    assert_eq!(names(&web(Some(("a", "z")), None)), ["b/x"]);
    // A relabelled object moves between values; a new one lands in order.
    store.apply(watcher::Event::Apply(labelled(
        "a",
        "y",
        2,
        serde_json::json!({"tier": "web", "id": "y"}),
    )));
    store.apply(watcher::Event::Apply(labelled(
        "a",
        "z",
        3,
        serde_json::json!({"tier": "db", "id": "z"}),
    )));
    store.apply(watcher::Event::Apply(labelled(
        "a",
        "w",
        4,
        serde_json::json!({"tier": "web"}),
    )));
    assert_eq!(names(&web(None, None)), ["a/w", "a/y", "b/x"]);
    let db = store.select(None, None, Some(("tier", "db")), |_| true);
    assert_eq!(names(&db), ["a/z"]);
    // Deleted objects leave the index, and values nobody has any more with them.
    store.apply(watcher::Event::Delete(labelled(
        "b",
        "x",
        5,
        serde_json::json!({}),
    )));
    assert_eq!(names(&web(None, None)), ["a/w", "a/y"]);
    assert!(!store.0.state.read().by_label["id"].contains_key("x"));
    let unknown = store.select(None, None, Some(("tier", "cache")), |_| true);
    assert!(unknown.objects.is_empty());
    // The filter still applies to the candidates, and the index equals a full scan.
    let scan = store.select(None, None, None, |o| o.label("tier") == Some("web"));
    assert_eq!(names(&scan), names(&web(None, None)));
    assert_eq!(web(None, None).version, 5);
}

#[test]
fn namespaces_are_shared_between_objects() {
    let store = ObjectStore::default();
    store.apply(watcher::Event::Init);
    store.apply(watcher::Event::InitApply(obj("prod", "a", 1)));
    store.apply(watcher::Event::InitApply(obj("prod", "b", 2)));
    store.apply(watcher::Event::InitDone);
    let objects = store.state();
    let (a, b) = (&objects[0], &objects[1]);
    assert!(std::ptr::eq(
        a.namespace().expect("ns").as_ptr(),
        b.namespace().expect("ns").as_ptr()
    ));
    assert_eq!(store.namespaces(), ["prod"]);
    assert!(store.get(Some("prod"), "b").is_some());
    assert!(store.get(None, "b").is_none());
}
