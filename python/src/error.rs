//! `torchtrt.Error` and the one-line messages it carries (the CLI's).

use pyo3::PyErr;
use pyo3::exceptions::PyRuntimeError;

pyo3::create_exception!(
    torchtrt,
    Error,
    PyRuntimeError,
    "Any failure of torchtrt: a bad model, engine, library, argument or input. The message is the one line the `torchtrtc` CLI prints."
);

/// The error and its causes on one line, each cause once (a cause whose text the message
/// already ends with is not repeated), as `torchtrtc` prints them.
pub fn one_line(e: &(dyn std::error::Error + 'static)) -> String {
    let mut line = String::new();
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        let text = c.to_string();
        if !line.ends_with(&text) {
            if !line.is_empty() {
                line += ": ";
            }
            line += &text;
        }
        cause = c.source();
    }
    line.replace('\n', " ")
}

/// A `torchtrt.Error` for `e`, after `context` (`importing model.onnx`, …) when not empty.
pub fn raise(context: &str, e: &(dyn std::error::Error + 'static)) -> PyErr {
    let text = one_line(e);
    if context.is_empty() {
        Error::new_err(text)
    } else {
        Error::new_err(format!("{context}: {text}"))
    }
}

/// A `torchtrt.Error` with this message.
pub fn msg(text: impl Into<String>) -> PyErr {
    Error::new_err(text.into())
}
