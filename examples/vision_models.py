"""ResNet-18 and MobileNetV2 in plain torch.nn, for examples/make_models.py.

The layers, their order and their module names are those of torchvision's resnet18 and
mobilenet_v2 (width 1.0), so that a dump names the kernels as it would for torchvision's models;
torchvision itself does not import beside the CPU wheel of torch the project pins. Both script
with torch.jit.script. (The AlexNet of torchvision is make_models.AlexNet with hidden=4096.)
"""
from typing import List, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F


def _init_weights(model: nn.Module, linear_std: Optional[float]):
    """He initialisation of the convolutions (fan out), unit batch norms; linear layers drawn
    from N(0, linear_std) with zero bias when linear_std is given (MobileNetV2), else left at
    PyTorch's default (ResNet)."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear) and linear_std is not None:
            nn.init.normal_(m.weight, 0.0, linear_std)
            nn.init.zeros_(m.bias)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with batch norm and a shortcut; `downsample` (a 1x1 convolution and
    a batch norm) adapts the shortcut when the block changes stride or width, else None."""

    def __init__(self, in_channels: int, channels: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.downsample: Optional[nn.Module] = None
        if stride != 1 or in_channels != channels:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_channels, channels, 1, stride=stride, bias=False),
                nn.BatchNorm2d(channels))
        self.stride = stride

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class ResNet18(nn.Module):
    """ResNet-18 (He et al.): a 7x7 stem, four stages of two basic blocks (64, 128, 256 and 512
    channels, the last three halving the resolution), global average pooling, one linear
    layer."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._stage(64, 64, stride=1)
        self.layer2 = self._stage(64, 128, stride=2)
        self.layer3 = self._stage(128, 256, stride=2)
        self.layer4 = self._stage(256, 512, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, num_classes)
        _init_weights(self, linear_std=None)

    @staticmethod
    def _stage(in_channels: int, channels: int, stride: int) -> nn.Sequential:
        return nn.Sequential(BasicBlock(in_channels, channels, stride),
                             BasicBlock(channels, channels))

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer1(x)
        x = self.layer2(x)
        x = self.layer3(x)
        x = self.layer4(x)
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        return self.fc(x)


class ConvBNActivation(nn.Sequential):
    """Convolution (no bias, "same" padding), batch norm, ReLU6: torchvision's
    Conv2dNormActivation as MobileNetV2 uses it."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int = 3,
                 stride: int = 1, groups: int = 1):
        super().__init__(
            nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride,
                      padding=(kernel_size - 1) // 2, groups=groups, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU6(inplace=True))


class InvertedResidual(nn.Module):
    """MobileNetV2's block: a 1x1 expansion (left out when expand_ratio is 1), a 3x3 depthwise
    convolution, a linear 1x1 projection; the input is added back when stride and width stay."""

    def __init__(self, in_channels: int, out_channels: int, stride: int, expand_ratio: int):
        super().__init__()
        hidden = in_channels * expand_ratio
        self.use_res_connect = stride == 1 and in_channels == out_channels
        layers: List[nn.Module] = []
        if expand_ratio != 1:
            layers.append(ConvBNActivation(in_channels, hidden, kernel_size=1))
        layers += [ConvBNActivation(hidden, hidden, stride=stride, groups=hidden),
                   nn.Conv2d(hidden, out_channels, 1, bias=False),
                   nn.BatchNorm2d(out_channels)]
        self.conv = nn.Sequential(*layers)
        self.out_channels = out_channels

    def forward(self, x):
        if self.use_res_connect:
            return x + self.conv(x)
        return self.conv(x)


class MobileNetV2(nn.Module):
    """MobileNetV2 (Sandler et al.), width 1.0: a stride-2 stem of 32 channels, 17 inverted
    residual blocks, a 1x1 convolution to 1280 channels, global average pooling, dropout 0.2
    and one linear layer."""

    # (expansion t, output channels c, repeats n, stride of the first s), the paper's Table 2.
    SETTING = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
               (6, 160, 3, 2), (6, 320, 1, 1)]

    def __init__(self, num_classes: int = 10, dropout: float = 0.2):
        super().__init__()
        channels = 32
        features: List[nn.Module] = [ConvBNActivation(3, channels, stride=2)]
        for t, c, n, s in self.SETTING:
            for i in range(n):
                features.append(InvertedResidual(channels, c, s if i == 0 else 1, t))
                channels = c
        features.append(ConvBNActivation(channels, 1280, kernel_size=1))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout), nn.Linear(1280, num_classes))
        _init_weights(self, linear_std=0.01)

    def forward(self, x):
        x = self.features(x)
        x = F.adaptive_avg_pool2d(x, (1, 1))
        x = torch.flatten(x, 1)
        return self.classifier(x)
