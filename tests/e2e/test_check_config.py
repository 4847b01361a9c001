"""End-to-end checks of `graphdump check-config` on MindSpore-style data_dump.json files."""
import glob
import json
import os
import subprocess

import pytest

BIN = os.environ.get("GRAPHDUMP_BIN", "graphdump")
SOURCE_DIR = os.environ.get("GRAPHDUMP_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "../.."))

# The configuration of MindSpore's dump tutorial (tutorials/source_en/debug/dump.md).
TUTORIAL = {
    "common_dump_settings": {
        "dump_mode": 0,
        "path": "/absolute_path",
        "net_name": "ResNet50",
        "iteration": "0|5-8|100-120",
        "saved_data": "tensor",
        "input_output": 0,
        "kernels": ["Default/Conv-op12"],
        "support_device": [0, 1, 2, 3, 4, 5, 6, 7],
        "statistic_category": ["max", "min", "l2norm"],
    },
    "e2e_dump_settings": {"enable": True, "trans_flag": True},
}

ENV_KEYS = ("GRAPHDUMP_CONFIG", "MINDSPORE_DUMP_CONFIG", "MS_DIAGNOSTIC_DATA_PATH")


def run(args, env_extra=None):
    env = {k: v for k, v in os.environ.items() if k not in ENV_KEYS}
    env.update(env_extra or {})
    return subprocess.run([BIN, "check-config"] + args, capture_output=True, text=True, env=env)


@pytest.fixture
def write(scratch):
    """write(name, content): a file in the test's scratch directory (content: text, or an
    object written as JSON); returns its path."""
    def write_file(name, content):
        path = os.path.join(scratch, name)
        with open(path, "w") as f:
            f.write(content if isinstance(content, str) else json.dumps(content, indent=4))
        return path
    return write_file


def check_ok(args, env_extra=None):
    result = run(args, env_extra)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout), result.stderr


def check_error(args, fragments, env_extra=None):
    result = run(args, env_extra)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    for fragment in fragments:
        assert fragment in result.stderr
    return result.stderr


def test_tutorial_config(write):
    out, err = check_ok([write("data_dump.json", TUTORIAL)])
    common = out["common_dump_settings"]
    assert list(common.keys()) == [
        "dump_mode", "path", "net_name", "iteration", "saved_data", "input_output", "kernels",
        "support_device", "statistic_category", "op_debug_mode", "overflow_number",
        "initial_iteration", "file_format"]
    assert common["dump_mode"] == 0
    assert common["path"] == "/absolute_path"
    assert common["net_name"] == "ResNet50"
    assert common["iteration"] == "0|5-8|100-120"
    assert common["saved_data"] == "tensor"
    assert common["input_output"] == 0
    assert common["kernels"] == ["Default/Conv-op12"]
    assert common["support_device"] == list(range(8))
    assert common["statistic_category"] == ["max", "min", "l2norm"]
    assert common["op_debug_mode"] == 0
    assert common["overflow_number"] == 0
    assert common["initial_iteration"] == 0
    assert common["file_format"] == "npy"
    assert out["e2e_dump_settings"] == {
        "enable": True, "trans_flag": True, "stat_calc_mode": "host",
        "device_stat_precision_mode": "high", "sample_mode": 0, "sample_num": 100,
        "save_kernel_args": False}
    # kernels are listed but dump_mode is 0: a warning, not an error.
    assert "warning:" in err
    assert "common_dump_settings.kernels: 1 entries are not used" in err


def test_output_is_a_valid_config_that_round_trips(write):
    first = run([write("data_dump.json", TUTORIAL)])
    assert first.returncode == 0, first.stderr
    second = run([write("effective.json", first.stdout)])
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout


def test_ge_dialect_prints_back_in_its_dialect_and_round_trips(write, scratch):
    dump = os.path.join(scratch, "ge")
    ge = {"dump": {"enable_dump": True, "dump_path": dump, "dump_step": "0|2-3",
                   "dump_layer": "relu-op1  linear"}}
    first, _ = check_ok([write("ge.json", ge)])
    assert first == {"dump": {"enable_dump": True, "dump_path": dump,
                              "dump_step": "0|2-3", "dump_mode": "output",
                              "dump_layer": "relu-op1 linear"}}
    second = run([write("ge_effective.json", json.dumps(first))])
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout) == first
    off, err = check_ok([write("off.json", {"dump": {"enable_dump": False}})])
    assert off == {"dump": {"enable_dump": False}}
    assert "enable_dump is false: nothing is dumped" in err


def test_tutorial_prose_iteration_with_spaces(write):
    config = json.loads(json.dumps(TUTORIAL))
    config["common_dump_settings"]["iteration"] = "0 | 5-8 | 100-120"
    out, _ = check_ok([write("spaces.json", config)])
    assert out["common_dump_settings"]["iteration"] == "0|5-8|100-120"


def test_examples_are_valid_without_warnings():
    examples = sorted(glob.glob(os.path.join(SOURCE_DIR, "examples", "*.json")))
    assert "data_dump.json" in [os.path.basename(e) for e in examples]
    for example in examples:
        out, err = check_ok([example])
        assert err == "", example
        assert out["common_dump_settings"]["dump_mode"] in (0, 1, 2), example
    out, _ = check_ok([os.path.join(SOURCE_DIR, "examples", "data_dump.json")])
    assert out["common_dump_settings"]["iteration"] == "0|2"
    assert out["common_dump_settings"]["saved_data"] == "full"
    assert out["common_dump_settings"]["net_name"] == "AlexNet"


def test_every_problem_is_reported(write):
    config = json.loads(json.dumps(TUTORIAL))
    common = config["common_dump_settings"]
    common["dump_mode"] = 3
    common["path"] = "relative/dir"
    common["iteration"] = "8-5|1||3"
    common["input_output"] = -1
    common["kernels"] = ["name-regex(conv[)"]
    common["statistic_category"] = ["max", "mean"]
    config["e2e_dump_settings"]["enable"] = "true"
    err = check_error([write("bad.json", config)], [
        "common_dump_settings.dump_mode: should be 0, 1 or 2, but got 3",
        "common_dump_settings.path: Dump path only support absolute path and should start "
        "with '/'",
        "common_dump_settings.iteration: \"8-5|1||3\" is not a valid iteration selection: "
        "segment \"8-5\" is a reversed range",
        "segment \"\" is empty",
        "common_dump_settings.input_output: should be unsigned int type, but got -1",
        "common_dump_settings.kernels[0]: \"name-regex(conv[)\" has an invalid regular "
        "expression",
        "The following statistic_category is invalid:'mean'",
        "e2e_dump_settings.enable: should be boolean type",
    ])
    assert len([l for l in err.splitlines() if "error:" in l]) == 8, err


def test_missing_required_keys_and_bad_json(write):
    config = json.loads(json.dumps(TUTORIAL))
    del config["common_dump_settings"]["net_name"]
    del config["common_dump_settings"]["support_device"]
    check_error([write("missing.json", config)], [
        "common_dump_settings.net_name: not found; this key is required",
        "common_dump_settings.support_device: not found; this key is required",
    ])
    check_error([write("broken.json", '{"common_dump_settings": {')],
                ["Parse dump json failed, error:"])


def test_unknown_keys_warn_with_a_suggestion(write):
    config = json.loads(json.dumps(TUTORIAL))
    config["common_dump_settings"]["kernal"] = []
    config["e2e_dump_settings"]["trans_flags"] = True
    _, err = check_ok([write("typo.json", config)])
    assert "common_dump_settings.kernal: unknown key, ignored; did you mean \"kernels\"?" in err
    assert ("e2e_dump_settings.trans_flags: unknown key, ignored; did you mean "
            "\"trans_flag\"?") in err


def test_file_errors(write, scratch):
    check_error([os.path.join(scratch, "absent.json")],
                ["absent.json: the dump config file does not exist"])
    check_error([write("data_dump.txt", TUTORIAL)],
                ["dump config file suffix only supports json! But got:\".txt\""])


def test_environment(write):
    gd = write("gd.json", TUTORIAL)
    ms_config = json.loads(json.dumps(TUTORIAL))
    ms_config["common_dump_settings"]["net_name"] = "FromMindSpore"
    ms = write("ms.json", ms_config)
    out, err = check_ok([], {"MINDSPORE_DUMP_CONFIG": ms})
    assert out["common_dump_settings"]["net_name"] == "FromMindSpore"
    assert "both set" not in err
    out, err = check_ok([], {"GRAPHDUMP_CONFIG": gd, "MINDSPORE_DUMP_CONFIG": ms})
    assert out["common_dump_settings"]["net_name"] == "ResNet50"
    assert "are both set; using GRAPHDUMP_CONFIG" in err
    check_error([], ["neither GRAPHDUMP_CONFIG nor MINDSPORE_DUMP_CONFIG is set"])


def test_diagnostic_path(write):
    config = json.loads(json.dumps(TUTORIAL))
    config["common_dump_settings"]["path"] = ""
    path = write("nopath.json", config)
    check_error([path], ["Dump path is empty. Please set it in dump json file or "
                         "environment variable `MS_DIAGNOSTIC_DATA_PATH`"])
    out, _ = check_ok([path], {"MS_DIAGNOSTIC_DATA_PATH": "/var/diag"})
    assert out["common_dump_settings"]["path"] == "/var/diag/debug_dump"


def test_help_teaches():
    result = subprocess.run([BIN, "check-config", "--help"], capture_output=True, text=True)
    assert result.returncode == 0
    assert "Example" in result.stdout
    assert "GRAPHDUMP_CONFIG" in result.stdout
    usage = subprocess.run([BIN, "check-config", "a.json", "b.json"], capture_output=True,
                           text=True)
    assert usage.returncode == 2

