//! Chaos experiments (`chaos/*.yaml`): a fault against one instance (or the host, or the
//! tree) while the others carry steady load through every surface; the report says
//! whether the others noticed. Run by `kairship chaos run`.

pub mod faults;
pub mod hostile;
pub mod leader_failover;
pub mod load;
pub mod report;
pub mod run;
pub mod spec;

use std::path::Path;

use report::ExperimentReport;

/// Writes `report.json` and `report.svg` into `dir`.
pub fn write_report(
    dir: &Path,
    profile: spec::Profile,
    reports: &[ExperimentReport],
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let json = serde_json::json!({
        "profile": profile,
        "passed": reports.iter().all(|r| r.passed || r.skipped.is_some()),
        "experiments": reports,
    });
    let text = serde_json::to_vec_pretty(&json).map_err(std::io::Error::other)?;
    std::fs::write(dir.join("report.json"), text)?;
    std::fs::write(dir.join("report.svg"), report::svg(reports))
}
