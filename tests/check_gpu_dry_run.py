"""tools/gpu-check without a GPU: a dry run from a bundle of a few of this build's programs
(tools/gpu-bundle --pack). Every step that needs the GPU must say "no device" at once, without
running; the steps that need none (the bundle, the emulator's fragment table) must pass; the
summary must count them so, and the exit status be 77 (nothing measured). Prints how long the
dry run took, and what the run on a GPU would give each step at most (their limits, from the
script), against the 420 s budget.

    python3 tests/check_gpu_dry_run.py BUILD
"""
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def main(build):
    smi = shutil.which("nvidia-smi")
    if smi and subprocess.run([smi, "-L"], capture_output=True, text=True).stdout.startswith("GPU"):
        print("check_gpu_dry_run: this machine has a GPU, so tools/gpu-check would not be a dry run: skipped")
        return 77
    build = pathlib.Path(build).resolve()
    programs = ["tests/mma_probe_emulated", "tests/test_tensor", "tests/test_autograd"]
    if (build / "tests" / "mma_probe").exists():
        programs.append("tests/mma_probe")
    with tempfile.TemporaryDirectory() as scratch:
        stage = pathlib.Path(scratch) / "bundle"
        subprocess.run([str(ROOT / "tools" / "gpu-bundle"), "--pack", str(build), str(stage), *programs], check=True)
        env = dict(os.environ, GPU_CHECK_BUILD=str(stage / "build-gpu"), GPU_CHECK_RESULTS=str(stage / "results"))
        env.pop("OUT", None)
        start = time.monotonic()
        run = subprocess.run([str(ROOT / "tools" / "gpu-check")], env=env, capture_output=True, text=True, timeout=300)
        seconds = time.monotonic() - start
        print(run.stdout)
        lines = [json.loads(line) for line in (stage / "results" / "gpu-check.jsonl").read_text().splitlines()]
    steps = {(r["step"], r.get("device", "")): r for r in lines}
    problems = []
    if run.returncode != 77:
        problems.append(f"exit status {run.returncode}, expected 77 (no device, nothing failed): {run.stderr[-500:]}")
    gpu_steps = ["gpu", "mma_probe", "gpu-test_tensor", "gpu-test_autograd", "gpu-gradcheck", "racecheck-test_cuda_gemm",
                 "racecheck-test_cuda_attention", "synccheck-test_cuda_gemm", "synccheck-test_cuda_attention", "bench",
                 "hf_check"]
    for name in gpu_steps:
        found = [r for r in lines if r["step"] == name and r.get("device", "gpu") == "gpu"]
        if not found:
            problems.append(f"no line for the GPU step {name}")
        elif found[0].get("skipped") != "no device" or found[0]["seconds"] != 0:
            problems.append(f"the GPU step {name} did not say 'no device' at once: {found[0]}")
    for key in [("bundle", ""), ("mma_probe", "emulator")]:
        if key not in steps or steps[key]["ok"] is not True:
            problems.append(f"the step {key[0]} {key[1]} did not pass: {steps.get(key)}")
    summary = steps.get(("summary", ""), {})
    no_device = sum(1 for r in lines if r.get("skipped") == "no device")
    if summary.get("failed_steps") != 0 or summary.get("no_device_steps") != no_device or summary.get("ok") is not False:
        problems.append(f"summary {summary}, expected 0 failed and {no_device} without a device")
    # What the GPU run may take: each step's limit (run NAME SECONDS) as the script sets it.
    script = (ROOT / "tools" / "gpu-check").read_text()
    budget = int(re.search(r"GPU_CHECK_BUDGET:-(\d+)", script).group(1))
    print(f"check_gpu_dry_run: the dry run took {seconds:.1f} s; {no_device} GPU steps said 'no device'; "
          f"the GPU run's budget is {budget} s")
    for p in problems:
        print("check_gpu_dry_run: " + p)
    if budget > 420:
        problems.append(f"tools/gpu-check's budget is {budget} s, over 420")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
