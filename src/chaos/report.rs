//! What an experiment measured, the goals it is checked against, and the report: a table
//! for the terminal, JSON for machines, and an SVG timeline for people.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::load::Sample;
use super::spec::Timing;

#[derive(Debug, Clone, Serialize)]
pub struct Goal {
    pub name: String,
    pub target: String,
    pub actual: String,
    pub ok: bool,
    /// Whether missing it fails the experiment; a latency goal of the short profile is
    /// reported only (the test suite's machines are shared and noisy).
    pub enforced: bool,
}

/// One second of the run: healthy p99 and the victim's phase.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    pub t_s: u32,
    pub healthy_p99_ms: Option<f64>,
    pub victim_phase: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ExperimentReport {
    pub name: String,
    pub description: String,
    pub victim: Option<String>,
    /// Why it did not run, when it did not.
    pub skipped: Option<String>,
    pub fault_start_s: f64,
    pub fault_end_s: f64,
    pub end_s: f64,
    pub healthy_requests: usize,
    pub healthy_errors: usize,
    pub healthy_p50_baseline_ms: f64,
    pub healthy_p99_baseline_ms: f64,
    pub healthy_p50_fault_ms: f64,
    pub healthy_p99_fault_ms: f64,
    pub victim_requests: usize,
    pub victim_errors: usize,
    pub healthy_watch_breaks: u64,
    pub detection_s: Option<f64>,
    pub recovery_s: Option<f64>,
    pub writes_acknowledged: usize,
    pub writes_lost: usize,
    pub healthy_actor_restarts: u32,
    pub victim_actor_restarts: u32,
    pub manager_restarts: u32,
    pub requests_shed: u64,
    /// The first errors seen, per instance.
    pub errors: BTreeMap<String, Vec<String>>,
    pub series: Vec<Point>,
    pub goals: Vec<Goal>,
    pub passed: bool,
}

/// The measurements an experiment hands over for reporting.
pub struct Measured<'a> {
    pub samples: &'a [Sample],
    /// Index of the victim among the instances, if it is one of them.
    pub victim: Option<u16>,
    pub fault_ms: (u32, u32),
    pub end_ms: u32,
    /// (ms, phase) of the victim, sampled through the API.
    pub phases: &'a [(u32, String)],
    pub expected_phase: Option<&'a str>,
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * (sorted.len() as f64)).ceil() as usize;
    f64::from(sorted[rank.clamp(1, sorted.len()) - 1]) / 1000.0
}

fn latencies(samples: &[&Sample]) -> Vec<u32> {
    let mut v: Vec<u32> = samples
        .iter()
        .filter(|s| s.ok)
        .map(|s| s.latency_us)
        .collect();
    v.sort_unstable();
    v
}

impl ExperimentReport {
    /// Fills the figures from the samples and checks the goals of `timing`.
    pub fn measure(&mut self, m: &Measured, timing: &Timing) {
        let healthy: Vec<&Sample> = m
            .samples
            .iter()
            .filter(|s| Some(s.instance) != m.victim)
            .collect();
        let (fs, fe) = m.fault_ms;
        let base: Vec<&Sample> = healthy.iter().copied().filter(|s| s.t_ms < fs).collect();
        let during: Vec<&Sample> = healthy
            .iter()
            .copied()
            .filter(|s| s.t_ms >= fs && s.t_ms < fe)
            .collect();
        let (b, d) = (latencies(&base), latencies(&during));
        self.fault_start_s = f64::from(fs) / 1000.0;
        self.fault_end_s = f64::from(fe) / 1000.0;
        self.end_s = f64::from(m.end_ms) / 1000.0;
        self.healthy_requests = healthy.len();
        self.healthy_errors = healthy.iter().filter(|s| !s.ok).count();
        self.healthy_p50_baseline_ms = percentile(&b, 50.0);
        self.healthy_p99_baseline_ms = percentile(&b, 99.0);
        self.healthy_p50_fault_ms = percentile(&d, 50.0);
        self.healthy_p99_fault_ms = percentile(&d, 99.0);
        let victim: Vec<&Sample> = m
            .samples
            .iter()
            .filter(|s| Some(s.instance) == m.victim)
            .collect();
        self.victim_requests = victim.len();
        self.victim_errors = victim.iter().filter(|s| !s.ok).count();
        if let Some(want) = m.expected_phase {
            self.detection_s = m
                .phases
                .iter()
                .find(|(t, p)| *t >= fs && p == want)
                .map(|(t, _)| f64::from(t - fs) / 1000.0);
        }
        // Recovery: from clearing the fault to Running after the last report of trouble.
        if let Some(last_bad) = m
            .phases
            .iter()
            .filter(|(t, p)| *t >= fs && p != "Running")
            .map(|(t, _)| *t)
            .max()
        {
            self.recovery_s = m
                .phases
                .iter()
                .find(|(t, p)| *t > last_bad && p == "Running")
                .map(|(t, _)| f64::from(t.saturating_sub(fe)) / 1000.0);
        }
        self.series = series(&healthy, m);
        self.check(m, timing);
    }

    fn check(&mut self, m: &Measured, timing: &Timing) {
        let mut goals = vec![
            Goal {
                name: "healthy errors".into(),
                target: "0".into(),
                actual: self.healthy_errors.to_string(),
                ok: self.healthy_errors == 0,
                enforced: true,
            },
            Goal {
                name: "healthy watches broken".into(),
                target: "0".into(),
                actual: self.healthy_watch_breaks.to_string(),
                ok: self.healthy_watch_breaks == 0,
                enforced: true,
            },
        ];
        let bound = (self.healthy_p99_baseline_ms * timing.p99_ratio).max(timing.p99_floor_ms);
        goals.push(Goal {
            name: "healthy p99 vs baseline".into(),
            target: if timing.p99_floor_ms > 0.0 {
                format!(
                    "<= {:.1}x or {:.0} ms",
                    timing.p99_ratio, timing.p99_floor_ms
                )
            } else {
                format!("<= {:.1}x", timing.p99_ratio)
            },
            actual: format!(
                "{:.1} / {:.1} ms ({:.2}x)",
                self.healthy_p99_fault_ms,
                self.healthy_p99_baseline_ms,
                self.healthy_p99_fault_ms / self.healthy_p99_baseline_ms.max(0.001)
            ),
            ok: self.healthy_p99_fault_ms <= bound,
            enforced: timing.enforce_p99,
        });
        if let Some(want) = m.expected_phase {
            goals.push(Goal {
                name: format!("victim reported {want}"),
                target: "<= 10 s".into(),
                actual: self.detection_s.map_or_else(
                    || format!("never (phases seen: {})", transitions(m.phases)),
                    |d| format!("{d:.1} s"),
                ),
                ok: self.detection_s.is_some_and(|d| d <= 10.0),
                enforced: true,
            });
        }
        if m.phases
            .iter()
            .any(|(t, p)| *t >= m.fault_ms.0 && p != "Running")
        {
            goals.push(Goal {
                name: "victim recovered".into(),
                target: "<= 10 s after clearing".into(),
                actual: self
                    .recovery_s
                    .map_or("not within the run".into(), |d| format!("{d:.1} s")),
                ok: self.recovery_s.is_some_and(|d| d <= 10.0),
                enforced: true,
            });
        }
        goals.push(Goal {
            name: "acknowledged writes lost".into(),
            target: "0".into(),
            actual: format!("{} of {}", self.writes_lost, self.writes_acknowledged),
            ok: self.writes_lost == 0,
            enforced: true,
        });
        goals.push(Goal {
            name: "healthy actor restarts".into(),
            target: "0".into(),
            actual: self.healthy_actor_restarts.to_string(),
            ok: self.healthy_actor_restarts == 0,
            enforced: true,
        });
        self.passed = goals.iter().all(|g| g.ok || !g.enforced);
        self.goals = goals;
    }
}

fn series(healthy: &[&Sample], m: &Measured) -> Vec<Point> {
    let seconds = m.end_ms / 1000 + 1;
    let mut buckets: Vec<Vec<u32>> = vec![Vec::new(); seconds as usize];
    for s in healthy.iter().filter(|s| s.ok) {
        if let Some(b) = buckets.get_mut((s.t_ms / 1000) as usize) {
            b.push(s.latency_us);
        }
    }
    buckets
        .into_iter()
        .enumerate()
        .map(|(i, mut b)| {
            b.sort_unstable();
            let t = u32::try_from(i).unwrap_or(u32::MAX);
            Point {
                t_s: t,
                healthy_p99_ms: (!b.is_empty()).then(|| percentile(&b, 99.0)),
                victim_phase: m
                    .phases
                    .iter()
                    .rev()
                    .find(|(ms, _)| *ms <= (t + 1) * 1000)
                    .map(|(_, p)| p.clone()),
            }
        })
        .collect()
}

/// The terminal table.
pub fn table(reports: &[ExperimentReport]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<18} {:>7} {:>5} {:>17} {:>6} {:>7} {:>8} {:>9} {:>5} {:>7}  RESULT",
        "EXPERIMENT",
        "HEALTHY",
        "ERRS",
        "P99 BASE/FAULT ms",
        "RATIO",
        "WATCHES",
        "DETECT",
        "RECOVER",
        "LOST",
        "RESTART"
    );
    for r in reports {
        if let Some(why) = &r.skipped {
            let _ = writeln!(out, "{:<18} skipped: {why}", r.name);
            continue;
        }
        let secs = |v: Option<f64>| v.map_or("-".to_string(), |s| format!("{s:.1}s"));
        let failed: Vec<&str> = r
            .goals
            .iter()
            .filter(|g| !g.ok && g.enforced)
            .map(|g| g.name.as_str())
            .collect();
        let noted: Vec<&str> = r
            .goals
            .iter()
            .filter(|g| !g.ok && !g.enforced)
            .map(|g| g.name.as_str())
            .collect();
        let _ = writeln!(
            out,
            "{:<18} {:>7} {:>5} {:>17} {:>6} {:>7} {:>8} {:>9} {:>5} {:>7}  {}",
            r.name,
            r.healthy_requests,
            r.healthy_errors,
            format!(
                "{:.1}/{:.1}",
                r.healthy_p99_baseline_ms, r.healthy_p99_fault_ms
            ),
            format!(
                "{:.2}x",
                r.healthy_p99_fault_ms / r.healthy_p99_baseline_ms.max(0.001)
            ),
            r.healthy_watch_breaks,
            secs(r.detection_s),
            secs(r.recovery_s),
            r.writes_lost,
            r.healthy_actor_restarts,
            match (failed.is_empty(), noted.is_empty()) {
                (true, true) => "ok".to_string(),
                (true, false) => format!("ok (missed, reported only: {})", noted.join(", ")),
                _ => format!("FAILED: {}", failed.join(", ")),
            }
        );
    }
    out
}

fn phase_color(p: &str) -> &'static str {
    match p {
        "Running" => "#2e9d5b",
        "Unreachable" => "#d64541",
        "Degraded" => "#e08a1e",
        _ => "#9aa0a6",
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// One panel per experiment: healthy p99 per second, the fault window shaded, the
/// victim's phase as a band along the bottom.
pub fn svg(reports: &[ExperimentReport]) -> String {
    let ran: Vec<&ExperimentReport> = reports.iter().filter(|r| r.skipped.is_none()).collect();
    let (w, ph, left, plot_w) = (860.0_f64, 150.0_f64, 60.0_f64, 760.0_f64);
    let height = ph * ran.len().max(1) as f64 + 30.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r##"<rect width="100%" height="100%" fill="#ffffff"/>"##);
    let _ = writeln!(
        s,
        r##"<text x="{left}" y="18" font-size="13">Kairship chaos report: healthy instances' p99 latency per second (line), fault window (shaded), victim phase (band)</text>"##
    );
    for (i, r) in ran.iter().enumerate() {
        let top = 30.0 + ph * i as f64;
        let plot_h = ph - 55.0;
        let end = r.end_s.max(1.0);
        let x = |t: f64| left + plot_w * (t / end).clamp(0.0, 1.0);
        let max = r
            .series
            .iter()
            .filter_map(|p| p.healthy_p99_ms)
            .fold(1.0_f64, f64::max)
            * 1.1;
        let y = |v: f64| top + 18.0 + plot_h * (1.0 - v / max);
        let _ = writeln!(
            s,
            r##"<text x="{left}" y="{}" font-weight="bold">{} {}</text>"##,
            top + 12.0,
            escape(&r.name),
            if r.passed {
                "(goals met)"
            } else {
                "(goal missed)"
            }
        );
        let _ = writeln!(
            s,
            r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{plot_h:.1}" fill="#f6d5d5"/>"##,
            x(r.fault_start_s),
            top + 18.0,
            (x(r.fault_end_s) - x(r.fault_start_s)).max(1.0)
        );
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#888"/>"##,
            top + 18.0 + plot_h,
            left + plot_w,
            top + 18.0 + plot_h
        );
        let _ = writeln!(
            s,
            r##"<text x="4" y="{:.1}">{max:.0} ms</text><text x="4" y="{:.1}">0</text>"##,
            top + 28.0,
            top + 18.0 + plot_h
        );
        let points: Vec<String> = r
            .series
            .iter()
            .filter_map(|p| {
                p.healthy_p99_ms
                    .map(|v| format!("{:.1},{:.1}", x(f64::from(p.t_s) + 0.5), y(v)))
            })
            .collect();
        let _ = writeln!(
            s,
            r##"<polyline fill="none" stroke="#1f5fbf" stroke-width="1.5" points="{}"/>"##,
            points.join(" ")
        );
        let band = top + 22.0 + plot_h;
        for p in &r.series {
            if let Some(phase) = &p.victim_phase {
                let _ = writeln!(
                    s,
                    r##"<rect x="{:.1}" y="{band:.1}" width="{:.1}" height="8" fill="{}"><title>{}s {}</title></rect>"##,
                    x(f64::from(p.t_s)),
                    (x(f64::from(p.t_s) + 1.0) - x(f64::from(p.t_s))).max(0.5),
                    phase_color(phase),
                    p.t_s,
                    escape(phase)
                );
            }
        }
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="end">{end:.0} s</text>"##,
            left + plot_w,
            band + 20.0
        );
    }
    s.push_str("</svg>\n");
    s
}

/// The victim's phase changes in words ("Running at 0.0 s, Pending at 12.3 s"), so that a
/// missed detection shows what was seen instead.
fn transitions(phases: &[(u32, String)]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut last: Option<&str> = None;
    for (t, p) in phases {
        if last != Some(p.as_str()) {
            out.push(format!("{p} at {:.1} s", f64::from(*t) / 1000.0));
            last = Some(p);
        }
    }
    match out.is_empty() {
        true => "none".into(),
        false => out.join(", "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chaos::load::Surface;
    use crate::chaos::spec::Profile;

    fn sample(t_ms: u32, instance: u16, ms: u32, ok: bool) -> Sample {
        Sample {
            t_ms,
            instance,
            surface: Surface::Grpc,
            latency_us: ms * 1000,
            ok,
        }
    }

    #[test]
    fn goals_follow_the_figures() {
        let mut samples = Vec::new();
        for t in (0..10_000).step_by(100) {
            samples.push(sample(t, 0, 5, true));
            samples.push(sample(t, 1, 900, t < 3000));
        }
        let phases = vec![
            (0, "Running".to_string()),
            (4500, "Unreachable".to_string()),
            (8500, "Running".to_string()),
        ];
        let m = Measured {
            samples: &samples,
            victim: Some(1),
            fault_ms: (3000, 7000),
            end_ms: 10_000,
            phases: &phases,
            expected_phase: Some("Unreachable"),
        };
        let mut r = ExperimentReport::default();
        r.measure(&m, &Profile::Full.timing());
        assert_eq!(r.healthy_errors, 0);
        assert_eq!(r.victim_errors, 70);
        assert_eq!(r.detection_s, Some(1.5));
        assert_eq!(r.recovery_s, Some(1.5));
        assert!(r.passed, "{:?}", r.goals);
        r.healthy_watch_breaks = 1;
        r.check(&m, &Profile::Full.timing());
        assert!(!r.passed);
        let text = table(std::slice::from_ref(&r));
        assert!(text.contains("FAILED: healthy watches broken"), "{text}");
        let picture = svg(&[r]);
        assert!(picture.starts_with("<svg") && picture.contains("polyline"));
    }
}
