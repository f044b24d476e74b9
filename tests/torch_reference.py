"""PyTorch reference results for tests/test_torch_reference.c.

Usage: torch_reference.py DIR
       torch_reference.py --condition DIR

Every subdirectory of DIR that holds a case.txt is one case written by the
C test: a manifest naming the layers (or a whole model), the mode, the
inputs and every named tensor of the network, with the tensors as raw
little-endian float32 files beside it (the manifest format is described at
the top of test_torch_reference.c). This script builds the same network
from torch.nn modules, loads the tensors by name, runs the case in float64
on the CPU and writes each result as ref.<key>.bin (little-endian
float64): out, dx, loss, loss.<step>, grad.<param>, after.<param>, and
margin: how far (relative) the data stays from every ReLU kink and max-pool
tie, so that the C test can tell an ill-conditioned case from a wrong one.

With --condition, the script instead runs the conditioning pass on every
case (see condition_case) and rewrites the BatchNorm biases; the C test
reloads them before it runs the case.

Any mismatch between the manifest and the torch model (a tensor name
missing on either side, a shape that differs) is an error: the script
exits nonzero with the reason on stderr.
"""
import collections
import hashlib
import os
import shutil
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


# ---------------------------------------------------------------------------
# Conditioning: a float32 result can only be compared with a float64 one
# where the network is smooth at float32 resolution. MARGINS collects, for
# every ReLU input, min|x| / max|x| (distance from the kink) and, for every
# max pool, the smallest gap between a window's maximum and its runner-up
# over max|x|. The smallest of them is written as ref.margin.bin.

MARGINS = []

# In the conditioning pass (--condition), the relative margin each ReLU input
# is given by shifting the bias of the BatchNorm that adds into it.
CONDITION_TARGET = 4e-5
conditioning = {"on": False, "shifts": []}


def condition(x, bn):
    """Shifts bn's bias (and x with it) in the channels where an input lies
    within CONDITION_TARGET * max|x| of 0, to the middle of the nearest gap
    between the channel's values that is wide enough."""
    t = CONDITION_TARGET * float(x.abs().max())
    for c in torch.nonzero(x.abs().amin(dim=(0, 2, 3)) < t).flatten().tolist():
        v = x[:, c].flatten().sort().values
        mids, widths = (v[1:] + v[:-1]) / 2, v[1:] - v[:-1]
        wide = torch.nonzero(widths >= 2.5 * t).flatten()
        if len(wide) == 0:
            continue  # left for the margin check to report
        shift = -float(mids[wide[mids[wide].abs().argmin()]])
        bn.bias[c] += shift
        x[:, c] += shift
        conditioning["shifts"].append(shift)
    return x


def relu(x, bn=None):
    """ReLU that records its margin; bn is the BatchNorm whose output is added
    into x (None where there is none), used by the conditioning pass."""
    if conditioning["on"] and bn is not None:
        x = condition(x, bn)
    a = x.detach().abs()
    MARGINS.append(float(a.min() / a.max().clamp_min(1e-300)))
    return F.relu(x)


class ReLU(nn.Module):
    def __init__(self, bn=None):
        super().__init__()
        self._bn = [bn]  # in a list: not a child module, not in the state dict

    def forward(self, x):
        return relu(x, self._bn[0])


class MaxPool2d(nn.MaxPool2d):
    def forward(self, x):
        y = super().forward(x)
        k, s, p = self.kernel_size, self.stride, self.padding
        n, c, h, w = x.shape
        # pad with -inf to cover every window (ceil mode may need more on the right)
        need_h, need_w = (y.shape[2] - 1) * s + k, (y.shape[3] - 1) * s + k
        xp = F.pad(x.detach(), (p, max(0, need_w - w - p), p, max(0, need_h - h - p)),
                   value=float("-inf"))
        windows = F.unfold(xp.reshape(n * c, 1, xp.shape[2], xp.shape[3]), k, stride=s)
        top2 = windows.topk(2, dim=1).values
        gap = (top2[:, 0] - top2[:, 1]).min()
        MARGINS.append(float(gap / x.detach().abs().max().clamp_min(1e-300)))
        return y


# ---------------------------------------------------------------------------
# Modules with torchvision's structure and names


class FlatLinear(nn.Linear):
    """nn.Linear over the flattened input, as the library's Linear."""

    def forward(self, x):
        return super().forward(x.flatten(1))


class BasicConv2d(nn.Module):
    """torchvision's GoogLeNet BasicConv2d: conv (no bias), BN eps 1e-3, ReLU."""

    def __init__(self, cin, cout, kernel, stride, pad):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel, stride, pad, bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=0.001)

    def forward(self, x):
        return relu(self.bn(self.conv(x)), self.bn)


def projection(cin, cout, stride):
    return nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = projection(cin, cout, stride) if stride != 1 or cin != cout else None

    def forward(self, x):
        y = self.bn2(self.conv2(relu(self.bn1(self.conv1(x)), self.bn1)))
        shortcut = self.downsample(x) if self.downsample is not None else x
        return relu(y + shortcut, self.bn2)


class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride):
        super().__init__()
        cout = 4 * width
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.downsample = projection(cin, cout, stride) if stride != 1 or cin != cout else None

    def forward(self, x):
        y = relu(self.bn1(self.conv1(x)), self.bn1)
        y = relu(self.bn2(self.conv2(y)), self.bn2)
        y = self.bn3(self.conv3(y))
        shortcut = self.downsample(x) if self.downsample is not None else x
        return relu(y + shortcut, self.bn3)


class Inception(nn.Module):
    """torchvision's GoogLeNet Inception block (3x3 in the third branch)."""

    def __init__(self, cin, c1, c3r, c3, c5r, c5, pool_proj):
        super().__init__()
        self.branch1 = BasicConv2d(cin, c1, 1, 1, 0)
        self.branch2 = nn.Sequential(BasicConv2d(cin, c3r, 1, 1, 0), BasicConv2d(c3r, c3, 3, 1, 1))
        self.branch3 = nn.Sequential(BasicConv2d(cin, c5r, 1, 1, 0), BasicConv2d(c5r, c5, 3, 1, 1))
        self.branch4 = nn.Sequential(MaxPool2d(3, 1, 1, ceil_mode=True),
                                     BasicConv2d(cin, pool_proj, 1, 1, 0))

    def forward(self, x):
        return torch.cat([self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x)], 1)


def make_layer(spec, previous=None):
    """A module from a layer spec line of the manifest (see make_layer in the
    C test); previous is the module before it."""
    kind, args = spec[0], spec[1:]
    i = [int(a) for a in args] if kind != "batchnorm2d_ex" else None
    if kind == "conv2d":
        cin, cout, kh, kw, sh, sw, ph, pw, dh, dw, groups, bias = i
        return nn.Conv2d(cin, cout, (kh, kw), (sh, sw), (ph, pw), (dh, dw), groups, bool(bias))
    if kind == "conv":
        cin, cout, k, s, p = i
        return nn.Conv2d(cin, cout, k, s, p, bias=False)
    if kind == "batchnorm2d":
        return nn.BatchNorm2d(i[0])  # PyTorch's defaults: momentum 0.1, eps 1e-5
    if kind == "batchnorm2d_ex":
        return nn.BatchNorm2d(int(args[0]), momentum=float(args[1]), eps=float(args[2]))
    if kind == "relu":
        return ReLU(previous if isinstance(previous, nn.BatchNorm2d) else None)
    if kind == "global_avgpool":
        return nn.AdaptiveAvgPool2d(1)
    if kind == "flatten":
        return nn.Flatten()
    if kind == "maxpool":
        return MaxPool2d(i[0], i[1], i[2])
    if kind == "maxpool_ceil":
        return MaxPool2d(i[0], i[1], i[2], ceil_mode=True)
    if kind == "avgpool":
        return nn.AvgPool2d(i[0], i[1], i[2], count_include_pad=True)
    if kind == "linear":
        return FlatLinear(i[0], i[1], bias=bool(i[2]))
    if kind == "basic_block":
        return BasicBlock(*i)
    if kind == "bottleneck":
        return Bottleneck(*i)
    if kind == "inception":
        return Inception(*i)
    if kind == "conv_bn_relu":
        return BasicConv2d(*i)
    raise ValueError("unknown layer spec %r" % " ".join(spec))


def cifar_resnet(depth, classes):
    """He et al.'s CIFAR ResNet (depth 6n+2) with torchvision-style names."""
    n = (depth - 2) // 6
    layers = collections.OrderedDict()
    layers["conv1"] = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
    layers["bn1"] = nn.BatchNorm2d(16)
    layers["relu"] = ReLU(layers["bn1"])
    cin = 16
    for stage, width in enumerate((16, 32, 64), start=1):
        blocks = []
        for b in range(n):
            blocks.append(BasicBlock(cin, width, 2 if stage > 1 and b == 0 else 1))
            cin = width
        layers["layer%d" % stage] = nn.Sequential(*blocks)
    layers["avgpool"] = nn.AdaptiveAvgPool2d(1)
    layers["flatten"] = nn.Flatten()
    layers["fc"] = nn.Linear(64, classes)
    return nn.Sequential(layers)


# ---------------------------------------------------------------------------
# Cases


def read_floats(path, shape):
    """A float32 file as a float64 tensor of the given shape."""
    a = np.fromfile(path, dtype="<f4")
    if a.size != int(np.prod(shape)):
        raise ValueError("%s: %d values, expected shape %s" % (path, a.size, shape))
    return torch.from_numpy(a.astype(np.float64).reshape(shape))


def write_ref(case_dir, key, tensor):
    data = tensor.detach().cpu().numpy().astype("<f8").ravel()
    data.tofile(os.path.join(case_dir, "ref.%s.bin" % key))


def parse_manifest(case_dir):
    case = {"layers": [], "inputs": [], "labels": {}, "params": [], "model": None}
    with open(os.path.join(case_dir, "case.txt")) as f:
        for line in f:
            w = line.split()
            if not w:
                continue
            if w[0] == "mode":
                case["mode"] = w[1]
            elif w[0] == "layer":
                case["layers"].append((w[1], w[2:]))
            elif w[0] == "model":
                case["model"] = (w[1], int(w[2]))
            elif w[0] == "input":
                case["inputs"].append((w[1], [int(d) for d in w[2:6]]))
            elif w[0] == "dy":
                case["dy"] = (w[1], [int(d) for d in w[2:6]])
            elif w[0] == "labels":
                case["labels"][int(w[1])] = torch.tensor([int(v) for v in w[2:]])
            elif w[0] == "optimizer":
                case["optimizer"] = (w[1], [float(v) for v in w[2:]])
            elif w[0] == "steps":
                case["steps"] = int(w[1])
            elif w[0] == "param":
                ndim = int(w[3])
                case["params"].append((w[1], bool(int(w[2])), [int(d) for d in w[4:4 + ndim]]))
            else:
                raise ValueError("%s: unknown directive %r" % (case_dir, w[0]))
    return case


def build_model(case):
    if case["model"] is not None:
        name, classes = case["model"]
        if name not in ("resnet20", "resnet56", "resnet110"):
            raise ValueError("no reference for model %r" % name)
        return cifar_resnet(int(name[len("resnet"):]), classes)
    layers = collections.OrderedDict()
    for name, spec in case["layers"]:
        layers[name] = make_layer(spec, next(reversed(layers.values()), None))
    return nn.Sequential(layers)


def load_tensors(model, case, case_dir):
    """Copies every manifest tensor into the model; both sides must name the same set."""
    ours = {name: (trainable, shape) for name, trainable, shape in case["params"]}
    params = dict(model.named_parameters())
    theirs = {k: v for k, v in model.state_dict(keep_vars=True).items()
              if not k.endswith("num_batches_tracked")}
    if set(ours) != set(theirs):
        raise ValueError("tensor names differ: only ours %s, only torch %s"
                         % (sorted(set(ours) - set(theirs)), sorted(set(theirs) - set(ours))))
    for name, (trainable, shape) in ours.items():
        t = theirs[name]
        if trainable != (name in params):
            raise ValueError("%s: trainable %d here, not in torch" % (name, trainable))
        value = read_floats(os.path.join(case_dir, "param.%s.bin" % name), shape)
        if tuple(t.shape) != tuple(value.shape):
            raise ValueError("%s: shape %s here, %s in torch" % (name, shape, list(t.shape)))
        with torch.no_grad():
            t.copy_(value)


def write_params(model, case_dir, grads, values, only_buffers=False):
    for name, t in model.state_dict(keep_vars=True).items():
        if name.endswith("num_batches_tracked"):
            continue
        is_param = isinstance(t, nn.Parameter)
        if grads and is_param:
            write_ref(case_dir, "grad." + name, t.grad)
        if values and (not only_buffers or not is_param):
            write_ref(case_dir, "after." + name, t)


def make_optimizer(spec, params):
    kind, v = spec
    if kind == "sgd":
        lr, momentum, weight_decay, nesterov = v
        return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay,
                               nesterov=bool(nesterov))
    if kind == "adam":
        lr, beta1, beta2, eps, weight_decay = v
        return torch.optim.Adam(params, lr=lr, betas=(beta1, beta2), eps=eps,
                                weight_decay=weight_decay)
    raise ValueError("unknown optimizer %r" % kind)


def load_case(case_dir):
    del MARGINS[:]
    case = parse_manifest(case_dir)
    model = build_model(case).double()
    load_tensors(model, case, case_dir)
    inputs = [read_floats(os.path.join(case_dir, f), s) for f, s in case["inputs"]]
    return case, model, inputs


def condition_case(case_dir):
    """The conditioning pass: a training forward that moves every ReLU input
    at least CONDITION_TARGET (relative) away from 0 by shifting BatchNorm
    biases, which are written back over param.<bn>.bias.bin (float32)."""
    case, model, inputs = load_case(case_dir)
    conditioning.update(on=True, shifts=[])
    try:
        with torch.no_grad():
            model.train()
            model(inputs[0])
    finally:
        conditioning["on"] = False
    for name, module in model.named_modules():
        if isinstance(module, nn.BatchNorm2d):
            data = module.bias.detach().numpy().astype("<f4")
            data.tofile(os.path.join(case_dir, "param.%s.bias.bin" % (name,)))
    shifts = conditioning["shifts"]
    print("%s: conditioning shifted %d BN channel(s), largest shift %.2e"
          % (os.path.basename(case_dir), len(shifts), max(map(abs, shifts), default=0.0)))


def run_case(case_dir):
    case, model, inputs = load_case(case_dir)
    mode = case["mode"]

    if mode in ("forward_backward", "forward_backward_eval"):
        # eval: BatchNorm normalises with its running statistics (our frozen
        # BatchNorm), and autograd differentiates through that
        model.train(mode == "forward_backward")
        x = inputs[0].clone().requires_grad_(True)
        out = model(x)
        dy = read_floats(os.path.join(case_dir, case["dy"][0]), case["dy"][1])
        out.backward(dy.reshape(out.shape))
        write_ref(case_dir, "out", out)
        write_ref(case_dir, "dx", x.grad)
        write_params(model, case_dir, grads=True, values=True, only_buffers=True)
    elif mode == "predict":
        model.eval()
        with torch.no_grad():
            write_ref(case_dir, "out", model(inputs[0]))
    elif mode == "cross_entropy":
        model.train()
        loss = F.cross_entropy(model(inputs[0]).flatten(1), case["labels"][0])
        loss.backward()
        write_ref(case_dir, "loss", loss)
        write_params(model, case_dir, grads=True, values=True, only_buffers=True)
    elif mode == "train":
        model.train()
        opt = make_optimizer(case["optimizer"], model.parameters())
        for k in range(case["steps"]):
            opt.zero_grad()
            loss = F.cross_entropy(model(inputs[k]).flatten(1), case["labels"][k])
            loss.backward()
            opt.step()
            write_ref(case_dir, "loss.%d" % k, loss)
        write_params(model, case_dir, grads=False, values=True)
    else:
        raise ValueError("unknown mode %r" % mode)
    write_ref(case_dir, "margin", torch.tensor([min(MARGINS, default=1.0)]))


def case_inputs(case_dir):
    """The files the C test wrote for a case: the manifest and param/input files."""
    return sorted(f for f in os.listdir(case_dir)
                  if f == "case.txt" or (f.endswith(".bin") and not f.startswith("ref.")))


def fingerprint(case_dir):
    h = hashlib.sha256()
    for f in case_inputs(case_dir):
        h.update(f.encode() + b"\0")
        with open(os.path.join(case_dir, f), "rb") as data:
            h.update(data.read())
    return h.hexdigest()


def main(argv):
    if len(argv) == 3 and argv[1] == "--condition":
        action, root, products = condition_case, argv[2], "param."
    elif len(argv) == 2:
        action, root, products = run_case, argv[1], "ref."
    else:
        sys.exit(__doc__)
    torch.set_num_threads(2)
    done = {}  # fingerprint -> a case directory already handled
    for name in sorted(os.listdir(root)):
        case_dir = os.path.join(root, name)
        if not os.path.isfile(os.path.join(case_dir, "case.txt")):
            continue
        key = fingerprint(case_dir)
        if key in done:  # the same case again (e.g. under another schedule)
            for f in os.listdir(done[key]):
                if f.startswith(products):
                    shutil.copyfile(os.path.join(done[key], f), os.path.join(case_dir, f))
            print("%s: same inputs as %s, results reused" % (name, os.path.basename(done[key])))
            continue
        try:
            action(case_dir)
        except Exception as e:
            sys.exit("torch_reference.py: case %s: %s: %s" % (name, type(e).__name__, e))
        done[key] = case_dir


if __name__ == "__main__":
    main(sys.argv)
