//! The compile progress bar: drawn on stderr when it is a terminal (and `TORCHTRT_LOG` is
//! below `info`, which logs each stage with its time instead).

use std::io::IsTerminal;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

/// A bar over named stages, or nothing when stderr is not a terminal.
pub struct Progress {
    bar: Option<ProgressBar>,
    current: Option<(&'static str, Instant)>,
}

impl Progress {
    /// A bar over `total` stages.
    pub fn stages(total: u64) -> Progress {
        let bar = (std::io::stderr().is_terminal() && !crate::logging::verbose()).then(|| {
            let bar = ProgressBar::new(total);
            if let Ok(style) =
                ProgressStyle::with_template("{spinner} [{pos}/{len}] {msg} ({elapsed})")
            {
                bar.set_style(style);
            }
            bar.enable_steady_tick(std::time::Duration::from_millis(100));
            bar
        });
        Progress { bar, current: None }
    }

    /// Starts stage `name`, counting the previous one as done.
    pub fn stage(&mut self, name: &'static str) {
        self.log_done();
        self.current = Some((name, Instant::now()));
        if let Some(bar) = &self.bar {
            if !bar.message().is_empty() {
                bar.inc(1);
            }
            bar.set_message(name);
        }
    }

    fn log_done(&mut self) {
        if let Some((name, start)) = self.current.take() {
            tracing::info!(
                stage = name,
                ms = start.elapsed().as_millis() as u64,
                "compile stage done"
            );
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.log_done();
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
