"""Train the iris classifier and save it the way each server loads it.

Run by the KServe environment's Python (``envs.train_models``)::

    python train_iris.py SKLEARN_DIR MLSERVER_DIR

``SKLEARN_DIR/model.joblib`` is what KServe's sklearn server looks for in its model dir;
``MLSERVER_DIR`` gets the same ``model.joblib`` and a ``model-settings.json`` naming
MLServer's scikit-learn runtime. The settings carry no model name: MLServer takes it from
``MLSERVER_MODEL_NAME``, which KServe's controller sets to the InferenceService's name.
The data set is the copy scikit-learn ships (nothing is downloaded).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import joblib
from sklearn import datasets, svm


def main(sklearn_dir: Path, mlserver_dir: Path) -> None:
    """Fit a support-vector classifier on iris and write both model directories."""
    iris = datasets.load_iris()
    model = svm.SVC(gamma="scale", random_state=0)
    model.fit(iris.data, iris.target)
    for directory in (sklearn_dir, mlserver_dir):
        directory.mkdir(parents=True, exist_ok=True)
        joblib.dump(model, directory / "model.joblib")
    settings = {
        "implementation": "mlserver_sklearn.SKLearnModel",
        "parameters": {"uri": "./model.joblib", "version": "v1"},
    }
    (mlserver_dir / "model-settings.json").write_text(json.dumps(settings, indent=2) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
