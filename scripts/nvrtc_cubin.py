"""Compile a CUDA C++ file with NVRTC (no GPU needed), as burn-cuda does (cubecl-cuda's options):

    nvrtc_cubin.py SRC.cu OUT.cubin [ARCH]    a cubin for a real architecture (sm_90a: H100/H200)
    nvrtc_cubin.py SRC.cu OUT.ptx compute_90a  PTX for a virtual one

$CUDA_WHEELS is the `nvidia` folder of NVIDIA's PyPI wheels (scripts/product_sass.sh fetches them)."""
import ctypes, sys, os
root = os.environ["CUDA_WHEELS"]
nvrtc = ctypes.CDLL(f"{root}/cuda_nvrtc/lib/libnvrtc.so.12")
src, out = sys.argv[1], sys.argv[2]
arch = sys.argv[3] if len(sys.argv) > 3 else "sm_90a"
prog = ctypes.c_void_p()
code = open(src, "rb").read()
assert nvrtc.nvrtcCreateProgram(ctypes.byref(prog), code, b"kernel.cu", 0, None, None) == 0
opts = [f"--gpu-architecture={arch}".encode(), f"--include-path={root}/cuda_runtime/include".encode(),
        f"--include-path={root}/cuda_cccl/include".encode(), b"-lineinfo"]
arr = (ctypes.c_char_p * len(opts))(*opts)
rc = nvrtc.nvrtcCompileProgram(prog, len(opts), arr)
size = ctypes.c_size_t()
nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
log = ctypes.create_string_buffer(size.value)
nvrtc.nvrtcGetProgramLog(prog, log)
if log.value.strip():
    sys.stderr.write(log.value.decode() + "\n")
if rc != 0:
    sys.exit(f"nvrtc failed: {rc}")
kind = "PTX" if arch.startswith("compute_") else "CUBIN"
getattr(nvrtc, f"nvrtcGet{kind}Size")(prog, ctypes.byref(size))
buf = ctypes.create_string_buffer(size.value)
assert getattr(nvrtc, f"nvrtcGet{kind}")(prog, buf) == 0
open(out, "wb").write(buf.raw.rstrip(b"\0") if kind == "PTX" else buf.raw)
