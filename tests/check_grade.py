"""check_grade.py BUILD_DIR: tools/grade grades every exercise, and grades it right.

Grading the reference solutions gives one row per test case of every exercise program
(tools/grade reads the exercises from check.cpp, the programs list what they run), each
passed; grading the untouched exercises gives the same rows, each "not attempted", and each
untouched check says "not done yet" once (not once per call of the exercise). Skipped (77)
where the exercises are edited, as tools/check-exercises is.
"""
import csv
import pathlib
import subprocess
import sys
import tempfile

root = pathlib.Path(__file__).resolve().parent.parent
build = pathlib.Path(sys.argv[1])
edited = subprocess.run(["git", "-C", str(root), "diff", "--quiet", "HEAD", "--", "tutorials/*/exercises/exercises.cpp"])
if edited.returncode == 1:
    print("check_grade: skipped: the exercises are edited here (git diff), and the test needs them untouched")
    sys.exit(77)


def grades(*options):
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([str(root / "tools" / "grade"), *options, out, str(build)], check=True)
        with open(pathlib.Path(out) / "grades.csv") as f:
            return [(row["exercise"] + " " + row["name"], row["result"]) for row in csv.DictReader(f)]


# tools/grade builds the programs it grades (the solutions are not built by default), so
# it runs before the programs are listed.
solved, untouched = grades("--solutions"), grades()
cases = []
for program in sorted((build / "tutorials" / "exercises").glob("solution_*")):
    if program.is_file():
        listed = subprocess.run([str(program), "--no-intro", "--list-test-cases"], capture_output=True, text=True,
                                check=True).stdout.splitlines()
        cases += [line for line in listed if line and not line.startswith(("[doctest]", "==="))]

problems = []
if sorted(case for case, _ in solved) != sorted(cases):
    problems.append(f"the grades name {[c for c, _ in solved]}, the programs run {cases}")
problems += [f"{case}: {result} on the solution" for case, result in solved if result != "passed"]
problems += [f"{case}: {result} untouched" for case, result in untouched if result != "not attempted"]
# An untouched exercise says "not done yet" once per check, however often the check calls it.
for program in sorted((build / "tutorials" / "exercises").glob("exercise_*")):
    if program.is_file():
        ran = subprocess.run([str(program), "--no-intro"], capture_output=True, text=True)
        said, checks = ran.stdout.count("is not done yet"), ran.stdout.count("TEST CASE:")
        if said != checks:
            problems.append(f"{program.name}: {said} 'not done yet' messages for {checks} checks")
if len(untouched) != len(solved):
    problems.append(f"{len(untouched)} grades untouched, {len(solved)} on the solutions")
print("\n".join(problems) or f"check_grade: all {len(solved)} exercises graded passed solved and not attempted untouched")
sys.exit(1 if problems else 0)
