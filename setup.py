"""Package discovery only (everything else is in pyproject.toml): the top-level ``specs/``
folder ships inside the wheel as the data package ``zoo_specs``."""
from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["registry", "registry.*", "zoo", "zoo.*"]) + ["zoo_specs"],
    package_dir={"zoo_specs": "specs"},
)
