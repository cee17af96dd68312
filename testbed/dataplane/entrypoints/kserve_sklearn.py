"""KServe's Python model server with a scikit-learn model: what ``kserve/sklearnserver`` runs.

Run by the KServe environment's Python with the container's arguments (``--model_name``,
``--model_dir``, ``--http_port``, ``--grpc_port`` and every other flag of KServe's model
server, whose own parser reads them). It serves V1 (``/v1/models/NAME:predict``) and V2
(``/v2/models/NAME/infer``) through ``kserve.ModelServer``, and is ready when the model file
in the model directory has loaded.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import joblib
import kserve
from kserve import model_server
from kserve.utils.utils import get_predict_input, get_predict_response

MODEL_FILES = ("model.joblib", "model.pkl", "model.pickle")
"""File names looked for in the model directory, in this order."""


class ScikitLearnModel(kserve.Model):  # type: ignore[misc]
    """A fitted scikit-learn estimator loaded from the model directory."""

    def __init__(self, name: str, model_dir: Path) -> None:
        super().__init__(name)
        self.model_dir = model_dir
        self.estimator: Any = None

    def load(self) -> bool:
        """Load the first model file found; the server is not ready until this returns."""
        found = [self.model_dir / f for f in MODEL_FILES if (self.model_dir / f).exists()]
        if not found:
            raise FileNotFoundError(
                f"no model file in {self.model_dir} (looked for {', '.join(MODEL_FILES)})")
        self.estimator = joblib.load(found[0])
        self.ready = True
        return True

    def predict(self, payload: Any, headers: Any = None, response_headers: Any = None) -> Any:
        """The estimator's predictions for a V1 or V2 request."""
        inputs = get_predict_input(payload)
        return get_predict_response(payload, self.estimator.predict(inputs), self.name)


def main() -> None:
    """Parse the container's arguments and serve until signalled."""
    parser = argparse.ArgumentParser(parents=[model_server.parser])
    parser.add_argument("--model_dir", required=True, help="directory holding the model file")
    args, _ = parser.parse_known_args()
    model = ScikitLearnModel(args.model_name, Path(args.model_dir))
    model.load()
    kserve.ModelServer().start([model])


if __name__ == "__main__":
    main()
