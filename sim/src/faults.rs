//! Per-API-server fault injection, as pinned in ../shared/DESIGN.md:
//! `{"mode": "down" | "latency" | "errors" | "drop-watches" | "compact", "latency_ms": n, "error_rate": 0.0-1.0}`.
//!
//! - `down`: new connections are reset and open ones (watches included) are cut.
//! - `latency`: every request waits `latency_ms` before it is answered.
//! - `errors`: a fraction `error_rate` of requests answer 500 or 503.
//! - `drop-watches`: open watches are cut now, and new ones within a second while it stands.
//! - `compact`: history is dropped now and open watches get `410 Gone`, so clients relist.

use std::time::Duration;

use rand::Rng;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use kairship_wire::status::ApiError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultMode {
    Down,
    Latency,
    Errors,
    DropWatches,
    Compact,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    pub mode: FaultMode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_rate: Option<f64>,
}

/// Upper bound on injected latency, so a typo cannot hang a test for hours.
const MAX_LATENCY_MS: u64 = 600_000;

impl Fault {
    /// Checks the fields the mode needs, naming the one that is wrong.
    pub fn validate(&self) -> Result<(), String> {
        match self.mode {
            FaultMode::Latency => match self.latency_ms {
                Some(ms) if ms > 0 && ms <= MAX_LATENCY_MS => Ok(()),
                Some(ms) => Err(format!(
                    "latency_ms must be between 1 and {MAX_LATENCY_MS}, got {ms}"
                )),
                None => Err("latency_ms is required with mode \"latency\"".into()),
            },
            FaultMode::Errors => match self.error_rate {
                Some(r) if r > 0.0 && r <= 1.0 => Ok(()),
                Some(r) => Err(format!("error_rate must be in (0.0, 1.0], got {r}")),
                None => Err("error_rate is required with mode \"errors\"".into()),
            },
            _ => Ok(()),
        }
    }
}

/// The fault currently applied to one API server, observable by its connections and watches.
#[derive(Debug)]
pub struct FaultState {
    tx: watch::Sender<Option<Fault>>,
}

impl Default for FaultState {
    fn default() -> Self {
        Self {
            tx: watch::channel(None).0,
        }
    }
}

/// What a request should suffer before it is handled.
pub enum Injection {
    None,
    Delay(Duration),
    Fail(ApiError),
}

impl FaultState {
    pub fn set(&self, fault: Option<Fault>) {
        self.tx.send_replace(fault);
    }

    pub fn current(&self) -> Option<Fault> {
        self.tx.borrow().clone()
    }

    pub fn subscribe(&self) -> watch::Receiver<Option<Fault>> {
        self.tx.subscribe()
    }

    pub fn is_down(&self) -> bool {
        matches!(&*self.tx.borrow(), Some(f) if f.mode == FaultMode::Down)
    }

    pub fn for_request(&self) -> Injection {
        match &*self.tx.borrow() {
            Some(Fault {
                mode: FaultMode::Latency,
                latency_ms: Some(ms),
                ..
            }) => Injection::Delay(Duration::from_millis(*ms)),
            Some(Fault {
                mode: FaultMode::Errors,
                error_rate: Some(rate),
                ..
            }) => {
                let mut rng = rand::rng();
                if rng.random_bool(rate.clamp(0.0, 1.0)) {
                    Injection::Fail(if rng.random_bool(0.5) {
                        ApiError::internal("injected fault: internal error")
                    } else {
                        ApiError::unavailable("injected fault: service unavailable")
                    })
                } else {
                    Injection::None
                }
            }
            _ => Injection::None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_pinned_shape_and_validates() {
        let f: Fault =
            serde_json::from_str(r#"{"mode":"latency","latency_ms":2000}"#).expect("parses");
        assert!(f.validate().is_ok());
        let f: Fault =
            serde_json::from_str(r#"{"mode":"errors","error_rate":1.5}"#).expect("parses");
        assert!(f
            .validate()
            .expect_err("out of range")
            .contains("error_rate"));
        assert!(serde_json::from_str::<Fault>(r#"{"mode":"sideways"}"#).is_err());
        let f: Fault = serde_json::from_str(r#"{"mode":"drop-watches"}"#).expect("parses");
        assert_eq!(f.mode, FaultMode::DropWatches);
    }

    #[test]
    fn errors_at_rate_one_always_fail() {
        let s = FaultState::default();
        s.set(Some(Fault {
            mode: FaultMode::Errors,
            latency_ms: None,
            error_rate: Some(1.0),
        }));
        for _ in 0..20 {
            assert!(
                matches!(s.for_request(), Injection::Fail(e) if e.code == 500 || e.code == 503)
            );
        }
    }
}
