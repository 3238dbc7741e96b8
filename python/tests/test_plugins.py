"""The plugin registry as Python sees it, and loading libraries."""

import pytest

import torchtrt


def test_builtin_plugins_are_listed_with_fields():
    plugins = {(p.namespace, p.name, p.version): p for p in torchtrt.plugins()}
    for key in [("torch_tensorrt", "Interpolate", "1"), ("torch_tensorrt", "NormalizePlugin", "1"),
                ("", "InstanceNormalization_TRT", "1"), ("", "CustomGeluPluginDynamic", "1")]:
        assert key in plugins, sorted(plugins)
    interp = plugins[("torch_tensorrt", "Interpolate", "1")]
    fields = {f.name: f for f in interp.fields}
    assert {"mode", "out_size", "scales", "align_corners", "use_scales"} <= set(fields)
    assert fields["out_size"].list and fields["mode"].type
    assert interp.library is None and interp.source.startswith("built in")


@pytest.mark.parametrize("load", [torchtrt.load_plugins, torchtrt.load_custom_converters,
                                  torchtrt.load_custom_torch_ops])
def test_loading_a_missing_library_is_an_error(load, tmp_path):
    with pytest.raises(torchtrt.Error, match="nope.so"):
        load(tmp_path / "nope.so")


def test_loading_a_file_that_is_not_a_library_is_an_error(tmp_path):
    bogus = tmp_path / "bogus.so"
    bogus.write_bytes(b"\x7fELF not really")
    with pytest.raises(torchtrt.Error, match="bogus.so"):
        torchtrt.load_plugins(bogus)
    before = len(torchtrt.plugins())
    with pytest.raises(torchtrt.Error):
        torchtrt.compile(b"garbage", plugins=[bogus])
    assert len(torchtrt.plugins()) == before
