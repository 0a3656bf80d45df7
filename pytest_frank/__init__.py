"""pytest-frank: prove that LLM inference endpoints really work after bring-up.

`pytest --endpoints fleet.yaml` runs the battery (pytest_frank.batteries) once per endpoint.
"""

__version__ = "0.1.0"
