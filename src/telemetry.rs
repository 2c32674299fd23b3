//! Logging through `tracing`: human-readable by default, JSON with `--log-format json`.

use clap::{Args, ValueEnum};
use tracing_subscriber::EnvFilter;

#[derive(Debug, Clone, Copy, ValueEnum, Default)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

#[derive(Debug, Clone, Args)]
pub struct LogArgs {
    /// Log line format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "KAIRSHIP_LOG_FORMAT")]
    pub log_format: LogFormat,
    /// Log filter (tracing `EnvFilter` syntax); `RUST_LOG` works too.
    #[arg(long, global = true, env = "KAIRSHIP_LOG")]
    pub log: Option<String>,
}

/// `default`: the filter when neither `--log` nor `RUST_LOG` says otherwise.
pub fn init(args: &LogArgs, default: &str) {
    let filter = args
        .log
        .as_deref()
        .and_then(|f| EnvFilter::try_new(f).ok())
        .or_else(|| EnvFilter::try_from_default_env().ok())
        .unwrap_or_else(|| EnvFilter::new(default));
    // Colours only on a terminal: a log file or a pod's log keeps plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    // A second init (tests) keeps the first subscriber.
    let _ = match args.log_format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}
