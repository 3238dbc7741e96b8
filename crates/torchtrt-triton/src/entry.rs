//! The functions Triton calls (`TRITONBACKEND_*`), each run inside [`guard`].

use std::ffi::c_void;
use std::path::PathBuf;

use serde_json::Value;

use crate::error::{BackendError, Result, c_str, check, guard, log};
use crate::ffi::{
    self, API_VERSION_MAJOR, API_VERSION_MINOR, Api, Backend, BackendAttribute, Model,
    ModelInstance, Request, TritonError, kind,
};
use crate::instance::InstanceState;
use crate::model::ModelState;

fn api() -> Result<&'static Api> {
    ffi::api().map_err(|missing| {
        BackendError::unsupported(format!(
            "the torchtrt backend runs inside tritonserver; a Triton function is missing: {missing}"
        ))
    })
}

/// `TRITONBACKEND_Initialize`: checks the server's backend API version and registers the
/// built-in plugins.
///
/// # Safety
/// Called by Triton with the live handles its backend API documents.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TRITONBACKEND_Initialize(_backend: *mut Backend) -> *mut TritonError {
    guard("TRITONBACKEND_Initialize", || {
        let api = api()?;
        let (mut major, mut minor) = (0u32, 0u32);
        // SAFETY: out-parameters.
        check(unsafe { (api.TRITONBACKEND_ApiVersion)(&mut major, &mut minor) })?;
        if major != API_VERSION_MAJOR || minor < API_VERSION_MINOR {
            return Err(BackendError::unsupported(format!(
                "the torchtrt backend needs Triton backend API {API_VERSION_MAJOR}.{API_VERSION_MINOR} \
                 or a later 1.x, the server has {major}.{minor}"
            )));
        }
        torchtrt::init_plugins()?;
        log(
            ffi::log::INFO,
            &format!(
                "torchtrt backend {} (backend API {major}.{minor})",
                env!("CARGO_PKG_VERSION")
            ),
        );
        Ok(())
    })
}

/// `TRITONBACKEND_GetBackendAttribute`: instances go on GPUs when the process has one,
/// else on the CPU.
///
/// # Safety
/// Called by Triton with the live handles its backend API documents.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TRITONBACKEND_GetBackendAttribute(
    _backend: *mut Backend,
    attributes: *mut BackendAttribute,
) -> *mut TritonError {
    guard("TRITONBACKEND_GetBackendAttribute", || {
        let api = api()?;
        let mut kinds = vec![kind::CPU];
        if torchtrt::cuda_backend(0).is_ok() {
            kinds.insert(0, kind::GPU);
        }
        for k in kinds {
            // SAFETY: the attribute object Triton handed over; no device ids.
            check(unsafe {
                (api.TRITONBACKEND_BackendAttributeAddPreferredInstanceGroup)(
                    attributes,
                    k,
                    0,
                    std::ptr::null(),
                    0,
                )
            })?;
        }
        Ok(())
    })
}

/// `TRITONBACKEND_ModelInitialize`: loads the model's libraries and engine, completes and
/// checks its configuration.
///
/// # Safety
/// Called by Triton with the live handles its backend API documents.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TRITONBACKEND_ModelInitialize(model: *mut Model) -> *mut TritonError {
    guard("TRITONBACKEND_ModelInitialize", || {
        let api = api()?;
        let (name, version, location) = model_identity(api, model)?;
        let label = format!("{name} (version {version})");
        let version_dir = location.join(version.to_string());
        let mut config = read_config(api, model)?;
        let mut auto = false;
        // SAFETY: a live model; out-parameter.
        check(unsafe { (api.TRITONBACKEND_ModelAutoCompleteConfig)(model, &mut auto) })?;
        let (state, changed) = ModelState::load(label.clone(), &version_dir, &mut config, auto)
            .map_err(|e| e.context(format!("model {label}")))?;
        if changed {
            write_config(api, model, &config)?;
        }
        log(
            ffi::log::INFO,
            &format!(
                "model {label}: {:?}, max_batch_size {}, engine on {}",
                state.source, state.max_batch, state.device
            ),
        );
        let state = Box::into_raw(Box::new(state));
        // SAFETY: a live model; the state is reclaimed in ModelFinalize.
        let set = check(unsafe { (api.TRITONBACKEND_ModelSetState)(model, state.cast()) });
        if set.is_err() {
            // SAFETY: the box made above, not handed to Triton.
            drop(unsafe { Box::from_raw(state) });
        }
        set
    })
}

/// `TRITONBACKEND_ModelFinalize`: drops the model's state.
///
/// # Safety
/// Called by Triton with the live handles its backend API documents.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TRITONBACKEND_ModelFinalize(model: *mut Model) -> *mut TritonError {
    guard("TRITONBACKEND_ModelFinalize", || {
        let api = api()?;
        let mut state: *mut c_void = std::ptr::null_mut();
        // SAFETY: a live model; out-parameter.
        check(unsafe { (api.TRITONBACKEND_ModelState)(model, &mut state) })?;
        if !state.is_null() {
            // SAFETY: the box ModelInitialize handed over; Triton finalizes a model once.
            drop(unsafe { Box::from_raw(state.cast::<ModelState>()) });
        }
        Ok(())
    })
}

/// `TRITONBACKEND_ModelInstanceInitialize`: an execution context on the instance's device
/// (`KIND_CPU`: the CPU; `KIND_GPU`: `cuda:<device id>`; else the model's device).
///
/// # Safety
/// Called by Triton with the live handles its backend API documents.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TRITONBACKEND_ModelInstanceInitialize(
    instance: *mut ModelInstance,
) -> *mut TritonError {
    guard("TRITONBACKEND_ModelInstanceInitialize", || {
        let api = api()?;
        let mut name = std::ptr::null();
        let mut group_kind = 0u32;
        let mut device_id = 0i32;
        // SAFETY: a live instance; out-parameters.
        unsafe {
            check((api.TRITONBACKEND_ModelInstanceName)(instance, &mut name))?;
            check((api.TRITONBACKEND_ModelInstanceKind)(
                instance,
                &mut group_kind,
            ))?;
            check((api.TRITONBACKEND_ModelInstanceDeviceId)(
                instance,
                &mut device_id,
            ))?;
        }
        // SAFETY: the name Triton returned.
        let name = unsafe { c_str(name) };
        let model = model_of(api, instance)?;
        let (device, gpu) = match group_kind {
            kind::GPU => (format!("cuda:{device_id}"), Some(i64::from(device_id))),
            kind::CPU => ("cpu".to_string(), None),
            _ => {
                let gpu = model
                    .device
                    .strip_prefix("cuda:")
                    .and_then(|n| n.parse().ok())
                    .or((model.device == "cuda").then_some(0));
                (model.device.clone(), gpu)
            }
        };
        let state = InstanceState::new(name.clone(), model, &device, gpu)?;
        log(
            ffi::log::INFO,
            &format!("instance {name} of model {} on {device}", model.label),
        );
        let state = Box::into_raw(Box::new(state));
        // SAFETY: a live instance; the state is reclaimed in ModelInstanceFinalize.
        let set =
            check(unsafe { (api.TRITONBACKEND_ModelInstanceSetState)(instance, state.cast()) });
        if set.is_err() {
            // SAFETY: the box made above, not handed to Triton.
            drop(unsafe { Box::from_raw(state) });
        }
        set
    })
}

/// `TRITONBACKEND_ModelInstanceFinalize`: drops the instance's context.
///
/// # Safety
/// Called by Triton with the live handles its backend API documents.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TRITONBACKEND_ModelInstanceFinalize(
    instance: *mut ModelInstance,
) -> *mut TritonError {
    guard("TRITONBACKEND_ModelInstanceFinalize", || {
        let api = api()?;
        let mut state: *mut c_void = std::ptr::null_mut();
        // SAFETY: a live instance; out-parameter.
        check(unsafe { (api.TRITONBACKEND_ModelInstanceState)(instance, &mut state) })?;
        if !state.is_null() {
            // SAFETY: the box ModelInstanceInitialize handed over; finalized once.
            drop(unsafe { Box::from_raw(state.cast::<InstanceState>()) });
        }
        Ok(())
    })
}

/// `TRITONBACKEND_ModelInstanceExecute`: answers every request (errors per request) and
/// releases them; an error return means the instance could not look at them at all.
///
/// # Safety
/// Called by Triton with the live handles its backend API documents.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TRITONBACKEND_ModelInstanceExecute(
    instance: *mut ModelInstance,
    requests: *mut *mut Request,
    request_count: u32,
) -> *mut TritonError {
    guard("TRITONBACKEND_ModelInstanceExecute", || {
        let api = api()?;
        let mut state: *mut c_void = std::ptr::null_mut();
        // SAFETY: a live instance; out-parameter.
        check(unsafe { (api.TRITONBACKEND_ModelInstanceState)(instance, &mut state) })?;
        if state.is_null() || (requests.is_null() && request_count > 0) {
            return Err(BackendError::internal("an instance without state"));
        }
        let model = model_of(api, instance)?;
        let requests: &[*mut Request] = if request_count == 0 {
            &[]
        } else {
            // SAFETY: Triton passes `request_count` requests.
            unsafe { std::slice::from_raw_parts(requests, request_count as usize) }
        };
        // SAFETY: the instance's own state; Triton runs one execute per instance at a time.
        let state = unsafe { &mut *state.cast::<InstanceState>() };
        state.execute(api, model, instance, requests);
        Ok(())
    })
}

fn model_identity(api: &Api, model: *mut Model) -> Result<(String, u64, PathBuf)> {
    let mut name = std::ptr::null();
    let mut version = 0u64;
    let mut artifact = 0u32;
    let mut location = std::ptr::null();
    // SAFETY: a live model; out-parameters; the strings are copied right away.
    unsafe {
        check((api.TRITONBACKEND_ModelName)(model, &mut name))?;
        check((api.TRITONBACKEND_ModelVersion)(model, &mut version))?;
        check((api.TRITONBACKEND_ModelRepository)(
            model,
            &mut artifact,
            &mut location,
        ))?;
        Ok((c_str(name), version, PathBuf::from(c_str(location))))
    }
}

fn model_of(api: &Api, instance: *mut ModelInstance) -> Result<&'static ModelState> {
    let mut model = std::ptr::null_mut();
    let mut state: *mut c_void = std::ptr::null_mut();
    // SAFETY: a live instance and its model; out-parameters.
    unsafe {
        check((api.TRITONBACKEND_ModelInstanceModel)(instance, &mut model))?;
        check((api.TRITONBACKEND_ModelState)(model, &mut state))?;
    }
    if state.is_null() {
        return Err(BackendError::internal("a model without state"));
    }
    // SAFETY: the model's state outlives its instances (Triton finalizes them first).
    Ok(unsafe { &*state.cast::<ModelState>() })
}

fn read_config(api: &Api, model: *mut Model) -> Result<Value> {
    let mut message = std::ptr::null_mut();
    // SAFETY: a live model; out-parameter.
    check(unsafe { (api.TRITONBACKEND_ModelConfig)(model, ffi::CONFIG_VERSION, &mut message) })?;
    let mut base = std::ptr::null();
    let mut size = 0usize;
    // SAFETY: the message just returned; its JSON is copied before the message is deleted.
    let json = unsafe {
        let serialized = check((api.TRITONSERVER_MessageSerializeToJson)(
            message, &mut base, &mut size,
        ))
        .map(|()| std::slice::from_raw_parts(base.cast::<u8>(), size).to_vec());
        let _ = check((api.TRITONSERVER_MessageDelete)(message));
        serialized?
    };
    serde_json::from_slice(&json)
        .map_err(|e| BackendError::internal(format!("the model configuration's JSON: {e}")))
}

fn write_config(api: &Api, model: *mut Model, config: &Value) -> Result<()> {
    let json = config.to_string();
    let mut message = std::ptr::null_mut();
    // SAFETY: the JSON bytes are valid for the call; Triton parses a copy.
    unsafe {
        check((api.TRITONSERVER_MessageNewFromSerializedJson)(
            &mut message,
            json.as_ptr().cast(),
            json.len(),
        ))?;
        let set = check((api.TRITONBACKEND_ModelSetConfig)(
            model,
            ffi::CONFIG_VERSION,
            message,
        ));
        let _ = check((api.TRITONSERVER_MessageDelete)(message));
        set
    }
}
