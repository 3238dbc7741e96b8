//! The part of Triton's C API (`tritonserver.h`, `tritonbackend.h`, backend API 1.19) this
//! backend calls, declared from the documented signatures. The functions live in the server
//! process (`libtritonserver.so`); they are looked up there once, when Triton initializes the
//! backend, so the library links without them and its tests run without a server.

use std::ffi::{c_char, c_int, c_void};
use std::sync::OnceLock;

/// `TRITONBACKEND_API_VERSION_MAJOR` this backend is written against.
pub const API_VERSION_MAJOR: u32 = 1;
/// `TRITONBACKEND_API_VERSION_MINOR` this backend is written against.
pub const API_VERSION_MINOR: u32 = 19;

/// Opaque Triton handles.
macro_rules! opaque {
    ($($name:ident),*) => {$(
        #[doc = concat!("`", stringify!($name), "` (opaque).")]
        #[repr(C)]
        pub struct $name {
            _private: [u8; 0],
        }
    )*};
}

opaque!(
    TritonError,
    Message,
    Backend,
    BackendAttribute,
    Model,
    ModelInstance,
    Request,
    Response,
    Input,
    Output
);

/// `TRITONSERVER_Error_Code`.
pub mod code {
    /// `TRITONSERVER_ERROR_INTERNAL`.
    pub const INTERNAL: u32 = 1;
    /// `TRITONSERVER_ERROR_NOT_FOUND`.
    pub const NOT_FOUND: u32 = 2;
    /// `TRITONSERVER_ERROR_INVALID_ARG`.
    pub const INVALID_ARG: u32 = 3;
    /// `TRITONSERVER_ERROR_UNSUPPORTED`.
    pub const UNSUPPORTED: u32 = 5;
}

/// `TRITONSERVER_MemoryType`.
pub mod memory {
    /// `TRITONSERVER_MEMORY_CPU`.
    pub const CPU: u32 = 0;
    /// `TRITONSERVER_MEMORY_GPU`.
    pub const GPU: u32 = 2;
}

/// `TRITONSERVER_InstanceGroupKind` (`KIND_AUTO` and `KIND_MODEL` take the model's device).
pub mod kind {
    /// `TRITONSERVER_INSTANCEGROUPKIND_CPU`.
    pub const CPU: u32 = 1;
    /// `TRITONSERVER_INSTANCEGROUPKIND_GPU`.
    pub const GPU: u32 = 2;
}

/// `TRITONSERVER_LogLevel`.
pub mod log {
    /// `TRITONSERVER_LOG_INFO`.
    pub const INFO: u32 = 0;
    /// `TRITONSERVER_LOG_WARN`.
    pub const WARN: u32 = 1;
    /// `TRITONSERVER_LOG_ERROR`.
    pub const ERROR: u32 = 2;
}

/// `TRITONSERVER_REQUEST_RELEASE_ALL`.
pub const REQUEST_RELEASE_ALL: u32 = 1;
/// `TRITONSERVER_RESPONSE_COMPLETE_FINAL`.
pub const RESPONSE_COMPLETE_FINAL: u32 = 1;
/// The model-configuration format version of `TRITONBACKEND_ModelConfig`.
pub const CONFIG_VERSION: u32 = 1;

type Err = *mut TritonError;

macro_rules! api {
    ($($name:ident: fn($($ty:ty),*) $(-> $ret:ty)?;)*) => {
        /// The Triton functions this backend calls, resolved in the server process.
        #[allow(non_snake_case)]
        pub struct Api {
            $(
                #[doc = concat!("`", stringify!($name), "`.")]
                pub $name: unsafe extern "C" fn($($ty),*) $(-> $ret)?,
            )*
        }

        impl Api {
            fn resolve() -> Result<Api, String> {
                let this = libloading::os::unix::Library::this();
                // SAFETY: each symbol is looked up by its C name and given the signature the
                // Triton API documents for it.
                unsafe {
                    Ok(Api {
                        $($name: *this
                            .get(concat!(stringify!($name), "\0").as_bytes())
                            .map_err(|e| format!("{}: {e}", stringify!($name)))?,)*
                    })
                }
            }
        }
    };
}

api! {
    TRITONSERVER_ErrorNew: fn(u32, *const c_char) -> Err;
    TRITONSERVER_ErrorDelete: fn(Err);
    TRITONSERVER_ErrorCode: fn(Err) -> u32;
    TRITONSERVER_ErrorMessage: fn(Err) -> *const c_char;
    TRITONSERVER_LogMessage: fn(u32, *const c_char, c_int, *const c_char) -> Err;
    TRITONSERVER_MessageNewFromSerializedJson: fn(*mut *mut Message, *const c_char, usize) -> Err;
    TRITONSERVER_MessageSerializeToJson: fn(*mut Message, *mut *const c_char, *mut usize) -> Err;
    TRITONSERVER_MessageDelete: fn(*mut Message) -> Err;
    TRITONBACKEND_ApiVersion: fn(*mut u32, *mut u32) -> Err;
    TRITONBACKEND_BackendAttributeAddPreferredInstanceGroup: fn(*mut BackendAttribute, u32, u64, *const u64, u64) -> Err;
    TRITONBACKEND_ModelName: fn(*mut Model, *mut *const c_char) -> Err;
    TRITONBACKEND_ModelVersion: fn(*mut Model, *mut u64) -> Err;
    TRITONBACKEND_ModelRepository: fn(*mut Model, *mut u32, *mut *const c_char) -> Err;
    TRITONBACKEND_ModelConfig: fn(*mut Model, u32, *mut *mut Message) -> Err;
    TRITONBACKEND_ModelAutoCompleteConfig: fn(*mut Model, *mut bool) -> Err;
    TRITONBACKEND_ModelSetConfig: fn(*mut Model, u32, *mut Message) -> Err;
    TRITONBACKEND_ModelState: fn(*mut Model, *mut *mut c_void) -> Err;
    TRITONBACKEND_ModelSetState: fn(*mut Model, *mut c_void) -> Err;
    TRITONBACKEND_ModelInstanceName: fn(*mut ModelInstance, *mut *const c_char) -> Err;
    TRITONBACKEND_ModelInstanceKind: fn(*mut ModelInstance, *mut u32) -> Err;
    TRITONBACKEND_ModelInstanceDeviceId: fn(*mut ModelInstance, *mut i32) -> Err;
    TRITONBACKEND_ModelInstanceModel: fn(*mut ModelInstance, *mut *mut Model) -> Err;
    TRITONBACKEND_ModelInstanceState: fn(*mut ModelInstance, *mut *mut c_void) -> Err;
    TRITONBACKEND_ModelInstanceSetState: fn(*mut ModelInstance, *mut c_void) -> Err;
    TRITONBACKEND_ModelInstanceReportStatistics: fn(*mut ModelInstance, *mut Request, bool, u64, u64, u64, u64) -> Err;
    TRITONBACKEND_ModelInstanceReportBatchStatistics: fn(*mut ModelInstance, u64, u64, u64, u64, u64) -> Err;
    TRITONBACKEND_RequestInputCount: fn(*mut Request, *mut u32) -> Err;
    TRITONBACKEND_RequestInputByIndex: fn(*mut Request, u32, *mut *mut Input) -> Err;
    TRITONBACKEND_RequestOutputCount: fn(*mut Request, *mut u32) -> Err;
    TRITONBACKEND_RequestOutputName: fn(*mut Request, u32, *mut *const c_char) -> Err;
    TRITONBACKEND_RequestRelease: fn(*mut Request, u32) -> Err;
    TRITONBACKEND_InputProperties: fn(*mut Input, *mut *const c_char, *mut u32, *mut *const i64, *mut u32, *mut u64, *mut u32) -> Err;
    TRITONBACKEND_InputBuffer: fn(*mut Input, u32, *mut *const c_void, *mut u64, *mut u32, *mut i64) -> Err;
    TRITONBACKEND_ResponseNew: fn(*mut *mut Response, *mut Request) -> Err;
    TRITONBACKEND_ResponseDelete: fn(*mut Response) -> Err;
    TRITONBACKEND_ResponseOutput: fn(*mut Response, *mut *mut Output, *const c_char, u32, *const i64, u32) -> Err;
    TRITONBACKEND_OutputBuffer: fn(*mut Output, *mut *mut c_void, u64, *mut u32, *mut i64) -> Err;
    TRITONBACKEND_ResponseSend: fn(*mut Response, u32, Err) -> Err;
}

static API: OnceLock<Result<Api, String>> = OnceLock::new();

/// The Triton functions, resolved on first use; `Err` names the first one missing (the
/// library was not loaded by a Triton server).
pub fn api() -> Result<&'static Api, &'static str> {
    API.get_or_init(Api::resolve)
        .as_ref()
        .map_err(String::as_str)
}
