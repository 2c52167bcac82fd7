"""Issue 15, the fresh sweep: bad inputs across every command, each must end in one clear line and a
non-zero exit — no traceback, no hang (each run is bounded), nothing half-written in the checkout."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from cli_runner import cli_subprocess
from platform_fixtures import REPO

NOFILE = "/nonexistent/deepep-env-sweep"
CASES = [
    ["plan", "no-such-env"], ["plan", "gcp-b200", "--demo-host", "no-such-host"], ["plan", NOFILE + ".toml"],
    ["detect", "--root", NOFILE], ["detect", "--root", "/dev/null"],
    ["overlay", "no-such-env"], ["overlay", "gcp-b200", "--root", NOFILE],
    ["activate", "no-such-env", "--prefix", NOFILE], ["activate", "gcp-b200", "--shell", "tcsh"],
    ["run", "no-such-env", "--", "true"],
    ["fetch", "no-such-env"], ["fetch", "h200-nvlink", "--from", NOFILE, "--offline"],
    ["build", "no-such-env"], ["build", "h200-nvlink", "-j", "0"], ["build", "--recipes", NOFILE],
    ["build", "h200-nvlink", "--check-package", "nosuchpkg", "--offline"], ["build", "--ofline"],
    ["lock", "no-such-env"], ["lock", "h200-nvlink", "--check", "--output", NOFILE],
    ["install", "no-such-env"], ["install", "h200-nvlink", "--prefix", "/"], ["install", "h200-nvlink", "--prefix", "/proc/x"],
    ["install", "h200-nvlink", "--lock", NOFILE],
    ["install", "h200-nvlink", "--mirror", f"https://conda.deepep-env.example/h200={NOFILE}"],
    ["pixi", "verdict", "--lock", NOFILE + ".lock"],
    ["diff", NOFILE, NOFILE], ["diff", "lockfiles/h200-nvlink.pixi.lock", "README.md"],
    ["export", NOFILE], ["export", "README.md"],
    ["task", "no-such-task", "-e", "h200-nvlink"],
    ["doctor", "no-such-env"], ["doctor", "gcp-b200", "--root", NOFILE],
    ["publish", "no-such-env", "--to", NOFILE], ["publish", "h200-nvlink", "--to", "ftp://example.invalid/x"],
    ["launch", "no-such-env", "internode"], ["launch", "gcp-b200", "internode", "--nodes", "0"],
    ["launch", "gcp-b200", "internode", "--target", "nomad"],
    ["spec", "show", "no-such-env"], ["pixi", "nosuch"], ["nosuchcommand"],
]


@pytest.mark.parametrize("args", CASES, ids=[" ".join(a) for a in CASES])
def test_bad_input_is_one_clear_line(args, tmp_path):
    env = {**os.environ, "DEEPEP_ENV_PROJECT": str(REPO), "DEEPEP_ENV_STATE": str(tmp_path / "state"),
           "DEEPEP_ENV_CACHE_DIR": str(tmp_path / "cache")}
    before = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True).stdout
    res = cli_subprocess(*args, env=env)
    assert "Traceback" not in res.stderr + res.stdout, res.stderr
    assert res.returncode != 0, (res.stdout, res.stderr)
    lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower()]
    assert errors and len(errors[0]) < 2000, res.stderr
    after = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True).stdout
    assert after == before, "the command wrote into the checkout"


# --- Issue 26: the new surfaces (task, pixi.toml, pixi verdict, diff revisions, locks, specs, demo host) ----------
# Each case runs on a fresh tests/build_fixtures.fake_project with a pixi.toml, in a real subprocess bounded
# by a timeout (a hang fails the case), and must end in one `deepep-env: error:` line, a non-zero exit, no
# traceback, and no change under the case's folder (project, state, cache: every path, size and mtime).

PIXI_TOML = """\
[workspace]
name = "sweep"
channels = []
platforms = ["linux-64"]

[feature.h200-nvlink.tasks]
{tasks}

[environments]
{environments}
"""
GREET = 'greet = { cmd = "echo hello {{ who }}", args = ["who"] }'
ENVS = 'h200-nvlink = { features = ["h200-nvlink"], no-default-feature = true }'
TASK = ["task", "greet", "-e", "h200-nvlink"]


def _pixi_toml(tasks: str = GREET, environments: str = ENVS) -> str:
    return PIXI_TOML.format(tasks=tasks, environments=environments)


def _write(rel: str, content: "str | bytes"):
    def setup(proj: Path) -> None:
        p = proj / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content.encode() if isinstance(content, str) else content)
    return setup


def _special(rel: str, kind: str):
    """``rel`` replaced by a directory, a FIFO, a symlink to /dev/zero, or a sparse file past the caps."""
    def setup(proj: Path) -> None:
        p = proj / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if p.exists() or p.is_symlink():
            p.unlink()
        if kind == "dir":
            p.mkdir()
        elif kind == "fifo":
            os.mkfifo(p)
        elif kind == "zero":
            os.symlink("/dev/zero", p)
        elif kind == "big":
            with p.open("wb") as fh:
                fh.truncate(80 << 20)
    return setup


def _git_commit(proj: Path) -> None:
    def git(*a: str) -> None:
        subprocess.run(["git", *a], cwd=proj, check=True, capture_output=True,
                       env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                            "GIT_COMMITTER_EMAIL": "t@t"})
    (proj / "pixi.lock").write_text("version: 6\nenvironments: {}\npackages: []\n")
    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "x")


def _spec_edit(old: str, new: str):
    def setup(proj: Path) -> None:
        f = proj / "env_specs" / "h200-nvlink.toml"
        text = f.read_text()
        assert old in text
        f.write_text(text.replace(old, new, 1))
    return setup


def _none(proj: Path) -> None:
    pass


SPEC = ["spec", "validate", "env_specs/h200-nvlink.toml"]
# id → (setup, command, what the one line must name)
NEW_CASES = {
    # pixi.toml that is not a UTF-8 regular file of sane size, for each command that reads it
    **{f"pixi.toml-{kind}-{name}": (_special("pixi.toml", kind), cmd, "pixi.toml")
       for kind in ("dir", "fifo", "zero", "big") for name, cmd in
       (("task-list", ["task"]), ("task-run", TASK), ("verdict", ["pixi", "verdict"]))},
    "pixi.toml-not-utf8": (_write("pixi.toml", b'[tasks]\nx = "\xff"\n'), TASK, "not UTF-8"),
    "pixi.toml-malformed": (_write("pixi.toml", "[tasks\n"), TASK, "malformed TOML"),
    "pixi.toml-missing": (_none, TASK, "no pixi.toml"),
    # pixi's task and environment rules, checked before anything runs
    "task-depends-on-7": (_write("pixi.toml", _pixi_toml('greet = { cmd = "echo", depends-on = 7 }')), TASK,
                          "greet.depends-on"),
    "task-env-string": (_write("pixi.toml", _pixi_toml('greet = { cmd = "echo", env = "X=1" }')), TASK, "greet.env"),
    "task-env-int": (_write("pixi.toml", _pixi_toml('greet = { cmd = "echo", env = { X = 1 } }')), TASK, "greet.env.X"),
    "task-no-cmd": (_write("pixi.toml", _pixi_toml('greet = { description = "hi" }')), TASK, "needs `cmd` or `depends-on`"),
    "task-cmd-42": (_write("pixi.toml", _pixi_toml("greet = { cmd = 42 }")), TASK, "greet.cmd"),
    "task-cmd-int-list": (_write("pixi.toml", _pixi_toml('greet = { cmd = ["echo", 1] }')), TASK, "greet.cmd[1]"),
    "task-bare-int": (_write("pixi.toml", _pixi_toml("greet = 42")), TASK, "tasks.greet"),
    "task-unknown-key": (_write("pixi.toml", _pixi_toml('greet = { cmd = "echo", cmdd = "x" }')), TASK, "unknown key"),
    "task-args-not-a-list": (_write("pixi.toml", _pixi_toml('greet = { cmd = "echo", args = "who" }')), TASK,
                             "greet.args"),
    "task-args-no-name": (_write("pixi.toml", _pixi_toml('greet = { cmd = "echo", args = [{ default = "x" }] }')), TASK,
                          "args[0].arg"),
    "task-depends-on-unknown": (_write("pixi.toml", _pixi_toml('greet = { cmd = "echo", depends-on = ["nope"] }')),
                                TASK, "unknown task 'nope'"),
    "task-cycle": (_write("pixi.toml", _pixi_toml('greet = { cmd = "echo", depends-on = ["greet"] }')), TASK, "cycle"),
    "task-too-many-args": (_write("pixi.toml", _pixi_toml()), [*TASK, "--", "a", "b"], "takes 1 argument"),
    "activation-env-int": (_write("pixi.toml", _pixi_toml(GREET + "\n\n[feature.h200-nvlink.activation]\nenv = { X = 1 }")),
                           TASK, "activation.env.X"),
    "environments-5": (_write("pixi.toml", _pixi_toml(environments="").replace("[environments]\n", "environments = 5\n")),
                       TASK, "environments"),
    "environment-unknown-feature": (_write("pixi.toml", _pixi_toml(environments='h200-nvlink = ["nope"]')), TASK,
                                    "feature 'nope'"),
    "environment-unknown-key": (_write("pixi.toml", _pixi_toml(environments='h200-nvlink = { feature = ["h200-nvlink"] }')),
                                TASK, "unknown key"),
    "verdict-bad-environments": (_write("pixi.toml", _pixi_toml(environments="").replace("[environments]\n",
                                                                                         "environments = 5\n")),
                                 ["pixi", "verdict"], "environments"),
    "verdict-dependency-int": (_write("pixi.toml", _pixi_toml(GREET + "\n\n[feature.h200-nvlink.dependencies]\nnumpy = 5")),
                               ["pixi", "verdict"], "dependencies.numpy"),
    "verdict-channel-int": (_write("pixi.toml", _pixi_toml().replace("channels = []", "channels = [{ channel = 5 }]")),
                            ["pixi", "verdict"], "workspace.channels[0].channel"),
    "verdict-platform-cuda-int": (_write("pixi.toml", _pixi_toml().replace('platforms = ["linux-64"]',
                                                                           'platforms = [{ platform = "linux-64", cuda = 5 }]')),
                                  ["pixi", "verdict"], "workspace.platforms[0].cuda"),
    # a revision that git would read as an option
    "diff-rev-option": (_git_commit, ["diff", "--", "--output=FILE:pixi.lock", "pixi.lock"], "starts with '-'"),
    "diff-rev-option-new": (_git_commit, ["diff", "pixi.lock", "--", "-ppixi.lock:pixi.lock"], "starts with '-'"),
    # locks that are not regular files are named for what they are, not "not found"
    **{f"lock-{kind}-{name}": (_special("pixi.lock", kind), cmd, {"fifo": "a FIFO", "zero": "a character device",
                                                                  "dir": "a directory", "big": "bytes or more"}[kind])
       for kind in ("fifo", "zero", "dir", "big") for name, cmd in
       (("diff", ["diff", "pixi.lock", "pixi.lock"]), ("install", ["install", "h200-nvlink", "--lock", "pixi.lock"]),
        ("verdict", ["pixi", "verdict", "--manifest", "pixi.toml"]))},
    "verdict-manifest-missing": (_none, ["pixi", "verdict", "--manifest", "missing/pixi.toml"], "missing/pixi.toml: no pixi.toml"),
    # every other file the tool reads goes through the same bounded reader
    **{f"{what}-{kind}": (_special(rel, kind), cmd, {"fifo": "a FIFO", "zero": "a character device"}[kind])
       for kind in ("fifo", "zero") for what, rel, cmd in
       (("catalog", "recipes/nvshmem/sources.toml", ["plan", "h200-nvlink"]),
        ("recipe", "recipes/deep-ep/recipe.yaml", ["build", "h200-nvlink", "--offline"]),
        ("env-file", "env.txt", ["doctor", "--env-file", "env.txt", "--demo-host", "gcp-b200-demo"]),
        ("build-manifest", "../state/builds/h200-nvlink.json", ["publish", "h200-nvlink", "--to", "../out"]))},
    # spec settings that would do nothing
    "spec-toolchain-host": (_spec_edit("\n[host]", '\n[toolchain]\ngcc = "13"\n\n[host]'), SPEC, "toolchain"),
    "spec-packages-deep-ep": (_spec_edit("\n[python]", '\npackages = ["deep-ep"]\n\n[python]'), SPEC, "pins itself"),
    "spec-packages-nccl": (_spec_edit("\n[python]", '\npackages = ["nccl >=2.27"]\n\n[python]'), SPEC, "pins itself"),
    # the bundled demo host
    "demo-host-unknown": (_none, ["doctor", "--demo-host", "nope"], "unknown demo host"),
    "demo-host-and-root": (_none, ["detect", "--root", "/tmp", "--demo-host", "gcp-b200-demo"], "name two hosts"),
    "demo-root-unknown-name": (_none, ["overlay", "--root", "gcp-b300-demo"], "--demo-host"),
}


def _snapshot(root: Path) -> dict[str, tuple]:
    """Every path under ``root`` with its type, size and mtime (nothing is opened: FIFOs stay unread)."""
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            out[os.path.relpath(p, root)] = (st.st_mode, st.st_size if not os.path.isdir(p) else 0, st.st_mtime_ns)
    return out


@pytest.fixture
def sweep_project(tmp_path):
    from build_fixtures import fake_project

    proj = fake_project(tmp_path).root
    env = {**os.environ, "DEEPEP_ENV_PROJECT": str(proj), "DEEPEP_ENV_STATE": str(tmp_path / "state"),
           "DEEPEP_ENV_CACHE_DIR": str(tmp_path / "cache")}
    return proj, env


@pytest.mark.parametrize("case", sorted(NEW_CASES))
def test_new_surfaces_bad_input_is_one_clear_line(case, sweep_project, tmp_path):
    proj, env = sweep_project
    setup, args, needle = NEW_CASES[case]
    if case != "pixi.toml-missing":
        (proj / "pixi.toml").write_text(_pixi_toml())  # a good one, which the case's setup may replace
    setup(proj)
    before = _snapshot(tmp_path)
    try:
        res = cli_subprocess(*args, env=env, cwd=proj, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{case}: hung")
    out = res.stdout + res.stderr
    assert "Traceback" not in out, res.stderr[-2000:]
    assert res.returncode != 0, f"{case}: exit 0 (silently accepted)\n{out[-1000:]}"
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("deepep-env: error: "), res.stderr[-2000:]
    assert needle in lines[0], (needle, lines[0])
    assert _snapshot(tmp_path) == before, f"{case}: the refusal changed state"


def test_a_task_argument_is_data_never_code(sweep_project, tmp_path, capfd):
    """Issue 26 (high): `cmd = "echo hello {{ who }}"`, `args = ["who"]`, then `-- 'x; touch …'` ran
    touch. Run for real (bash), without the install step: the value is printed, nothing else runs."""
    from deepep_env.base.project import Project
    from deepep_env.views.tasks import plan_task, run_task

    proj, _ = sweep_project
    (proj / "pixi.toml").write_text(_pixi_toml(GREET + '\nquoted = { cmd = "echo \'hello {{ who }}\'", args = ["who"] }'
                                               '\ndq = { cmd = "echo \\"hello {{ who }}\\"", args = ["who"] }'))
    pwned = tmp_path / "pwned"
    for task, value in (("greet", f"x; touch {pwned}"), ("quoted", f"x'; touch {pwned}; echo '"),
                        ("dq", f'x"; touch {pwned}; echo "$(touch {pwned})')):
        plan = plan_task(Project(proj), task, environment="h200-nvlink", args=[value])
        capfd.readouterr()
        assert run_task(Project(proj), plan, base_env={"PATH": os.environ["PATH"]}, install=False) == 0
        assert capfd.readouterr().out == f"hello {value}\n"
        assert not pwned.exists(), task


@pytest.mark.parametrize("args", [["detect", "--demo-host", "gcp-b200-demo"], ["detect", "--root", "h200x8-nvlink"],
                                  ["overlay", "--demo-host", "gcp-b200-demo", "--format", "json"],
                                  ["doctor", "--demo-host", "gcp-b200-demo"], ["doctor", "--root", "gcp-b200-demo"],
                                  ["plan", "gcp-b200", "--demo-host", "gcp-b200-demo"]])
def test_the_bundled_demo_host_works_beyond_plan(args, tmp_path):
    """Issue 26 §9: `--demo-host` worked with `plan` only, and `--root` refused the bundled captures."""
    env = {**os.environ, "DEEPEP_ENV_PROJECT": str(REPO), "DEEPEP_ENV_STATE": str(tmp_path / "state"),
           "DEEPEP_ENV_CACHE_DIR": str(tmp_path / "cache")}
    res = cli_subprocess(*args, env=env, cwd=tmp_path, timeout=120)
    assert "Traceback" not in res.stderr and "error:" not in res.stderr, res.stderr[-2000:]
    if args[0] == "doctor":  # a report (its exit status is its findings on this process's environment)
        assert res.stdout.startswith(f"doctor: platform gcp-b200 (detected), root bundled capture {args[2]}")
    else:
        assert res.returncode == 0 and ("platform" in res.stdout or "export " in res.stdout or "{" in res.stdout)
