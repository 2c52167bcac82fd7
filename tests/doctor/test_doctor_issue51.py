"""Issue 51: a RoCE platform with no RDMA NIC, and test scripts whose imports the env cannot resolve."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cli_runner import cli_subprocess
from doctor_fixtures import build_host, make_prefix
from deepep_env.doctor.checks_test_imports import imported_modules, script_imports
from test_doctor_checks import doctor, find, quiet

# The imports of DeepEP v1.2.1's tests (9af0e0d: tests/utils.py, test_intranode.py, test_low_latency.py).
UTILS = ("import inspect\nimport json\nimport tempfile\nfrom pathlib import Path\n\nimport numpy as np\nimport os\n"
         "import sys\nimport torch\nimport torch.distributed as dist\nfrom typing import Optional, Union\n")
INTRANODE = ("import argparse\nimport time\nimport torch\nimport torch.distributed as dist\n\nimport deep_ep\n"
             "from utils import init_dist, bench\n\nimport test_low_latency\n")
LOW_LATENCY = ("import argparse\nimport random\nimport torch\nimport numpy as np\nfrom functools import partial\n"
               "import deep_ep\nfrom utils import init_dist\ntry:\n    import deep_gemm\nexcept ImportError:\n    pass\n")


def test_roce_platform_without_nics_is_an_error(tmp_path):
    root = build_host(tmp_path / "h", "h200x8-nvlink")
    f = find(doctor(root, platform="h20-roce"), "host.no-rdma-nic")
    assert f.severity == "error" and "0 RDMA NICs" in f.title and "mlx5_bond_0" in f.title and "h20-roce" in f.title
    quiet(doctor(root), "host.no-rdma-nic")  # detected nvlink: no NIC is right
    quiet(doctor(root, platform="h20-roce", environ={"NVSHMEM_REMOTE_TRANSPORT": "none"}), "host.no-rdma-nic")
    quiet(doctor(build_host(tmp_path / "g", "h20-roce")), "host.no-rdma-nic")


def test_no_nic_cli_names_the_expected_nics():
    res = cli_subprocess("doctor", "--demo-host", "h200x8-nvlink", "--platform", "gke-a4")
    assert res.returncode == 2 and "ERROR host.no-rdma-nic" in res.stdout and "8x B200" in res.stdout


def test_imports_parsed_from_the_scripts(tmp_path):
    assert imported_modules(LOW_LATENCY) == {"argparse", "random", "torch", "numpy", "functools", "deep_ep", "utils"}
    for name, text in (("utils.py", UTILS), ("test_intranode.py", INTRANODE), ("test_low_latency.py", LOW_LATENCY)):
        (tmp_path / name).write_text(text)
    needed, bad = script_imports(str(tmp_path), ["test_intranode.py", "test_internode.py"])
    assert bad == ["test_internode.py"]
    assert "utils" not in needed and "test_low_latency" not in needed and "deep_gemm" not in needed
    assert needed["numpy"] == ["test_low_latency.py", "utils.py"] and needed["torch"][0] == "test_intranode.py"


def _installed(tmp_path: Path, with_numpy: bool) -> Path:
    """A host-python env: a real interpreter (a bare venv, no numpy); the overlay puts the prefix's site on PYTHONPATH."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    prefix = make_prefix(tmp_path / "pfx", env="gcp-b200", python="host",
                         python_executable=str(venv / "bin" / "python"))
    site = prefix / "lib" / "python3.12" / "site-packages"
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text("")
    if with_numpy:
        (site / "numpy").mkdir()
        (site / "numpy" / "__init__.py").write_text("")
    tests = prefix / "share" / "deep-ep" / "tests"
    tests.mkdir(parents=True)
    for name, text in (("utils.py", UTILS), ("test_intranode.py", INTRANODE), ("test_low_latency.py", LOW_LATENCY),
                       ("test_internode.py", INTRANODE)):
        (tests / name).write_text(text)
    return prefix


def test_missing_numpy_fails_the_test_import_check(tmp_path):
    root = build_host(tmp_path / "h", "gcp-b200")
    prefix = _installed(tmp_path, with_numpy=False)
    r = doctor(root, prefix=str(prefix))
    f = find(r, "deepep.test-import-missing")
    assert f.severity == "error" and "numpy" in f.title and "torch" not in f.title and "deep_ep" not in f.title
    assert any("utils.py" in e.value for e in f.evidence)
    quiet(r, "deepep.test-import-unchecked")


def test_numpy_on_the_path_passes(tmp_path):
    root = build_host(tmp_path / "h", "gcp-b200")
    prefix = _installed(tmp_path, with_numpy=True)
    # the host venv finds torch, numpy and deep_ep only through the overlay's PYTHONPATH (rule host-python)
    r = doctor(root, prefix=str(prefix))
    assert r.context["environment"]["PYTHONPATH"]["value"].startswith(str(prefix))
    quiet(r, "deepep.test-import-missing", "deepep.test-import-unchecked")
