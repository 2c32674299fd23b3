//! `kairship ctl rollouts plan`: what a fleet rollout would do, before anything moves:
//! its waves, each instance's release now and after, when it may next be changed, and
//! what blocks it.

use clap::{Args, Subcommand};
use serde_json::Value;

use super::{print, s, status, Conn, Output};
use crate::proto::{self, rollout_service_client::RolloutServiceClient};
use crate::Error;

#[derive(Debug, Subcommand)]
pub enum RolloutsCmd {
    /// The plan of a rollout to --version: waves, windows, blocking findings.
    Plan(PlanArgs),
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The Karmada release the instances move to (v1.18.2).
    #[arg(long)]
    pub version: String,
    /// Only instances with these labels (`env=prod`, repeat or comma-separate).
    #[arg(short = 'l', long = "selector", value_delimiter = ',')]
    pub selector: Vec<String>,
    /// Instances changed first, alone.
    #[arg(long, default_value_t = 1)]
    pub canary: u32,
    /// Then waves bringing the share of the fleet done to each (rising, ending at 100).
    #[arg(long, value_delimiter = ',', default_value = "50,100")]
    pub percentages: Vec<u32>,
    /// Plan as if every maintenance window were open.
    #[arg(long)]
    pub ignore_windows: bool,
}

fn rows(j: &Value) -> Vec<Vec<String>> {
    let mut rows = vec![vec![
        "WAVE".into(),
        "INSTANCE".into(),
        "FROM".into(),
        "TO".into(),
        "NEXT WINDOW".into(),
        "BLOCKING / NOTES".into(),
    ]];
    for (w, wave) in j["waves"].as_array().into_iter().flatten().enumerate() {
        for i in wave["instances"].as_array().into_iter().flatten() {
            let words = |k: &str| -> Vec<String> {
                i[k].as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            };
            let blocking = words("blocking");
            let what = match blocking.is_empty() {
                false => format!("BLOCKED: {}", blocking.join("; ")),
                true => words("notes").join("; "),
            };
            rows.push(vec![
                (w + 1).to_string(),
                s(i, "/name"),
                s(i, "/fromVersion"),
                s(i, "/toVersion"),
                s(i, "/nextWindow"),
                what,
            ]);
        }
    }
    let blocked = j["blocked"].as_i64().unwrap_or(0);
    if blocked > 0 {
        rows.push(vec![format!(
            "({blocked} instance(s) blocked: the rollout would not start unless forced)"
        )]);
    }
    rows
}

pub(crate) async fn run(conn: &Conn, out: Output, cmd: &RolloutsCmd) -> Result<(), Error> {
    let RolloutsCmd::Plan(args) = cmd;
    let match_labels = args
        .selector
        .iter()
        .map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| Error::Usage(format!("--selector {kv:?}: expected key=value")))
        })
        .collect::<Result<_, _>>()?;
    let spec = proto::RolloutSpec {
        karmada_version: args.version.clone(),
        match_labels,
        canary: args.canary,
        percentages: args.percentages.clone(),
        ignore_windows: args.ignore_windows,
        ..Default::default()
    };
    let mut c = RolloutServiceClient::new(conn.channel.clone());
    let plan = c
        .plan_rollout(conn.request(proto::PlanRolloutRequest { spec: Some(spec) }))
        .await
        .map_err(status)?
        .into_inner();
    print(out, "kairship.v1alpha1.RolloutPlan", &plan, rows)
}
