"""gpu_libs.py — what a PyTorch GPU result was measured on, read from the
bench's own process, with the same keys as bench_gpt2.c and bench_gpu.c
print (bench/gpu_info.c): "device" (the GPU's name), "cudart", "cudnn"
(cudnnGetVersion: 91900 is 9.19.0), "cublas" ("13.0.2"), "cublaslt"
(cublasLtGetVersion) and "gpu_libs" (the files of the CUDA runtime, cuDNN,
cuBLAS and NCCL the process mapped, from /proc/self/maps). The versions
are asked of the loaded libraries themselves (ctypes), so they are the
ones the step ran with, whichever copy PyTorch's wheels brought; None
where a library is not loaded. Call it after a step ran.
"""
import ctypes
import os

WANTED = ("libcudart", "libcudnn", "libcublas", "libnccl")


def loaded_files():
    """Real paths of the mapped CUDA runtime, cuDNN, cuBLAS and NCCL files."""
    seen = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                i = line.find("/")
                if i < 0:
                    continue
                path = line[i:].strip()
                if os.path.basename(path).startswith(WANTED):
                    real = os.path.realpath(path)
                    if real not in seen:
                        seen.append(real)
    except OSError:
        pass
    return seen


def _call(files, prefix, name, restype, *args):
    """name(*args) from the first loaded file whose name starts with prefix."""
    for path in files:
        base = os.path.basename(path)
        if not base.startswith(prefix) or (prefix == "libcublas" and base.startswith("libcublasLt")):
            continue
        try:
            fn = getattr(ctypes.CDLL(path), name)
        except (OSError, AttributeError):
            continue
        fn.restype = restype
        return fn(*args)
    return None


def describe(torch, gpu=0):
    """The device and the libraries' versions, as a dict of JSON fields."""
    files = loaded_files()
    out = {"device": torch.cuda.get_device_name(gpu) if torch.cuda.is_available() else None}
    v = ctypes.c_int(0)
    rc = _call(files, "libcudart", "cudaRuntimeGetVersion", ctypes.c_int, ctypes.byref(v))
    out["cudart"] = v.value if rc == 0 else None
    out["cudnn"] = _call(files, "libcudnn", "cudnnGetVersion", ctypes.c_size_t)
    parts = []
    for prop in (0, 1, 2):  # major, minor, patch level
        v = ctypes.c_int(0)
        if _call(files, "libcublas", "cublasGetProperty", ctypes.c_int, prop, ctypes.byref(v)) != 0:
            break
        parts.append(str(v.value))
    out["cublas"] = ".".join(parts) if len(parts) == 3 else None
    out["cublaslt"] = _call(files, "libcublasLt", "cublasLtGetVersion", ctypes.c_size_t)
    out["gpu_libs"] = files
    return out
