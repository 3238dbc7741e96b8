//! Log output on stderr at the level `TORCHTRT_LOG` names (`error`, `warn` — the default —,
//! `info`, `debug`, `trace`, or `off`).

/// The environment variable that sets the level.
pub const LOG_ENV: &str = "TORCHTRT_LOG";

/// Installs the logger once, unless the process has one already.
pub fn init() {
    let level = match std::env::var(LOG_ENV)
        .unwrap_or_default()
        .to_ascii_lowercase()
        .as_str()
    {
        "off" | "none" => return,
        "error" => tracing::Level::ERROR,
        "info" => tracing::Level::INFO,
        "debug" => tracing::Level::DEBUG,
        "trace" => tracing::Level::TRACE,
        _ => tracing::Level::WARN,
    };
    let _ = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

/// Whether `info` messages are shown (then stages are logged, not drawn as a bar).
pub fn verbose() -> bool {
    tracing::enabled!(tracing::Level::INFO)
}
