"""Package discovery only (everything else is in pyproject.toml): the top-level ``specs/``
folder ships inside the wheel as the data package ``zoo_specs``, the method cards and their figures
(``docs/``) as ``zoo_docs`` (read by ``zoo report``)."""
from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["registry", "registry.*", "zoo", "zoo.*"]) + ["zoo_specs", "zoo_docs"],
    package_dir={"zoo_specs": "specs", "zoo_docs": "docs"},
)
