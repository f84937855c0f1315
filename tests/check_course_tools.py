"""check_course_tools.py: what tools/grade and tools/exercise say, without building anything.

tools/grade's verdicts on doctest's own words (a JUnit report of an untouched exercise, a wrong
one, one caught calling the library's answer) and on the compiler's errors that hidden.h
provokes; `tools/grade --solutions` in a course copy without tutorials/solutions/; and
`tools/exercise` without an argument, which says in one line what to give and where the usage is. tests/check_grade.py grades the
real exercises and solutions (it builds them).
"""
import pathlib
import shutil
import subprocess
import sys
import tempfile
from importlib.machinery import SourceFileLoader

root = pathlib.Path(__file__).resolve().parent.parent
grade = SourceFileLoader("grade", str(root / "tools" / "grade")).load_module()
problems = []


def expect(what, got, want):
    if got != want:
        problems.append(f"{what}: got {got!r}, want {want!r}")


junit = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites><testsuite name="exercise_05" errors="1" failures="3" tests="4">
  <testcase name="05.1 warmup_cosine_lr" status="run">
    <failure type="CHECK">
../tutorials/05_train_gated_lm/exercises/check.cpp:12:
CHECK( exercises::warmup_cosine_lr(step, 30, 600, 3e-3, 3e-4) == doctest::Approx(nn::lr_at(schedule, step)) ) THREW exception: "exercise 05.1 warmup_cosine_lr is not done yet: write it, then check it with tools/exercise 05.1"
  logged: step := 0
    </failure>
  </testcase>
  <testcase name="05.2 unigram_entropy" status="run">
    <failure type="CHECK">
../tutorials/05_train_gated_lm/exercises/check.cpp:20:
CHECK( exercises::unigram_entropy(data.train_stream()) == doctest::Approx(data.unigram_entropy()) ) is NOT correct!
  values: CHECK( 2.5 == Approx( 3.1 ) )
    </failure>
    <failure type="CHECK">
../tutorials/05_train_gated_lm/exercises/check.cpp:21:
CHECK( exercises::unigram_entropy({7, 7, 7}) == doctest::Approx(0) ) is NOT correct!
    </failure>
  </testcase>
  <testcase name="05.3 adamw_step" status="run">
    <error message="exception">
        exercise 05.3 adamw_step is not done yet: write it, then check it with tools/exercise 05.3
    </error>
  </testcase>
  <testcase name="01.1 contiguous_strides" status="run">
    <failure type="CHECK">
../tutorials/01_tensors/exercises/check.cpp:33:
CHECK( exercises::contiguous_strides({n, n, n}) == Strides{n * n, n, 1} ) THREW exception: "zeros: 1152921504606846976 elements"
  logged: exercise 01.1 asks you to write the strides from the shape, without building a tensor
    </failure>
  </testcase>
  <testcase name="02.3 numerical_gradient" status="run"/>
</testsuite></testsuites>
"""
with tempfile.TemporaryDirectory() as tmp:
    report = pathlib.Path(tmp) / "report.xml"
    report.write_text(junit)
    results = grade.results_of(report)
expect("untouched", results["05.1 warmup_cosine_lr"], "not attempted")
expect("untouched, thrown outside a CHECK", results["05.3 adamw_step"], "not attempted")
expect("wrong", results["05.2 unigram_entropy"],
       "fails: CHECK( exercises::unigram_entropy(data.train_stream()) == doctest::Approx(data.unigram_entropy()) ) "
       "is NOT correct! values: CHECK( 2.5 == Approx( 3.1 ) )")
expect("caught by the check", results["01.1 contiguous_strides"],
       "caught: exercise 01.1 asks you to write the strides from the shape, without building a tensor")
expect("done", results["02.3 numerical_gradient"], "passed")

log = """../tutorials/03_modules/exercises/exercises.cpp:40:12: error: 'double gg::nn::clip_grad_norm(const std::vector<gg::Tensor>&, double)' is deprecated: exercise 03.3 asks you to write this [-Werror=deprecated-declarations]
../tutorials/03_modules/exercises/exercises.cpp:31:5: error: 'exercise_03_2_asks_you_to_write_SGD' is not a member of 'gg::nn'
"""
expect("caught by hidden.h", grade.compile_verdicts(log, [("03.1", "Affine"), ("03.2", "sgd"), ("03.3", "clip")]),
       {"03.1": "does not compile",
        "03.2": "caught: 'exercise_03_2_asks_you_to_write_SGD' is not a member of 'gg::nn'",
        "03.3": "caught: 'double gg::nn::clip_grad_norm(const std::vector<gg::Tensor>&, double)' is deprecated: "
                "exercise 03.3 asks you to write this [-Werror=deprecated-declarations]"})

# A course copy: the tools without tutorials/solutions/.
with tempfile.TemporaryDirectory() as tmp:
    (pathlib.Path(tmp) / "tools").mkdir()
    (pathlib.Path(tmp) / "tutorials").mkdir()
    shutil.copy(root / "tools" / "grade", pathlib.Path(tmp) / "tools" / "grade")
    ran = subprocess.run([str(pathlib.Path(tmp) / "tools" / "grade"), "--solutions", str(pathlib.Path(tmp) / "out")],
                         capture_output=True, text=True)
    expect("grade --solutions in a course copy: exit", ran.returncode, 2)
    if "has no tutorials/solutions/" not in ran.stderr:
        problems.append(f"grade --solutions in a course copy said {ran.stderr!r}")

ran = subprocess.run([str(root / "tools" / "exercise")], capture_output=True, text=True)
expect("exercise without an argument: exit", ran.returncode, 2)
if (len(ran.stderr.splitlines()) != 1 or not ran.stderr.startswith("tools/exercise: give an exercise (02.1)")
        or "see tools/exercise --help" not in ran.stderr):
    problems.append(f"exercise without an argument said {ran.stderr!r}")

print("\n".join(problems) or "check_course_tools: grade's verdicts, grade --solutions in a copy, exercise's usage")
sys.exit(1 if problems else 0)
