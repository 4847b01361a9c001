#!/usr/bin/env python3
"""Makes the TorchScript models graphdump's demo and tests run.

usage: .venv/bin/python examples/make_models.py OUT_DIR [NAME...]

Writes OUT_DIR/{NAME}.pt for each NAME (all models when none is given). Every model is made
from a fixed seed, so the same command always writes the same weights. Models are scripted
(torch.jit.script) so that graphdump's source traces name exact Python lines; `traced_mlp` is
traced (torch.jit.trace) to exercise stack-text parsing.

  alexnet        AlexNet, torchvision's layers (classifier width 4096), 10 classes (inputs >= 63x63)
  demo_alexnet   AlexNet as in MindSpore's dump tutorial, defined below (classifier width 1024)
  resnet18       ResNet-18 with torchvision's layers, 10 classes (vision_models.py)
  mobilenet_v2   MobileNetV2 with torchvision's layers, 10 classes (vision_models.py)
  ifloop         data-dependent if and a loop (scripted control flow)
  failing        fails at a known kernel (its matmul line) for exception dump
  small_cnn      conv/relu/pool/linear, no dropout: training parity with torch.optim
  mlp            two linear layers, no dropout
  traced_mlp     mlp traced instead of scripted
  channels_last  produces channels-last and transposed (non-contiguous) tensors (trans_flag)
"""
import contextlib
import os
import sys
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F
import vision_models  # beside this file: ResNet-18 and MobileNetV2 in plain torch.nn


class AlexNet(nn.Module):
    """AlexNet (Krizhevsky et al.): torchvision's with hidden 4096, MindSpore's tutorial's 1024."""

    def __init__(self, num_classes: int = 10, hidden: int = 1024):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, kernel_size=11, stride=4, padding=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(64, 192, kernel_size=5, padding=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(192, 384, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
        )
        self.avgpool = nn.AdaptiveAvgPool2d((6, 6))
        self.classifier = nn.Sequential(
            nn.Dropout(p=0.5),
            nn.Linear(256 * 6 * 6, hidden),
            nn.ReLU(inplace=True),
            nn.Dropout(p=0.5),
            nn.Linear(hidden, hidden),
            nn.ReLU(inplace=True),
            nn.Linear(hidden, num_classes),
        )

    def forward(self, x):
        x = self.features(x)
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        x = self.classifier(x)
        return x


class IfLoop(nn.Module):
    """Data-dependent control flow: an if on a tensor value and a loop with a carried value."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, 16)
        self.block = nn.Sequential(nn.Linear(16, 16), nn.Tanh())
        self.out = nn.Linear(16, 4)

    def forward(self, x):
        h = self.inp(x)
        if h.sum() > 0:
            h = torch.relu(h)
        else:
            h = torch.sigmoid(h)
        for i in range(3):
            h = self.block(h) + h * 0.5
        parts = [h, h * 2.0]
        h = torch.cat(parts, dim=0)
        return self.out(h)


class Failing(nn.Module):
    """A matmul whose shapes never fit: fails at a known kernel."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 6)
        self.weight = nn.Parameter(torch.randn(5, 3))

    def forward(self, x):
        h = torch.relu(self.fc(x))
        y = torch.matmul(h, self.weight)  # FAILS_HERE
        return y


class SmallCnn(nn.Module):
    """No dropout, so training is deterministic and comparable with torch.optim."""

    def __init__(self, num_classes: int = 5):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, kernel_size=3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, kernel_size=3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Sequential(nn.Linear(16 * 4 * 4, 32), nn.ReLU(), nn.Linear(32, num_classes))

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        return self.fc(x)


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(12, 32)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(32, 3)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class ChannelsLast(nn.Module):
    """Outputs whose memory order differs from their logical NCHW order."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, kernel_size=3, padding=1)

    def forward(self, x):
        x = x.contiguous(memory_format=torch.channels_last)
        y = self.conv(x)
        z = y.transpose(2, 3) * 1.0
        return torch.flatten(z, 1)


class TimesOne(nn.Module):
    """One elementwise kernel: what dumping adds to a single big tensor (bench/e2e_bench.py)."""

    def forward(self, x):
        return x * 1.0


class WideMlp(nn.Module):
    """About 128 MiB of float32 parameters, for peak-memory measurements (bench/e2e_bench.py)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(256, 4096)
        self.fc2 = nn.Linear(4096, 4096)
        self.fc3 = nn.Linear(4096, 4096)
        self.head = nn.Linear(4096, 10)

    def forward(self, x):
        return self.head(torch.relu(self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))))


def eager(name):
    """The model as an eager nn.Module, made from the fixed seed."""
    torch.manual_seed(0)
    builders = {
        "alexnet": lambda: AlexNet(hidden=4096).eval(),
        "demo_alexnet": lambda: AlexNet(),
        "resnet18": lambda: vision_models.ResNet18(num_classes=10).eval(),
        "mobilenet_v2": lambda: vision_models.MobileNetV2(num_classes=10).eval(),
        "ifloop": lambda: IfLoop().eval(),
        "failing": lambda: Failing().eval(),
        "small_cnn": lambda: SmallCnn(),
        "mlp": lambda: Mlp(),
        "traced_mlp": lambda: Mlp().eval(),
        "channels_last": lambda: ChannelsLast().eval(),
        "times_one": lambda: TimesOne().eval(),
        "wide_mlp": lambda: WideMlp(),
    }
    if name not in builders:
        raise SystemExit(f"make_models.py: unknown model '{name}'; known: {', '.join(MODELS)}")
    return builders[name]()


# What torch.jit.script, trace, save and load warn since torch 2.10: "`torch.jit.script` is
# deprecated. ..." (a DeprecationWarning, a FutureWarning from torch 2.14; "... is not supported
# in Python 3.14+ ..." there). These models exist to be TorchScript, so the warning says nothing
# to whoever makes them; any other warning shows as usual.
TORCHSCRIPT_DEPRECATION = r"`torch\.jit\.\w+` is (deprecated|not supported in Python)"


@contextlib.contextmanager
def torchscript_deprecation_silenced():
    """Within it, TorchScript's deprecation warnings are not shown; other warnings are."""
    with warnings.catch_warnings():
        for category in (DeprecationWarning, FutureWarning):
            warnings.filterwarnings("ignore", TORCHSCRIPT_DEPRECATION, category)
        yield


def make(name):
    """The model as a TorchScript module (traced for traced_mlp, scripted otherwise)."""
    module = eager(name)
    with torchscript_deprecation_silenced():
        if name == "traced_mlp":
            return torch.jit.trace(module, torch.randn(2, 12))
        return torch.jit.script(module)


MODELS = ["alexnet", "demo_alexnet", "resnet18", "mobilenet_v2", "ifloop", "failing",
          "small_cnn", "mlp", "traced_mlp", "channels_last", "times_one", "wide_mlp"]


def main(argv):
    if len(argv) >= 2 and argv[1] in ("-h", "--help"):
        print(__doc__)
        return
    def usage_error(message):
        print(f"make_models.py: {message}\n{__doc__}", file=sys.stderr)
        sys.exit(2)

    if len(argv) < 2:
        usage_error("missing OUT_DIR")
    if argv[1].startswith("-"):
        usage_error(f"unknown option '{argv[1]}'")
    unknown = [name for name in argv[2:] if name not in MODELS]
    if unknown:  # before writing anything
        usage_error(f"unknown model '{unknown[0]}'; known: {', '.join(MODELS)}")
    out_dir = argv[1]
    os.makedirs(out_dir, exist_ok=True)
    torch.set_num_threads(1)
    for name in argv[2:] or MODELS:
        path = os.path.join(out_dir, name + ".pt")
        make(name).save(path)
        print(f"make_models.py: wrote {path}")


if __name__ == "__main__":
    main(sys.argv)
