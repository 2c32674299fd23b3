//! `kairship ctl rollouts`: `plan` shows what a fleet rollout would do before anything
//! moves (its waves, each instance's release now and after, when it may next be changed,
//! what blocks it); `start` (or `create`) runs it as a FleetRollout; `list`, `get`, `pause`, `resume`
//! and `abort` follow and steer it.

use clap::{Args, Subcommand};
use serde_json::Value;

use super::{print, s, status, Conn, Output};
use crate::proto::{self, rollout_service_client::RolloutServiceClient};
use crate::Error;

#[derive(Debug, Subcommand)]
pub enum RolloutsCmd {
    /// The plan of a rollout to --version: waves, windows, blocking findings.
    Plan(PlanArgs),
    /// Starts a rollout to --version: each instance backed up, changed and soaked, wave
    /// by wave; the first failure halts it and rolls that instance back.
    #[command(visible_alias = "create")]
    Start(StartArgs),
    /// Every rollout, with its phase.
    List,
    /// One rollout: its phase and every instance's step.
    Get(NameArg),
    /// Nothing new starts; instances changing carry on.
    Pause(NameArg),
    Resume(NameArg),
    /// Stops for good: nothing new starts, what changed stays changed.
    Abort(NameArg),
}

#[derive(Debug, Args)]
pub struct NameArg {
    pub name: String,
}

#[derive(Debug, Args)]
pub struct StartArgs {
    /// The rollout's name.
    pub name: String,
    #[command(flatten)]
    pub plan: PlanArgs,
    /// Instances of a wave changing at once.
    #[arg(long, default_value_t = 1)]
    pub max_unavailable: u32,
    /// How long an instance stays Running after its change before it counts as done.
    #[arg(long, default_value_t = 300)]
    pub soak_seconds: u32,
    /// How long a change may take before the rollout halts.
    #[arg(long, default_value_t = 1800)]
    pub progress_deadline_seconds: u32,
    /// Start although some instances cannot take the change (they are left out).
    #[arg(long)]
    pub force: bool,
    /// Halt when more than this percentage of the requests through Kairship to an
    /// instance fail (5xx) while it soaks (100: never).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub max_failed_request_percent: u32,
    /// ... once it had at least this many requests while it soaks.
    #[arg(long, default_value_t = 20)]
    pub min_requests: u32,
    /// A Prometheus alert that halts it (repeatable; a prefix ending in `*` names several),
    /// when Kairship reads alerts (`kairship run --alerts-url`). Default: Kairship's own
    /// instance alerts and API errors.
    #[arg(
        long = "halt-on-alert",
        value_name = "ALERT",
        conflicts_with = "halt_on_no_alerts"
    )]
    pub halt_on_alerts: Vec<String>,
    /// Halt on no alert at all.
    #[arg(long)]
    pub halt_on_no_alerts: bool,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The Karmada release the instances move to (v1.18.2).
    #[arg(long, required_unless_present = "class", conflicts_with = "class")]
    pub version: Option<String>,
    /// Or an InstanceClass to roll out: its instances get its release and spec.
    #[arg(long)]
    pub class: Option<String>,
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
    for c in j["crdChanges"].as_array().into_iter().flatten() {
        let (from, to) = (s(c, "/fromVersion"), s(c, "/toVersion"));
        let changes: Vec<&str> = c["changes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let line = match (s(c, "/unknown"), changes.is_empty()) {
            (why, _) if !why.is_empty() => format!("not known: {why}"),
            (_, true) => "none".to_string(),
            (_, false) => changes.join("; "),
        };
        rows.push(vec![format!("CRD changes {from} -> {to}: {line}")]);
    }
    rows
}

fn spec_of(args: &PlanArgs) -> Result<proto::RolloutSpec, Error> {
    let match_labels = args
        .selector
        .iter()
        .map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| Error::Usage(format!("--selector {kv:?}: expected key=value")))
        })
        .collect::<Result<_, _>>()?;
    Ok(proto::RolloutSpec {
        karmada_version: args.version.clone().unwrap_or_default(),
        class_name: args.class.clone().unwrap_or_default(),
        match_labels,
        canary: args.canary,
        percentages: args.percentages.clone(),
        ignore_windows: args.ignore_windows,
        ..Default::default()
    })
}

fn list_rows(j: &Value) -> Vec<Vec<String>> {
    let mut rows = vec![vec![
        "NAME".into(),
        "VERSION".into(),
        "PHASE".into(),
        "DONE".into(),
        "REASON".into(),
    ]];
    for r in j["rollouts"].as_array().into_iter().flatten() {
        rows.push(summary(r));
    }
    rows
}

fn summary(r: &Value) -> Vec<String> {
    let all: Vec<&Value> = r["waves"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|w| w["instances"].as_array().into_iter().flatten())
        .collect();
    let done = all.iter().filter(|i| i["step"] == "Done").count();
    vec![
        s(r, "/name"),
        s(r, "/spec/karmadaVersion"),
        s(r, "/phase"),
        format!("{done}/{}", all.len()),
        s(r, "/reason"),
    ]
}

fn rollout_rows(r: &Value) -> Vec<Vec<String>> {
    let mut rows = list_rows(&serde_json::json!({"rollouts": [r]}));
    rows.push(vec![]);
    rows.push(vec![
        "WAVE".into(),
        "INSTANCE".into(),
        "STEP".into(),
        "SINCE".into(),
        "FROM".into(),
        "BACKUP".into(),
        "REASON".into(),
    ]);
    for (w, wave) in r["waves"].as_array().into_iter().flatten().enumerate() {
        for i in wave["instances"].as_array().into_iter().flatten() {
            rows.push(vec![
                (w + 1).to_string(),
                s(i, "/name"),
                s(i, "/step"),
                s(i, "/since"),
                s(i, "/fromVersion"),
                s(i, "/backup"),
                s(i, "/reason"),
            ]);
        }
    }
    rows
}

pub(crate) async fn run(conn: &Conn, out: Output, cmd: &RolloutsCmd) -> Result<(), Error> {
    let mut c = RolloutServiceClient::new(conn.channel.clone());
    let name = |n: &NameArg| {
        conn.request(proto::RolloutName {
            name: n.name.clone(),
        })
    };
    const ROLLOUT: &str = "kairship.v1alpha1.Rollout";
    match cmd {
        RolloutsCmd::Plan(args) => {
            let spec = spec_of(args)?;
            let plan = c
                .plan_rollout(conn.request(proto::PlanRolloutRequest { spec: Some(spec) }))
                .await
                .map_err(status)?
                .into_inner();
            print(out, "kairship.v1alpha1.RolloutPlan", &plan, rows)
        }
        RolloutsCmd::Start(args) => {
            let req = proto::StartRolloutRequest {
                name: args.name.clone(),
                spec: Some(spec_of(&args.plan)?),
                options: Some(proto::RolloutOptions {
                    max_unavailable: args.max_unavailable,
                    soak_seconds: args.soak_seconds,
                    progress_deadline_seconds: args.progress_deadline_seconds,
                    force: args.force,
                    max_failed_request_percent: args.max_failed_request_percent,
                    min_requests: args.min_requests,
                    halt_on_alerts: args.halt_on_alerts.clone(),
                    halt_on_no_alerts: args.halt_on_no_alerts,
                }),
            };
            let r = c
                .start_rollout(conn.request(req))
                .await
                .map_err(status)?
                .into_inner();
            print(out, ROLLOUT, &r, rollout_rows)
        }
        RolloutsCmd::List => {
            let list = c
                .list_rollouts(conn.request(proto::ListRolloutsRequest {}))
                .await
                .map_err(status)?
                .into_inner();
            print(
                out,
                "kairship.v1alpha1.ListRolloutsResponse",
                &list,
                list_rows,
            )
        }
        RolloutsCmd::Get(n) => {
            let r = c.get_rollout(name(n)).await.map_err(status)?.into_inner();
            print(out, ROLLOUT, &r, rollout_rows)
        }
        RolloutsCmd::Pause(n) => {
            let r = c.pause_rollout(name(n)).await.map_err(status)?.into_inner();
            print(out, ROLLOUT, &r, rollout_rows)
        }
        RolloutsCmd::Resume(n) => {
            let r = c
                .resume_rollout(name(n))
                .await
                .map_err(status)?
                .into_inner();
            print(out, ROLLOUT, &r, rollout_rows)
        }
        RolloutsCmd::Abort(n) => {
            let r = c.abort_rollout(name(n)).await.map_err(status)?.into_inner();
            print(out, ROLLOUT, &r, rollout_rows)
        }
    }
}
