//! The builder's record of plugin tactic timings (TensorRT's timing cache): which tactic
//! won for a plugin configuration on a device, so a rebuild reuses the choice instead of
//! timing again. A text file, one entry per line.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{Error, Result};
use crate::files::read_bounded;

/// The first line of a timing cache file.
const HEADER: &str = "# torchtrt timing cache 1";
/// Largest timing cache file read (entries are a line each; this is millions of them).
pub const MAX_TIMING_CACHE_BYTES: u64 = 64 << 20;

/// The winning tactic of one configuration and its median time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CachedTactic {
    /// The tactic's id ([`torchtrt_plugin_api::Tactic::id`]).
    pub id: u32,
    /// Its median time at the configuration's shapes, in microseconds.
    pub micros: f64,
}

/// Tactic choices by configuration key (plugin, fields, dtypes and shapes, device), with
/// counts of how often a build found or timed one.
#[derive(Clone, Debug, Default)]
pub struct TimingCache {
    entries: BTreeMap<String, CachedTactic>,
    hits: usize,
    timed: usize,
}

impl TimingCache {
    /// An empty cache.
    pub fn new() -> TimingCache {
        TimingCache::default()
    }

    /// The cache stored at `path`; an empty one when there is no file. A file that is not
    /// a timing cache is an error naming the file and line.
    pub fn load(path: &Path) -> Result<TimingCache> {
        let io = |source| Error::Io {
            path: path.display().to_string(),
            source,
        };
        let bytes = match read_bounded(path, MAX_TIMING_CACHE_BYTES, "a timing cache") {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(TimingCache::new()),
            Err(e) => return Err(io(e)),
        };
        let text = std::str::from_utf8(&bytes).map_err(|e| {
            Error::InvalidArgument(format!(
                "timing cache `{}` is not UTF-8 text (byte {})",
                path.display(),
                e.valid_up_to()
            ))
        })?;
        TimingCache::parse(text)
            .map_err(|m| Error::InvalidArgument(format!("timing cache `{}`: {m}", path.display())))
    }

    /// Reads the text form ([`TimingCache::to_text`]).
    pub fn parse(text: &str) -> std::result::Result<TimingCache, String> {
        let mut lines = text.lines().enumerate();
        match lines.next() {
            Some((_, HEADER)) => {}
            _ => return Err(format!("line 1: expected `{HEADER}`")),
        }
        let mut cache = TimingCache::new();
        for (n, line) in lines {
            if line.is_empty() {
                continue;
            }
            let bad = |what: &str| format!("line {}: {what}", n + 1);
            let mut parts = line.splitn(3, '\t');
            let (Some(id), Some(micros), Some(key)) = (parts.next(), parts.next(), parts.next())
            else {
                return Err(bad("expected `tactic<TAB>microseconds<TAB>key`"));
            };
            let id: u32 = id
                .parse()
                .ok()
                .filter(|&i| i != 0)
                .ok_or_else(|| bad(&format!("tactic `{id}` is not a nonzero integer")))?;
            let micros: f64 = micros
                .parse()
                .ok()
                .filter(|m: &f64| m.is_finite() && *m >= 0.0)
                .ok_or_else(|| bad(&format!("time `{micros}` is not a duration")))?;
            if key.is_empty() {
                return Err(bad("empty key"));
            }
            cache
                .entries
                .insert(key.to_string(), CachedTactic { id, micros });
        }
        Ok(cache)
    }

    /// The text form: a header line, then `tactic<TAB>microseconds<TAB>key` per entry,
    /// sorted by key.
    pub fn to_text(&self) -> String {
        let mut out = format!("{HEADER}\n");
        for (key, t) in &self.entries {
            out.push_str(&format!("{}\t{:.3}\t{key}\n", t.id, t.micros));
        }
        out
    }

    /// Writes the text form to `path` (through a temporary file beside it, so a reader
    /// never sees half a cache).
    pub fn save(&self, path: &Path) -> Result<()> {
        let io = |source| Error::Io {
            path: path.display().to_string(),
            source,
        };
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        std::fs::write(&tmp, self.to_text()).map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }

    /// The cached choice for `key`, counted as a hit when present.
    pub fn lookup(&mut self, key: &str) -> Option<CachedTactic> {
        let found = self.entries.get(key).copied();
        self.hits += usize::from(found.is_some());
        found
    }

    /// Records a choice the builder timed. Control characters in `key` become spaces, so
    /// every entry stays one line.
    pub fn insert(&mut self, key: &str, tactic: CachedTactic) {
        let key: String = key
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        self.entries.insert(key, tactic);
        self.timed += 1;
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the cache holds no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Lookups that found an entry, since the cache was created or loaded.
    pub fn hits(&self) -> usize {
        self.hits
    }

    /// Configurations timed and recorded, since the cache was created or loaded.
    pub fn timed(&self) -> usize {
        self.timed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_round_trips_and_bad_lines_are_named() {
        let mut c = TimingCache::new();
        c.insert("p@1 in=f32[2,3]\tx", CachedTactic { id: 2, micros: 1.5 });
        c.insert(
            "q@1",
            CachedTactic {
                id: 7,
                micros: 0.25,
            },
        );
        let text = c.to_text();
        let mut back = TimingCache::parse(&text).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back.lookup("p@1 in=f32[2,3] x").map(|t| t.id), Some(2));
        assert_eq!(back.lookup("q@1").map(|t| t.id), Some(7));
        assert_eq!(back.lookup("r@1"), None);
        assert_eq!(back.hits(), 2);
        for (text, want) in [
            ("", "line 1"),
            ("garbage\n", "line 1"),
            (&format!("{HEADER}\n1\t2\n") as &str, "line 2"),
            (&format!("{HEADER}\n0\t2\tk\n"), "nonzero"),
            (&format!("{HEADER}\n\n3\tNaN\tk\n"), "line 3"),
            (&format!("{HEADER}\n3\t1\t\n"), "empty key"),
        ] {
            let err = TimingCache::parse(text).unwrap_err();
            assert!(err.contains(want), "{text:?}: {err}");
        }
    }
}
