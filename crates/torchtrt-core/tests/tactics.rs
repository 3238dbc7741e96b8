//! Plugin tactics: the builder times each tactic a plugin offers at the profile's optimum
//! shapes and keeps the fastest; the engine stores the choice and sets it again when it is
//! loaded; a timing cache spares a rebuild the timing; bad tactic lists are build errors.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{backends, fresh_registry};
use torchtrt_core::plugin_api::{
    DType, DeviceKind, FieldCollection, FieldSpec, FieldType, Launch, Plugin, PluginCreator,
    PluginError, PluginKey, PluginResult, PortDesc, ShapeExpr, Tactic, TensorDesc,
};
use torchtrt_core::{
    BuildConfig, Dim, Engine, EngineLoader, LayerKind, NetworkDefinition, OnDuplicate,
    PluginRegistry, Tensor, TimingCache, build,
};

/// How each tactic behaves; one per test, so tests running at once do not share counts.
#[derive(Default)]
struct Script {
    /// Runs of each tactic id (0..4).
    runs: [AtomicUsize; 4],
    /// The shapes `tactics` was asked about.
    asked: Mutex<Vec<Vec<i64>>>,
}

/// `y = 2x`. Tactic 1 (`slow`) sleeps 3 ms per run, tactic 2 (`fast`) does not, tactic 3
/// (`broken`) fails; `list` picks which the plugin offers.
#[derive(Clone)]
struct Twice {
    script: Arc<Script>,
    list: Vec<Tactic>,
    tactic: u32,
}

impl Plugin for Twice {
    fn num_outputs(&self) -> usize {
        1
    }
    fn output_dtypes(&self, inputs: &[DType]) -> PluginResult<Vec<DType>> {
        Ok(vec![inputs[0]])
    }
    fn output_shapes(&self, inputs: &[ShapeExpr]) -> PluginResult<Vec<ShapeExpr>> {
        Ok(vec![inputs[0].clone()])
    }
    fn supports(&self, pos: usize, io: &[PortDesc], _n: usize, device: DeviceKind) -> bool {
        device == DeviceKind::Cpu && io[pos].dtype == DType::F32
    }
    fn tactics(&self, inputs: &[TensorDesc], _: &[TensorDesc], _: DeviceKind) -> Vec<Tactic> {
        self.script
            .asked
            .lock()
            .unwrap()
            .push(inputs[0].shape.clone());
        self.list.clone()
    }
    fn set_tactic(&mut self, tactic: u32) -> PluginResult<()> {
        if tactic > 3 {
            return Err(PluginError::InvalidInput(format!("no tactic {tactic}")));
        }
        self.tactic = tactic;
        Ok(())
    }
    fn enqueue(&self, launch: Launch<'_, '_>) -> PluginResult<()> {
        let Launch::Cpu(l) = launch else {
            return Err(PluginError::Unsupported("CPU only".into()));
        };
        self.script.runs[self.tactic as usize].fetch_add(1, Ordering::SeqCst);
        match self.tactic {
            1 => std::thread::sleep(Duration::from_millis(3)),
            3 => return Err(PluginError::InvalidInput("tactic 3 is broken".into())),
            _ => {}
        }
        let x = l.inputs[0].typed::<f32>()?.to_vec();
        for (o, v) in l.outputs[0].typed_mut::<f32>()?.iter_mut().zip(x) {
            *o = 2.0 * v;
        }
        Ok(())
    }
    fn fields_to_serialize(&self) -> FieldCollection {
        FieldCollection::new().with("offer", self.list.len() as i32)
    }
    fn clone_plugin(&self) -> Box<dyn Plugin> {
        Box::new(self.clone())
    }
}

struct TwiceCreator {
    script: Arc<Script>,
    list: Vec<Tactic>,
}

impl PluginCreator for TwiceCreator {
    fn key(&self) -> PluginKey {
        PluginKey::new("test", "Twice", "1")
    }
    fn field_schema(&self) -> Vec<FieldSpec> {
        vec![FieldSpec::optional("offer", FieldType::I32, "tactics offered").scalar()]
    }
    fn create(&self, _: &str, _: &FieldCollection) -> PluginResult<Box<dyn Plugin>> {
        Ok(Box::new(Twice {
            script: self.script.clone(),
            list: self.list.clone(),
            tactic: 0,
        }))
    }
}

fn registry_with(list: Vec<Tactic>) -> (&'static PluginRegistry, Arc<Script>) {
    let script = Arc::new(Script::default());
    let registry = fresh_registry();
    let creator = TwiceCreator {
        script: script.clone(),
        list,
    };
    registry
        .register(Arc::new(creator), "tests 1.0", OnDuplicate::Error)
        .unwrap();
    (registry, script)
}

fn slow_fast() -> Vec<Tactic> {
    vec![Tactic::new(1, "slow"), Tactic::new(2, "fast")]
}

/// `x: f32[batch, 8]` (batch 1..16, optimum 4) → Twice → `y`.
fn network(registry: &PluginRegistry) -> NetworkDefinition {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input(
            "x",
            DType::F32,
            &[Dim::dynamic("batch", 1, 4, 16), Dim::Fixed(8)],
        )
        .unwrap();
    let key = PluginKey::new("test", "Twice", "1");
    let y = net
        .add_plugin("twice", registry, &key, &FieldCollection::new(), &[x])
        .unwrap();
    net.mark_output(y[0], "y").unwrap();
    net
}

fn chosen(engine: &Engine) -> Option<Tactic> {
    engine.plan().layers.iter().find_map(|l| match &l.kind {
        LayerKind::Plugin(p) => p.tactic.clone(),
        _ => None,
    })
}

fn check_runs(engine: &Engine) {
    let x: Vec<f32> = (0..24).map(|i| (i as f32 * 0.37).sin()).collect();
    let input = Tensor::from_vec(&[3, 8], x.clone()).unwrap();
    let y = engine.create_context().unwrap().execute(&[&input]).unwrap();
    let want: Vec<f32> = x.iter().map(|v| 2.0 * v).collect();
    assert_eq!(y[0].as_slice::<f32>().unwrap(), want.as_slice());
}

#[test]
fn the_fastest_tactic_is_chosen_at_the_optimum_and_survives_a_round_trip() {
    let (registry, script) = registry_with(slow_fast());
    let engine = build(&network(registry), &BuildConfig::default(), &backends()).unwrap();
    assert_eq!(chosen(&engine), Some(Tactic::new(2, "fast")));
    assert_eq!(script.asked.lock().unwrap().as_slice(), &[vec![4, 8]]);
    for id in [1, 2] {
        assert_eq!(
            script.runs[id].load(Ordering::SeqCst),
            6,
            "one warm-up, five timed"
        );
    }
    check_runs(&engine);
    assert_eq!(script.runs[2].load(Ordering::SeqCst), 7);

    let loaded = EngineLoader::with_registry(backends(), registry)
        .deserialize(&engine.serialize())
        .unwrap();
    assert_eq!(chosen(&loaded), Some(Tactic::new(2, "fast")));
    check_runs(&loaded);
    assert_eq!(
        script.runs[2].load(Ordering::SeqCst),
        8,
        "the loaded engine runs `fast`"
    );
    assert_eq!(script.runs[1].load(Ordering::SeqCst), 6);
    assert_eq!(script.runs[0].load(Ordering::SeqCst), 0);
    let summary = loaded.summary();
    assert_eq!(summary.plugins[0].tactic, Some(Tactic::new(2, "fast")));
}

#[test]
fn a_timing_cache_spares_the_rebuild_and_round_trips_through_its_file() {
    let (registry, script) = registry_with(slow_fast());
    let cache = Arc::new(Mutex::new(TimingCache::new()));
    let config = BuildConfig {
        timing_cache: Some(cache.clone()),
        ..BuildConfig::default()
    };
    build(&network(registry), &config, &backends()).unwrap();
    assert_eq!(cache.lock().unwrap().timed(), 1);
    assert_eq!(cache.lock().unwrap().len(), 1);

    let dir = std::env::temp_dir().join(format!("ttrt-tactics-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("timing.cache");
    cache.lock().unwrap().save(&path).unwrap();
    let reloaded = Arc::new(Mutex::new(TimingCache::load(&path).unwrap()));
    let runs = |s: &Script| {
        s.runs
            .iter()
            .map(|r| r.load(Ordering::SeqCst))
            .sum::<usize>()
    };
    let before = runs(&script);
    let config = BuildConfig {
        timing_cache: Some(reloaded.clone()),
        ..BuildConfig::default()
    };
    let engine = build(&network(registry), &config, &backends()).unwrap();
    assert_eq!(runs(&script), before, "a cached choice is not timed again");
    assert_eq!(chosen(&engine), Some(Tactic::new(2, "fast")));
    assert_eq!(reloaded.lock().unwrap().hits(), 1);
    assert_eq!(reloaded.lock().unwrap().timed(), 0);

    std::fs::write(&path, "# torchtrt timing cache 1\nfast\t1\tkey\n").unwrap();
    let err = TimingCache::load(&path).unwrap_err().to_string();
    assert!(
        err.contains("timing.cache") && err.contains("line 2"),
        "{err}"
    );
    assert_eq!(
        TimingCache::load(&dir.join("absent")).unwrap().len(),
        0,
        "a missing file is an empty cache"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_cached_tactic_the_plugin_no_longer_offers_is_timed_again() {
    let (registry, script) = registry_with(slow_fast());
    let cache = Arc::new(Mutex::new(TimingCache::new()));
    let config = BuildConfig {
        timing_cache: Some(cache.clone()),
        ..BuildConfig::default()
    };
    build(&network(registry), &config, &backends()).unwrap();
    let text = cache
        .lock()
        .unwrap()
        .to_text()
        .replacen("\n2\t", "\n9\t", 1);
    let stale = Arc::new(Mutex::new(TimingCache::parse(&text).unwrap()));
    let before = script.runs[1].load(Ordering::SeqCst);
    let config = BuildConfig {
        timing_cache: Some(stale.clone()),
        ..BuildConfig::default()
    };
    let engine = build(&network(registry), &config, &backends()).unwrap();
    assert_eq!(chosen(&engine), Some(Tactic::new(2, "fast")));
    assert!(script.runs[1].load(Ordering::SeqCst) > before);
    assert_eq!(stale.lock().unwrap().timed(), 1);
}

#[test]
fn failing_tactics_are_passed_over_and_single_ones_not_timed() {
    let (registry, script) = registry_with(vec![Tactic::new(3, "broken"), Tactic::new(1, "slow")]);
    let engine = build(&network(registry), &BuildConfig::default(), &backends()).unwrap();
    assert_eq!(chosen(&engine), Some(Tactic::new(1, "slow")));
    check_runs(&engine);

    let (registry, script_one) = registry_with(vec![Tactic::new(2, "fast")]);
    let engine = build(&network(registry), &BuildConfig::default(), &backends()).unwrap();
    assert_eq!(chosen(&engine), None);
    assert_eq!(script_one.runs[2].load(Ordering::SeqCst), 0);
    assert!(script.runs[3].load(Ordering::SeqCst) >= 1);
}

#[test]
fn invalid_tactic_lists_are_build_errors_naming_the_layer() {
    for (list, want) in [
        (vec![Tactic::new(0, "zero"), Tactic::new(1, "slow")], "id 0"),
        (vec![Tactic::new(1, "a"), Tactic::new(1, "b")], "twice"),
    ] {
        let (registry, _) = registry_with(list);
        let err = build(&network(registry), &BuildConfig::default(), &backends())
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("twice") && err.contains(want), "{err}");
    }
}

#[test]
fn an_engine_whose_tactic_the_plugin_refuses_does_not_load() {
    let (registry, _) = registry_with(slow_fast());
    let engine = build(&network(registry), &BuildConfig::default(), &backends()).unwrap();
    let bytes = engine.serialize();
    let (other, _) = registry_with(vec![]);
    let broken = Arc::new(TwiceRefusing);
    other
        .register(broken, "tests 2.0", OnDuplicate::Replace)
        .unwrap();
    let err = EngineLoader::with_registry(backends(), other)
        .deserialize(&bytes)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("twice") && err.contains("tactic 2"), "{err}");
}

/// A `test::Twice@1` that knows no tactics (the default `set_tactic`).
struct TwiceRefusing;

#[derive(Clone)]
struct Plain;

impl Plugin for Plain {
    fn num_outputs(&self) -> usize {
        1
    }
    fn output_dtypes(&self, inputs: &[DType]) -> PluginResult<Vec<DType>> {
        Ok(vec![inputs[0]])
    }
    fn output_shapes(&self, inputs: &[ShapeExpr]) -> PluginResult<Vec<ShapeExpr>> {
        Ok(vec![inputs[0].clone()])
    }
    fn supports(&self, _: usize, _: &[PortDesc], _: usize, _: DeviceKind) -> bool {
        true
    }
    fn enqueue(&self, _: Launch<'_, '_>) -> PluginResult<()> {
        Ok(())
    }
    fn fields_to_serialize(&self) -> FieldCollection {
        FieldCollection::new()
    }
    fn clone_plugin(&self) -> Box<dyn Plugin> {
        Box::new(self.clone())
    }
}

impl PluginCreator for TwiceRefusing {
    fn key(&self) -> PluginKey {
        PluginKey::new("test", "Twice", "1")
    }
    fn field_schema(&self) -> Vec<FieldSpec> {
        vec![FieldSpec::optional("offer", FieldType::I32, "ignored").scalar()]
    }
    fn create(&self, _: &str, _: &FieldCollection) -> PluginResult<Box<dyn Plugin>> {
        Ok(Box::new(Plain))
    }
}
