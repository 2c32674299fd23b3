//! An admin of one instance kept from another's backups: reading, restoring and deleting
//! them, and deleting a Secret that is not a backup by naming it as one; every refusal
//! audited.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_of_one_instance_cannot_reach_anothers_backups() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(
        &tokens,
        "ops-token,ops,0,\"ops\"\none-token,one-admin,1,\"one\"\nviewer-token,viewer,2,\"viewers\"\n",
    )
    .expect("tokens");
    let auth = AuthConfig {
        token_file: Some(tokens),
        ..Default::default()
    };
    let api = Api::start_full(2, None, Some(auth)).await;
    let grants: KubeApi<InstanceRoleBinding> = KubeApi::all(api.env.host.clone());
    for (name, role, instances, group) in [
        ("ops", Role::Admin, "*", "ops"),
        ("one", Role::Admin, "karmada-1", "one"),
        ("viewers", Role::View, "*", "viewers"),
    ] {
        let spec = InstanceRoleBindingSpec {
            role,
            instances: vec![instances.into()],
            subjects: vec![Subject {
                kind: SubjectKind::Group,
                name: group.into(),
            }],
        };
        grants
            .create(
                &PostParams::default(),
                &InstanceRoleBinding::new(name, spec),
            )
            .await
            .expect("binding");
    }
    let as_user = |token: &'static str| {
        InstanceServiceClient::with_interceptor(
            api.channel.clone(),
            move |mut r: tonic::Request<()>| {
                let v = format!("Bearer {token}").parse().expect("header");
                r.metadata_mut().insert("authorization", v);
                Ok(r)
            },
        )
    };
    // ops backs up karmada-2.
    let mut ops = as_user("ops-token");
    let started = eventually(Duration::from_secs(10), "ops' grant seen", || {
        let mut ops = ops.clone();
        async move {
            ops.create_backup(CreateBackupRequest {
                name: "karmada-2".into(),
            })
            .await
            .ok()
        }
    })
    .await
    .into_inner();
    let done = eventually(Duration::from_secs(30), "the backup done", || {
        let mut ops = ops.clone();
        let name = started.name.clone();
        async move {
            let b = ops
                .get_backup(GetBackupRequest {
                    name: "karmada-2".into(),
                    backup: name,
                })
                .await
                .ok()?
                .into_inner();
            (b.phase == "Completed").then_some(b)
        }
    })
    .await;
    let _ = ops
        .list_backups(ListBackupsRequest {
            name: "karmada-2".into(),
        })
        .await;

    // karmada-1's admin: not karmada-2's backups, neither read nor restored into karmada-1.
    let mut one = as_user("one-token");
    eventually(Duration::from_secs(10), "one's grant seen", || {
        let mut one = one.clone();
        async move {
            one.list_backups(ListBackupsRequest {
                name: "karmada-1".into(),
            })
            .await
            .ok()
        }
    })
    .await;
    let read = one
        .get_backup(GetBackupRequest {
            name: "karmada-2".into(),
            backup: done.name.clone(),
        })
        .await
        .expect_err("not theirs");
    assert_eq!(read.code(), Code::PermissionDenied, "{read:?}");
    let through_own = one
        .get_backup(GetBackupRequest {
            name: "karmada-1".into(),
            backup: done.name.clone(),
        })
        .await
        .expect_err("not karmada-1's backup");
    assert_eq!(through_own.code(), Code::NotFound, "{through_own:?}");
    let restored = one
        .restore_backup(RestoreBackupRequest {
            name: "karmada-1".into(),
            backup: done.name.clone(),
            source_instance: "karmada-2".into(),
        })
        .await
        .expect_err("needs admin on karmada-2");
    assert_eq!(restored.code(), Code::PermissionDenied, "{restored:?}");
    assert!(restored.message().contains("karmada-2"), "{restored:?}");
    let delete = one
        .delete_backup(DeleteBackupRequest {
            name: "karmada-2".into(),
            backup: done.name.clone(),
        })
        .await
        .expect_err("not theirs");
    assert_eq!(delete.code(), Code::PermissionDenied, "{delete:?}");

    // Kairship may delete Secrets in its backup namespace: never one a request names that
    // is not a backup of that instance (here the instance's own kubeconfig Secret, and
    // a name in the backups' form).
    for secret in [
        "karmada-1-kubeconfig",
        "kairship-backup-karmada-1-kubeconfig",
    ] {
        let refused = one
            .delete_backup(DeleteBackupRequest {
                name: "karmada-1".into(),
                backup: secret.into(),
            })
            .await
            .expect_err("not a backup");
        assert_eq!(refused.code(), Code::NotFound, "{secret}: {refused:?}");
    }
    let secrets: KubeApi<k8s_openapi::api::core::v1::Secret> =
        KubeApi::namespaced(api.env.host.clone(), crate::harness::NS);
    secrets
        .get("karmada-1-kubeconfig")
        .await
        .expect("the kubeconfig Secret is still there");

    // A viewer lists backups but neither takes nor restores one.
    let mut viewer = as_user("viewer-token");
    viewer
        .list_backups(ListBackupsRequest {
            name: "karmada-2".into(),
        })
        .await
        .expect("a viewer lists");
    let take = viewer
        .create_backup(CreateBackupRequest {
            name: "karmada-2".into(),
        })
        .await
        .expect_err("viewers do not back up");
    assert_eq!(take.code(), Code::PermissionDenied, "{take:?}");

    // An admin of both restores one's backup into the other.
    let r = ops
        .restore_backup(RestoreBackupRequest {
            name: "karmada-1".into(),
            backup: done.name.clone(),
            source_instance: "karmada-2".into(),
        })
        .await
        .expect("ops restores")
        .into_inner();
    assert_eq!(r.failed, 0, "{r:?}");

    // Every refusal and the write are audited.
    for (user, verb, name, refused) in [
        ("one-admin", "get", done.name.as_str(), true),
        ("one-admin", "restore", done.name.as_str(), true),
        ("one-admin", "delete", done.name.as_str(), true),
        ("viewer", "create", "karmada-2", true),
        ("ops", "create", "karmada-2", false),
        ("ops", "restore", done.name.as_str(), false),
    ] {
        assert!(
            api.audited(user, "grpc", verb, "instances", name, refused),
            "{user} {verb} {name} audited: {:#?}",
            api.audit_events()
        );
    }
    api.stop().await;
}
