"""The distribution as users install it: the wheel is built from this tree and installed into fresh
virtual environments, away from the source tree (docs/design.md, "Installs").

- the base install (``pip install ragmon``) carries the emitter with its own dependencies only (the
  transport that exports with the OpenTelemetry SDK names the extra it needs, ``ragmon[otel]``);
- the server install (``pip install "ragmon[server]"``) runs ``ragmon demo``;
- neither puts a top-level ``monitor``, ``collectors``, ``exporters`` or ``alerts`` into site-packages.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
FOLDERS = ("monitor", "collectors", "exporters", "alerts")
SERVER_ONLY = ("starlette", "uvicorn", "sqlmodel", "kafka-python", "prometheus-client", "pydantic", "apscheduler",
               "opentelemetry-sdk", "opentelemetry-api")


def run(*command: str | Path, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([str(part) for part in command], cwd=cwd, capture_output=True, text=True, timeout=600)
    if check and result.returncode != 0:
        raise AssertionError(f"{command} exited {result.returncode}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # from a copy of what the distribution is made of: setuptools leaves build/ behind in the tree it
    # builds, and a module deleted since an earlier build would come back from there
    source, out = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("dist")
    for name in ("pyproject.toml", "README.md", "ragmon", *FOLDERS):
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy
        copy(ROOT / name, source / name, **({"ignore": shutil.ignore_patterns("__pycache__")}
                                             if (ROOT / name).is_dir() else {}))
    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", out, source, cwd=out)
    (built,) = out.glob("ragmon-*.whl")
    return built


def venv(where: Path) -> Path:
    run(sys.executable, "-m", "venv", where, cwd=where.parent)
    return where / "bin"


def site_packages(bin_dir: Path) -> Path:
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return Path(run(bin_dir / "python", "-c", code, cwd=bin_dir).stdout.strip())


@pytest.mark.slow
def test_the_wheel_holds_one_top_level_package_and_every_folder(wheel: Path):
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names} == {"ragmon", wheel.name.split("-py3")[0] + ".dist-info"}, names
    # every package folder of the tree is listed in pyproject.toml, so none is left out of the wheel
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    for folder in FOLDERS:
        for init in (ROOT / folder).rglob("__init__.py"):
            package = ".".join(("ragmon", *init.parent.relative_to(ROOT).parts))
            assert package in listed, f"{init.parent} is a package but pyproject.toml does not list {package}"
            assert f"{package.replace('.', '/')}/__init__.py" in names
    # data the code reads at run time
    assert "ragmon/monitor/storage/migrations/env.py" in names
    assert any(name.startswith("ragmon/monitor/storage/migrations/versions/0001_") for name in names)
    assert "ragmon/monitor/app/examples/events.jsonl" in names


@pytest.mark.slow
def test_the_base_install_is_the_emitter_alone(wheel: Path, tmp_path: Path):
    bin_dir = venv(tmp_path / "light")
    run(bin_dir / "pip", "install", "-q", wheel, cwd=tmp_path)
    installed = {line.split("==")[0].lower() for line in run(bin_dir / "pip", "freeze", cwd=tmp_path).stdout.split()}
    assert not installed & set(SERVER_ONLY), installed
    assert not {path.name for path in site_packages(bin_dir).iterdir()} & set(FOLDERS)

    emit = """
import json, ragmon
transport = ragmon.ListTransport()
emitter = ragmon.Emitter(transport)
trace = emitter.start_trace("How many days carry over?", caller="u-1", groups=["staff"], tenant="acme", index="hr")
trace.add_retrieval("bm25", [{"id": "leave#4", "score": 12.1, "doc_id": "leave", "doc_version": "3"}])
trace.set_answer("Five days.", citations=["leave#4"])
trace.end()
try:
    ragmon.OpenInferenceTransport.otlp("http://127.0.0.1:9/v1/traces")
    missing = None
except ImportError as error:
    missing = str(error)
print(json.dumps({"version": ragmon.__version__, "sent": transport.sent, "otlp": missing}))
"""
    out = json.loads(run(bin_dir / "python", "-c", emit, cwd=tmp_path).stdout)
    assert out["version"] == "0.1.0"
    assert out["otlp"] is not None and "pip install 'ragmon[otel]'" in out["otlp"]  # the SDK is an extra
    ((event, key),) = out["sent"]
    assert event["type"] == "trace" and event["caller"]["id"] == "u-1" and key == "u-1"
    assert event["retrievals"][0]["passages"][0]["id"] == "leave#4"

    command = run(bin_dir / "ragmon", "--help", cwd=tmp_path, check=False)
    assert command.returncode == 2
    assert "pip install 'ragmon[server]'" in command.stderr and "Traceback" not in command.stderr


@pytest.mark.integration  # installs the server's dependencies from the package index
def test_the_server_install_runs_the_demo(wheel: Path, tmp_path: Path):
    bin_dir = venv(tmp_path / "server")
    # with uv when the test environment has it (``make test`` does): the same resolution of the
    # wheel's metadata as pip's, in a fraction of pip's CPU; the base install above stays with pip
    uv = Path(sys.executable).with_name("uv")
    installer = [uv, "pip", "install", "-q", "--native-tls", "--python", bin_dir / "python"] if uv.exists() \
        else [bin_dir / "pip", "install", "-q"]
    run(*installer, f"{wheel}[server]", cwd=tmp_path)
    assert not {path.name for path in site_packages(bin_dir).iterdir()} & set(FOLDERS)
    for folder in FOLDERS:
        found = run(bin_dir / "python", "-c", f"import importlib.util as u; print(u.find_spec({folder!r}))",
                    cwd=tmp_path).stdout.strip()
        assert found == "None", f"{folder} is importable as a top-level package: {found}"

    demo = run(bin_dir / "ragmon", "demo", "--traces", "3000", "--seconds", "3", "--json-file", tmp_path / "demo.json",
               cwd=tmp_path)
    findings = json.loads((tmp_path / "demo.json").read_text())
    assert findings["traces"] >= 3000, demo.stdout
    # its store was migrated by the scripts shipped in the wheel, and its weekly export was written
    assert list((tmp_path / "ragmon-data" / "demo-batches").glob("*/cases.jsonl")), demo.stdout
    # the dashboards' builder comes with the server install, and builds what the chart ships
    run(bin_dir / "ragmon", "dashboard", "render", "--out", tmp_path / "dashboards", cwd=tmp_path)
    shipped = ROOT / "helm" / "ragmon" / "dashboards"
    assert {p.name: p.read_text() for p in (tmp_path / "dashboards").glob("*.json")} == {
        p.name: p.read_text() for p in shipped.glob("*.json")}
