"""TorchScript is deprecated (torch >= 2.10: torch.jit.script, trace, save and load warn,
DeprecationWarning up to 2.13, FutureWarning from 2.14). graphdump's own TorchScript calls show
no such warning: make_models.py writes its models silently even where the warnings are errors.
A user's own calls keep Python's behaviour: under `graphdump python`, a script that scripts,
traces, saves and loads modules shows exactly the TorchScript warnings it shows under plain
Python, with the default filters and with every warning shown."""
import os
import re
import subprocess
import sys

import pytest

import gdtest

DEPRECATED = re.compile(r"`torch\.jit\.\w+` is (deprecated|not supported in Python)")

USER_SCRIPT = '''
import sys
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x):
        return torch.relu(self.fc(x))


scripted = torch.jit.script(Net())
traced = torch.jit.trace(Net(), torch.randn(3, 4))
torch.jit.save(scripted, sys.argv[1])
loaded = torch.jit.load(sys.argv[1])
optimizer = torch.optim.SGD(loaded.parameters(), lr=0.1)
for model in (scripted, traced, loaded):
    optimizer.zero_grad()
    model(torch.randn(3, 4)).sum().backward()
    optimizer.step()
print("trained")
'''


def deprecations(stderr):
    return sorted(line for line in stderr.splitlines() if DEPRECATED.search(line))


def test_make_models_shows_no_torchscript_deprecation(scratch):
    script = os.path.join(gdtest.SOURCE_DIR, "examples", "make_models.py")
    p = subprocess.run([gdtest.PYTHON, "-W", "error::DeprecationWarning", "-W",
                        "error::FutureWarning", script, scratch, "ifloop", "traced_mlp"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, f"make_models.py with warnings as errors: {p.stderr[-2000:]}"
    assert not deprecations(p.stderr), f"no TorchScript deprecation shown: {p.stderr}"
    assert os.path.exists(os.path.join(scratch, "traced_mlp.pt"))


@pytest.mark.parametrize("filters", [None, "always"])
def test_user_calls_warn_as_under_plain_python(scratch, filters):
    script = os.path.join(scratch, "user.py")
    with open(script, "w") as f:
        f.write(USER_SCRIPT)
    config = gdtest.write_config(os.path.join(scratch, "dump.json"),
                                 os.path.join(scratch, "dump"), {"saved_data": "statistic"})
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONWARNINGS", "GRAPHDUMP_CONFIG", "MINDSPORE_DUMP_CONFIG")}
    if filters:
        env["PYTHONWARNINGS"] = filters
    plain = subprocess.run([gdtest.PYTHON, script, os.path.join(scratch, "plain.pt")],
                           capture_output=True, text=True, env=env, timeout=600)
    assert plain.returncode == 0 and "trained" in plain.stdout, plain.stderr[-2000:]
    code, out, err = gdtest.run("python", "--config", config, script,
                                os.path.join(scratch, "dumped.pt"),
                                env={"PYTHONWARNINGS": filters} if filters else None)
    assert code == 0 and "trained" in out, f"graphdump python: exit {code}\n{err[-2000:]}"
    # The optimizer holds the loaded module's parameters: the steps after the scripted and the
    # traced module's backward update nothing, and only an update is an optimizer step.
    assert "1 optimizer step(s)" in err, f"the script trained under graphdump:\n{err}"
    expected = deprecations(plain.stderr)
    if filters == "always":
        assert len(expected) >= 4, f"torch warns for script, trace, save and load: {expected}"
    assert deprecations(err) == expected, (
        f"graphdump python shows the user's TorchScript warnings as Python does, and none of "
        f"its own:\nplain python:\n{plain.stderr}\ngraphdump python:\n{err}")


if __name__ == "__main__":
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__]))
