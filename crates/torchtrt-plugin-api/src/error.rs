//! The error type of plugins and creators.

use crate::field::FieldType;
use crate::plugin::PluginKey;

/// What went wrong creating, configuring or running a plugin.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PluginError {
    /// A required field was not given.
    #[error("plugin {key}: missing required field `{field}`")]
    MissingField {
        /// The plugin.
        key: PluginKey,
        /// The missing field.
        field: String,
    },
    /// A field the schema does not know.
    #[error("plugin {key}: unknown field `{field}` (fields: {known})")]
    UnknownField {
        /// The plugin.
        key: PluginKey,
        /// The unknown field.
        field: String,
        /// The schema's field names, comma separated.
        known: String,
    },
    /// A field of the wrong type.
    #[error("plugin {key}: field `{field}` has type {found}, expected {expected}")]
    WrongFieldType {
        /// The plugin.
        key: PluginKey,
        /// The field.
        field: String,
        /// The schema's type.
        expected: FieldType,
        /// The given type.
        found: FieldType,
    },
    /// A field with too few or too many elements.
    #[error("plugin {key}: field `{field}` has {found} elements, expected {expected}")]
    WrongFieldLength {
        /// The plugin.
        key: PluginKey,
        /// The field.
        field: String,
        /// The schema's rule, e.g. `exactly 1`.
        expected: String,
        /// The given element count.
        found: usize,
    },
    /// A field whose value is not acceptable (unknown mode, negative size, …).
    #[error("plugin {key}: field `{field}`: {reason}")]
    InvalidField {
        /// The plugin.
        key: PluginKey,
        /// The field.
        field: String,
        /// Why the value is refused.
        reason: String,
    },
    /// Inputs the plugin cannot work with (count, rank, dtype, shape).
    #[error("{0}")]
    InvalidInput(String),
    /// A device, dtype or layout the plugin has no kernel for.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A kernel failed while running.
    #[error("execution failed: {0}")]
    Execution(String),
    /// A creator could not be registered (its key is taken by another provider, …).
    #[error("registration failed: {0}")]
    Registration(String),
    /// A panic was caught at a boundary and turned into an error.
    #[error("plugin panicked: {0}")]
    Panic(String),
}

impl PluginError {
    /// An [`PluginError::InvalidField`] for `key` and `field`.
    pub fn invalid_field(key: &PluginKey, field: &str, reason: impl Into<String>) -> PluginError {
        PluginError::InvalidField {
            key: key.clone(),
            field: field.to_string(),
            reason: reason.into(),
        }
    }
}

/// Shorthand for results of plugin operations.
pub type PluginResult<T> = Result<T, PluginError>;
