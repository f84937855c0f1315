"""bench/gpu-readme: the GPU table of docs/gpu.md is the one the committed results give (every target
"not measured on a GPU" while bench/results/ holds no tools/gpu-check run), and on a run's JSON
lines it quotes the ratios they hold and says met or not met. The run here is the H200's of
2026-11-30 (bench/results/h200-2026-11-30/bench-gpu.jsonl, from before the kernels were
rewritten, so it is not one docs/gpu.md quotes), under a gpu-check.jsonl written for the test.

    python3 tests/check_gpu_readme.py
"""
import importlib.machinery
import importlib.util
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent


def load_tool():
    loader = importlib.machinery.SourceFileLoader("gpu_readme", str(ROOT / "bench" / "gpu-readme"))
    spec = importlib.util.spec_from_loader("gpu_readme", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def main():
    problems = []
    tool = load_tool()
    check = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu-readme"), "--check"], capture_output=True,
                           text=True)
    print(check.stdout + check.stderr, end="")
    if check.returncode != 0:
        problems.append(f"{tool.NAME}'s GPU table is not bench/gpu-readme's")
    if tool.newest_results() is None and tool.NOT_MEASURED not in tool.PAGE.read_text():
        problems.append(f"no results, yet {tool.NAME} does not say 'not measured on a GPU'")

    with tempfile.TemporaryDirectory() as scratch:
        run = pathlib.Path(scratch) / "h200-2026-11-30"
        run.mkdir()
        shutil.copy(ROOT / "bench" / "results" / "h200-2026-11-30" / "bench-gpu.jsonl", run / "bench-gpu.jsonl")
        (run / "gpu-check.jsonl").write_text(json.dumps({"step": "gpu", "ok": True, "name": "NVIDIA H200"}) + "\n")
        table = tool.table(run)
    print(table)
    # Each cell from the file's own numbers: the 4096³ library GEMM at 43.5447% of cuBLAS, its
    # training-shape products from 21.0308% to 51.414%; fused f32 attention 1.73309 ms against
    # SDPA's 1.3245 at T 1024; the memory rows; no bf16 GEMM and no medium bf16 step in that run.
    wanted = [
        "measured on NVIDIA H200",
        "| 44% of cuBLAS FP32 at 4096³; the medium step's products 21%–51%: **not met** |",
        "| not in this run: the 4096³ bf16 GEMM |",
        "softmax_4096 38%",
        "f32 T 1024 1.31×, T 2048 1.52×, T 4096 1.64×",
        "f32 70.7 ms against PyTorch eager 34.5 ms (2.05×)",
        "(no bf16 pair)",
    ]
    for text in wanted:
        if text not in table:
            problems.append(f"the table lacks {text!r}")
    if table.count("**met**") != 0:
        problems.append("a target of the 2026-11-30 run reads met; none was")
    for p in problems:
        print("check_gpu_readme: " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
