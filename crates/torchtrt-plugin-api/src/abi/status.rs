//! Errors across the ABI: status codes, message buffers, and caught panics.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};

use super::types::{
    TTRT_ERROR_EXECUTION, TTRT_ERROR_INVALID_ARGUMENT, TTRT_ERROR_PANIC, TTRT_ERROR_UNSUPPORTED,
    TTRT_OK, TtrtErrorBuf, TtrtStatus,
};
use crate::error::{PluginError, PluginResult};
use crate::plugin::PluginKey;

/// Bytes of the buffer a host hands to each call for its error message.
const HOST_ERROR_CAPACITY: usize = 2048;

/// Writes `msg` into `err`, truncated at a character boundary and NUL-terminated.
///
/// # Safety
/// `err` is NULL or points to a buffer description whose `data` has `capacity` writable bytes.
pub(crate) unsafe fn write_error(err: *mut TtrtErrorBuf, msg: &str) {
    // SAFETY: NULL or valid by the caller's promise.
    let Some(buf) = (unsafe { err.as_ref() }) else {
        return;
    };
    if buf.data.is_null() || buf.capacity == 0 {
        return;
    }
    let mut n = msg.len().min(buf.capacity - 1);
    while !msg.is_char_boundary(n) {
        n -= 1;
    }
    // SAFETY: `n + 1 <= capacity` bytes of `data` are writable by the caller's promise.
    unsafe {
        std::ptr::copy_nonoverlapping(msg.as_ptr(), buf.data.cast::<u8>(), n);
        *buf.data.add(n) = 0;
    }
}

/// The status code and message that carry `e` across the ABI.
pub(crate) fn status_of(e: &PluginError) -> (TtrtStatus, String) {
    match e {
        PluginError::Unsupported(m) => (TTRT_ERROR_UNSUPPORTED, m.clone()),
        PluginError::Execution(m) => (TTRT_ERROR_EXECUTION, m.clone()),
        PluginError::Panic(m) => (TTRT_ERROR_PANIC, m.clone()),
        other => (TTRT_ERROR_INVALID_ARGUMENT, other.to_string()),
    }
}

/// How messages about the plugin `key` in layer `layer` begin.
pub(crate) fn context(key: &PluginKey, layer: &str) -> String {
    format!("plugin {key} layer `{layer}`")
}

/// The error a failed call reported, prefixed with the plugin and layer unless the message
/// already names the plugin.
pub(crate) fn error_of(status: TtrtStatus, msg: &str, key: &PluginKey, layer: &str) -> PluginError {
    let msg = if msg.contains(&key.to_string()) {
        msg.to_string()
    } else {
        format!("{}: {msg}", context(key, layer))
    };
    match status {
        TTRT_ERROR_INVALID_ARGUMENT => PluginError::InvalidInput(msg),
        TTRT_ERROR_UNSUPPORTED => PluginError::Unsupported(msg),
        TTRT_ERROR_PANIC => PluginError::Panic(msg),
        _ => PluginError::Execution(msg),
    }
}

/// The message of a caught panic; the payload is dropped without letting a second panic out.
pub(crate) fn panic_message(payload: Box<dyn Any + Send>) -> String {
    let msg = if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_string()
    };
    let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
    msg
}

/// Runs `f`, turning its error or panic into a status and a message in `err`.
///
/// # Safety
/// As for [`write_error`].
pub(crate) unsafe fn guard(
    err: *mut TtrtErrorBuf,
    f: impl FnOnce() -> PluginResult<()>,
) -> TtrtStatus {
    let (status, msg) = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => return TTRT_OK,
        Ok(Err(e)) => status_of(&e),
        Err(payload) => (TTRT_ERROR_PANIC, panic_message(payload)),
    };
    // SAFETY: forwarded from the caller.
    unsafe { write_error(err, &msg) };
    status
}

/// An error buffer owned by the host for one call.
pub(crate) struct ErrorBuf {
    bytes: Vec<u8>,
}

impl ErrorBuf {
    /// A zeroed buffer.
    pub(crate) fn new() -> ErrorBuf {
        ErrorBuf {
            bytes: vec![0; HOST_ERROR_CAPACITY],
        }
    }

    /// The description to pass to the library; valid while `self` is not touched.
    pub(crate) fn raw(&mut self) -> TtrtErrorBuf {
        TtrtErrorBuf {
            data: self.bytes.as_mut_ptr().cast(),
            capacity: self.bytes.len(),
        }
    }

    /// What the library wrote, up to the first NUL.
    pub(crate) fn message(&self) -> String {
        let end = self
            .bytes
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(self.bytes.len());
        if end == 0 {
            return "(the library gave no message)".to_string();
        }
        String::from_utf8_lossy(&self.bytes[..end]).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncates_at_char_boundary_and_terminates() {
        let mut bytes = [0xffu8; 6];
        let mut raw = TtrtErrorBuf {
            data: bytes.as_mut_ptr().cast(),
            capacity: bytes.len(),
        };
        // SAFETY: `raw` describes `bytes`.
        unsafe { write_error(&mut raw, "abcdé!") };
        assert_eq!(&bytes[..5], b"abcd\0");
        // SAFETY: NULL is accepted.
        unsafe { write_error(std::ptr::null_mut(), "ignored") };
    }

    #[test]
    fn statuses_round_trip() {
        let key = PluginKey::new("ns", "P", "1");
        for e in [
            PluginError::Unsupported("no cuda".into()),
            PluginError::Execution("boom".into()),
            PluginError::Panic("oops".into()),
            PluginError::InvalidInput("rank 3".into()),
        ] {
            let (s, m) = status_of(&e);
            let back = error_of(s, &format!("ns::P@1 {m}"), &key, "l");
            assert_eq!(
                back.to_string(),
                e.to_string().replace(&m, &format!("ns::P@1 {m}"))
            );
        }
        let e = error_of(TTRT_ERROR_EXECUTION, "bad", &key, "l");
        assert_eq!(
            e.to_string(),
            "execution failed: plugin ns::P@1 layer `l`: bad"
        );
    }
}
