//! The latest chaos report (`report.json` and `report.svg` that `kairship chaos run` writes
//! into its state dir), for the console. It names every instance, so only callers who
//! hold a role on every instance may read it (the chain's rule for it).

use std::path::PathBuf;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::{header, HeaderValue};

use crate::api::answer::status_response;
use crate::error::ApiError;

pub const PATH: &str = "/chaos/{file}";

#[derive(Clone)]
pub struct Reports {
    /// Where `kairship chaos run --state-dir` writes; none when the server was not told.
    pub dir: Option<PathBuf>,
}

/// The two files a report has, and their content types.
fn content_type(file: &str) -> Option<&'static str> {
    match file {
        "report.json" => Some("application/json"),
        "report.svg" => Some("image/svg+xml"),
        _ => None,
    }
}

/// Behind the handler chain, whose rule (`chain::rules::http`) asks for a role on every
/// instance.
pub async fn file(State(reports): State<Reports>, Path(file): Path<String>) -> Response {
    let Some(kind) = content_type(&file) else {
        return status_response(&ApiError::NotFound(format!(
            "no chaos report file {file:?}: there are report.json and report.svg"
        )));
    };
    let Some(dir) = reports.dir.as_ref() else {
        return status_response(&ApiError::NotFound(
            "no chaos report: this server was started without --chaos-report-dir".into(),
        ));
    };
    let path = dir.join(&file);
    match tokio::fs::read(&path).await {
        Ok(bytes) => {
            let mut r = bytes.into_response();
            r.headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
            r.headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            r
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            status_response(&ApiError::NotFound(format!(
                "no chaos report yet in {}: run `kairship chaos run --state-dir {}`",
                dir.display(),
                dir.display()
            )))
        }
        Err(e) => status_response(&ApiError::Unavailable(format!(
            "reading {}: {e}",
            path.display()
        ))),
    }
}
