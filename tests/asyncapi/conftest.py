"""The official AsyncAPI 3.0.0 JSON schema, from the npm package ``@asyncapi/specs`` that
``scripts/test.sh`` installs into ``tests/asyncapi/node`` (``npm ci``): every document these
tests make is validated against it. Without it a test skips, but fails when ``CI=true``."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

NODE_DIR = Path(__file__).parent / "node"
SCHEMA_FILE = (
    NODE_DIR / "node_modules" / "@asyncapi" / "specs" / "schemas" / "3.0.0-without-$id.json"
)


@pytest.fixture(scope="session")
def asyncapi_schema() -> dict[str, Any]:
    if not SCHEMA_FILE.is_file():
        why = f"the AsyncAPI schema is not in {NODE_DIR} (npm ci --prefix {NODE_DIR})"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{why}: scripts/test.sh installs it", pytrace=False)
        pytest.skip(why)
    schema: dict[str, Any] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    return schema


@pytest.fixture(scope="session")
def assert_valid(asyncapi_schema: dict[str, Any]) -> Callable[[Any], None]:
    """Asserts that a document is an AsyncAPI 3.0.0 document, naming every error."""
    validator = jsonschema.Draft7Validator(asyncapi_schema)

    def check(document: Any) -> None:
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(document)]
        assert not errors, "\n".join(errors)

    return check
