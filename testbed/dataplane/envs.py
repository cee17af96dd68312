"""The real model servers' virtualenvs and the models they serve, built once into the cache.

Each server gets a virtualenv of its own under ``<cache>/venvs/<name>-<key>/``, keyed on its
pinned requirements and the Python that made it, so a change of pin installs exactly that
environment again. KServe's Python packages and MLServer cannot share one (their starlette
requirements exclude each other, :mod:`testbed.versions`), and neither enters the product's
environment or wheel.

The iris model is trained with scikit-learn inside the KServe environment (the same
scikit-learn release as MLServer's) and saved the way each server loads it.

``python -m testbed build dataplane`` builds all of this; ``make binaries`` does too.
"""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from testbed import versions
from testbed.dataplane.podspec import Environments
from testbed.paths import cache_dir

ENTRYPOINTS = Path(__file__).resolve().parent / "entrypoints"
"""Scripts run by the servers' Pythons (they import the servers' packages, never the testbed)."""


class EnvError(RuntimeError):
    """A server environment could not be installed; the message says which and why."""


@dataclasses.dataclass(frozen=True)
class ServerEnv:
    """One virtualenv with a model server's pinned packages."""

    name: str
    requirements: tuple[str, ...]

    @property
    def key(self) -> str:
        """Short hash of the requirements and the Python version (the cache key)."""
        text = "\n".join([sys.version.split()[0], *self.requirements])
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def path(self) -> Path:
        """Directory of the virtualenv."""
        return cache_dir() / "venvs" / f"{self.name}-{self.key}"

    @property
    def python(self) -> Path:
        """The environment's Python interpreter."""
        return self.path / "bin" / "python"

    def bin(self, name: str) -> Path:
        """An executable the environment's packages installed (``mlserver``)."""
        return self.path / "bin" / name

    def is_built(self) -> bool:
        """True when the environment was installed completely."""
        return (self.path / ".complete").exists() and self.python.exists()

    def build(self, log: Callable[[str], None] = print) -> float:
        """Create the virtualenv and install the pins (no-op when built); return seconds."""
        if self.is_built():
            return 0.0
        t0 = time.monotonic()
        shutil.rmtree(self.path, ignore_errors=True)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        log(f"[dataplane] {self.name}: creating {self.path}")
        _run([sys.executable, "-m", "venv", str(self.path)], f"virtualenv for {self.name}")
        log(f"[dataplane] {self.name}: installing {' '.join(self.requirements)}")
        _run(
            [str(self.python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             *self.requirements],
            f"{self.name}'s packages",
        )
        (self.path / ".complete").write_text("\n".join(self.requirements) + "\n")
        return time.monotonic() - t0


KSERVE_ENV = ServerEnv(
    "kserve",
    (
        f"kserve=={versions.KSERVE_PYTHON}",
        f"kserve-storage=={versions.KSERVE_PYTHON}",
        f"scikit-learn=={versions.SCIKIT_LEARN}",
        f"joblib=={versions.JOBLIB}",
    ),
)
"""KServe's model server (``kserve``), its storage initializer's code (``kserve-storage``) and
scikit-learn: the ``kserve-sklearnserver`` runtime and the storage-initializer container."""

MLSERVER_ENV = ServerEnv(
    "mlserver",
    (
        f"mlserver=={versions.MLSERVER}",
        f"mlserver-sklearn=={versions.MLSERVER}",
        f"scikit-learn=={versions.SCIKIT_LEARN}",
        f"joblib=={versions.JOBLIB}",
        # MLServer's inference-pool workers call asyncio.get_event_loop() in a fresh process,
        # which uvloop 0.22 made an error ("There is no current event loop"): every worker
        # died at start and no model ever loaded.
        f"uvloop=={versions.MLSERVER_UVLOOP}",
    ),
)
"""MLServer with its scikit-learn runtime: the ``kserve-mlserver`` runtime."""

ENVS = (KSERVE_ENV, MLSERVER_ENV)


def models_dir() -> Path:
    """Where the trained models are kept, keyed like the environment that trained them."""
    return cache_dir() / "models" / f"iris-{KSERVE_ENV.key}"


def sklearn_iris_dir() -> Path:
    """The iris model as KServe's sklearn server loads it (``model.joblib`` in the model dir)."""
    return models_dir() / "sklearn" / "iris"


def mlserver_iris_dir() -> Path:
    """The iris model as MLServer loads it (``model-settings.json`` and ``model.joblib``)."""
    return models_dir() / "mlserver" / "iris"


def train_models(log: Callable[[str], None] = print) -> float:
    """Train the iris classifier once and save it for both servers; return seconds spent."""
    done = models_dir() / ".complete"
    if done.exists():
        return 0.0
    if not KSERVE_ENV.is_built():
        raise EnvError("the kserve environment is not built: run `python -m testbed build`")
    t0 = time.monotonic()
    shutil.rmtree(models_dir(), ignore_errors=True)
    _run(
        [str(KSERVE_ENV.python), str(ENTRYPOINTS / "train_iris.py"),
         str(sklearn_iris_dir()), str(mlserver_iris_dir())],
        "training the iris model",
    )
    done.write_text(f"scikit-learn {versions.SCIKIT_LEARN}\n")
    log(f"[dataplane] iris model trained into {models_dir()}")
    return time.monotonic() - t0


def build_all(log: Callable[[str], None] = print) -> None:
    """Install every server environment and train the models (each step once)."""
    for env in ENVS:
        if env.is_built():
            log(f"[dataplane] {env.name}: cached in {env.path}")
            continue
        spent = env.build(log)
        log(f"[dataplane] {env.name}: installed in {spent:.0f}s")
    train_models(log)


def _run(argv: list[str], what: str) -> None:
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.splitlines()[-30:])
        raise EnvError(f"{what} failed (`{' '.join(argv)}`):\n{tail}")


def environments() -> Environments:
    """Where the runners find the servers' programs (the environments must be built)."""
    return Environments(
        kserve_python=KSERVE_ENV.python,
        mlserver=MLSERVER_ENV.bin("mlserver"),
        entrypoints=ENTRYPOINTS,
        addon_cli=Path(sys.executable).parent / "model-serving-addon",
        # The add-on's processes (the release hook) import this checkout's code.
        addon_source=str(ENTRYPOINTS.parent.parent.parent),
    )
