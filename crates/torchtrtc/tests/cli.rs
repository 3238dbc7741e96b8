//! The built `torchtrtc` binary, driven as a user would: the README's demo, compile →
//! inspect → run → bench, and bad input of every kind, each of which must be one line on
//! stderr starting with `error:` and exit code 1 (2 for usage), never a panic.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use prost::Message;
use support::{demo, fails, scratch_in, succeeds, text, torchtrtc, write_npy};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A file in this test run's own folder under cargo's test scratch space.
fn scratch(name: &str) -> PathBuf {
    scratch_in("cli", name)
}

/// The demo model compiled once per test process.
fn demo_engine() -> &'static Path {
    static ENGINE: OnceLock<PathBuf> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let path = scratch("demo.engine");
        let out = torchtrtc([
            "compile".as_ref(),
            demo("demo.onnx").as_os_str(),
            "-o".as_ref(),
            path.as_os_str(),
        ]);
        succeeds(&out);
        path
    })
}

fn input_arg(file: &Path) -> String {
    format!("x={}", file.display())
}

fn pseudo_random(n: usize) -> Vec<f64> {
    let mut s: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        })
        .collect()
}

fn f32_npy(name: &str, shape: &[usize]) -> PathBuf {
    let n = shape.iter().product();
    let data: Vec<u8> = pseudo_random(n)
        .iter()
        .flat_map(|&v| (v as f32).to_le_bytes())
        .collect();
    let path = scratch(name);
    write_npy(&path, "<f4", shape, &data);
    path
}

/// The numbers of a flat JSON object of numbers and strings, in order (strings skipped).
fn parse_flat_json(line: &str) -> Vec<(String, f64)> {
    let body = line
        .trim()
        .strip_prefix('{')
        .and_then(|l| l.strip_suffix('}'))
        .unwrap_or_else(|| panic!("not a JSON object: {line}"));
    body.split(',')
        .filter_map(|kv| {
            let (k, v) = kv.split_once(':').expect("key: value");
            let k = k.trim().trim_matches('"').to_string();
            let v = v.trim();
            if v.starts_with('"') && v.ends_with('"') {
                return None;
            }
            Some((k, v.parse::<f64>().unwrap_or_else(|_| panic!("{kv}"))))
        })
        .collect()
}

#[test]
fn readme_demo_compiles_runs_checks_and_names_the_plugins() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let first = readme
        .lines()
        .find(|l| l.starts_with("cargo run"))
        .expect("README has a cargo run command");
    assert!(
        first.contains("run models/demo/demo.onnx")
            && first.contains("--check y=models/demo/y.npy"),
        "README's first command is the demo: {first}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_torchtrtc"))
        .current_dir(root())
        .args([
            "run",
            "models/demo/demo.onnx",
            "--input",
            "x=models/demo/x.npy",
            "--check",
            "y=models/demo/y.npy",
        ])
        .output()
        .unwrap();
    let stdout = succeeds(&out);
    assert!(stdout.contains("check y: ok"), "{stdout}");
    let plugins = stdout
        .lines()
        .find(|l| l.starts_with("plugins:"))
        .expect("a plugins line");
    for name in [
        "torch_tensorrt::Interpolate@1 ×2",
        "InstanceNormalization_TRT@1",
        "CustomGeluPluginDynamic@1",
        "torch_tensorrt::NormalizePlugin@1",
    ] {
        assert!(plugins.contains(name), "{name} missing: {plugins}");
    }
}

#[test]
fn compile_inspect_run_check_and_output_dir() {
    let engine = demo_engine();
    let shown = succeeds(&torchtrtc(["inspect".as_ref(), engine.as_os_str()]));
    for want in [
        "x: f32[1,3,16,16]",
        "[cpu] conv",
        "adaptive_max_pool torch_tensorrt::Interpolate@1 from the built-in plugins",
        "mode: string = \"adaptive_max_pool2d\"",
        "out_size: i64 = [7, 7]",
        "deployment needs: libtorchtrt_runtime.so with the built-in plugins baked in",
        "libtorchtrt_plugins.so",
    ] {
        assert!(shown.contains(want), "`{want}` missing from:\n{shown}");
    }
    let dir = scratch("outputs");
    let out = torchtrtc([
        "run".as_ref(),
        engine.as_os_str(),
        "--input".as_ref(),
        input_arg(&demo("x.npy")).as_ref(),
        "--check".as_ref(),
        format!("y={}", demo("y.npy").display()).as_ref(),
        "--output-dir".as_ref(),
        dir.as_os_str(),
    ]);
    let stdout = succeeds(&out);
    assert!(stdout.contains("check y: ok"), "{stdout}");
    let written = std::fs::read(dir.join("y.npy")).unwrap();
    assert!(written.starts_with(b"\x93NUMPY"));
    assert_eq!(written.len(), std::fs::read(demo("y.npy")).unwrap().len());
}

#[test]
fn check_against_a_wrong_reference_fails_with_exit_1() {
    let wrong = f32_npy("wrong_y.npy", &[1, 8, 7, 7]);
    let out = torchtrtc([
        "run".as_ref(),
        demo_engine().as_os_str(),
        "--input".as_ref(),
        input_arg(&demo("x.npy")).as_ref(),
        "--check".as_ref(),
        format!("y={}", wrong.display()).as_ref(),
    ]);
    fails(&out, 1, &["--check failed for y"]);
    assert!(text(&out.stdout).contains("check y: FAILED: element"));
}

#[test]
fn bench_exports_every_layers_time() {
    let path = scratch("profile.json");
    let out = torchtrtc([
        "bench".as_ref(),
        demo_engine().as_os_str(),
        "--iterations".as_ref(),
        "3".as_ref(),
        "--export-profile".as_ref(),
        path.as_os_str(),
    ]);
    succeeds(&out);
    let text = std::fs::read_to_string(&path).unwrap();
    let rows = text.matches("\"name\": ").count();
    assert!(rows >= 2, "{text}");
    let percent: f64 = text
        .split("\"percent\": ")
        .skip(1)
        .map(|s| s.split('}').next().unwrap().trim().parse::<f64>().unwrap())
        .sum();
    assert!((percent - 100.0).abs() < 1e-6, "{percent}: {text}");
    let out = torchtrtc([
        "bench".as_ref(),
        demo_engine().as_os_str(),
        "--export-profile".as_ref(),
        scratch("no/such/dir/profile.json").as_os_str(),
    ]);
    fails(&out, 1, &["writing the profile to"]);
}

#[test]
fn bench_json_last_line_has_the_numbers() {
    let out = torchtrtc([
        "bench".as_ref(),
        demo_engine().as_os_str(),
        "--iterations".as_ref(),
        "5".as_ref(),
        "--warmup".as_ref(),
        "1".as_ref(),
        "--json".as_ref(),
    ]);
    let stdout = succeeds(&out);
    assert!(
        stdout
            .lines()
            .last()
            .unwrap()
            .contains("\"device\": \"cpu\""),
        "{stdout}"
    );
    let fields = parse_flat_json(stdout.lines().last().unwrap());
    let get = |k: &str| {
        fields
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| *v)
            .unwrap_or_else(|| panic!("{k} missing: {stdout}"))
    };
    let (min, median, p90, p99) = (
        get("min_ms"),
        get("median_ms"),
        get("p90_ms"),
        get("p99_ms"),
    );
    assert!(
        0.0 < min && min <= median && median <= p90 && p90 <= p99,
        "{stdout}"
    );
    assert!((get("throughput_per_s") - 1e3 / median).abs() < 1e-6 * get("throughput_per_s"));
    assert!(get("peak_rss_bytes") > 1e6, "{stdout}");
}

#[test]
fn plugins_lists_the_builtins_as_a_table() {
    let stdout = succeeds(&torchtrtc(["plugins"]));
    let head = stdout.lines().next().unwrap();
    for col in [
        "NAMESPACE",
        "NAME",
        "VERSION",
        "SOURCE",
        "CAPABILITIES",
        "FIELDS",
    ] {
        assert!(head.contains(col), "{head}");
    }
    let nms = stdout
        .lines()
        .find(|l| l.contains(" NonMaxSuppression "))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(nms.contains("shape inputs, sized outputs"), "{nms}");
    let gelu = stdout
        .lines()
        .find(|l| l.contains(" CustomGeluPluginDynamic "))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(gelu.contains("  -  "), "{gelu}");
    let interp = stdout
        .lines()
        .find(|l| l.starts_with("torch_tensorrt") && l.contains(" Interpolate "))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(interp.contains("built in (torchtrt_plugins"), "{interp}");
    assert!(interp.contains("mode: string"), "{interp}");
    assert!(interp.contains("out_size?: i64[]"), "{interp}");
    assert!(
        interp.contains("shape inputs, tactics") && !interp.contains("sized outputs"),
        "{interp}"
    );
}

/// `--timing-cache`: the first compile times the demo's adaptive max pool tactics and
/// writes the cache, the second reads it and leaves it as it was, `inspect` shows the
/// tactic, and a damaged cache is an error naming the file and line.
#[test]
fn timing_cache_is_written_reused_and_checked() {
    let cache = scratch("timing.cache");
    let compile = |engine: &str| {
        torchtrtc([
            "compile".as_ref(),
            demo("demo.onnx").as_os_str(),
            "-o".as_ref(),
            scratch(engine).as_os_str(),
            "--timing-cache".as_ref(),
            cache.as_os_str(),
        ])
    };
    succeeds(&compile("timed.engine"));
    let first = std::fs::read_to_string(&cache).unwrap();
    let entries: Vec<&str> = first.lines().skip(1).collect();
    assert_eq!(entries.len(), 1, "{first}");
    assert!(
        entries[0].contains("torch_tensorrt::Interpolate@1") && entries[0].contains("on=cpu"),
        "{first}"
    );
    succeeds(&compile("cached.engine"));
    assert_eq!(std::fs::read_to_string(&cache).unwrap(), first);
    let tactic: String = entries[0].split('\t').next().unwrap().to_string();
    let shown = succeeds(&torchtrtc([
        "inspect".as_ref(),
        scratch("cached.engine").as_os_str(),
    ]));
    assert!(
        shown.contains(&format!("(id {tactic})")) && shown.contains("      tactic: "),
        "{shown}"
    );
    std::fs::write(&cache, "# torchtrt timing cache 1\n1\tsoon\tkey\n").unwrap();
    fails(&compile("bad.engine"), 1, &["timing.cache", "line 2"]);
}

#[test]
fn missing_model_file() {
    for cmd in ["run", "compile", "bench"] {
        let mut args = vec![cmd.to_string(), "no/such/model.onnx".to_string()];
        if cmd == "compile" {
            args.extend(["-o".into(), scratch("never.engine").display().to_string()]);
        }
        fails(
            &torchtrtc(&args),
            1,
            &["no/such/model.onnx", "No such file"],
        );
    }
    fails(
        &torchtrtc(["inspect", "no/such/model.engine"]),
        1,
        &["no/such/model.engine", "No such file"],
    );
}

#[test]
fn non_onnx_model_file() {
    let path = scratch("notes.onnx");
    std::fs::write(&path, "these are my notes, not a model\n").unwrap();
    let out = torchtrtc([
        "run".as_ref(),
        path.as_os_str(),
        "--input".as_ref(),
        input_arg(&demo("x.npy")).as_ref(),
    ]);
    fails(&out, 1, &["notes.onnx", "not an ONNX model"]);
    let out = torchtrtc(["inspect".as_ref(), path.as_os_str()]);
    fails(&out, 1, &["notes.onnx is not a torchtrt engine", "compile"]);
}

#[test]
fn truncated_onnx_model() {
    let bytes = std::fs::read(demo("demo.onnx")).unwrap();
    let path = scratch("truncated.onnx");
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let out = torchtrtc([
        "compile".as_ref(),
        path.as_os_str(),
        "-o".as_ref(),
        scratch("truncated.engine").as_os_str(),
    ]);
    fails(&out, 1, &["truncated.onnx", "not an ONNX model"]);
}

#[test]
fn engine_of_another_format_version() {
    let mut bytes = std::fs::read(demo_engine()).unwrap();
    let current = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
    bytes[8..12].copy_from_slice(&(current + 1).to_le_bytes());
    let path = scratch("next_version.engine");
    std::fs::write(&path, bytes).unwrap();
    fails(
        &torchtrtc(["inspect".as_ref(), path.as_os_str()]),
        1,
        &[
            "next_version.engine",
            &format!("format version {}", current + 1),
            &format!("reads version {current}"),
        ],
    );
    let out = torchtrtc([
        "run".as_ref(),
        path.as_os_str(),
        "--input".as_ref(),
        input_arg(&demo("x.npy")).as_ref(),
    ]);
    fails(&out, 1, &[&format!("format version {}", current + 1)]);
}

#[test]
fn engine_for_another_target_or_damaged() {
    let good = std::fs::read(demo_engine()).unwrap();
    let mut cuda = good.clone();
    cuda[12..16].copy_from_slice(&1u32.to_le_bytes());
    cuda[16..20].copy_from_slice(&7u32.to_le_bytes());
    let path = scratch("cuda_sm70.engine");
    std::fs::write(&path, cuda).unwrap();
    fails(
        &torchtrtc(["inspect".as_ref(), path.as_os_str()]),
        1,
        &["cuda_sm70.engine", "cuda"],
    );
    let mut flipped = good.clone();
    let at = good.len() - 3;
    flipped[at] ^= 0x5a;
    let path = scratch("flipped.engine");
    std::fs::write(&path, flipped).unwrap();
    fails(
        &torchtrtc(["inspect".as_ref(), path.as_os_str()]),
        1,
        &["flipped.engine", "checksum"],
    );
    let path = scratch("short.engine");
    std::fs::write(&path, &good[..good.len() / 2]).unwrap();
    fails(
        &torchtrtc(["inspect".as_ref(), path.as_os_str()]),
        1,
        &["short.engine"],
    );
}

#[test]
fn npy_of_the_wrong_dtype() {
    let data: Vec<u8> = pseudo_random(768)
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let path = scratch("x_f64.npy");
    write_npy(&path, "<f8", &[1, 3, 16, 16], &data);
    for model in [demo_engine().to_path_buf(), demo("demo.onnx")] {
        let out = torchtrtc([
            "run".as_ref(),
            model.as_os_str(),
            "--input".as_ref(),
            input_arg(&path).as_ref(),
        ]);
        fails(&out, 1, &["input `x` is f64[1,3,16,16], expected f32"]);
    }
}

#[test]
fn npy_of_the_wrong_shape() {
    let path = f32_npy("x_small.npy", &[1, 3, 8, 16]);
    let out = torchtrtc([
        "run".as_ref(),
        demo_engine().as_os_str(),
        "--input".as_ref(),
        input_arg(&path).as_ref(),
    ]);
    fails(&out, 1, &["input `x` has shape [1,3,8,16]", "[1,3,16,16]"]);
    let out = torchtrtc([
        "run".as_ref(),
        demo("demo.onnx").as_os_str(),
        "--input".as_ref(),
        input_arg(&path).as_ref(),
    ]);
    fails(&out, 1, &["input `x` has shape [1,3,8,16]", "[1,3,16,16]"]);
}

#[test]
fn unknown_input_name() {
    for model in [demo_engine().to_path_buf(), demo("demo.onnx")] {
        let out = torchtrtc([
            "run".as_ref(),
            model.as_os_str(),
            "--input".as_ref(),
            format!("image={}", demo("x.npy").display()).as_ref(),
        ]);
        fails(&out, 1, &["no input `image`", "inputs: x"]);
    }
    let out = torchtrtc([
        "compile".as_ref(),
        demo("demo.onnx").as_os_str(),
        "-o".as_ref(),
        scratch("never2.engine").as_os_str(),
        "--input".as_ref(),
        "image=1x3x16x16".as_ref(),
    ]);
    fails(&out, 1, &["no input `image`"]);
    let x = input_arg(&demo("x.npy"));
    let out = torchtrtc([
        "run".as_ref(),
        demo_engine().as_os_str(),
        "--input".as_ref(),
        x.as_ref(),
        "--input".as_ref(),
        x.as_ref(),
    ]);
    fails(&out, 1, &["--input x=… is given twice"]);
}

#[test]
fn plugins_path_that_does_not_exist() {
    for cmd in ["plugins", "run", "inspect"] {
        let mut args = vec![cmd.to_string()];
        if cmd == "run" {
            args.extend([
                demo("demo.onnx").display().to_string(),
                "--input".into(),
                input_arg(&demo("x.npy")),
            ]);
        }
        if cmd == "inspect" {
            args.push(demo_engine().display().to_string());
        }
        args.extend(["--plugins".into(), "/no/such/libplugins.so".into()]);
        fails(
            &torchtrtc(&args),
            1,
            &["--plugins /no/such/libplugins.so", "does not exist"],
        );
    }
}

/// Compiles `source` (C) into the shared library `name` with the system C compiler.
fn c_library(source: &str, name: &str) -> PathBuf {
    let c = scratch(&format!("{name}.c"));
    std::fs::write(&c, source).unwrap();
    let lib = scratch(name);
    let status = Command::new("cc")
        .args(["-std=c11", "-shared", "-fPIC", "-O1", "-I"])
        .arg(root().join("include"))
        .arg(&c)
        .arg("-o")
        .arg(&lib)
        .arg("-lm")
        .status()
        .expect("the system C compiler runs");
    assert!(status.success(), "cc failed on {name}");
    lib
}

#[test]
fn library_that_is_not_an_extension() {
    let lib = c_library(
        "int not_a_torchtrt_extension(void);\nint not_a_torchtrt_extension(void) { return 7; }\n",
        "libplain.so",
    );
    let out = torchtrtc(["plugins".as_ref(), "--plugins".as_ref(), lib.as_os_str()]);
    fails(
        &out,
        1,
        &[
            "libplain.so",
            "not a torchtrt extension",
            "torchtrt_extension_v1",
        ],
    );
    let text_file = scratch("libtext.so");
    std::fs::write(&text_file, "not ELF").unwrap();
    let out = torchtrtc([
        "plugins".as_ref(),
        "--plugins".as_ref(),
        text_file.as_os_str(),
    ]);
    fails(&out, 1, &["libtext.so"]);
}

#[test]
fn library_registering_a_key_already_taken() {
    let source =
        std::fs::read_to_string(root().join("crates/torchtrt-plugin-api/tests/c/scale_shift.c"))
            .unwrap();
    let clash = "\"\", \"CustomGeluPluginDynamic\", \"1\"";
    let patched = source.replace("\"test_c\", \"ScaleShift\", \"1\"", clash);
    assert!(
        patched.contains(clash),
        "scale_shift.c names its key as expected"
    );
    let lib = c_library(&patched, "libgelu_clash.so");
    let out = torchtrtc(["plugins".as_ref(), "--plugins".as_ref(), lib.as_os_str()]);
    fails(
        &out,
        1,
        &[
            "libgelu_clash.so",
            "CustomGeluPluginDynamic",
            "already registered",
        ],
    );
}

#[test]
fn op_no_converter_or_plugin_knows() {
    let bytes = std::fs::read(demo("demo.onnx")).unwrap();
    let mut model = torchtrt::onnx::proto::ModelProto::decode(bytes.as_slice()).unwrap();
    let graph = model.graph.as_mut().unwrap();
    let conv = graph
        .node
        .iter_mut()
        .find(|n| n.op_type() == "Conv")
        .unwrap();
    conv.op_type = Some("FrobnicateConv".into());
    let path = scratch("unknown_op.onnx");
    std::fs::write(&path, model.encode_to_vec()).unwrap();
    let out = torchtrtc([
        "compile".as_ref(),
        path.as_os_str(),
        "-o".as_ref(),
        scratch("never3.engine").as_os_str(),
    ]);
    fails(&out, 1, &["node `conv`", "FrobnicateConv", "no converter"]);
}

#[test]
fn usage_errors_exit_2() {
    fails(&torchtrtc(["run"]), 2, &["MODEL"]);
    fails(&torchtrtc(["frobnicate"]), 2, &["frobnicate"]);
    fails(
        &torchtrtc(["compile", "m.onnx", "-o", "m.engine", "--precision", "f8"]),
        2,
        &["f8"],
    );
    let out = torchtrtc(["run", "m.onnx", "--input", "x"]);
    fails(&out, 1, &["expected NAME=VALUE"]);
}

/// The C test plugin `test_c::ScaleShift` (y = scale·x + shift) as a library of its own.
fn scale_shift_library() -> PathBuf {
    let source =
        std::fs::read_to_string(root().join("crates/torchtrt-plugin-api/tests/c/scale_shift.c"))
            .unwrap();
    c_library(&source, "libscale_shift.so")
}

/// The demo with a `test_c::ScaleShift` node (scale 2, shift 0.5) after the convolution.
/// Instance normalization removes a per-tensor affine map, so the reference still holds.
fn demo_with_scale_shift() -> PathBuf {
    use torchtrt::onnx::proto::attribute_proto::AttributeType;
    use torchtrt::onnx::proto::{AttributeProto, NodeProto, OperatorSetIdProto};
    let bytes = std::fs::read(demo("demo.onnx")).unwrap();
    let mut model = torchtrt::onnx::proto::ModelProto::decode(bytes.as_slice()).unwrap();
    model.opset_import.push(OperatorSetIdProto {
        domain: Some("test_c".into()),
        version: Some(1),
    });
    let graph = model.graph.as_mut().unwrap();
    let at = graph
        .node
        .iter()
        .position(|n| n.op_type() == "Conv")
        .unwrap();
    for n in &mut graph.node {
        for i in &mut n.input {
            if i == "conv" {
                *i = "scaled".into();
            }
        }
    }
    let float = |name: &str, f: f32| AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Float as i32),
        f: Some(f),
        ..AttributeProto::default()
    };
    graph.node.insert(
        at + 1,
        NodeProto {
            input: vec!["conv".into()],
            output: vec!["scaled".into()],
            name: Some("scale_shift".into()),
            op_type: Some("ScaleShift".into()),
            domain: Some("test_c".into()),
            attribute: vec![float("scale", 2.0), float("shift", 0.5)],
            ..NodeProto::default()
        },
    );
    let path = scratch("demo_scale_shift.onnx");
    std::fs::write(&path, model.encode_to_vec()).unwrap();
    path
}

#[test]
fn external_plugin_library_is_named_where_a_deployment_needs_it() {
    let lib = scale_shift_library();
    let model = demo_with_scale_shift();
    let engine = scratch("scale_shift.engine");
    let compile = |extra: &[&std::ffi::OsStr]| {
        let mut args: Vec<&std::ffi::OsStr> = vec![
            "compile".as_ref(),
            model.as_os_str(),
            "-o".as_ref(),
            engine.as_os_str(),
        ];
        args.extend_from_slice(extra);
        torchtrtc(args)
    };
    fails(
        &compile(&[]),
        1,
        &["node `scale_shift`", "test_c::ScaleShift@1"],
    );
    let out = compile(&["--plugins".as_ref(), lib.as_os_str()]);
    let stdout = succeeds(&out);
    assert!(stdout.contains("libscale_shift.so"), "{stdout}");

    let shown = succeeds(&torchtrtc([
        "inspect".as_ref(),
        engine.as_os_str(),
        "--plugins".as_ref(),
        lib.as_os_str(),
    ]));
    let deploy = shown
        .lines()
        .find(|l| l.starts_with("deployment needs:"))
        .unwrap();
    assert!(
        deploy.contains("built-in plugins baked in") && deploy.contains("; plus /"),
        "{deploy}"
    );
    assert!(deploy.ends_with("libscale_shift.so"), "{deploy}");
    assert!(shown.contains("scale: f32 = 2"), "{shown}");

    let unloaded = torchtrtc(["inspect".as_ref(), engine.as_os_str()]);
    let records = succeeds(&unloaded);
    let note = String::from_utf8_lossy(&unloaded.stderr);
    assert!(
        note.contains("test_c::ScaleShift@1") && note.contains("--plugins"),
        "{note}"
    );
    assert!(
        records.contains("scale: f32 = 2") && records.contains(deploy),
        "{records}"
    );

    let run = |extra: &[&std::ffi::OsStr]| {
        let mut args: Vec<&std::ffi::OsStr> = vec!["run".as_ref(), engine.as_os_str()];
        let input = input_arg(&demo("x.npy"));
        let check = format!("y={}", demo("y.npy").display());
        let mut owned: Vec<std::ffi::OsString> = vec![
            "--input".into(),
            input.into(),
            "--check".into(),
            check.into(),
        ];
        owned.extend(extra.iter().map(|s| s.to_os_string()));
        args.extend(owned.iter().map(|s| s.as_os_str()));
        torchtrtc(args)
    };
    fails(&run(&[]), 1, &["ScaleShift", "libscale_shift.so"]);
    let stdout = succeeds(&run(&["--plugins".as_ref(), lib.as_os_str()]));
    assert!(stdout.contains("check y: ok"), "{stdout}");
    assert!(stdout.contains("test_c::ScaleShift@1"), "{stdout}");
}

#[test]
fn help_on_every_command() {
    for (cmd, flag) in [
        ("compile", "--input <NAME=SHAPE>"),
        ("run", "--check <NAME=FILE>"),
        ("inspect", "--plugins <LIB>"),
        ("plugins", "--docs"),
        ("bench", "--json"),
    ] {
        let stdout = succeeds(&torchtrtc([cmd, "--help"]));
        assert!(
            stdout.contains(flag),
            "{cmd} --help lacks {flag}:\n{stdout}"
        );
    }
}

#[test]
fn run_reads_onnx_tensor_protos_as_inputs() {
    let npy = std::fs::read(demo("x.npy")).unwrap();
    let header = u16::from_le_bytes([npy[8], npy[9]]) as usize;
    let raw = npy[10 + header..].to_vec();
    assert_eq!(raw.len(), 3 * 16 * 16 * 4);
    let proto = torchtrt::onnx::proto::TensorProto {
        dims: vec![1, 3, 16, 16],
        data_type: Some(1),
        name: Some("x".into()),
        raw_data: Some(raw),
        ..Default::default()
    };
    let pb = scratch("input_0.pb");
    std::fs::write(&pb, proto.encode_to_vec()).unwrap();
    let out = torchtrtc([
        "run".as_ref(),
        demo_engine().as_os_str(),
        "--input".as_ref(),
        input_arg(&pb).as_ref(),
        "--check".as_ref(),
        format!("y={}", demo("y.npy").display()).as_ref(),
    ]);
    assert!(succeeds(&out).contains("check y: ok"));
    let bad = scratch("garbage.pb");
    std::fs::write(&bad, [0xffu8; 7]).unwrap();
    let out = torchtrtc([
        "run".as_ref(),
        demo_engine().as_os_str(),
        "--input".as_ref(),
        input_arg(&bad).as_ref(),
    ]);
    fails(&out, 1, &["garbage.pb", "not an ONNX TensorProto"]);
}
