//! Progress bars for long work (compile stages, bench iterations), drawn on stderr only
//! when both stdout and stderr are terminals and neither `-q` nor `-v` is given; with `-v`
//! each stage is logged with its time instead.

use std::cell::Cell;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Decides once, from the flags and the terminals, whether bars are drawn.
pub fn init(quiet: bool, verbose: u8) {
    let tty = std::io::stdout().is_terminal() && std::io::stderr().is_terminal();
    ENABLED.store(tty && !quiet && verbose == 0, Ordering::Relaxed);
}

/// A bar, or nothing when bars are off. Stages are also logged (`-v`) with their times.
pub struct Progress {
    bar: Option<ProgressBar>,
    current: Cell<Option<(&'static str, Instant)>>,
}

impl Progress {
    /// A bar over named stages; [`Progress::stage`] moves to the next one.
    pub fn stages(total: usize) -> Progress {
        Progress::new(total, "{spinner} [{pos}/{len}] {msg} ({elapsed})")
    }

    /// A bar over `n` iterations of `what`.
    pub fn iterations(n: usize, what: &str) -> Progress {
        let p = Progress::new(n, "{msg} [{bar:30}] {pos}/{len} ({elapsed}, {eta} left)");
        p.message(what);
        p
    }

    fn new(total: usize, template: &str) -> Progress {
        if !ENABLED.load(Ordering::Relaxed) {
            return Progress {
                bar: None,
                current: Cell::new(None),
            };
        }
        let bar = ProgressBar::new(total as u64);
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.enable_steady_tick(std::time::Duration::from_millis(100));
        Progress {
            bar: Some(bar),
            current: Cell::new(None),
        }
    }

    /// Starts stage `name`, counting the previous one as done.
    pub fn stage(&self, name: &'static str) {
        self.log_done();
        self.current.set(Some((name, Instant::now())));
        if let Some(bar) = &self.bar {
            if !bar.message().is_empty() {
                bar.inc(1);
            }
            bar.set_message(name.to_string());
        }
    }

    /// Changes the number of stages or iterations, e.g. once the path taken is known.
    pub fn set_total(&self, total: usize) {
        if let Some(bar) = &self.bar {
            bar.set_length(total as u64);
        }
    }

    /// Sets the message without advancing.
    pub fn message(&self, text: &str) {
        if let Some(bar) = &self.bar {
            bar.set_message(text.to_string());
        }
    }

    /// One more unit done.
    pub fn inc(&self) {
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
    }

    fn log_done(&self) {
        if let Some((name, start)) = self.current.take() {
            tracing::info!("{name}: {:.1} ms", start.elapsed().as_secs_f64() * 1e3);
        }
    }

    /// Removes the bar from the terminal.
    pub fn finish(&self) {
        self.log_done();
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
