//! `kairship ctl search`: one query across the fleet, e.g. where `app=payments` runs.

use clap::Args;
use serde_json::Value;

use super::{n, print, s, status, Conn, Output};
use crate::proto::{self, search_service_client::SearchServiceClient};
use crate::Error;

#[derive(Debug, Args)]
pub struct SearchArgs {
    /// Label selector, e.g. `app=payments`.
    #[arg(short = 'l', long, default_value = "")]
    pub selector: String,
    /// Kinds to search (repeat); default every cached kind.
    #[arg(short, long = "kind")]
    pub kinds: Vec<String>,
    /// Only this namespace.
    #[arg(short, long, default_value = "")]
    pub namespace: String,
    /// A name, exact unless --substring.
    #[arg(long, default_value = "")]
    pub name: String,
    /// Match --name anywhere in the object's name.
    #[arg(long)]
    pub substring: bool,
    /// Instances to search (repeat); default every instance you may view.
    #[arg(short, long = "instance")]
    pub instances: Vec<String>,
    /// Label selector over the Instances' labels.
    #[arg(long, default_value = "")]
    pub instance_selector: String,
    #[arg(long, default_value_t = 0)]
    pub page_size: i32,
    #[arg(long, default_value = "")]
    pub page_token: String,
}

fn rows(j: &Value) -> Vec<Vec<String>> {
    let mut rows = vec![vec![
        "INSTANCE".into(),
        "KIND".into(),
        "NAMESPACE".into(),
        "NAME".into(),
        "READY".into(),
        "CLUSTERS".into(),
    ]];
    for h in j["hits"].as_array().into_iter().flatten() {
        let clusters: Vec<String> = h
            .pointer("/placement/clusters")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| format!("{}:{}", s(c, "/name"), n(c, "/replicas")))
            .collect();
        let ready = match h.get("placement") {
            Some(_) => format!("{}/{}", n(h, "/readyReplicas"), n(h, "/replicas")),
            None => String::new(),
        };
        rows.push(vec![
            s(h, "/instance"),
            s(h, "/kind"),
            s(h, "/namespace"),
            s(h, "/name"),
            ready,
            clusters.join(" "),
        ]);
    }
    let mut notes = Vec::new();
    if j["filtered"] == true {
        notes.push(
            "(some objects were left out: an instance does not let you list them)".to_string(),
        );
    }
    if let Some(u) = j["unavailableInstances"]
        .as_array()
        .filter(|u| !u.is_empty())
    {
        let names: Vec<&str> = u.iter().filter_map(Value::as_str).collect();
        notes.push(format!("(not searched now: {})", names.join(", ")));
    }
    if let Some(t) = j["nextPageToken"].as_str().filter(|t| !t.is_empty()) {
        notes.push(format!("(more: --page-token {t})"));
    }
    rows.extend(notes.into_iter().map(|n| vec![n]));
    rows
}

pub(crate) async fn run(conn: &Conn, out: Output, args: &SearchArgs) -> Result<(), Error> {
    let mut c = SearchServiceClient::new(conn.channel.clone());
    let req = proto::SearchRequest {
        kinds: args.kinds.clone(),
        label_selector: args.selector.clone(),
        namespace: args.namespace.clone(),
        name: args.name.clone(),
        name_match: match args.substring {
            true => proto::NameMatch::Substring as i32,
            false => proto::NameMatch::Exact as i32,
        },
        instances: args.instances.clone(),
        instance_selector: args.instance_selector.clone(),
        page_size: args.page_size,
        page_token: args.page_token.clone(),
    };
    let r = c
        .search(conn.request(req))
        .await
        .map_err(status)?
        .into_inner();
    print(out, "kairship.v1alpha1.SearchResponse", &r, rows)
}
