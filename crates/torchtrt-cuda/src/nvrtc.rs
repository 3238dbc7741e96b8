//! CUDA C → PTX and cubin with NVRTC. The result is plain bytes ([`KernelImage`]) that an
//! engine stores; [`crate::Module::load`] turns them back into kernels with the driver alone.

use std::ffi::{CString, c_char};

use cudarc::nvrtc::{result, sys};
use serde::{Deserialize, Serialize};

use crate::error::{CudaError, CudaResult};
use crate::probe;

/// A GPU architecture, e.g. `sm_90`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Arch {
    /// Compute capability major version.
    pub major: u32,
    /// Compute capability minor version.
    pub minor: u32,
}

impl Arch {
    /// The architecture of compute capability `(major, minor)`.
    pub fn new((major, minor): (u32, u32)) -> Arch {
        Arch { major, minor }
    }
}

impl std::fmt::Display for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sm_{}{}", self.major, self.minor)
    }
}

/// A compiled CUDA program: PTX (loads on this and any later architecture, compiled by the
/// driver on load) and a cubin for `arch` exactly (loads with no compilation).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelImage {
    /// The program's name, used in errors.
    pub name: String,
    /// The architecture the cubin is for.
    pub arch: Arch,
    /// PTX text, without a trailing NUL.
    pub ptx: Vec<u8>,
    /// Machine code for `arch`.
    pub cubin: Vec<u8>,
}

/// Compiles `source` (CUDA C, `extern "C"` kernels) for `arch` with NVRTC, into PTX and a
/// cubin. `options` are extra NVRTC flags (e.g. `-DVEC=4`). Needs NVRTC, not a device.
pub fn compile(name: &str, source: &str, arch: Arch, options: &[&str]) -> CudaResult<KernelImage> {
    probe::nvrtc()?;
    let ptx = run_nvrtc(
        name,
        source,
        arch,
        &format!("compute_{}{}", arch.major, arch.minor),
        options,
        Output::Ptx,
    )?;
    let cubin = run_nvrtc(
        name,
        source,
        arch,
        &arch.to_string(),
        options,
        Output::Cubin,
    )?;
    Ok(KernelImage {
        name: name.to_string(),
        arch,
        ptx,
        cubin,
    })
}

#[derive(Clone, Copy)]
enum Output {
    Ptx,
    Cubin,
}

fn run_nvrtc(
    name: &str,
    source: &str,
    arch: Arch,
    target: &str,
    options: &[&str],
    output: Output,
) -> CudaResult<Vec<u8>> {
    let fail = |log: String| CudaError::Compile {
        name: name.to_string(),
        arch: arch.to_string(),
        log,
    };
    let src = CString::new(source).map_err(|_| fail("the source contains a NUL byte".into()))?;
    let cname = CString::new(name).map_err(|_| fail("the name contains a NUL byte".into()))?;
    let prog = result::create_program(&src, Some(&cname)).map_err(|e| fail(format!("{e:?}")))?;
    let mut opts: Vec<String> = vec![
        format!("--gpu-architecture={target}"),
        "--std=c++17".into(),
        "-lineinfo".into(),
    ];
    opts.extend(options.iter().map(|o| o.to_string()));
    if opts.iter().any(|o| o.contains('\0')) {
        return Err(fail("an option contains a NUL byte".into()));
    }
    // SAFETY: `prog` is live until destroyed below; `src`/`cname` outlive it.
    let out = unsafe {
        let compiled = result::compile_program(prog, &opts);
        let out = match compiled {
            Ok(()) => match output {
                Output::Ptx => result::get_ptx(prog).map(chars_to_bytes),
                Output::Cubin => get_cubin(prog),
            }
            .map_err(|e| fail(format!("{e:?}"))),
            Err(e) => {
                let log = result::get_program_log(prog)
                    .map(|l| String::from_utf8_lossy(&chars_to_bytes(l)).into_owned())
                    .unwrap_or_default();
                Err(fail(format!("{e:?}\n{log}")))
            }
        };
        let _ = result::destroy_program(prog);
        out
    }?;
    Ok(out)
}

fn chars_to_bytes(chars: Vec<c_char>) -> Vec<u8> {
    let mut bytes: Vec<u8> = chars.into_iter().map(|c| c as u8).collect();
    while bytes.last() == Some(&0) {
        bytes.pop();
    }
    bytes
}

/// # Safety
/// `prog` must be a live, successfully compiled program.
unsafe fn get_cubin(prog: sys::nvrtcProgram) -> Result<Vec<u8>, result::NvrtcError> {
    let mut size = 0usize;
    // SAFETY: per the function's contract.
    unsafe {
        sys::nvrtcGetCUBINSize(prog, &mut size).result()?;
        let mut buf = vec![0u8; size];
        sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr().cast()).result()?;
        Ok(buf)
    }
}
