#!/usr/bin/env python3
"""safetensors_torch.py — PyTorch's side of tests/test_serialize.c.

A CIFAR ResNet-20 built in torch (conv1 3x3 16 no bias, bn1, relu,
layer1..3 of 3 BasicBlocks 16/32/64, the first block of layer2 and layer3
with stride 2 and a downsample (1x1 conv, no bias, stride 2; BN), adaptive
average pool, fc Linear(64, 10)), evaluated in eval mode.

    safetensors_torch.py check  MODEL INPUT N C H W LOGITS
        loads MODEL (written by sublinear) with load_state_dict(strict=True),
        runs INPUT and compares with LOGITS (sublinear's outputs);
        fails when max|ours - torch| / max|torch| > 1e-4.
    safetensors_torch.py export MODEL INPUT N C H W LOGITS
        writes a seeded torch ResNet-20 (BatchNorm statistics and affine
        parameters randomised so they matter) to MODEL and torch's outputs
        for INPUT to LOGITS.

INPUT and LOGITS are raw little-endian float32. Files are read and written
with the `safetensors` package when it is importable, else with struct and
json (the format is an 8-byte little-endian header length, a JSON header,
then the raw data).
"""
import json
import struct
import sys

import torch
import torch.nn as nn

REL_TOL = 1e-4

try:
    import safetensors.torch as st_torch
except ImportError:
    st_torch = None

DTYPES = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16,
          "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32,
          "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool}


def read_safetensors(path):
    if st_torch is not None:
        return st_torch.load_file(path)
    with open(path, "rb") as f:
        raw = f.read()
    (hlen,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + hlen])
    data = raw[8 + hlen:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        begin, end = e["data_offsets"]
        dtype = DTYPES[e["dtype"]]
        if end > begin:
            t = torch.frombuffer(bytearray(data[begin:end]), dtype=dtype)
        else:
            t = torch.empty(0, dtype=dtype)
        out[name] = t.reshape(e["shape"]).clone()
    return out


def write_safetensors(path, tensors):
    if st_torch is not None:
        st_torch.save_file(tensors, path, metadata={"format": "pt"})
        return
    names = {v: k for k, v in DTYPES.items()}
    header, blobs, at = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        b = t.detach().contiguous().cpu().numpy().tobytes()
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape),
                        "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        idt = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(y)) + idt)


class ResNet20(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu = nn.ReLU(inplace=True)
        cin = 16
        for s, width in enumerate((16, 32, 64)):
            blocks = []
            for b in range(3):
                blocks.append(BasicBlock(cin, width, 2 if (b == 0 and s > 0) else 1))
                cin = width
            setattr(self, "layer%d" % (s + 1), nn.Sequential(*blocks))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def read_floats(path, shape):
    with open(path, "rb") as f:
        return torch.frombuffer(bytearray(f.read()), dtype=torch.float32).reshape(shape).clone()


def check(model_path, x, ours_path):
    model = ResNet20()
    state = read_safetensors(model_path)
    model.load_state_dict(state, strict=True)  # every key, no extra: raises otherwise
    model.eval()
    with torch.no_grad():
        ref = model(x)
    ours = read_floats(ours_path, ref.shape)
    err = (ours - ref).abs().max().item() / max(ref.abs().max().item(), 1e-12)
    print("torch read %d tensors; relative error of outputs %.3g" % (len(state), err))
    return 0 if err <= REL_TOL else 1


def export(model_path, x, logits_path):
    torch.manual_seed(1234)
    model = ResNet20()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.3, 0.3)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.6, 1.2)
                m.bias.uniform_(-0.2, 0.2)
                m.num_batches_tracked.fill_(7)
    model.eval()
    write_safetensors(model_path, {k: v for k, v in model.state_dict().items()})
    with torch.no_grad():
        out = model(x)
    with open(logits_path, "wb") as f:
        f.write(out.contiguous().numpy().astype("<f4").tobytes())
    print("torch wrote %d tensors (%s)" % (len(model.state_dict()),
                                           "safetensors" if st_torch else "struct+json"))
    return 0


def main(argv):
    if len(argv) != 9 or argv[1] not in ("check", "export"):
        print(__doc__)
        return 2
    n, c, h, w = (int(v) for v in argv[4:8])
    x = read_floats(argv[3], (n, c, h, w))
    torch.set_num_threads(2)
    if argv[1] == "check":
        return check(argv[2], x, argv[8])
    return export(argv[2], x, argv[8])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
