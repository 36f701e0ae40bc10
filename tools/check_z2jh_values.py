"""Check the course hub's Kubernetes values against the Zero to JupyterHub chart's own schema.

    .venv/bin/python tools/check_z2jh_values.py PATH/TO/zero-to-jupyterhub-k8s/jupyterhub

The chart is not a Python package and this machine has no network, so CI cannot run this; run
it where a checkout of the chart is at hand. It merges autograder/jupyterhub/z2jh/values.yaml
onto the chart's defaults (as helm does) and validates the result with values.schema.yaml,
which rejects unknown keys. Exit 1 with each error on a line.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import jsonschema
import yaml

VALUES = Path(__file__).resolve().parents[1] / "autograder" / "jupyterhub" / "z2jh" / "values.yaml"


def merged(defaults: dict, values: dict) -> dict:
    out = copy.deepcopy(defaults)
    for key, value in values.items():
        both = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = merged(out[key], value) if both else value
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not (Path(argv[0]) / "values.schema.yaml").is_file():
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        print("(the folder must hold the chart's values.yaml and values.schema.yaml)", file=sys.stderr)
        return 2
    chart = Path(argv[0])
    schema = yaml.safe_load((chart / "values.schema.yaml").read_text())
    values = merged(yaml.safe_load((chart / "values.yaml").read_text()), yaml.safe_load(VALUES.read_text()))
    errors = list(jsonschema.Draft7Validator(schema).iter_errors(values))
    for error in errors:
        print(f"{'.'.join(map(str, error.path)) or '(top)'}: {error.message}")
    print(f"{VALUES.name}: {len(errors)} error(s) against {chart / 'values.schema.yaml'}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
